//! TLS: the rustls client configuration, built once per client from the
//! `tls*` options and shared by every socket of that client (so rustls'
//! in-memory session cache resumes sessions between them), and the words
//! for what went wrong in a handshake.
//!
//! ```text
//! TlsOptions ──client_config──> Arc<ClientConfig>   (roots: tlsCAFile, else the webpki roots;
//!                                                    client certificate: tlsCertificateKeyFile;
//!                                                    verifier: strict, or relaxed by tlsAllowInvalid*/tlsInsecure)
//! ```
//!
//! The crypto provider is `ring`: it builds with a C compiler alone and
//! faster than aws-lc-rs (which wants cmake), and it serves SCRAM too.
//!
//! OCSP and revocation: nothing is fetched over the network (a short-lived
//! process cannot wait on an OCSP responder), and rustls does not check
//! stapled responses or CRLs it is not given; `tlsDisableOCSPEndpointCheck`
//! and `tlsDisableCertificateRevocationCheck` are accepted and change nothing.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, InvalidMessage, RootCertStore,
    SignatureScheme,
};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::address::ServerAddress;
use crate::proto::options::TlsOptions;

pub(crate) mod remembered;
pub(crate) use remembered::ChainMemory;
use remembered::RememberingVerifier;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS option or file that cannot be used: the official driver's
/// `InvalidTlsConfig`, raised before anything is sent.
fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidTlsConfig { message })
}

/// The rustls configuration for `options` (absent: all defaults). Reads the
/// CA and certificate-key files once; any problem with them is an error
/// naming the file and the problem.
pub fn client_config(options: Option<&TlsOptions>) -> Result<Arc<ClientConfig>> {
    client_config_remembering(options, false).map(|(config, _)| config)
}

/// [`client_config`], and with `remember` (a client with a state file) a
/// verifier that remembers verified chains ([`remembered`]), whose memory
/// comes back beside the configuration. A client that accepts any
/// certificate verifies no chain and gets no memory.
pub(crate) fn client_config_remembering(
    options: Option<&TlsOptions>,
    remember: bool,
) -> Result<(Arc<ClientConfig>, Option<Arc<ChainMemory>>)> {
    let default = TlsOptions::default();
    let options = options.unwrap_or(&default);
    let provider = provider();
    let roots = root_store(options)?;
    let insecure = options.insecure == Some(true);
    let any_certificate = insecure || options.allow_invalid_certificates == Some(true);
    let any_host_name = insecure || options.allow_invalid_hostnames == Some(true);
    let memory = (remember && !any_certificate).then(|| Arc::new(ChainMemory::new(&roots)));
    let roots = Arc::new(roots);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS setup failed: {e}")))?
        .dangerous();
    let verifier: Arc<dyn ServerCertVerifier> = if any_certificate {
        Arc::new(AcceptAnyCertificate {
            algorithms: provider.signature_verification_algorithms,
        })
    } else {
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| invalid(format!("TLS setup failed: {e}")))?;
        let checked: Arc<dyn ServerCertVerifier> = if any_host_name {
            Arc::new(AcceptAnyHostName { inner: webpki })
        } else {
            webpki
        };
        match &memory {
            Some(memory) => Arc::new(RememberingVerifier {
                inner: checked,
                memory: memory.clone(),
            }),
            None => checked,
        }
    };
    let builder = builder.with_custom_certificate_verifier(verifier);
    let config = match &options.cert_key_file_path {
        Some(path) => {
            let (certs, key) =
                certificate_and_key(path, options.tls_certificate_key_file_password.as_deref())?;
            builder.with_client_auth_cert(certs, key).map_err(|e| {
                invalid(format!(
                    "tlsCertificateKeyFile {path:?}: the certificate and key do not go together: {e}"
                ))
            })?
        }
        None => builder.with_no_client_auth(),
    };
    Ok((Arc::new(config), memory))
}

/// The trusted roots: the webpki roots by default; a CA file replaces
/// them, as in the other drivers; the system's store on request (with a CA
/// file, both are trusted).
fn root_store(options: &TlsOptions) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let system = options.system_roots == Some(true);
    if system {
        add_system_roots(&mut roots)?;
    }
    if let Some(path) = options.ca_file_path.as_deref() {
        add_ca_file(&mut roots, path)?;
    } else if !system {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    Ok(roots)
}

