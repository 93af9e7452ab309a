//! Authentication: resolving a credential by the auth spec's rules, and the
//! conversation on a new socket right after its handshake.
//!
//! ```text
//! handshake command ──Authenticator::prepare_handshake──> + saslSupportedMechs, speculativeAuthenticate
//! handshake reply ──Authenticator::begin(reply, speculation, nonce)──> (Conversation, Next)
//!      speculativeAuthenticate in the reply? ──yes──> saslContinue (one round trip saved)
//!                                            └─no───> saslStart ──> saslContinue
//! each reply ──Authenticator::step(conversation, reply)──> Next::Send(command) | Next::Done
//! ```
//!
//! Sans-I/O, like rustls' handshake: every mechanism is a [`Conversation`]
//! value that takes server replies and yields the next command; the shell
//! sends them on the socket, and a scripted server in the tests can stand in
//! for a real one. Randomness (the nonces) is drawn by the shell and passed
//! in. The client keeps one
//! [`Authenticator`] for its whole life: SCRAM keys are derived once per
//! salt and iteration count and reused on every socket. With a state file
//! ([`crate::proto::state_file`]) they outlive the process: sealed keys
//! from an earlier one are tried before PBKDF2, and dropped the moment a
//! conversation with them fails ([`Authenticator::stored_keys_refused`]).

pub mod aws;
pub mod scram;
pub mod sigv4;

use std::collections::HashMap;

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::options::oidc::CallbackKind;
use crate::proto::options::Credential;

use crate::proto::state_file::{self, Binding, SealedScramKeys};
use scram::{ClientFinal, ClientFirst, SaltParams, ScramKeys, ScramMechanism};

/// `authSource` for mechanisms whose users live outside MongoDB.
pub const EXTERNAL: &str = "$external";

/// The credential as the auth spec says to read it: the source filled in
/// (`authSource`, else the URI's database, else `admin` — `$external` for
/// the external mechanisms), GSSAPI's default `SERVICE_NAME`, and the
/// mechanism-specific rules checked (property names and values, what each
/// mechanism allows). Pure: no I/O, nothing about what this driver can run.
pub fn resolve_credential(
    credential: &Credential,
    default_database: Option<&str>,
) -> Result<Credential> {
    let mut resolved = credential.clone();
    let mechanism = credential.mechanism_name();
    resolved.source = Some(auth_source(credential, default_database)?);
    let properties = credential.mechanism_properties.clone();
    match mechanism {
        Some("GSSAPI") => {
            resolved.mechanism_properties = Some(gssapi_properties(properties)?);
        }
        Some("MONGODB-AWS") => {
            let has_token = properties
                .as_ref()
                .is_some_and(|p| property(p, "AWS_SESSION_TOKEN").is_some());
            if has_token && credential.username.is_none() {
                return Err(Error::invalid_argument(
                    "AWS_SESSION_TOKEN needs a user name (access key id) and password (secret \
                     access key) too",
                ));
            }
        }
        Some("MONGODB-OIDC") => validate_oidc(credential, properties.as_ref())?,
        _ => {}
    }
    Ok(resolved)
}

/// The auth spec's source rule: `authSource`, else the URI's database, else
/// `admin` — or `$external` for the external mechanisms (PLAIN takes the
/// URI's database first).
fn auth_source(credential: &Credential, default_database: Option<&str>) -> Result<String> {
    let source = match credential.mechanism_name() {
        Some("MONGODB-X509" | "GSSAPI" | "MONGODB-AWS" | "MONGODB-OIDC") => {
            credential.source.clone().unwrap_or_else(|| EXTERNAL.into())
        }
        Some("PLAIN") => credential
            .source
            .clone()
            .or_else(|| default_database.map(str::to_owned))
            .unwrap_or_else(|| EXTERNAL.into()),
        _ => credential
            .source
            .clone()
            .or_else(|| default_database.map(str::to_owned))
            .unwrap_or_else(|| "admin".into()),
    };
    if source.is_empty() {
        return Err(Error::invalid_argument("authSource is empty"));
    }
    Ok(source)
}

/// GSSAPI's properties checked (`CANONICALIZE_HOST_NAME`'s values) and its
/// default `SERVICE_NAME` filled in.
fn gssapi_properties(properties: Option<Document>) -> Result<Document> {
    let mut properties = properties.unwrap_or_default();
    if let Some(value) = property(&properties, "CANONICALIZE_HOST_NAME") {
        let valid = matches!(value, Bson::Boolean(_) | Bson::String(_))
            && match value {
                Bson::String(s) => {
                    ["none", "forward", "forwardAndReverse", "true", "false"].contains(&s.as_str())
                }
                _ => true,
            };
        if !valid {
            return Err(Error::invalid_argument(
                "CANONICALIZE_HOST_NAME must be none, forward, forwardAndReverse, true or \
                 false",
            ));
        }
    }
    if property(&properties, "SERVICE_NAME").is_none() {
        properties.insert("SERVICE_NAME", "mongodb");
    }
    Ok(properties)
}

