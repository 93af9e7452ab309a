//! The state file's contents as values: what a new process may reuse from
//! an earlier one (the SCRAM keys, so that it skips PBKDF2; the certificate
//! chains that passed verification, [`chain`]; the DNS answers until their
//! TTL, [`dns`]; the last topology seen, which orders the first scan,
//! [`topology`]), its byte format, and the sealing of the keys. The shell
//! (`shell::state_file`) reads and writes the file; nothing here touches
//! it, the clock or randomness (the nonces and the time are passed in).
//!
//! # Format (version 1)
//!
//! ```text
//! magic "MISTATE\0" · version u16 · entry count u16
//! entry*: kind u8 · binding [32] · written (unix seconds) u64 · length u16 · body
//! SHA-256 of everything before it [32]
//! ```
//!
//! Kinds: 1 sealed SCRAM keys, 2 a verified chain, 3 SRV and TXT answers,
//! 4 a host name's addresses, 5 the last topology seen.
//!
//! Integers are little-endian. Every length is bounded ([`MAX_FILE_BYTES`],
//! [`MAX_ENTRIES`], [`MAX_SALT_BYTES`]); a file that breaks any rule, is
//! torn (the digest does not match) or has another version decodes as an
//! error, which the shell treats as an empty file and rewrites. The digest
//! is keyed by nothing: it catches torn and garbled files, not an attacker
//! (the file's permissions keep those out, and a forged entry can at worst
//! fail an authentication, which drops it).
//!
//! # Binding
//!
//! Each entry carries the hash of the client's hosts (or SRV name), user,
//! authentication source and TLS settings ([`Binding::of`]): a client with
//! another connection string never reads it. The password is not part of
//! the binding (a hash of it would be a verifier).
//!
//! # The SCRAM keys, sealed
//!
//! An entry holds `ClientKey ‖ ServerKey` for (user, mechanism, salt,
//! iteration count), XORed with a keystream drawn from a key derived from
//! the prepared password: `K = PBKDF2-HMAC-SHA256(password, "mongo-inline
//! state v1" ‖ binding ‖ nonce, SEAL_ROUNDS)`, keystream `HMAC(K, "client
//! key") ‖ HMAC(K, "server key")`, with a fresh 16-byte nonce per entry. The
//! file holds neither the password nor the key, and nothing tells a right
//! key from a wrong one: no tag, no MAC, no hash of the keys. Unsealing with
//! a wrong password yields random-looking keys, which show themselves only
//! as a failed authentication at the server (the client drops the entry and
//! runs PBKDF2).
//!
//! What a guess costs an attacker:
//! - **The file alone** (a backup, a copy): nothing to test a guess
//!   against. Any password unseals to some pair of keys, and the pairs
//!   cannot be told apart without the server: this is stronger than the
//!   server's own stored keys, against which a guess costs PBKDF2.
//! - **The file and the server's `StoredKey`/`ServerKey`** (or a recorded
//!   SCRAM exchange, which TLS hides): a guess costs [`SEAL_ROUNDS`] PBKDF2
//!   rounds plus the one HMAC and hash with which the server checks a
//!   proof, at least as much as the server's own proof check, but less than
//!   the server's iteration count (15,000 by default). That is the price of
//!   skipping PBKDF2 at all: whatever lets the process recover the keys
//!   quickly from its password lets an attacker with both halves test a
//!   password as quickly. That is why the file is opt-in, held to mode 0600,
//!   and as sensitive as the connection string itself.

use ring::{digest, hmac, pbkdf2};

mod chain;
mod dns;
mod topology;
pub use chain::{certificate_not_after, VerifiedChain, CHAIN_MAX_AGE_SECS};
pub use dns::{expiry as dns_expiry, HostAddresses, SrvAnswer};
pub use topology::RememberedTopology;

use crate::proto::auth::scram::{SaltParams, ScramKeys, ScramMechanism};
use crate::proto::options::ClientOptions;