fn add_ca_file(roots: &mut RootCertStore, path: &std::path::Path) -> Result<()> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(format!("tlsCAFile {path:?} cannot be read: {e}")))?;
    let mut added = 0;
    for cert in certs {
        let cert =
            cert.map_err(|e| invalid(format!("tlsCAFile {path:?} is not valid PEM: {e}")))?;
        roots.add(cert).map_err(|e| {
            invalid(format!(
                "tlsCAFile {path:?} holds an unusable certificate: {e}"
            ))
        })?;
        added += 1;
    }
    if added == 0 {
        return Err(invalid(format!(
            "tlsCAFile {path:?} holds no PEM certificate"
        )));
    }
    Ok(())
}

/// The platform's trusted certificates (`SSL_CERT_FILE`/`SSL_CERT_DIR`
/// when set); a store that yields none is an error naming what failed,
/// since trusting nothing was not what was asked.
fn add_system_roots(roots: &mut RootCertStore) -> Result<()> {
    let found = rustls_native_certs::load_native_certs();
    let (added, _unusable) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(invalid(format!(
            "system_roots: the system's trust store holds no usable certificate ({})",
            if errors.is_empty() {
                "nothing found; SSL_CERT_FILE or SSL_CERT_DIR can point at one".to_owned()
            } else {
                errors.join("; ")
            }
        )));
    }
    Ok(())
}

fn certificate_and_key(
    path: &std::path::Path,
    password: Option<&[u8]>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let text = std::fs::read(path).map_err(|e| {
        invalid(format!(
            "tlsCertificateKeyFile {path:?} cannot be read: {e}"
        ))
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&text)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| {
            invalid(format!(
                "tlsCertificateKeyFile {path:?} is not valid PEM: {e}"
            ))
        })?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "tlsCertificateKeyFile {path:?} holds no certificate"
        )));
    }
    let key = match encrypted_pkcs8_block(&text) {
        Some(block) => decrypt_key(path, block, password)?,
        None => plain_key(path, &text, password)?,
    };
    Ok((certs, key))
}

const ENCRYPTED_PKCS8_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_PKCS8_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The `ENCRYPTED PRIVATE KEY` PEM block of `text`, if it has one.
fn encrypted_pkcs8_block(text: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(text).ok()?;
    let start = text.find(ENCRYPTED_PKCS8_BEGIN)?;
    let end = start + text[start..].find(ENCRYPTED_PKCS8_END)? + ENCRYPTED_PKCS8_END.len();
    Some(&text[start..end])
}

/// An encrypted PKCS#8 key (PBES2: PBKDF2 or scrypt with AES, as
/// `openssl pkcs8 -topk8` writes), decrypted in memory with the password.
/// The password never reaches a message.
fn decrypt_key(
    path: &std::path::Path,
    block: &str,
    password: Option<&[u8]>,
) -> Result<PrivateKeyDer<'static>> {
    use pkcs8::der::{pem::PemLabel, Decode, Document};
    let Some(password) = password else {
        return Err(invalid(format!(
            "tlsCertificateKeyFile {path:?} holds an encrypted private key: give its password \
             in tlsCertificateKeyFilePassword"
        )));
    };
    let (label, document) = Document::from_pem(block).map_err(|e| {
        invalid(format!(
            "tlsCertificateKeyFile {path:?}: the encrypted private key is not valid PEM: {e}"
        ))
    })?;
    debug_assert_eq!(label, pkcs8::EncryptedPrivateKeyInfo::PEM_LABEL);
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(document.as_bytes()).map_err(|e| {
        invalid(format!(
            "tlsCertificateKeyFile {path:?}: the encrypted private key cannot be read: {e}"
        ))
    })?;
    let decrypted = encrypted.decrypt(password).map_err(|e| {
        invalid(format!(
            "tlsCertificateKeyFile {path:?}: the private key cannot be decrypted with \
             tlsCertificateKeyFilePassword (a wrong password, or a cipher other than PBES2 \
             with AES): {e}"
        ))
    })?;
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(decrypted.as_bytes().to_vec());
    Ok(PrivateKeyDer::Pkcs8(key))
}