/// A mechanism property, by case-insensitive name (the auth spec's rule).
fn property<'a>(properties: &'a Document, name: &str) -> Option<&'a Bson> {
    properties
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
}

fn validate_oidc(credential: &Credential, properties: Option<&Document>) -> Result<()> {
    const KNOWN: [&str; 3] = ["ENVIRONMENT", "TOKEN_RESOURCE", "ALLOWED_HOSTS"];
    let empty = Document::new();
    let properties = properties.unwrap_or(&empty);
    if let Some(unknown) = properties
        .keys()
        .find(|k| !KNOWN.iter().any(|known| known.eq_ignore_ascii_case(k)))
    {
        return Err(Error::invalid_argument(format!(
            "MONGODB-OIDC does not know the property {unknown:?}; expected one of {}",
            KNOWN.join(", ")
        )));
    }
    if credential.password.is_some() {
        return Err(Error::invalid_argument(
            "MONGODB-OIDC does not take a password",
        ));
    }
    let Some(environment) = oidc_environment(credential, properties)? else {
        return Ok(());
    };
    let has_resource = property(properties, "TOKEN_RESOURCE").is_some();
    match environment {
        "test" | "k8s" => {
            if credential.username.is_some() && environment == "test" {
                return Err(Error::invalid_argument(
                    "MONGODB-OIDC with ENVIRONMENT:test takes no user name",
                ));
            }
        }
        "azure" | "gcp" => {
            if !has_resource {
                return Err(Error::invalid_argument(format!(
                    "MONGODB-OIDC with ENVIRONMENT:{environment} needs TOKEN_RESOURCE"
                )));
            }
            if environment == "gcp" && credential.username.is_some() {
                return Err(Error::invalid_argument(
                    "MONGODB-OIDC with ENVIRONMENT:gcp takes no user name",
                ));
            }
        }
        other => {
            return Err(Error::invalid_argument(format!(
                "MONGODB-OIDC ENVIRONMENT {other:?} is not supported; expected test, azure, gcp \
                 or k8s"
            )))
        }
    }
    Ok(())
}

/// The `ENVIRONMENT` property, checked against the callback (one or the
/// other); `None` with a machine callback.
fn oidc_environment<'a>(
    credential: &Credential,
    properties: &'a Document,
) -> Result<Option<&'a str>> {
    let callback = &credential.oidc_callback;
    if matches!(callback.kind, Some(CallbackKind::Human)) {
        return Err(Error::invalid_argument(
            "MONGODB-OIDC's human (browser) flow is not supported by this driver; give a machine \
             callback (oidc::Callback::machine) or an ENVIRONMENT property",
        ));
    }
    let environment = match property(properties, "ENVIRONMENT") {
        Some(_) if callback.is_set() => {
            return Err(Error::invalid_argument(
                "MONGODB-OIDC takes an ENVIRONMENT property or a callback, not both",
            ))
        }
        Some(Bson::String(e)) => Some(e.as_str()),
        Some(_) => return Err(Error::invalid_argument("ENVIRONMENT must be a string")),
        None if callback.is_set() => {
            if property(properties, "TOKEN_RESOURCE").is_some() {
                return Err(Error::invalid_argument(
                    "MONGODB-OIDC's TOKEN_RESOURCE goes with ENVIRONMENT:azure or gcp only",
                ));
            }
            None
        }
        None => {
            return Err(Error::invalid_argument(
                "MONGODB-OIDC needs an ENVIRONMENT property (test, azure, gcp or k8s) or a \
                 callback",
            ))
        }
    };
    Ok(environment)
}

/// The mechanisms this driver runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// SCRAM-SHA-1 or SCRAM-SHA-256.
    Scram(ScramMechanism),
    /// MONGODB-X509: the TLS client certificate's subject is the user.
    X509,
    /// PLAIN (LDAP): the password is sent as is, so only over TLS in practice.
    Plain,
    /// MONGODB-AWS: a signed STS `GetCallerIdentity` request, which the
    /// server runs to learn the IAM identity.
    Aws,
    /// MONGODB-OIDC: an access token (JWT) from an identity provider.
    Oidc,
}

impl Mechanism {
    /// The mechanism's name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Scram(m) => m.name(),
            Mechanism::X509 => "MONGODB-X509",
            Mechanism::Plain => "PLAIN",
            Mechanism::Aws => "MONGODB-AWS",
            Mechanism::Oidc => "MONGODB-OIDC",
        }
    }
}

/// What the handshake's `speculativeAuthenticate` started, to be finished
/// with the handshake reply.
#[derive(Debug)]
pub enum Speculation {
    /// Nothing was sent.
    None,
    /// A SCRAM client-first message went out inside the hello.
    Scram(ClientFirst),
    /// An X.509 `authenticate` went out inside the hello.
    X509,
    /// A MONGODB-OIDC saslStart with the cached token went out inside the
    /// hello.
    Oidc,
}