/// The largest file read; a bigger one is hostile or not ours.
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// At most this many entries are kept (the oldest go first).
pub const MAX_ENTRIES: usize = 128;
/// The longest salt kept (servers send 16 to 28 bytes).
pub const MAX_SALT_BYTES: usize = 64;
/// PBKDF2 rounds of the sealing key: over a hundred times the server's
/// proof check: 1.26 M instructions, about a third of a millisecond, the largest
/// part of a warm start's CPU (benches/README.md).
pub const SEAL_ROUNDS: u32 = 256;
/// The nonce that makes each entry's keystream its own.
pub const NONCE_BYTES: usize = 16;

const MAGIC: &[u8; 8] = b"MISTATE\0";
const VERSION: u16 = 1;
const KIND_SCRAM: u8 = 1;
const KIND_CHAIN: u8 = 2;
const KIND_SRV: u8 = 3;
const KIND_HOST: u8 = 4;
const KIND_TOPOLOGY: u8 = 5;
const DIGEST_BYTES: usize = 32;
const SEAL_CONTEXT: &[u8] = b"mongo-inline state v1";

/// The hash of what a client's entries are bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Binding(pub [u8; 32]);

impl Binding {
    /// The binding of a client's options: its seed list or SRV name, its
    /// user and authentication source, and its TLS settings.
    pub fn of(options: &ClientOptions) -> Binding {
        let mut context = digest::Context::new(&digest::SHA256);
        let mut field = |tag: &str, value: &str| {
            // Length-prefixed, so that no two field lists hash alike.
            for part in [tag, value] {
                context.update(&(part.len() as u64).to_le_bytes());
                context.update(part.as_bytes());
            }
        };
        field("srv", options.srv_host.as_deref().unwrap_or_default());
        for host in options.hosts() {
            field("host", &host.to_string());
        }
        if let Some(credential) = options.credential() {
            field("user", credential.username.as_deref().unwrap_or_default());
            field("source", credential.source.as_deref().unwrap_or_default());
            field("mechanism", credential.mechanism_name().unwrap_or_default());
        }
        field("tls", if options.tls() { "on" } else { "off" });
        // The settings' Debug form names every field and redacts the key
        // file's password.
        field("tls options", &format!("{:?}", options.tls_options()));
        let mut hash = [0u8; 32];
        hash.copy_from_slice(context.finish().as_ref());
        Binding(hash)
    }
}

/// SCRAM keys as the file holds them: sealed under the password.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedScramKeys {
    /// The mechanism the keys are for.
    pub mechanism: ScramMechanism,
    /// The server's salt and iteration count they were derived with.
    pub params: SaltParams,
    nonce: [u8; NONCE_BYTES],
    sealed: Vec<u8>,
}

impl std::fmt::Debug for SealedScramKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedScramKeys")
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.params.iterations)
            .finish_non_exhaustive()
    }
}

impl SealedScramKeys {
    /// Seals `keys` under `prepared_password` for `binding`, with a fresh
    /// `nonce` (from the shell's cryptographic source).
    pub fn seal(
        keys: &ScramKeys,
        mechanism: ScramMechanism,
        params: SaltParams,
        prepared_password: &[u8],
        binding: Binding,
        nonce: [u8; NONCE_BYTES],
    ) -> SealedScramKeys {
        let (client, server) = keys.parts();
        let mut sealed = [client, server].concat();
        xor_keystream(
            &mut sealed,
            prepared_password,
            binding,
            &nonce,
            client.len(),
        );
        SealedScramKeys {
            mechanism,
            params,
            nonce,
            sealed,
        }
    }

    /// The keys under `prepared_password`: right if the password is the one
    /// they were sealed under, random-looking otherwise (only the server can
    /// tell).
    pub fn unseal(&self, prepared_password: &[u8], binding: Binding) -> ScramKeys {
        let half = self.sealed.len() / 2;
        let mut plain = self.sealed.clone();
        xor_keystream(&mut plain, prepared_password, binding, &self.nonce, half);
        let server = plain.split_off(half);
        ScramKeys::from_parts(plain, server)
    }

