//! The TLS handshake and the handshake hello over it on a non-blocking
//! socket, driven by the poller's wake-ups ([`super::overlap`]): rustls'
//! `write_tls` / `read_tls` / `process_new_packets` over the mio socket,
//! until the hello's reply is whole. The session is made from the client's
//! one configuration, so sessions resume as on a blocking socket; a
//! certificate or host name failure is the same [`crate::error::ErrorKind::Tls`]
//! error ([`crate::tls::handshake_error`]).

use std::io::Read;
use std::sync::Arc;

use bson::Document;
use mio::net::TcpStream;
use rustls::{ClientConfig, ClientConnection};

use super::exchange::{closed, would_block, HelloExchange, ProgressError};
use crate::error::Result;
use crate::proto::address::ServerAddress;

/// A new TLS session to `address` with the hello already handed to it:
/// rustls keeps the hello until the handshake is done, then sends it.
pub(super) fn start_session(
    config: &Arc<ClientConfig>,
    address: &ServerAddress,
    exchange: &mut HelloExchange,
) -> Result<Box<ClientConnection>> {
    let server_name = crate::shell::tls::server_name(address)?;
    let mut session = ClientConnection::new(config.clone(), server_name)
        .map_err(|e| crate::shell::tls::handshake_error(address, &e))?;
    let mut writer = session.writer();
    let unsent = exchange.take_unsent();
    std::io::Write::write_all(&mut writer, unsent)
        .map_err(|e| crate::error::Error::network(Some(address.clone()), "starting TLS", e))?;
    Ok(Box::new(session))
}

/// Moves the TLS handshake and the hello on as far as the socket allows;
/// `Some` with the hello's reply once it is whole. Every call goes on
/// until the socket would block (the poller wakes on edges).
pub(super) fn advance(
    session: &mut ClientConnection,
    stream: &mut TcpStream,
    exchange: &mut HelloExchange,
    address: &ServerAddress,
) -> std::result::Result<Option<Document>, ProgressError> {
    let mut plaintext = [0u8; 16 * 1024];
    loop {
        while session.wants_write() {
            match session.write_tls(stream) {
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ProgressError::Io(e)),
            }
        }
        loop {
            match session.reader().read(&mut plaintext) {
                // close_notify before the reply was whole.
                Ok(0) => return Err(ProgressError::Io(closed())),
                Ok(n) => exchange.received(&plaintext[..n]),
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(ProgressError::Io(e)),
            }
        }
        if let Some(reply) = exchange.complete_reply(address)? {
            return Ok(Some(reply));
        }
        match session.read_tls(stream) {
            Ok(0) => return Err(ProgressError::Io(closed())),
            Ok(_) => {
                if let Err(error) = session.process_new_packets() {
                    // Tell the server why (rustls queued an alert); the
                    // socket is dropped either way.
                    let _ = session.write_tls(stream);
                    let failure = crate::shell::tls::handshake_error(address, &error);
                    return Err(ProgressError::Reply(failure));
                }
            }
            Err(e) if would_block(&e) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ProgressError::Io(e)),
        }
    }
}