/// A credential that works over the transport but deserves a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportWarning {
    /// PLAIN over plain TCP: the password crosses the network unencrypted.
    PlainWithoutTls,
}

impl std::fmt::Display for TransportWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportWarning::PlainWithoutTls => f.write_str(
                "authMechanism=PLAIN without tls=true sends the password unencrypted over the \
                 network",
            ),
        }
    }
}

/// Fresh randomness for one conversation, drawn by the shell
/// (`src/shell/rng.rs`): the pure core never reads a random source itself.
#[derive(Clone)]
pub struct ClientNonce {
    bytes: [u8; 32],
    /// A SCRAM nonce given as text (the spec's recorded conversations).
    scram_text: Option<String>,
}

impl ClientNonce {
    /// A nonce of 32 random bytes.
    pub fn new(bytes: [u8; 32]) -> ClientNonce {
        ClientNonce {
            bytes,
            scram_text: None,
        }
    }

    /// A nonce whose SCRAM form is `text` (to replay a recorded exchange).
    #[cfg(test)]
    pub fn scram(text: &str) -> ClientNonce {
        ClientNonce {
            bytes: [7; 32],
            scram_text: Some(text.to_owned()),
        }
    }

    /// SCRAM's printable nonce: 24 of the bytes, base64 encoded.
    fn scram_text(&self) -> String {
        use base64::Engine as _;
        match &self.scram_text {
            Some(text) => text.clone(),
            None => base64::engine::general_purpose::STANDARD.encode(&self.bytes[..24]),
        }
    }

    /// The raw bytes (MONGODB-AWS's client nonce).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.bytes
    }
}

impl std::fmt::Debug for ClientNonce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientNonce")
    }
}

/// What a conversation wants next: a command sent on the socket being
/// authenticated (its reply goes to [`Authenticator::step`]), or nothing.
#[derive(Debug)]
pub enum Next {
    /// Send `command` to database `db`.
    Send {
        /// The database the command runs on (the credential's source).
        db: String,
        /// The command.
        command: Document,
    },
    /// The conversation needs a secret the shell fetches (from the
    /// environment, a file or an HTTP endpoint): give it to
    /// [`Authenticator::provide`].
    Fetch(Need),
    /// The socket is authenticated.
    Done,
}

/// A secret a conversation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// AWS credentials (MONGODB-AWS).
    AwsCredentials,
    /// A fresh OIDC access token (MONGODB-OIDC), from the callback or the
    /// built-in environment.
    OidcToken,
}

/// A secret the shell fetched for [`Need`].
#[derive(Debug)]
pub enum Secret {
    /// AWS credentials, and the time (seconds since the Unix epoch) to
    /// sign the request with.
    Aws {
        /// The credentials.
        credentials: aws::AwsCredentials,
        /// Now, for `X-Amz-Date`.
        unix_time: u64,
    },
    /// An OIDC access token.
    OidcToken(String),
}

/// One socket's authentication conversation, as a value named by the
/// server reply it expects next (sans-I/O: the shell sends each
/// [`Next::Send`] and hands the reply to [`Authenticator::step`]).
#[derive(Debug)]
pub struct Conversation {
    mechanism: Mechanism,
    state: State,
    /// The SCRAM keys this conversation proves with, and where they came
    /// from when it took them: what its outcome says about them
    /// ([`Authenticator::stored_keys_refused`],
    /// [`Authenticator::keys_accepted`]) is its own, whatever other
    /// sockets' conversations are under way beside it.
    keys: Option<(KeyId, KeySource)>,
}

/// A SCRAM key cache entry's name: the mechanism, the salt and the
/// iteration count.
type KeyId = (ScramMechanism, SaltParams);

#[derive(Debug)]
enum State {
    /// The SCRAM server-first message (reply to saslStart).
    ScramFirst(ClientFirst),
    /// The SCRAM server-final message (the server's signature).
    ScramFinal { fin: ClientFinal, id: Bson },
    /// `done` from a server that ignored skipEmptyExchange.
    ScramEmpty { id: Bson, rounds_left: u8 },
    /// PLAIN's one reply, which must say `done`.
    Plain,
    /// X.509's `authenticate` reply: `ok` is all.
    X509,
    /// MONGODB-AWS: waiting for the credentials.
    AwsCredentials { nonce: [u8; 32] },
    /// MONGODB-AWS: the server's nonce and STS host.
    AwsFirst {
        nonce: [u8; 32],
        credentials: aws::AwsCredentials,
        unix_time: u64,
    },
    /// MONGODB-AWS: the server ran GetCallerIdentity; `done` is expected.
    AwsFinal,
    /// MONGODB-OIDC: waiting for a fresh token.
    OidcToken,
    /// MONGODB-OIDC: the server's answer to the token (`cached`: the
    /// client cache's, which a refusal invalidates once).
    OidcJwt { token: String, cached: bool },
    /// Finished: nothing more is expected.
    Finished,
}

