//! The most common test certificate, a self-signed one made the way
//! `openssl req -x509` makes it (marked as a CA), served by SecantusDB: the
//! client's TLS error says which check failed and what to do about it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::path::{Path, PathBuf};

use bson::doc;
use mongo_inline::{Client, ErrorKind};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use support::server::{ServerOptions, TestServer};

/// A CA:TRUE self-signed certificate for `localhost` and its key, in a
/// directory of this process (swept by later runs, as tests/support/tls.rs
/// does).
fn self_signed_ca_for_localhost() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-certs")
        .join(format!("{}-self-signed", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.join("self-signed.pem"), dir.join("self-signed-key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

#[test]
fn a_self_signed_ca_certificate_as_the_server_certificate_is_explained() {
    let (cert, key) = self_signed_ca_for_localhost();
    let server = TestServer::with_options(ServerOptions {
        standalone: true,
        extra_args: vec![
            "--tls-cert-file".into(),
            cert.to_string_lossy().into_owned(),
            "--tls-key-file".into(),
            key.to_string_lossy().into_owned(),
        ],
    });
    let uri = format!(
        "mongodb://localhost:{}/?tls=true&tlsCAFile={}&serverSelectionTimeoutMS=5000",
        server.port(),
        cert.to_string_lossy()
    );
    let client = Client::with_uri_str(&uri).unwrap();
    let error = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("webpki refuses a CA certificate as the server's own");
    println!("{error}");
    let text = error.to_string();
    assert!(
        text.contains("is a CA certificate (basicConstraints CA:TRUE) used as the server's own"),
        "{text}"
    );
    assert!(text.contains("tlsAllowInvalidCertificates=true"), "{text}");
    assert!(!text.contains("CaUsedAsEndEntity"), "{text}");
    assert!(
        matches!(
            error.kind(),
            ErrorKind::ServerSelection { .. } | ErrorKind::Tls { .. }
        ),
        "{error:?}"
    );

    // The advice holds: without certificate checks the same server answers.
    let insecure = format!("{uri}&tlsAllowInvalidCertificates=true");
    Client::with_uri_str(&insecure)
        .unwrap()
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
}
