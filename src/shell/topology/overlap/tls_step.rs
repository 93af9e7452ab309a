//! The TLS session of a new socket in the shared wait: made from the
//! client's one configuration, so sessions resume as on a blocking socket.
//! Its handshake, then the hello, move through the connection's shared
//! step ([`crate::shell::conn::pump`]) on the poller's wake-ups; a
//! certificate or host name failure is the same
//! [`crate::error::ErrorKind::Tls`] error ([`crate::tls::handshake_error`]).

use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection};

use crate::error::Result;
use crate::proto::address::ServerAddress;

/// A new TLS session to `address`; the step hands it the hello, which
/// rustls keeps until the handshake is done.
pub(super) fn start_session(
    config: &Arc<ClientConfig>,
    address: &ServerAddress,
) -> Result<Box<ClientConnection>> {
    let server_name = crate::shell::tls::server_name(address)?;
    let session = ClientConnection::new(config.clone(), server_name)
        .map_err(|e| crate::shell::tls::handshake_error(address, &e))?;
    Ok(Box::new(session))
}