/// One client's authentication state: its resolved credential and the
/// SCRAM keys derived so far.
pub struct Authenticator {
    username: Option<String>,
    password: Option<String>,
    source: String,
    /// `None`: negotiate through `saslSupportedMechs`.
    mechanism: Option<Mechanism>,
    /// `authMechanismProperties`, resolved.
    properties: Document,
    /// MONGODB-AWS: temporary credentials fetched from an AWS endpoint,
    /// reused until five minutes before they expire.
    aws_cache: Option<aws::AwsCredentials>,
    /// MONGODB-OIDC: the last access token obtained (the spec's Client
    /// Cache), kept until the server refuses it.
    oidc_token: Option<String>,
    /// MONGODB-OIDC: when the callback last ran (the spec spaces calls
    /// 100 ms apart).
    last_oidc_call: Option<std::time::Instant>,
    /// Keys by what derived them, and where each came from (an entry
    /// becomes [`KeySource::Memory`] once a server accepted it).
    keys: HashMap<KeyId, (ScramKeys, KeySource)>,
    /// How many times PBKDF2 ran (the cache's effect, observable in tests).
    derivations: usize,
    /// The state file's part: sealed keys from an earlier process.
    stored: Option<StoredKeys>,
}

/// The sealed SCRAM keys the state file holds for this client.
struct StoredKeys {
    binding: Binding,
    sealed: Vec<SealedScramKeys>,
    /// Whether `sealed` differs from the file (an entry added or dropped).
    changed: bool,
}

