//! The SCRAM conversation (RFC 5802, RFC 7677) as values: no socket, no
//! clock, the nonce passed in. Each state is named by what it expects next
//! and handling a server message consumes it.
//!
//! ```text
//! ClientFirst::new(nonce) ──message()──> "n,,n=user,r=<nonce>"
//!     └─handle_server_first("r=..,s=..,i=..", keys)──> ClientFinal ──message()──> "c=biws,r=..,p=<proof>"
//!            └─handle_server_final("v=<signature>")──> Ok(())   (the server knows the password too)
//! ```
//!
//! Crypto comes from `ring` (already in the tree as rustls' crypto
//! provider): HMAC, PBKDF2 and the digests. MongoDB's SCRAM-SHA-1 password
//! digest needs MD5, which ring lacks; `md-5` (RustCrypto) provides it.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};

use crate::error::{Error, ErrorKind, Result};

/// The auth spec's floor on the server's iteration count (a lower one is a
/// downgrade attack by a man in the middle).
pub const MIN_ITERATIONS: u32 = 4096;

/// A ceiling on the iteration count, so that a hostile server cannot make
/// the client spin on PBKDF2 for minutes; well above any real setting
/// (MongoDB's defaults are 10,000 and 15,000).
pub const MAX_ITERATIONS: u32 = 10_000_000;

/// Which SCRAM variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-1, with MongoDB's MD5 password digest.
    Sha1,
    /// SCRAM-SHA-256, with the password prepared by SASLprep.
    Sha256,
}

impl ScramMechanism {
    /// The mechanism's name in `saslStart`.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha1 => "SCRAM-SHA-1",
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha1 => pbkdf2::PBKDF2_HMAC_SHA1,
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
            ScramMechanism::Sha256 => &digest::SHA256,
        }
    }

    fn output_len(self) -> usize {
        self.digest_algorithm().output_len()
    }

    /// The bytes PBKDF2 salts: for SCRAM-SHA-1 MongoDB's
    /// `hex(md5(username ":mongo:" password))`, for SCRAM-SHA-256 the
    /// password after SASLprep. The user name is never prepared.
    pub fn prepare_password(self, username: &str, password: &str) -> Result<Vec<u8>> {
        match self {
            ScramMechanism::Sha1 => {
                use md5::Digest as _;
                let digest = md5::Md5::digest(format!("{username}:mongo:{password}").as_bytes());
                Ok(hex_lower(&digest).into_bytes())
            }
            ScramMechanism::Sha256 => stringprep::saslprep(password)
                .map(|prepared| prepared.into_owned().into_bytes())
                // stringprep's error text quotes no input; still, say only what is wrong.
                .map_err(|_| {
                    auth_error(
                        self,
                        None,
                        "the password contains characters that SASLprep (RFC 4013) prohibits",
                    )
                }),
        }
    }
}

fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

fn auth_error(mechanism: ScramMechanism, username: Option<&str>, what: &str) -> Error {
    let user = username
        .map(|u| format!(" for user {u:?}"))
        .unwrap_or_default();
    Error::new(ErrorKind::Authentication {
        message: format!("{}{user}: {what}", mechanism.name()),
    })
}

/// The client and server keys derived from a password, a salt and an
/// iteration count: what the auth spec says to cache, so that PBKDF2 runs
/// once per client and credential however many sockets authenticate.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramKeys {
    client_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScramKeys(<redacted>)")
    }
}

impl ScramKeys {
    /// Keys as a state file holds them, unsealed (right or not: only the
    /// server can tell).
    pub fn from_parts(client_key: Vec<u8>, server_key: Vec<u8>) -> ScramKeys {
        ScramKeys {
            client_key,
            server_key,
        }
    }

    /// The client key and the server key, for sealing into a state file.
    pub fn parts(&self) -> (&[u8], &[u8]) {
        (&self.client_key, &self.server_key)
    }