/// An unencrypted PKCS#1, PKCS#8 or SEC1 key; a password for it, or a key
/// in OpenSSL's legacy encrypted PEM, is an error saying what to do.
fn plain_key(
    path: &std::path::Path,
    text: &[u8],
    password: Option<&[u8]>,
) -> Result<PrivateKeyDer<'static>> {
    let legacy = text.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED");
    if legacy {
        return Err(invalid(format!(
            "tlsCertificateKeyFile {path:?} holds a private key in OpenSSL's legacy encrypted \
             format; convert it to encrypted PKCS#8, e.g. `openssl pkcs8 -topk8 -v2 aes-256-cbc \
             -in key.pem -out key-pkcs8.pem`"
        )));
    }
    if password.is_some() {
        return Err(invalid(format!(
            "tlsCertificateKeyFilePassword is given but the private key in \
             tlsCertificateKeyFile {path:?} is not encrypted"
        )));
    }
    PrivateKeyDer::from_pem_slice(text).map_err(|e| {
        invalid(format!(
            "tlsCertificateKeyFile {path:?} holds no usable private key: {e}"
        ))
    })
}

/// The name rustls checks the certificate against and sends as SNI (an IP
/// address is checked but, per RFC 6066, not sent).
pub fn server_name(address: &ServerAddress) -> Result<ServerName<'static>> {
    let ServerAddress::Tcp { host, .. } = address else {
        return Err(Error::invalid_argument(format!(
            "TLS over a Unix domain socket ({address}) is not supported"
        )));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|_| invalid(format!("{host:?} is not a valid TLS server name")))
}

/// What a reply that is no TLS record means: bytes in plain text, from a
/// server that read the TLS hello as a message of its own protocol.
const NOT_TLS: &str = "the server does not speak TLS: it answered the TLS hello with bytes \
                       that are not TLS (remove tls=true, or the tls* options that turn it on, \
                       if this server has no TLS)";

/// A plain socket's first exchange failed with a reset or a close before
/// any reply: that is how a server that requires TLS refuses plain text,
/// so the error says so (the cause stays as it was).
pub(crate) fn hint_tls_required(error: Error) -> Error {
    let Some((failure, kind)) = error.socket_failure() else {
        return error;
    };
    let refused = matches!(
        kind,
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
    ) || (kind == std::io::ErrorKind::UnexpectedEof
        && failure.message.contains("before a reply"));
    if !refused {
        return error;
    }
    Error::io_failure(
        kind,
        failure.address.clone(),
        format!(
            "{}; the server may require TLS (add tls=true to the connection string)",
            failure.message
        ),
    )
}

/// A TLS failure on the socket to `address`, in words: which check failed
/// and why. `error` is what rustls reported.
pub fn handshake_error(address: &ServerAddress, error: &rustls::Error) -> Error {
    let reason = match error {
        rustls::Error::InvalidCertificate(certificate) => certificate_reason(certificate),
        rustls::Error::AlertReceived(alert) => format!(
            "the server sent the alert {alert:?} (a server that wants a client certificate \
             refuses a missing or untrusted one this way)"
        ),
        rustls::Error::InvalidMessage(
            InvalidMessage::InvalidContentType
            | InvalidMessage::UnknownProtocolVersion
            | InvalidMessage::MessageTooLarge,
        ) => NOT_TLS.into(),
        other => other.to_string(),
    };
    Error::new(ErrorKind::Tls {
        address: Some(address.clone()),
        message: reason,
    })
}

fn certificate_reason(error: &CertificateError) -> String {
    match error {
        CertificateError::Expired => "the server's certificate has expired".into(),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "the server's certificate has expired (valid until {} s after the Unix epoch, now is {})",
            not_after.as_secs(),
            time.as_secs()
        ),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet".into()
        }
        CertificateError::UnknownIssuer => "the server's certificate was issued by an unknown \
                                            certificate authority (not in tlsCAFile, or not in \
                                            the webpki roots when no tlsCAFile is given)"
            .into(),
        CertificateError::NotValidForName => {
            "the server's certificate does not name the host connected to (host name mismatch; \
             tlsAllowInvalidHostnames=true accepts it)"
                .into()
        }
        CertificateError::NotValidForNameContext { expected, presented } => format!(
            "host name mismatch: the server's certificate names {} but the client connected to \
             {} (tlsAllowInvalidHostnames=true accepts it)",
            if presented.is_empty() {
                "no host".to_owned()
            } else {
                presented
                    .iter()
                    .map(|name| presented_name(name))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            expected.to_str()
        ),
        CertificateError::Revoked => "the server's certificate has been revoked".into(),
        CertificateError::BadSignature => {
            "the server's certificate is not correctly signed by its issuer".into()
        }
        CertificateError::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::CaUsedAsEndEntity) => CA_AS_SERVER_CERTIFICATE.into(),
            Some(webpki::Error::EndEntityUsedAsCa) => SERVER_CERTIFICATE_AS_CA.into(),
            _ => format!("the server's certificate was refused: {other:?}"),
        },
        other => format!("the server's certificate was refused: {other:?}"),
    }
}

