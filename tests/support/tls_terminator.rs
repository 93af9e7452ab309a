//! A TLS terminator in front of a plain server: each accepted socket's TLS
//! is ended here and its bytes go on in plain to the server. The topology
//! simulator parses OP_MSG, so it cannot sit behind TLS itself; with this
//! in front (and a [`super::delay_proxy::DelayProxy`] in front of that)
//! round trips through TLS can be counted.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

/// A server configuration presenting the chain in the PEM file `chain` with
/// the key in `key` (such as the tests' `server.pem` and `server-key.pem`).
pub fn server_config(chain: &str, key: &str) -> Arc<ServerConfig> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(chain)
        .expect("the certificate file")
        .collect::<Result<_, _>>()
        .expect("a certificate chain");
    let key = PrivateKeyDer::from_pem_file(key).expect("the key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the server certificate");
    Arc::new(config)
}

/// Listens on an ephemeral port; each socket's TLS is ended here and its
/// bytes go on in plain to 127.0.0.1:`upstream`. Returns the port.
pub fn terminate_tls(config: Arc<ServerConfig>, upstream: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let config = config.clone();
            std::thread::spawn(move || relay(client, server, config));
        }
    });
    port
}

/// Moves bytes both ways between a TLS client and a plain server, both
/// sockets non-blocking, napping 100 µs when neither side had anything
/// (well below the delays measured).
fn relay(mut client: TcpStream, mut server: TcpStream, config: Arc<ServerConfig>) {
    let (Ok(mut tls), Ok(()), Ok(())) = (
        ServerConnection::new(config),
        client.set_nonblocking(true),
        server.set_nonblocking(true),
    ) else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let mut busy = false;
        match tls.read_tls(&mut client) {
            Ok(0) => return,
            Ok(_) => {
                busy = true;
                if tls.process_new_packets().is_err() {
                    let _ = tls.write_tls(&mut client);
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        loop {
            match tls.reader().read(&mut buffer) {
                Ok(0) => return,
                Ok(n) => {
                    busy = true;
                    if write_all(&mut server, &buffer[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        match server.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => {
                busy = true;
                if tls.writer().write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        while tls.wants_write() {
            match tls.write_tls(&mut client) {
                Ok(_) => busy = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// `write_all` on a non-blocking socket: retries while its buffer is full.
fn write_all(socket: &mut TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