    /// Runs PBKDF2 over the prepared password ([`ScramMechanism::prepare_password`]).
    pub fn derive(
        mechanism: ScramMechanism,
        prepared_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramKeys {
        let mut salted = vec![0u8; mechanism.output_len()];
        let rounds = std::num::NonZeroU32::new(iterations.max(1)).expect("at least one round");
        pbkdf2::derive(
            mechanism.pbkdf2_algorithm(),
            rounds,
            salt,
            prepared_password,
            &mut salted,
        );
        let salted_key = hmac::Key::new(mechanism.hmac_algorithm(), &salted);
        ScramKeys {
            client_key: hmac::sign(&salted_key, b"Client Key").as_ref().to_vec(),
            server_key: hmac::sign(&salted_key, b"Server Key").as_ref().to_vec(),
        }
    }
}

/// The salt and iteration count a server sent, which pick the cached keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SaltParams {
    /// The decoded salt.
    pub salt: Vec<u8>,
    /// The iteration count.
    pub iterations: u32,
}

/// The first step: the client-first message is ready to send.
#[derive(Debug, Clone)]
pub struct ClientFirst {
    mechanism: ScramMechanism,
    username: String,
    nonce: String,
    bare: String,
}

impl ClientFirst {
    /// Starts a conversation for `username` (not SASLprepped: the auth spec
    /// forbids it) with the client nonce `nonce` (the shell draws it; tests inject one).
    pub fn new(mechanism: ScramMechanism, username: &str, nonce: &str) -> ClientFirst {
        let escaped = username.replace('=', "=3D").replace(',', "=2C");
        ClientFirst {
            mechanism,
            username: username.to_owned(),
            nonce: nonce.to_owned(),
            bare: format!("n={escaped},r={nonce}"),
        }
    }

    /// The mechanism of this conversation.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// `n,,n=<user>,r=<nonce>`: no channel binding, as the spec requires.
    pub fn message(&self) -> Vec<u8> {
        format!("n,,{}", self.bare).into_bytes()
    }

    /// Reads the salt and iteration count from the server-first message
    /// without consuming the state, so the caller can look up cached keys.
    pub fn salt_params(&self, server_first: &[u8]) -> Result<SaltParams> {
        self.parse_server_first(server_first)
            .map(|(_, params)| params)
    }

    fn error(&self, what: &str) -> Error {
        auth_error(self.mechanism, Some(&self.username), what)
    }

