//! The verifier of a client with a state file: a chain that passed full
//! verification in an earlier process (or an earlier socket) for the same
//! server name under the same trust anchors, and is still within its
//! leaf's notAfter and a day of that verification, is not verified again.
//! The handshake's signature is always checked against the presented
//! leaf's key, so the server still proves it holds the key of the
//! certificate that was verified; any other chain, a changed trust store,
//! an expired entry or another server name goes through the full
//! verification, whose error ends the handshake as without a state file.
//!
//! # Threat model
//!
//! rustls cannot write a TLS 1.3 session ticket out of the process, so a
//! new process cannot resume; this is the part of a full handshake it can
//! skip instead (with ECDSA certificates, one signature check and the path
//! building per server). What the state file then vouches for:
//!
//! - **Someone who can write the file** can make this client accept any
//!   certificate (a key of their own) for a server it names, exactly as
//!   someone who can write the `tlsCAFile` can. That is why the file must
//!   be this user's, mode 0600, in a directory only this user can write,
//!   and is refused otherwise (`shell::state_file`): the file is as
//!   sensitive as the connection string and the CA file it names.
//! - **Someone who can read the file** learns which servers this client
//!   talked to and the hashes of the chains they presented, which those
//!   servers show anyone who connects.
//! - **A copied file** used by another user or with another connection
//!   string: entries are bound to the URI's hosts, user and TLS settings
//!   (the binding) and to the trust anchors' hash, so another URI or another
//!   CA file never reads them.
//! - **Revocation**: nothing here checks it, as without the state file
//!   (no OCSP or CRL is consulted); the day's bound limits how long a
//!   verification is reused.

use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::proto::state_file::{certificate_not_after, VerifiedChain, CHAIN_MAX_AGE_SECS};

/// The chains a client trusts without verifying them again, and those it
/// verified since the state file was last written.
#[derive(Debug)]
pub(crate) struct ChainMemory {
    /// The hash of the trust anchors this client's chains are verified under.
    trust: [u8; 32],
    chains: Mutex<Chains>,
}

#[derive(Debug, Default)]
struct Chains {
    known: Vec<VerifiedChain>,
    unsaved: Vec<VerifiedChain>,
}

impl ChainMemory {
    /// An empty memory for chains verified under `roots`.
    pub(crate) fn new(roots: &RootCertStore) -> ChainMemory {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        for anchor in &roots.roots {
            let parts = [
                anchor.subject.as_ref(),
                anchor.subject_public_key_info.as_ref(),
                anchor.name_constraints.as_deref().unwrap_or_default(),
            ];
            for part in parts {
                context.update(&(part.len() as u64).to_le_bytes());
                context.update(part);
            }
        }
        let mut trust = [0u8; 32];
        trust.copy_from_slice(context.finish().as_ref());
        ChainMemory {
            trust,
            chains: Mutex::new(Chains::default()),
        }
    }

    /// Takes the chains a state file remembered; those verified under other
    /// trust anchors are left out.
    pub(crate) fn load(&self, chains: Vec<VerifiedChain>) {
        let mut state = self.lock();
        state
            .known
            .extend(chains.into_iter().filter(|c| c.trust == self.trust));
    }

    /// The chains verified since the last call (to be written).
    pub(crate) fn take_unsaved(&self) -> Vec<VerifiedChain> {
        std::mem::take(&mut self.lock().unsaved)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Chains> {
        // A panic while holding it leaves plain data behind, still usable.
        self.chains.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn vouches_for(&self, server_name: &str, chain: &[u8; 32], now: u64) -> bool {
        self.lock()
            .known
            .iter()
            .any(|c| c.vouches_for(server_name, &self.trust, chain, now))
    }

    fn remember(&self, server_name: String, chain: [u8; 32], leaf: &[u8], now: u64) {
        let Some(not_after) = certificate_not_after(leaf) else {
            return;
        };
        let entry = VerifiedChain {
            server_name,
            trust: self.trust,
            chain,
            valid_until: not_after.min(now.saturating_add(CHAIN_MAX_AGE_SECS)),
        };
        let mut state = self.lock();
        state.known.retain(|old| !entry.replaces(old));
        state.known.push(entry.clone());
        state.unsaved.retain(|old| !entry.replaces(old));
        state.unsaved.push(entry);
    }
}

/// A verifier that skips the chain checks of a chain [`ChainMemory`]
/// vouches for, and remembers each chain `inner` accepts.
#[derive(Debug)]
pub(crate) struct RememberingVerifier {
    pub(crate) inner: Arc<dyn ServerCertVerifier>,
    pub(crate) memory: Arc<ChainMemory>,
}

impl ServerCertVerifier for RememberingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let chain = VerifiedChain::digest(end_entity, intermediates.iter().map(AsRef::as_ref));
        let name = server_name.to_str();
        if self.memory.vouches_for(&name, &chain, now.as_secs()) {
            return Ok(ServerCertVerified::assertion());
        }
        let verified = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        self.memory
            .remember(name.into_owned(), chain, end_entity, now.as_secs());
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests;