/// What `openssl req -x509` makes by default: a self-signed certificate
/// marked as a CA, which webpki will not accept as the server's own.
const CA_AS_SERVER_CERTIFICATE: &str = "the server's certificate is a CA certificate \
(basicConstraints CA:TRUE) used as the server's own certificate, as a self-signed certificate \
made with `openssl req -x509` is; issue the server a certificate (CA:FALSE) signed by that CA, \
and give the CA to the client in tlsCAFile (tlsAllowInvalidCertificates=true accepts it, but \
only for testing: it turns off every certificate check)";

/// The mirror image: a chain whose issuer is not a CA.
const SERVER_CERTIFICATE_AS_CA: &str = "a certificate in the server's chain is not a CA \
certificate (basicConstraints CA:FALSE or absent) but issued the next one; the chain must be \
signed by a CA certificate";

/// A name as rustls presents it (`DnsName("db.example.com")`,
/// `IpAddress(10.0.0.1)`), without the wrapper.
fn presented_name(name: &str) -> &str {
    name.split_once('(')
        .and_then(|(_, inner)| inner.strip_suffix(')'))
        .map(|inner| inner.trim_matches('"'))
        .unwrap_or(name)
}

/// `tlsAllowInvalidHostnames`: the chain is verified, the name is not.
#[derive(Debug)]
struct AcceptAnyHostName {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AcceptAnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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
}

