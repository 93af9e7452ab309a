//! The remembering verifier: what it skips, what it never skips, and real
//! TLS 1.3 handshakes (in memory) against servers whose chain changed or
//! who present a remembered chain without its key.

use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::pki_types::PrivateKeyDer;

use super::*;
use crate::proto::options::TlsOptions;

/// A CA and a leaf for `localhost` signed by it (ECDSA P-256, as rcgen
/// makes them), valid until `not_after_year`.
struct Issued {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    ca_pem: String,
    leaf: CertificateDer<'static>,
    leaf_key: rcgen::KeyPair,
}

fn issue(ca_name: &str, not_after_year: i32) -> Issued {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let (leaf, leaf_key) = leaf(&ca, &ca_key, not_after_year);
    Issued {
        ca_pem: ca.pem(),
        ca,
        ca_key,
        leaf,
        leaf_key,
    }
}

/// A leaf for `localhost` with a key of its own, signed by `ca`.
fn leaf(
    ca: &rcgen::Certificate,
    ca_key: &rcgen::KeyPair,
    not_after_year: i32,
) -> (CertificateDer<'static>, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_after = rcgen::date_time_ymd(not_after_year, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (cert.der().clone(), key)
}

/// A verifier that counts the chains it is asked about and accepts or
/// refuses every one (the signatures are the real handshakes' business,
/// below).
#[derive(Debug, Default)]
struct Counting {
    chains: AtomicUsize,
    refuse: bool,
}

impl ServerCertVerifier for Counting {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        self.chains.fetch_add(1, Ordering::SeqCst);
        if self.refuse {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ECDSA_NISTP256_SHA256]
    }
}

fn roots(pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}

use rustls::pki_types::pem::PemObject as _;

fn verify(
    verifier: &RememberingVerifier,
    leaf: &CertificateDer<'_>,
    name: &str,
    now: u64,
) -> std::result::Result<ServerCertVerified, rustls::Error> {
    let name = ServerName::try_from(name.to_string()).unwrap();
    verifier.verify_server_cert(
        leaf,
        &[],
        &name,
        &[],
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(now)),
    )
}

const NOW: u64 = 1_800_000_000; // 2027-01-15

#[test]
fn a_remembered_chain_is_not_verified_again_for_its_name_trust_and_day() {
    let issued = issue("CA one", 2030);
    let first = RememberingVerifier {
        inner: Arc::new(Counting::default()),
        memory: Arc::new(ChainMemory::new(&roots(&issued.ca_pem))),
    };
    verify(&first, &issued.leaf, "localhost", NOW).unwrap();
    let saved = first.memory.take_unsaved();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].valid_until, NOW + CHAIN_MAX_AGE_SECS);
    // A new process: the memory comes from the file.
    let counting = Arc::new(Counting::default());
    let second = RememberingVerifier {
        inner: counting.clone(),
        memory: Arc::new(ChainMemory::new(&roots(&issued.ca_pem))),
    };
    second.memory.load(saved.clone());
    verify(&second, &issued.leaf, "localhost", NOW + 60).unwrap();
    assert_eq!(counting.chains.load(Ordering::SeqCst), 0);
    assert!(second.memory.take_unsaved().is_empty());
    // Another server name, a day later, or under other trust anchors: verified.
    let cases = [
        ("127.0.0.1", NOW),
        ("localhost", NOW + CHAIN_MAX_AGE_SECS + 1),
    ];
    for (expected, (name, now)) in (1..).zip(cases) {
        verify(&second, &issued.leaf, name, now).unwrap();
        assert_eq!(counting.chains.load(Ordering::SeqCst), expected);
    }
    let other_trust = ChainMemory::new(&roots(&issue("CA two", 2030).ca_pem));
    other_trust.load(saved);
    assert!(!other_trust.vouches_for("localhost", &saved_chain(&issued), NOW));
}

fn saved_chain(issued: &Issued) -> [u8; 32] {
    VerifiedChain::digest(issued.leaf.as_ref(), [])
}

#[test]
fn a_changed_chain_is_verified_and_its_refusal_stands() {
    let issued = issue("CA one", 2030);
    let memory = Arc::new(ChainMemory::new(&roots(&issued.ca_pem)));
    let remembering = RememberingVerifier {
        inner: Arc::new(Counting::default()),
        memory: memory.clone(),
    };
    verify(&remembering, &issued.leaf, "localhost", NOW).unwrap();
    let refusing = Arc::new(Counting {
        refuse: true,
        ..Counting::default()
    });
    let next = RememberingVerifier {
        inner: refusing.clone(),
        memory,
    };
    let changed = issue("CA one", 2030);
    verify(&next, &changed.leaf, "localhost", NOW).unwrap_err();
    assert_eq!(refusing.chains.load(Ordering::SeqCst), 1);
    // The refused chain is not remembered: refused again.
    verify(&next, &changed.leaf, "localhost", NOW).unwrap_err();
    assert_eq!(refusing.chains.load(Ordering::SeqCst), 2);
}