    /// Whether these are the keys for `mechanism` with `params`.
    pub fn matches(&self, mechanism: ScramMechanism, params: &SaltParams) -> bool {
        self.mechanism == mechanism && &self.params == params
    }

    /// The sealed bytes (tests: tampering).
    #[cfg(test)]
    pub fn sealed_bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.sealed
    }
}

fn xor_keystream(
    data: &mut [u8],
    prepared_password: &[u8],
    binding: Binding,
    nonce: &[u8; NONCE_BYTES],
    half: usize,
) {
    let salt = [SEAL_CONTEXT, &binding.0, nonce].concat();
    let mut key = [0u8; 32];
    let rounds = std::num::NonZeroU32::new(SEAL_ROUNDS).expect("a positive constant");
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        rounds,
        &salt,
        prepared_password,
        &mut key,
    );
    let key = hmac::Key::new(hmac::HMAC_SHA256, &key);
    let client = hmac::sign(&key, b"client key");
    let server = hmac::sign(&key, b"server key");
    let stream = client.as_ref()[..half]
        .iter()
        .chain(&server.as_ref()[..half]);
    for (byte, mask) in data.iter_mut().zip(stream) {
        *byte ^= mask;
    }
}

/// One entry: what it is bound to, when it was written, what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The client it belongs to.
    pub binding: Binding,
    /// When it was written (unix seconds; the oldest go first).
    pub written: u64,
    /// What it holds.
    pub item: Item,
}

/// What an entry holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// Sealed SCRAM keys.
    Scram(SealedScramKeys),
    /// A certificate chain that passed full verification.
    Chain(VerifiedChain),
    /// The SRV and TXT answers of the client's `mongodb+srv` name.
    Srv(SrvAnswer),
    /// The addresses of a member's host name.
    Host(HostAddresses),
    /// The last topology the client saw.
    Topology(RememberedTopology),
}

impl Item {
    /// Whether this newer item takes `old`'s place: one set of SRV
    /// answers and one topology per client, one chain per server name and
    /// trust, one address list per host name (SCRAM keys are replaced as a whole,
    /// [`StateContents::replace`]).
    fn replaces(&self, old: &Item) -> bool {
        match (self, old) {
            (Item::Chain(new), Item::Chain(old)) => new.replaces(old),
            (Item::Srv(_), Item::Srv(_)) | (Item::Topology(_), Item::Topology(_)) => true,
            (Item::Host(new), Item::Host(old)) => new.host.eq_ignore_ascii_case(&old.host),
            _ => false,
        }
    }

    /// The entry's kind byte and body; none when it is too large to keep.
    fn encode(&self) -> Option<(u8, Vec<u8>)> {
        Some(match self {
            Item::Scram(keys) => (KIND_SCRAM, encode_scram(keys)),
            Item::Chain(chain) => (KIND_CHAIN, chain.encode()),
            Item::Srv(answer) => (KIND_SRV, answer.encode()?),
            Item::Host(addresses) => (KIND_HOST, addresses.encode()?),
            Item::Topology(topology) => (KIND_TOPOLOGY, topology.encode()?),
        })
    }
}

/// Everything the file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateContents {
    /// The entries, in the file's order.
    pub entries: Vec<Entry>,
}

