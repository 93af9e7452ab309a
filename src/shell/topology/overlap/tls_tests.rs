//! The TLS step of the shared wait against a local rustls server: the
//! handshake and the hello complete, and a second socket made from the
//! same client configuration resumes the first one's session.

use std::io::Write;
use std::net::TcpListener;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use bson::doc;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{HandshakeKind, ServerConfig, ServerConnection};

use super::tests::primary_reply_to_one_request;
use super::{Checked, Overlap, Start};
use crate::proto::address::ServerAddress;

/// A CA and a server certificate for `localhost`: the server's config and
/// a client config that trusts the CA.
fn configs() -> (Arc<ServerConfig>, Arc<rustls::ClientConfig>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca_cert, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![server_cert.der().clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_cert.der().to_vec()))
        .unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// Serves `sockets` TLS sockets one after another: one hello each, then
/// reports how the handshake went.
fn serve(config: Arc<ServerConfig>, sockets: usize) -> (u16, mpsc::Receiver<HandshakeKind>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (kinds, received) = mpsc::channel();
    thread::spawn(move || {
        for _ in 0..sockets {
            let (socket, _) = listener.accept().unwrap();
            let session = ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(session, socket);
            let reply = primary_reply_to_one_request(&mut tls);
            tls.write_all(&reply).unwrap();
            kinds.send(tls.conn.handshake_kind().unwrap()).unwrap();
        }
        thread::sleep(Duration::from_millis(300));
    });
    (port, received)
}

fn tls_check(port: u16, config: &Arc<rustls::ClientConfig>) -> bson::Document {
    let mut overlap = Overlap::new(std::sync::Arc::new(crate::shell::clock::SystemClock)).unwrap();
    let started = Instant::now();
    let limit = Some(started + Duration::from_secs(3));
    let start = Start {
        address: ServerAddress::tcp("localhost", port),
        addresses: vec![([127, 0, 0, 1], port).into()],
        command: doc! { "hello": 1 },
        use_op_msg: true,
        speculation: crate::proto::auth::Speculation::None,
        tls: Some(config.clone()),
        generation: 0,
        socket_timeout: None,
        started,
        limit,
    };
    assert!(overlap.start(start).is_ok());
    let finished = loop {
        if let Some(done) = overlap.wait(Instant::now(), limit).pop() {
            break done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the wait never ended"
        );
    };
    match finished.result {
        Ok(Checked::Handshake(connection, reply, _)) => {
            assert!(!connection.is_broken());
            reply
        }
        Ok(_) => panic!("a new socket's check is a handshake"),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn a_second_tls_socket_of_the_same_client_resumes_the_session() {
    let (server, client) = configs();
    let (port, kinds) = serve(server, 2);
    let first = tls_check(port, &client);
    assert_eq!(first.get_bool("isWritablePrimary"), Ok(true));
    assert_eq!(kinds.recv().unwrap(), HandshakeKind::Full);
    tls_check(port, &client);
    assert_eq!(kinds.recv().unwrap(), HandshakeKind::Resumed);
}