/// `tlsAllowInvalidCertificates` / `tlsInsecure`: any certificate is
/// accepted, but the handshake signatures are still checked, so the peer
/// must hold the key of the certificate it sent.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS server in a thread that accepts `sockets` connections, sends
    /// one byte on each (so the client reads the session ticket that comes
    /// before it) and closes.
    fn tls_server(sockets: usize) -> (u16, String, std::thread::JoinHandle<()>) {
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        tls_server_with(sockets, params)
    }

    /// [`tls_server`] with a self-signed certificate made from `params`;
    /// handshakes the client refuses end the socket quietly.
    fn tls_server_with(
        sockets: usize,
        params: rcgen::CertificateParams,
    ) -> (u16, String, std::thread::JoinHandle<()>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for _ in 0..sockets {
                let (mut tcp, _) = listener.accept().unwrap();
                let mut session = rustls::ServerConnection::new(config.clone()).unwrap();
                while session.is_handshaking() {
                    if session.complete_io(&mut tcp).is_err() {
                        break;
                    }
                }
                if session.is_handshaking() {
                    continue;
                }
                let mut stream = rustls::StreamOwned::new(session, tcp);
                let _ = std::io::Write::write_all(&mut stream, b"x");
                let mut rest = Vec::new();
                let _ = std::io::Read::read_to_end(&mut stream, &mut rest);
            }
        });
        (port, cert.pem(), server)
    }

    #[test]
    fn sockets_of_one_configuration_resume_the_tls_session() {
        use std::io::Read as _;
        let (port, ca_pem, server) = tls_server(2);
        let dir = std::env::temp_dir().join(format!("mongo-inline-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let options = TlsOptions {
            ca_file_path: Some(ca.clone()),
            ..Default::default()
        };
        // Built once, as the client does; a configuration per socket would
        // make both handshakes full ones.
        let config = client_config(Some(&options)).unwrap();
        let address = ServerAddress::tcp("localhost", port);
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut session =
                rustls::ClientConnection::new(config.clone(), server_name(&address).unwrap())
                    .unwrap();
            while session.is_handshaking() {
                session.complete_io(&mut tcp).unwrap();
            }
            kinds.push(session.handshake_kind());
            let mut stream = rustls::StreamOwned::new(session, tcp);
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).unwrap();
            stream.conn.send_close_notify();
            let _ = stream.conn.complete_io(&mut stream.sock);
        }
        server.join().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(
            kinds,
            vec![
                Some(rustls::HandshakeKind::Full),
                Some(rustls::HandshakeKind::Resumed)
            ]
        );
    }

    /// Opens a [`crate::conn::Connection`] to `host` and starts TLS on it
    /// with `ca_pem` as the only root.
    fn connect(host: &str, port: u16, ca_pem: &str, extra: TlsOptions) -> Result<()> {
        let dir =
            std::env::temp_dir().join(format!("mongo-inline-tls-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let options = TlsOptions {
            ca_file_path: Some(ca.clone()),
            ..extra
        };
        let config = client_config(Some(&options)).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        let timeout = Some(std::time::Duration::from_secs(5));
        let mut connection = crate::shell::conn::Connection::open(
            &ServerAddress::tcp(host, port),
            0,
            timeout,
            timeout,
        )?;
        connection.start_tls(&config, timeout)
    }

    #[test]
    fn an_expired_certificate_is_named_as_such() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2001, 1, 1);
        params.not_after = rcgen::date_time_ymd(2002, 1, 1);
        let (port, ca, server) = tls_server_with(2, params);
        let e = connect("localhost", port, &ca, TlsOptions::default()).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Tls { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("has expired"), "{text}");
        assert!(text.contains(&format!("localhost:{port}")), "{text}");
        // tlsAllowInvalidCertificates lets it through.
        let relaxed = TlsOptions {
            allow_invalid_certificates: Some(true),
            ..Default::default()
        };
        connect("localhost", port, &ca, relaxed).unwrap();
        server.join().unwrap();
    }

    #[test]
    fn a_name_mismatch_names_both_names() {
        let (port, ca, server) = tls_server(1);
        let e = connect("127.0.0.1", port, &ca, TlsOptions::default()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("host name mismatch"), "{text}");
        assert!(
            text.contains("names localhost but the client connected to 127.0.0.1"),
            "{text}"
        );
        server.join().unwrap();
    }

    #[test]
    fn unreadable_files_are_errors_that_name_them() {
        let options = TlsOptions {
            ca_file_path: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        };
        let e = client_config(Some(&options)).unwrap_err();
        assert!(
            e.to_string().contains("tlsCAFile \"/nonexistent/ca.pem\""),
            "{e}"
        );
    }

    #[test]
    fn defaults_use_the_webpki_roots() {
        assert!(client_config(None).is_ok());
        assert!(server_name(&ServerAddress::tcp("::1", 1)).is_ok());
        assert!(server_name(&ServerAddress::tcp("db.example.com", 1)).is_ok());
    }

    #[test]
    fn certificate_failures_say_which_and_why() {
        let address = ServerAddress::tcp("db.example.com", 27017);
        let expired = handshake_error(
            &address,
            &rustls::Error::InvalidCertificate(CertificateError::Expired),
        );
        assert!(
            expired.to_string().contains("db.example.com:27017"),
            "{expired}"
        );
        assert!(expired.to_string().contains("expired"), "{expired}");
        let mismatch = handshake_error(
            &address,
            &rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("db.example.com").unwrap(),
                presented: vec!["DnsName(\"other.example.com\")".into()],
            }),
        );
        assert!(
            mismatch.to_string().contains("host name mismatch"),
            "{mismatch}"
        );
        assert!(!mismatch.is_network_error());
    }

    #[test]
    fn a_ca_certificate_as_the_server_certificate_says_so_and_what_to_do() {
        let address = ServerAddress::tcp("localhost", 27017);
        let ca_as_server = handshake_error(
            &address,
            &rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                Arc::new(webpki::Error::CaUsedAsEndEntity),
            ))),
        );
        let text = ca_as_server.to_string();
        assert!(
            text.contains("is a CA certificate (basicConstraints CA:TRUE)"),
            "{text}"
        );
        assert!(text.contains("tlsCAFile"), "{text}");
        assert!(!text.contains("CaUsedAsEndEntity"), "{text}");
    }
}