/// Why a file's bytes were not read (the shell logs it and starts cold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl StateContents {
    /// The sealed keys bound to `binding`.
    pub fn scram_keys(&self, binding: Binding) -> Vec<SealedScramKeys> {
        self.entries
            .iter()
            .filter(|e| e.binding == binding)
            .filter_map(|e| match &e.item {
                Item::Scram(keys) => Some(keys.clone()),
                _ => None,
            })
            .collect()
    }

    /// The verified chains bound to `binding`.
    pub fn verified_chains(&self, binding: Binding) -> Vec<VerifiedChain> {
        self.items(binding)
            .filter_map(|item| match item {
                Item::Chain(chain) => Some(chain.clone()),
                _ => None,
            })
            .collect()
    }

    /// The SRV and TXT answers bound to `binding`, fresh or not.
    pub fn srv_answer(&self, binding: Binding) -> Option<SrvAnswer> {
        self.items(binding).find_map(|item| match item {
            Item::Srv(answer) => Some(answer.clone()),
            _ => None,
        })
    }

    /// The host addresses bound to `binding`, fresh or not.
    pub fn host_addresses(&self, binding: Binding) -> Vec<HostAddresses> {
        self.items(binding)
            .filter_map(|item| match item {
                Item::Host(addresses) => Some(addresses.clone()),
                _ => None,
            })
            .collect()
    }

    /// The last topology seen by a client bound to `binding`, fresh or not.
    pub fn topology(&self, binding: Binding) -> Option<RememberedTopology> {
        self.items(binding).find_map(|item| match item {
            Item::Topology(topology) => Some(topology.clone()),
            _ => None,
        })
    }

    fn items(&self, binding: Binding) -> impl Iterator<Item = &Item> {
        self.entries
            .iter()
            .filter(move |e| e.binding == binding)
            .map(|e| &e.item)
    }

    /// Replaces `binding`'s SCRAM keys with `keys`, written at `now` (unix
    /// seconds), keeping everything else; the oldest go beyond
    /// [`MAX_ENTRIES`].
    pub fn replace(&mut self, binding: Binding, keys: &[SealedScramKeys], now: u64) {
        self.entries
            .retain(|e| e.binding != binding || !matches!(e.item, Item::Scram(_)));
        self.entries.extend(keys.iter().map(|k| Entry {
            binding,
            written: now,
            item: Item::Scram(k.clone()),
        }));
        self.keep_the_newest();
    }

    /// Adds `items` (chains, DNS answers) to `binding`'s, each taking the
    /// place of the one it replaces, written at `now` (unix seconds).
    pub fn remember(&mut self, binding: Binding, items: &[Item], now: u64) {
        self.entries
            .retain(|e| e.binding != binding || !items.iter().any(|new| new.replaces(&e.item)));
        self.entries.extend(items.iter().map(|item| Entry {
            binding,
            written: now,
            item: item.clone(),
        }));
        // The keys stay last (a stable sort), where they were before this
        // item came: the tampering tests find them there.
        self.entries
            .sort_by_key(|e| matches!(e.item, Item::Scram(_)));
        self.keep_the_newest();
    }

    fn keep_the_newest(&mut self) {
        if self.entries.len() > MAX_ENTRIES {
            self.entries.sort_by_key(|e| std::cmp::Reverse(e.written));
            self.entries.truncate(MAX_ENTRIES);
        }
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.entries.len() * 160);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let encoded: Vec<(&Entry, u8, Vec<u8>)> = self
            .entries
            .iter()
            .filter_map(|entry| entry.item.encode().map(|(kind, body)| (entry, kind, body)))
            .take(MAX_ENTRIES)
            .collect();
        out.extend_from_slice(&(encoded.len() as u16).to_le_bytes());
        for (entry, kind, body) in encoded {
            out.push(kind);
            out.extend_from_slice(&entry.binding.0);
            out.extend_from_slice(&entry.written.to_le_bytes());
            out.extend_from_slice(&(body.len() as u16).to_le_bytes());
            out.extend_from_slice(&body);
        }
        let digest = digest::digest(&digest::SHA256, &out);
        out.extend_from_slice(digest.as_ref());
        out
    }

    /// Reads a file's bytes; anything torn, oversized, of another version
    /// or malformed is an error.
    pub fn decode(bytes: &[u8]) -> Result<StateContents, DecodeError> {
        if bytes.len() > MAX_FILE_BYTES {
            return Err(DecodeError("the file is larger than a state file can be"));
        }
        let body_len = bytes
            .len()
            .checked_sub(DIGEST_BYTES)
            .ok_or(DecodeError("the file is too short"))?;
        let (body, digest) = bytes.split_at(body_len);
        if digest::digest(&digest::SHA256, body).as_ref() != digest {
            return Err(DecodeError(
                "the file is torn or garbled (its digest differs)",
            ));
        }
        let mut reader = Reader(body);
        if reader.take(MAGIC.len())? != MAGIC {
            return Err(DecodeError("the file is not a mongo-inline state file"));
        }
        if reader.u16()? != VERSION {
            return Err(DecodeError("the file has another format version"));
        }
        let count = usize::from(reader.u16()?);
        if count > MAX_ENTRIES {
            return Err(DecodeError("the file has too many entries"));
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let kind = reader.u8()?;
            let mut binding = [0u8; 32];
            binding.copy_from_slice(reader.take(32)?);
            let written = reader.u64()?;
            let len = usize::from(reader.u16()?);
            let body = reader.take(len)?;
            let item = match kind {
                KIND_SCRAM => Item::Scram(decode_scram(body)?),
                KIND_CHAIN => Item::Chain(VerifiedChain::decode(body)?),
                KIND_SRV => Item::Srv(SrvAnswer::decode(body)?),
                KIND_HOST => Item::Host(HostAddresses::decode(body)?),
                KIND_TOPOLOGY => Item::Topology(RememberedTopology::decode(body)?),
                _ => return Err(DecodeError("the file has an entry of an unknown kind")),
            };
            entries.push(Entry {
                binding: Binding(binding),
                written,
                item,
            });
        }
        if !reader.0.is_empty() {
            return Err(DecodeError("the file has bytes after its last entry"));
        }
        Ok(StateContents { entries })
    }
}