/// Where a conversation's SCRAM keys came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeySource {
    /// This process's cache, already accepted by a server.
    Memory,
    /// Unsealed from the state file: not yet accepted by any server.
    StateFile,
    /// PBKDF2, in this conversation.
    Derived,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("username", &self.username)
            .field("source", &self.source)
            .field("mechanism", &self.mechanism.map(Mechanism::name))
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// The authenticator for `credential` (as given in the options), or an
    /// error naming a mechanism this driver does not run.
    pub fn new(credential: &Credential, default_database: Option<&str>) -> Result<Authenticator> {
        let resolved = resolve_credential(credential, default_database)?;
        let mechanism = match resolved.mechanism_name() {
            None => None,
            Some("SCRAM-SHA-1") => Some(Mechanism::Scram(ScramMechanism::Sha1)),
            Some("SCRAM-SHA-256") => Some(Mechanism::Scram(ScramMechanism::Sha256)),
            Some("MONGODB-X509") => Some(Mechanism::X509),
            Some("PLAIN") => Some(Mechanism::Plain),
            Some("MONGODB-AWS") => Some(Mechanism::Aws),
            Some("MONGODB-OIDC") => Some(Mechanism::Oidc),
            Some(other) => {
                return Err(Error::invalid_argument(format!(
                    "authMechanism {other} is not supported by this driver yet; it runs \
                     SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509, PLAIN, MONGODB-AWS and MONGODB-OIDC"
                )))
            }
        };
        let needs_password = matches!(
            mechanism,
            None | Some(Mechanism::Scram(_) | Mechanism::Plain)
        );
        if needs_password && resolved.password.is_none() {
            // The URI grammar allows a user without a password; the
            // conversation would only fail later, at the server.
            let name = mechanism.map_or("SCRAM", Mechanism::name);
            return Err(Error::invalid_argument(format!(
                "the credential for user {:?} has no password, which {name} needs",
                resolved.username.as_deref().unwrap_or_default()
            )));
        }
        Ok(Authenticator {
            username: resolved.username,
            password: resolved.password,
            source: resolved.source.unwrap_or_else(|| "admin".into()),
            mechanism,
            properties: resolved.mechanism_properties.unwrap_or_default(),
            aws_cache: None,
            oidc_token: None,
            last_oidc_call: None,
            keys: HashMap::new(),
            derivations: 0,
            stored: None,
        })
    }

    /// Takes the SCRAM keys a state file holds for this client (bound to
    /// `binding`), and keeps the ones servers accept from now on.
    pub fn use_state_file(&mut self, binding: Binding, sealed: Vec<SealedScramKeys>) {
        self.stored = Some(StoredKeys {
            binding,
            sealed,
            changed: false,
        });
    }

    /// After `conversation` failed: if its keys came from the state file,
    /// they are dropped (from the file too, unless a conversation beside it
    /// replaced them already) and the caller starts the conversation over,
    /// which derives them (PBKDF2, once for all the sockets refused).
    pub fn stored_keys_refused(&mut self, conversation: &Conversation) -> bool {
        let Some((key, KeySource::StateFile)) = &conversation.keys else {
            return false;
        };
        if matches!(self.keys.get(key), Some((_, KeySource::StateFile))) {
            self.keys.remove(key);
            if let Some(stored) = &mut self.stored {
                stored.sealed.retain(|s| !s.matches(key.0, &key.1));
                stored.changed = true;
            }
        }
        true
    }

    /// After a server accepted `conversation`: its keys are known good
    /// from now on, and keys PBKDF2 derived are sealed for the state file
    /// with `nonce` (fresh randomness), once however many sockets used
    /// them.
    pub fn keys_accepted(
        &mut self,
        conversation: &Conversation,
        nonce: [u8; state_file::NONCE_BYTES],
    ) -> Result<()> {
        let Some((key, _)) = &conversation.keys else {
            return Ok(());
        };
        let Some((keys, source)) = self.keys.get_mut(key) else {
            return Ok(());
        };
        let was = std::mem::replace(source, KeySource::Memory);
        let (Some(stored), KeySource::Derived) = (&mut self.stored, was) else {
            return Ok(());
        };
        let (mechanism, params) = key.clone();
        let prepared = mechanism.prepare_password(
            self.username.as_deref().unwrap_or_default(),
            self.password.as_deref().unwrap_or_default(),
        )?;
        let sealed =
            SealedScramKeys::seal(keys, mechanism, params, &prepared, stored.binding, nonce);
        stored
            .sealed
            .retain(|s| !s.matches(mechanism, &sealed.params));
        stored.sealed.push(sealed);
        stored.changed = true;
        Ok(())
    }

    /// The sealed keys the state file should hold for this client, when
    /// they changed since it was read or last written.
    pub fn take_state_change(&mut self) -> Option<(Binding, Vec<SealedScramKeys>)> {
        let stored = self.stored.as_mut().filter(|s| s.changed)?;
        stored.changed = false;
        Some((stored.binding, stored.sealed.clone()))
    }

    /// Checks the mechanism against the transport before any socket opens:
    /// MONGODB-X509 cannot work without TLS and a client certificate, and
    /// PLAIN over plain TCP sends the password in the clear (a warning, for
    /// the caller to log).
    pub fn check_transport(
        &self,
        tls: bool,
        client_certificate: bool,
    ) -> Result<Option<TransportWarning>> {
        match self.mechanism {
            Some(Mechanism::X509) if !tls || !client_certificate => Err(Error::invalid_argument(
                "MONGODB-X509 authenticates with the TLS client certificate: it needs tls=true \
                     and tlsCertificateKeyFile",
            )),
            Some(Mechanism::Plain) if !tls => Ok(Some(TransportWarning::PlainWithoutTls)),
            _ => Ok(None),
        }
    }

    /// How many times a password was run through PBKDF2 so far.
    #[cfg(test)]
    pub fn derivations(&self) -> usize {
        self.derivations
    }

    /// Adds mechanism negotiation (`saslSupportedMechs`, when no mechanism
    /// was named) and `speculativeAuthenticate` to a handshake command.
    pub fn prepare_handshake(
        &self,
        command: &mut Document,
        nonce: &ClientNonce,
    ) -> Result<Speculation> {
        let username = self.username.as_deref().unwrap_or_default();
        if self.mechanism.is_none() {
            command.insert("saslSupportedMechs", format!("{}.{username}", self.source));
        }
        match self.mechanism {
            // Without a named mechanism, speculate with the default of any
            // server new enough to take speculation (4.4+): SCRAM-SHA-256.
            None | Some(Mechanism::Scram(_)) => {
                let mechanism = match self.mechanism {
                    Some(Mechanism::Scram(m)) => m,
                    _ => ScramMechanism::Sha256,
                };
                let first = ClientFirst::new(mechanism, username, &nonce.scram_text());
                let mut start = sasl_start(mechanism.name(), first.message());
                start.insert("db", self.source.clone());
                command.insert("speculativeAuthenticate", start);
                Ok(Speculation::Scram(first))
            }
            Some(Mechanism::X509) => {
                let mut authenticate = self.x509_command();
                authenticate.insert("db", EXTERNAL);
                command.insert("speculativeAuthenticate", authenticate);
                Ok(Speculation::X509)
            }
            // The auth spec: speculate only with a cached token.
            Some(Mechanism::Oidc) => match &self.oidc_token {
                Some(token) => {
                    let mut start = oidc_start(token);
                    start.insert("db", EXTERNAL);
                    command.insert("speculativeAuthenticate", start);
                    Ok(Speculation::Oidc)
                }
                None => Ok(Speculation::None),
            },
            Some(Mechanism::Plain | Mechanism::Aws) => Ok(Speculation::None),
        }
    }

    fn x509_command(&self) -> Document {
        let mut command = doc! { "authenticate": 1, "mechanism": "MONGODB-X509" };
        if let Some(user) = &self.username {
            command.insert("user", user.clone());
        }
        command
    }

    fn error(&self, mechanism: Mechanism, what: impl std::fmt::Display) -> Error {
        let user = match &self.username {
            Some(u) => format!(" for user {u:?} on database {:?}", self.source),
            None => format!(" on database {:?}", self.source),
        };
        Error::new(ErrorKind::Authentication {
            message: format!("{}{user}: {what}", mechanism.name()),
        })
    }

    fn send(&self, command: Document) -> Next {
        Next::Send {
            db: self.source.clone(),
            command,
        }
    }

    /// Starts authenticating the socket whose handshake `reply` answered
    /// the command [`Self::prepare_handshake`] extended: the conversation
    /// and its first command (or [`Next::Done`] when the speculative
    /// answer settled it). `nonce` is fresh randomness for a conversation
    /// that starts over.
    pub fn begin(
        &mut self,
        reply: &Document,
        speculation: Speculation,
        nonce: &ClientNonce,
    ) -> Result<(Conversation, Next)> {
        let mechanism = match self.mechanism {
            Some(m) => m,
            None => Mechanism::Scram(negotiated(reply)),
        };
        let mut conversation = Conversation {
            mechanism,
            state: State::Finished,
            keys: None,
        };
        // The auth spec: no authentication is possible on an arbiter.
        if reply.get_bool("arbiterOnly") == Ok(true) {
            return Ok((conversation, Next::Done));
        }
        let speculative_reply = reply.get_document("speculativeAuthenticate").ok();
        let next = match (mechanism, speculation, speculative_reply) {
            (Mechanism::Scram(m), Speculation::Scram(first), Some(server))
                if first.mechanism() == m =>
            {
                conversation.state = State::ScramFirst(first);
                self.advance(&mut conversation, server)?
            }
            (Mechanism::X509, Speculation::X509, Some(_)) => Next::Done,
            (Mechanism::Oidc, Speculation::Oidc, Some(server))
                if server.get_bool("done") == Ok(true) =>
            {
                Next::Done
            }
            (Mechanism::Oidc, _, _) => self.oidc_first(&mut conversation),
            (Mechanism::Scram(m), _, _) => {
                let username = self.username.as_deref().unwrap_or_default();
                let first = ClientFirst::new(m, username, &nonce.scram_text());
                let start = sasl_start(m.name(), first.message());
                conversation.state = State::ScramFirst(first);
                self.send(start)
            }
            (Mechanism::X509, _, _) => {
                conversation.state = State::X509;
                self.send(self.x509_command())
            }
            (Mechanism::Plain, _, _) => {
                let payload = format!(
                    "\0{}\0{}",
                    self.username.as_deref().unwrap_or_default(),
                    self.password.as_deref().unwrap_or_default()
                );
                let mut start = sasl_start("PLAIN", payload.into_bytes());
                start.remove("options");
                conversation.state = State::Plain;
                self.send(start)
            }
            (Mechanism::Aws, _, _) => {
                conversation.state = State::AwsCredentials {
                    nonce: *nonce.bytes(),
                };
                Next::Fetch(Need::AwsCredentials)
            }
        };
        Ok((conversation, next))
    }

    /// MONGODB-OIDC's start: the cached token if there is one, else a
    /// fresh one.
    fn oidc_first(&self, conversation: &mut Conversation) -> Next {
        match &self.oidc_token {
            Some(token) => {
                conversation.state = State::OidcJwt {
                    token: token.clone(),
                    cached: true,
                };
                self.send(oidc_start(token))
            }
            None => {
                conversation.state = State::OidcToken;
                Next::Fetch(Need::OidcToken)
            }
        }
    }

    /// MONGODB-OIDC: notes a call of the token source at `now`, and says
    /// how long to wait first (the spec: 100 ms since the last call).
    pub fn oidc_call_wait(&mut self, now: std::time::Instant) -> std::time::Duration {
        const SPACING: std::time::Duration = std::time::Duration::from_millis(100);
        let wait = self
            .last_oidc_call
            .map_or(std::time::Duration::ZERO, |last| {
                SPACING.saturating_sub(now.saturating_duration_since(last))
            });
        self.last_oidc_call = Some(now + wait);
        wait
    }

    /// Whether the server's `ReauthenticationRequired` (391) can be
    /// answered: MONGODB-OIDC only (the auth spec).
    pub fn reauthenticates(&self) -> bool {
        self.mechanism == Some(Mechanism::Oidc)
    }

    /// Reauthenticates a socket after `ReauthenticationRequired`: the
    /// token it used is invalidated and a fresh one fetched (no hello, no
    /// speculation, as the spec says).
    pub fn reauthenticate(&mut self) -> Result<(Conversation, Next)> {
        if !self.reauthenticates() {
            let what = "the server asked for reauthentication, which only MONGODB-OIDC offers";
            return Err(Error::new(ErrorKind::Authentication {
                message: what.into(),
            }));
        }
        self.oidc_token = None;
        let mut conversation = Conversation {
            mechanism: Mechanism::Oidc,
            state: State::Finished,
            keys: None,
        };
        let next = self.oidc_first(&mut conversation);
        Ok((conversation, next))
    }

    /// Hands a conversation the secret its [`Next::Fetch`] asked for.
    pub fn provide(&mut self, conversation: &mut Conversation, secret: Secret) -> Result<Next> {
        match (
            std::mem::replace(&mut conversation.state, State::Finished),
            secret,
        ) {
            (
                State::AwsCredentials { nonce },
                Secret::Aws {
                    credentials,
                    unix_time,
                },
            ) => {
                let mut start = sasl_start("MONGODB-AWS", aws::client_first(&nonce));
                start.remove("options");
                conversation.state = State::AwsFirst {
                    nonce,
                    credentials,
                    unix_time,
                };
                Ok(self.send(start))
            }
            (State::OidcToken, Secret::OidcToken(token)) => {
                self.oidc_token = Some(token.clone());
                let start = oidc_start(&token);
                conversation.state = State::OidcJwt {
                    token,
                    cached: false,
                };
                Ok(self.send(start))
            }
            (_, secret) => Err(self.error(
                conversation.mechanism,
                format!("the conversation did not ask for {secret:?}"),
            )),
        }
    }

    /// MONGODB-AWS: the access key, secret and session token given in the
    /// connection string, if any.
    pub fn aws_uri_credentials(&self) -> Option<aws::AwsCredentials> {
        let access_key_id = self.username.clone()?;
        Some(aws::AwsCredentials {
            access_key_id,
            secret_access_key: self.password.clone().unwrap_or_default(),
            session_token: property(&self.properties, "AWS_SESSION_TOKEN")
                .and_then(Bson::as_str)
                .map(str::to_owned),
            expiration: None,
        })
    }

    /// MONGODB-AWS: the credentials fetched before, if they are still
    /// fresh at `unix_time`.
    pub fn cached_aws_credentials(&self, unix_time: u64) -> Option<aws::AwsCredentials> {
        self.aws_cache
            .clone()
            .filter(|credentials| credentials.fresh_at(unix_time))
    }

    /// MONGODB-AWS: keeps credentials fetched from an AWS endpoint.
    pub fn cache_aws_credentials(&mut self, credentials: aws::AwsCredentials) {
        self.aws_cache = Some(credentials);
    }

    /// Forgets what a failed conversation may have got wrong: the auth
    /// spec clears the AWS credential cache whatever the failure.
    pub fn conversation_failed(&mut self, conversation: &Conversation) {
        if conversation.mechanism == Mechanism::Aws {
            self.aws_cache = None;
        }
    }

    /// Handles the server's `reply` to the conversation's last command:
    /// the next command, [`Next::Done`], or an authentication error (a
    /// refusal carries the server's message and code).
    pub fn step(&mut self, conversation: &mut Conversation, reply: &Document) -> Result<Next> {
        if let State::OidcJwt {
            token,
            cached: true,
        } = &conversation.state
        {
            // The cached token was refused: invalidate it (unless a newer
            // one replaced it) and fetch a fresh one, once.
            if !is_ok(reply) && reply.get_i32("code") == Ok(18) {
                if self.oidc_token.as_ref() == Some(token) {
                    self.oidc_token = None;
                }
                conversation.state = State::OidcToken;
                return Ok(Next::Fetch(Need::OidcToken));
            }
        }
        if !is_ok(reply) {
            let message = reply
                .get_str("errmsg")
                .unwrap_or("the server refused without a message");
            let code = match reply.get("code") {
                Some(Bson::Int32(c)) => format!(" (code {c})"),
                Some(Bson::Int64(c)) => format!(" (code {c})"),
                _ => String::new(),
            };
            conversation.state = State::Finished;
            return Err(self.error(conversation.mechanism, format!("{message}{code}")));
        }
        self.advance(conversation, reply)
    }

    /// The conversation's move on a reply the server accepted (or on the
    /// speculative answer inside the handshake reply, which has no `ok`).
    fn advance(&mut self, conversation: &mut Conversation, reply: &Document) -> Result<Next> {
        let mechanism = conversation.mechanism;
        match std::mem::replace(&mut conversation.state, State::Finished) {
            State::ScramFirst(first) => {
                let id = reply.get("conversationId").cloned().ok_or_else(|| {
                    self.error(mechanism, "the server's reply has no conversationId")
                })?;
                let payload = self.payload(mechanism, reply)?;
                let params = first.salt_params(&payload)?;
                let (keys, used) = self.keys_for(first.mechanism(), params)?;
                conversation.keys = Some(used);
                let fin = first.handle_server_first(&payload, &keys)?;
                let command = sasl_continue(&id, fin.message());
                conversation.state = State::ScramFinal { fin, id };
                Ok(self.send(command))
            }
            State::ScramFinal { fin, id } => {
                fin.handle_server_final(&self.payload(mechanism, reply)?)?;
                // Servers that ignore skipEmptyExchange want one empty round
                // more; a server that never finishes is refused rather than
                // followed.
                self.empty_round(conversation, reply, id, 2)
            }
            State::ScramEmpty { id, rounds_left } => {
                self.empty_round(conversation, reply, id, rounds_left)
            }
            State::Plain => {
                if reply.get_bool("done") != Ok(true) {
                    return Err(self.error(mechanism, "the server did not finish the conversation"));
                }
                Ok(Next::Done)
            }
            State::X509 => Ok(Next::Done),
            State::AwsFirst {
                nonce,
                credentials,
                unix_time,
            } => {
                let id = reply.get("conversationId").cloned().ok_or_else(|| {
                    self.error(mechanism, "the server's reply has no conversationId")
                })?;
                let server = aws::server_first(&self.payload(mechanism, reply)?, &nonce)?;
                let payload = aws::client_final(&server, &credentials, unix_time);
                conversation.state = State::AwsFinal;
                Ok(self.send(sasl_continue(&id, payload)))
            }
            State::AwsFinal | State::OidcJwt { .. } => {
                if reply.get_bool("done") != Ok(true) {
                    return Err(self.error(mechanism, "the server did not finish the conversation"));
                }
                Ok(Next::Done)
            }
            State::AwsCredentials { .. } | State::OidcToken | State::Finished => {
                Err(self.error(mechanism, "the conversation is already over"))
            }
        }
    }

    fn empty_round(
        &self,
        conversation: &mut Conversation,
        reply: &Document,
        id: Bson,
        rounds_left: u8,
    ) -> Result<Next> {
        if reply.get_bool("done").unwrap_or(false) {
            return Ok(Next::Done);
        }
        if rounds_left == 0 {
            let what = "the server did not finish the conversation";
            return Err(self.error(conversation.mechanism, what));
        }
        let command = sasl_continue(&id, Vec::new());
        conversation.state = State::ScramEmpty {
            id,
            rounds_left: rounds_left - 1,
        };
        Ok(self.send(command))
    }

    fn payload(&self, mechanism: Mechanism, reply: &Document) -> Result<Vec<u8>> {
        match reply.get("payload") {
            Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
            Some(Bson::String(s)) => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| self.error(mechanism, "the server's payload is not base64"))
            }
            _ => Err(self.error(mechanism, "the server's reply has no payload")),
        }
    }

    /// The keys for `mechanism` and `params`: from this process's cache,
    /// else unsealed from the state file, else derived (PBKDF2); with
    /// the name and source the conversation keeps.
    fn keys_for(
        &mut self,
        mechanism: ScramMechanism,
        params: SaltParams,
    ) -> Result<(ScramKeys, (KeyId, KeySource))> {
        let key_id = (mechanism, params);
        if let Some((keys, source)) = self.keys.get(&key_id) {
            // An entry no server accepted yet is still where it came from.
            return Ok((keys.clone(), (key_id, *source)));
        }
        let prepared = mechanism.prepare_password(
            self.username.as_deref().unwrap_or_default(),
            self.password.as_deref().unwrap_or_default(),
        )?;
        let unsealed = self.stored.as_ref().and_then(|stored| {
            stored
                .sealed
                .iter()
                .find(|s| s.matches(mechanism, &key_id.1))
                .map(|s| s.unseal(&prepared, stored.binding))
        });
        let (keys, source) = match unsealed {
            Some(keys) => (keys, KeySource::StateFile),
            None => {
                self.derivations += 1;
                let keys =
                    ScramKeys::derive(mechanism, &prepared, &key_id.1.salt, key_id.1.iterations);
                (keys, KeySource::Derived)
            }
        };
        self.keys.insert(key_id.clone(), (keys.clone(), source));
        Ok((keys, (key_id, source)))
    }
}