    fn parse_server_first(&self, server_first: &[u8]) -> Result<(String, SaltParams)> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| self.error("the server's first message is not UTF-8"))?;
        let mut fields = text.split(',');
        let mut next = |key: &str| -> Result<&str> {
            let field = fields.next().unwrap_or_default();
            if let Some(message) = field.strip_prefix("e=") {
                return Err(self.error(&format!("the server refused: {message}")));
            }
            field
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('='))
                .ok_or_else(|| {
                    self.error(&format!(
                        "the server's first message has no '{key}=' field where expected"
                    ))
                })
        };
        let combined_nonce = next("r")?;
        let salt = next("s")?;
        let iterations = next("i")?;
        if !combined_nonce.starts_with(&self.nonce) || combined_nonce.len() <= self.nonce.len() {
            return Err(self.error(
                "the server's nonce does not extend the client's (a replayed or forged reply)",
            ));
        }
        if combined_nonce.contains(',') {
            return Err(self.error("the server's nonce contains ','"));
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| self.error("the server's salt is not valid base64"))?;
        if salt.is_empty() {
            return Err(self.error("the server's salt is empty"));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| self.error("the server's iteration count is not a number"))?;
        if iterations < MIN_ITERATIONS {
            return Err(self.error(&format!(
                "the server asked for {iterations} iterations, fewer than the minimum of \
                 {MIN_ITERATIONS}"
            )));
        }
        if iterations > MAX_ITERATIONS {
            return Err(self.error(&format!(
                "the server asked for {iterations} iterations, more than this driver's limit of \
                 {MAX_ITERATIONS}"
            )));
        }
        Ok((combined_nonce.to_owned(), SaltParams { salt, iterations }))
    }

    /// Handles the server-first message with `keys` (derived or cached for
    /// the salt and iteration count it names) and computes the proof.
    pub fn handle_server_first(self, server_first: &[u8], keys: &ScramKeys) -> Result<ClientFinal> {
        let (combined_nonce, _) = self.parse_server_first(server_first)?;
        let algorithm = self.mechanism.hmac_algorithm();
        // c=biws is base64("n,,"): the GS2 header without channel binding.
        let without_proof = format!("c=biws,r={combined_nonce}");
        let server_first = std::str::from_utf8(server_first).expect("checked above");
        let auth_message = format!("{},{server_first},{without_proof}", self.bare);
        let stored_key = digest::digest(self.mechanism.digest_algorithm(), &keys.client_key);
        let signature = hmac::sign(
            &hmac::Key::new(algorithm, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = keys
            .client_key
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        Ok(ClientFinal {
            mechanism: self.mechanism,
            username: self.username,
            message: format!("{without_proof},p={}", BASE64.encode(proof)),
            server_key: keys.server_key.clone(),
            auth_message,
        })
    }
}

/// The second step: the client-final message (with the proof) is ready;
/// the server's signature is expected.
#[derive(Clone)]
pub struct ClientFinal {
    mechanism: ScramMechanism,
    username: String,
    message: String,
    server_key: Vec<u8>,
    auth_message: String,
}

impl std::fmt::Debug for ClientFinal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFinal")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl ClientFinal {
    /// `c=biws,r=<nonce>,p=<proof>`.
    pub fn message(&self) -> Vec<u8> {
        self.message.clone().into_bytes()
    }

    /// Checks the server's signature: only a server that knows the
    /// password's keys can produce it. Compared in constant time.
    pub fn handle_server_final(self, server_final: &[u8]) -> Result<()> {
        let error = |what: &str| auth_error(self.mechanism, Some(&self.username), what);
        let text = std::str::from_utf8(server_final)
            .map_err(|_| error("the server's final message is not UTF-8"))?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(message) = first.strip_prefix("e=") {
            return Err(error(&format!("the server refused: {message}")));
        }
        let signature = first
            .strip_prefix("v=")
            .ok_or_else(|| error("the server's final message has no signature ('v=')"))?;
        let signature = BASE64
            .decode(signature)
            .map_err(|_| error("the server's signature is not valid base64"))?;
        let key = hmac::Key::new(self.mechanism.hmac_algorithm(), &self.server_key);
        hmac::verify(&key, self.auth_message.as_bytes(), &signature).map_err(|_| {
            error("the server's signature is wrong: the server does not know the password")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a whole conversation with the keys derived from `password`
    /// taken as-is (the RFCs' vectors) and returns the client-final message.
    fn converse(
        mechanism: ScramMechanism,
        prepared: &[u8],
        nonce: &str,
        server_first: &str,
        server_final: &str,
    ) -> Result<String> {
        let first = ClientFirst::new(mechanism, "user", nonce);
        assert_eq!(first.message(), format!("n,,n=user,r={nonce}").into_bytes());
        let params = first.salt_params(server_first.as_bytes())?;
        let keys = ScramKeys::derive(mechanism, prepared, &params.salt, params.iterations);
        let fin = first.handle_server_first(server_first.as_bytes(), &keys)?;
        let message = String::from_utf8(fin.message()).unwrap();
        fin.handle_server_final(server_final.as_bytes())?;
        Ok(message)
    }

    #[test]
    fn rfc5802_sha1_vector() {
        // RFC 5802 section 5: SCRAM-SHA-1 with the plain password "pencil".
        let message = converse(
            ScramMechanism::Sha1,
            b"pencil",
            "fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
        )
        .unwrap();
        assert_eq!(
            message,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        );
    }

    #[test]
    fn rfc7677_sha256_vector() {
        let prepared = ScramMechanism::Sha256
            .prepare_password("user", "pencil")
            .unwrap();
        let message = converse(
            ScramMechanism::Sha256,
            &prepared,
            "rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        )
        .unwrap();
        assert_eq!(
            message,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
    }

    #[test]
    fn mongodb_sha1_vector_uses_the_md5_password_digest() {
        // The auth spec's SCRAM-SHA-1 conversation (user "user", password "pencil").
        let prepared = ScramMechanism::Sha1
            .prepare_password("user", "pencil")
            .unwrap();
        assert_eq!(prepared, b"1c33006ec1ffd90f9cadcbcc0e118200");
        let message = converse(
            ScramMechanism::Sha1,
            &prepared,
            "fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,\
             i=10000",
            "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=",
        )
        .unwrap();
        assert_eq!(
            message,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,\
             p=MC2T8BvbmWRckDw8oWl5IVghwCY="
        );
    }

    #[test]
    fn a_wrong_server_signature_is_refused() {
        let e = converse(
            ScramMechanism::Sha1,
            b"pencil",
            "fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "v=AAAApqV8S7suAoZWja4dJRkFsKQ=",
        )
        .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Authentication { .. }), "{e}");
        assert!(e.to_string().contains("signature is wrong"), "{e}");
    }

    #[test]
    fn hostile_server_first_messages_are_clear_errors() {
        let first = ClientFirst::new(ScramMechanism::Sha256, "user", "abc");
        let cases = [
            ("r=xyz123,s=QSXCR+Q6sek8bf92,i=4096", "does not extend"),
            ("r=abc,s=QSXCR+Q6sek8bf92,i=4096", "does not extend"),
            ("r=abcdef,s=!!!,i=4096", "base64"),
            ("r=abcdef,s=,i=4096", "salt is empty"),
            (
                "r=abcdef,s=QSXCR+Q6sek8bf92,i=4095",
                "fewer than the minimum",
            ),
            (
                "r=abcdef,s=QSXCR+Q6sek8bf92,i=4294967295",
                "more than this driver's limit",
            ),
            ("r=abcdef,s=QSXCR+Q6sek8bf92,i=many", "not a number"),
            ("r=abcdef,i=4096", "no 's='"),
            ("", "no 'r='"),
            ("e=unknown-user", "the server refused: unknown-user"),
        ];
        for (message, expected) in cases {
            let e = first.salt_params(message.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(expected), "{message:?}: {e}");
            assert!(
                e.to_string().contains("SCRAM-SHA-256 for user \"user\""),
                "{e}"
            );
        }
        assert!(first.salt_params(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn user_names_are_escaped_not_prepared() {
        let first = ClientFirst::new(ScramMechanism::Sha256, "a=b,c\u{00AD}", "n");
        assert_eq!(first.message(), "n,,n=a=3Db=2Cc\u{00AD},r=n".as_bytes());
    }

    #[test]
    fn saslprep_cases() {
        let prep = |p: &str| ScramMechanism::Sha256.prepare_password("u", p);
        // RFC 4013 section 3's examples.
        assert_eq!(prep("I\u{00AD}X").unwrap(), b"IX"); // soft hyphen mapped to nothing
        assert_eq!(prep("user").unwrap(), b"user");
        assert_eq!(prep("USER").unwrap(), b"USER"); // case preserved
        assert_eq!(prep("\u{00AA}").unwrap(), "a".as_bytes()); // NFKC
        assert_eq!(prep("\u{2168}").unwrap(), b"IX"); // NFKC
        assert_eq!(prep("a\u{00A0}b").unwrap(), b"a b"); // non-ASCII space to space
        let e = prep("\u{0007}").unwrap_err(); // prohibited control character
        assert!(e.to_string().contains("SASLprep"), "{e}");
        assert!(!e.to_string().contains('\u{0007}'));
        assert!(prep("\u{0627}\u{0031}").is_err()); // bidi rule: RandALCat must end the string
                                                    // SCRAM-SHA-1 does not SASLprep: the digest covers the raw text.
        assert_eq!(
            ScramMechanism::Sha1
                .prepare_password("u", "\u{2168}")
                .unwrap(),
            ScramMechanism::Sha1
                .prepare_password("u", "\u{2168}")
                .unwrap()
        );
        assert_ne!(
            ScramMechanism::Sha1
                .prepare_password("u", "\u{2168}")
                .unwrap(),
            ScramMechanism::Sha1.prepare_password("u", "IX").unwrap()
        );
    }

    #[test]
    fn keys_never_print() {
        let keys = ScramKeys::derive(ScramMechanism::Sha256, b"pencil", b"salt", 4096);
        assert_eq!(format!("{keys:?}"), "ScramKeys(<redacted>)");
    }
}