#[test]
fn the_leaf_expiry_bounds_the_memory() {
    let issued = issue("CA one", 2027);
    let memory = ChainMemory::new(&roots(&issued.ca_pem));
    let jan_1_2027 = 1_798_761_600;
    memory.remember(
        "localhost".into(),
        saved_chain(&issued),
        issued.leaf.as_ref(),
        jan_1_2027 - 3600,
    );
    let saved = memory.take_unsaved();
    assert_eq!(saved[0].valid_until, jan_1_2027);
    assert!(memory.vouches_for("localhost", &saved_chain(&issued), jan_1_2027));
    assert!(!memory.vouches_for("localhost", &saved_chain(&issued), jan_1_2027 + 1));
}

/// A server presenting `chain` and signing with `key` (which need not be
/// the chain's: rustls' resolver is asked for a pair and does not check it).
#[derive(Debug)]
struct Presenting(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Presenting {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

fn server(chain: &CertificateDer<'static>, key: &rcgen::KeyPair) -> rustls::ServerConnection {
    let provider = super::super::provider();
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    let signing = provider.key_provider.load_private_key(key).unwrap();
    let certified = rustls::sign::CertifiedKey::new(vec![chain.clone()], signing);
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Presenting(Arc::new(certified))));
    rustls::ServerConnection::new(Arc::new(config)).unwrap()
}

/// A whole handshake between `config` and `server`, in memory.
fn handshake(
    config: &Arc<rustls::ClientConfig>,
    mut server: rustls::ServerConnection,
) -> std::result::Result<(), rustls::Error> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(config.clone(), name).unwrap();
    for _ in 0..10 {
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        client.write_tls(&mut bytes).unwrap();
        server.read_tls(&mut &bytes[..]).unwrap();
        if let Err(e) = server.process_new_packets() {
            // The server refused what the client sent: the client's own
            // error, if it has one, says why.
            let mut alert = Vec::new();
            let _ = server.write_tls(&mut alert);
            return Err(client_error(&mut client, &alert).unwrap_or(e));
        }
        bytes.clear();
        server.write_tls(&mut bytes).unwrap();
        client.read_tls(&mut &bytes[..]).unwrap();
        client.process_new_packets()?;
    }
    panic!("the handshake did not end");
}

fn client_error(client: &mut rustls::ClientConnection, bytes: &[u8]) -> Option<rustls::Error> {
    client.read_tls(&mut &bytes[..]).ok()?;
    client.process_new_packets().err()
}

#[test]
fn real_handshakes_skip_only_what_was_verified_and_always_check_the_key() {
    let issued = issue("CA one", 2040);
    let dir = std::env::temp_dir().join(format!("mongo-inline-remembered-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &issued.ca_pem).unwrap();
    let options = TlsOptions {
        ca_file_path: Some(ca),
        ..Default::default()
    };
    let client = || super::super::client_config_remembering(Some(&options), true).unwrap();
    let (config, memory) = client();
    let memory = memory.unwrap();
    handshake(&config, server(&issued.leaf, &issued.leaf_key)).unwrap();
    let saved = memory.take_unsaved();
    assert_eq!(saved.len(), 1);
    // A new process with what the file remembers.
    let (config, memory) = client();
    let memory = memory.unwrap();
    memory.load(saved);
    handshake(&config, server(&issued.leaf, &issued.leaf_key)).unwrap();
    assert!(memory.take_unsaved().is_empty(), "verified again");
    // The remembered chain from a server without its key: the signature
    // check refuses it.
    let impostor = rcgen::KeyPair::generate().unwrap();
    let error = handshake(&config, server(&issued.leaf, &impostor)).unwrap_err();
    assert!(
        matches!(
            error,
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature)
        ),
        "{error:?}"
    );
    // Another chain for the same name, from a CA not trusted: refused.
    let stranger = issue("CA two", 2040);
    let error = handshake(&config, server(&stranger.leaf, &stranger.leaf_key)).unwrap_err();
    assert!(
        matches!(
            error,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
        ),
        "{error:?}"
    );
    // Another chain from the trusted CA (a renewed certificate): verified
    // in full, accepted, and remembered in the old one's place.
    let renewed = leaf(&issued.ca, &issued.ca_key, 2041);
    handshake(&config, server(&renewed.0, &renewed.1)).unwrap();
    assert_eq!(memory.take_unsaved().len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}