/// The auth spec's default: SCRAM-SHA-256 when the server lists it for the
/// user, SCRAM-SHA-1 otherwise (also when the list is absent).
fn negotiated(reply: &Document) -> ScramMechanism {
    let listed = reply
        .get_array("saslSupportedMechs")
        .map(|mechs| mechs.iter().any(|m| m.as_str() == Some("SCRAM-SHA-256")))
        .unwrap_or(false);
    if listed {
        ScramMechanism::Sha256
    } else {
        ScramMechanism::Sha1
    }
}

fn is_ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(v)) => *v == 1.0,
        Some(Bson::Int32(v)) => *v == 1,
        Some(Bson::Int64(v)) => *v == 1,
        Some(Bson::Boolean(v)) => *v,
        _ => false,
    }
}

fn binary(bytes: Vec<u8>) -> Binary {
    Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    }
}

fn sasl_start(mechanism: &str, payload: Vec<u8>) -> Document {
    doc! {
        "saslStart": 1,
        "mechanism": mechanism,
        "payload": binary(payload),
        "autoAuthorize": 1,
        "options": { "skipEmptyExchange": true },
    }
}

/// MONGODB-OIDC's one-step saslStart: `{jwt: token}`.
fn oidc_start(token: &str) -> Document {
    let mut payload = Vec::new();
    doc! { "jwt": token }
        .to_writer(&mut payload)
        .expect("a document of one string serializes");
    doc! {
        "saslStart": 1,
        "mechanism": "MONGODB-OIDC",
        "payload": binary(payload),
    }
}

fn sasl_continue(conversation_id: &Bson, payload: Vec<u8>) -> Document {
    doc! {
        "saslContinue": 1,
        "conversationId": conversation_id.clone(),
        "payload": binary(payload),
    }
}

#[cfg(test)]
mod tests;