fn encode_scram(keys: &SealedScramKeys) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.push(match keys.mechanism {
        ScramMechanism::Sha1 => 1,
        ScramMechanism::Sha256 => 2,
    });
    out.extend_from_slice(&keys.params.iterations.to_le_bytes());
    out.push(keys.params.salt.len() as u8);
    out.extend_from_slice(&keys.params.salt);
    out.extend_from_slice(&keys.nonce);
    out.push(keys.sealed.len() as u8);
    out.extend_from_slice(&keys.sealed);
    out
}

fn decode_scram(body: &[u8]) -> Result<SealedScramKeys, DecodeError> {
    let mut reader = Reader(body);
    let (mechanism, key_len) = match reader.u8()? {
        1 => (ScramMechanism::Sha1, 20),
        2 => (ScramMechanism::Sha256, 32),
        _ => return Err(DecodeError("an entry names an unknown SCRAM mechanism")),
    };
    let iterations = reader.u32()?;
    if !(crate::proto::auth::scram::MIN_ITERATIONS..=crate::proto::auth::scram::MAX_ITERATIONS)
        .contains(&iterations)
    {
        return Err(DecodeError("an entry's iteration count is out of range"));
    }
    let salt_len = usize::from(reader.u8()?);
    if salt_len == 0 || salt_len > MAX_SALT_BYTES {
        return Err(DecodeError("an entry's salt has an impossible length"));
    }
    let salt = reader.take(salt_len)?.to_vec();
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(reader.take(NONCE_BYTES)?);
    if usize::from(reader.u8()?) != 2 * key_len {
        return Err(DecodeError("an entry's keys have the wrong length"));
    }
    let sealed = reader.take(2 * key_len)?.to_vec();
    if !reader.0.is_empty() {
        return Err(DecodeError("an entry has bytes after its keys"));
    }
    Ok(SealedScramKeys {
        mechanism,
        params: SaltParams { salt, iterations },
        nonce,
        sealed,
    })
}

/// Reads fields off the front of a slice; running out is an error.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("the file ends inside an entry"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A length byte and that many bytes.
    fn short_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::from(self.u8()?);
        self.take(len)
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests;
