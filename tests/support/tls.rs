//! TLS certificates generated with rcgen and SecantusDB servers with
//! `--auth` (and optionally TLS) holding the test users, shared by
//! tests/tls_auth.rs and benches/shapes.rs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bson::doc;
use mongo_inline::Client;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use super::server::{ServerOptions, TestServer};

pub const PASSWORD: &str = "pencil-Ⅸ-secret";
pub const X509_USER: &str = "CN=x509-client";

/// The files one test run generates: a CA, a server certificate for
/// `localhost` signed by it, a client certificate, and an unrelated CA.
pub struct Certs {
    dir: PathBuf,
}

impl Certs {
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

/// Removes what earlier test processes left in `dir` (entries named
/// `<prefix><pid>...` whose process is gone): their statics are never dropped.
fn sweep(dir: &Path, prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let owner = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

pub fn certs() -> &'static Certs {
    static CERTS: OnceLock<Certs> = OnceLock::new();
    CERTS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-certs");
        sweep(&root, "");
        sweep(&root.join("../test-servers"), "auth-data-");
        let dir = root.join(std::process::id().to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let ca = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            (cert, key)
        };
        let (ca_cert, ca_key) = ca("mongo-inline test CA");
        let (other_ca, _) = ca("some other CA");
        let mut server = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().unwrap();
        let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client.distinguished_name = rcgen::DistinguishedName::new();
        client
            .distinguished_name
            .push(DnType::CommonName, "x509-client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().unwrap();
        let client_cert = client.signed_by(&client_key, &ca_cert, &ca_key).unwrap();
        let mut stranger = CertificateParams::new(Vec::<String>::new()).unwrap();
        stranger.distinguished_name = rcgen::DistinguishedName::new();
        stranger
            .distinguished_name
            .push(DnType::CommonName, "stranger");
        stranger.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stranger_key = KeyPair::generate().unwrap();
        let stranger_cert = stranger
            .signed_by(&stranger_key, &ca_cert, &ca_key)
            .unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.join(name), text).unwrap();
        write(
            "stranger.pem",
            format!("{}{}", stranger_cert.pem(), stranger_key.serialize_pem()),
        );
        write("ca.pem", ca_cert.pem());
        write("other-ca.pem", other_ca.pem());
        write("server.pem", server_cert.pem());
        write("server-key.pem", server_key.serialize_pem());
        write(
            "client.pem",
            format!("{}{}", client_cert.pem(), client_key.serialize_pem()),
        );
        write(
            "client-encrypted.pem",
            format!(
                "{}{}",
                client_cert.pem(),
                encrypted_pkcs8(&client_key.serialize_der())
            ),
        );
        Certs { dir }
    })
}

/// The password of `client-encrypted.pem`'s key.
pub const KEY_PASSWORD: &str = "key pässword";

/// `der` (a PKCS#8 key) encrypted with [`KEY_PASSWORD`] as
/// `openssl pkcs8 -topk8 -v2 aes-256-cbc` does: PBES2, PBKDF2-SHA256, AES-256-CBC.
fn encrypted_pkcs8(der: &[u8]) -> String {
    use pkcs8::der::EncodePem;
    let parameters =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"saltsalt", &[7; 16])
            .unwrap();
    let info = pkcs8::PrivateKeyInfo::try_from(der).unwrap();
    let encrypted = info.encrypt_with_params(parameters, KEY_PASSWORD).unwrap();
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(encrypted.as_bytes()).unwrap();
    info.to_pem(pkcs8::LineEnding::LF).unwrap()
}

pub fn tls_args(require_client_cert: bool) -> Vec<String> {
    let c = certs();
    let mut args = vec![
        "--tls-cert-file".to_string(),
        c.path("server.pem"),
        "--tls-key-file".to_string(),
        c.path("server-key.pem"),
        "--tls-ca-file".to_string(),
        c.path("ca.pem"),
    ];
    if require_client_cert {
        args.push("--tls-require-client-cert".into());
    }
    args
}

/// A data directory with the test users, made by a server without
/// `--auth` (SecantusDB's way to provision users), then a server with
/// `--auth` on it.
pub fn auth_server(tls: bool) -> TestServer {
    auth_server_with(tls, true)
}

/// [`auth_server`] with the choice of topology: a standalone, or (with
/// `standalone` false) a one-member replica set.
pub fn auth_server_with(tls: bool, standalone: bool) -> TestServer {
    static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-servers")
        .join(format!("auth-data-{}-{tls}-{n}", std::process::id()));
    sweep(
        dir.parent().expect("under target/test-servers"),
        "auth-data-",
    );
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut args = vec![
        "--storage-path".to_string(),
        dir.to_string_lossy().into_owned(),
        "--sync-on-commit".to_string(),
    ];
    if tls {
        args.extend(tls_args(false));
    }
    {
        let provisioning = TestServer::with_options(ServerOptions {
            standalone,
            extra_args: args.clone(),
        });
        let uri = if tls {
            format!(
                "mongodb://localhost:{}/?tls=true&tlsCAFile={}",
                provisioning.port(),
                certs().path("ca.pem")
            )
        } else {
            provisioning.uri()
        };
        let client = Client::with_uri_str(&uri).unwrap();
        let admin = client.database("admin");
        let users = [
            (
                "admin",
                "alice",
                vec!["SCRAM-SHA-256", "SCRAM-SHA-1"],
                "root",
                "admin",
            ),
            ("admin", "legacy", vec!["SCRAM-SHA-1"], "root", "admin"),
            ("app", "bob", vec!["SCRAM-SHA-256"], "readWrite", "app"),
        ];
        for (db, user, mechanisms, role, role_db) in users {
            client
                .database(db)
                .run_command(doc! {
                    "createUser": user, "pwd": PASSWORD, "mechanisms": mechanisms,
                    "roles": [{ "role": role, "db": role_db }],
                })
                .run()
                .unwrap();
        }
        client
            .database("$external")
            .run_command(doc! {
                "createUser": X509_USER, "mechanisms": ["MONGODB-X509"],
                "roles": [{ "role": "readWrite", "db": "x509db" }],
            })
            .run()
            .unwrap();
        drop(admin);
    }
    args.push("--auth".into());
    TestServer::with_options(ServerOptions {
        standalone,
        extra_args: args,
    })
}

pub fn plain_auth_server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| auth_server(false))
}

pub fn tls_auth_server() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| auth_server(true))
}

/// A connection string for alice on a TLS + SCRAM-SHA-256 server (such as
/// `tls_auth_server`) reached at `port` (the server's, or a proxy's in
/// front of it); naming the mechanism lets speculative authentication
/// start in the hello.
pub fn scram_sha_256_uri(port: u16) -> String {
    format!(
        "mongodb://alice:{}@localhost:{port}/?tls=true&tlsCAFile={}&authSource=admin\
         &authMechanism=SCRAM-SHA-256",
        encoded(PASSWORD),
        certs().path("ca.pem")
    )
}

/// `text` percent-encoded for a connection string's user or password.
pub fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
