//! A minimal blocking HTTP/1.1 client for the few requests cloud
//! authentication makes (AWS STS, ECS and EC2 metadata; Azure and GCP
//! metadata): one request per connection (`Connection: close`), a body of
//! at most [`MAX_BODY`] bytes, every step bounded by the caller's deadline
//! (host look-up through our resolver, connect, TLS handshake, each read
//! and write), TLS through rustls with the webpki roots.
//!
//! Why not a crate: `ureq` 3 with rustls, the well-kept blocking client,
//! has 25 crates in its tree, 8 of them not already ours (ureq, ureq-proto,
//! http, httparse, bytes, itoa, utf8-zero and a second base64); a scratch
//! build of it took 67 s of CPU. It also resolves host names through the
//! system (`getaddrinfo`, which no deadline bounds) where ours go through
//! the driver's resolver. These endpoints answer a handful of small JSON
//! bodies; this file is what that takes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::shell::clock::Clock;
use crate::shell::dns::ResolverConfig;

/// The longest body read: metadata and STS replies are well under 16 KiB.
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// One request.
pub(crate) struct Request<'a> {
    /// `GET`, `PUT`, `POST`.
    pub method: &'a str,
    /// `http://host[:port]/path?query` or `https://...`.
    pub url: &'a str,
    /// Extra headers (Host, Connection and Content-Length are added).
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

/// A response: its status and body.
pub(crate) struct Response {
    /// The status code.
    pub status: u16,
    /// The body (at most [`MAX_BODY`] bytes).
    pub body: Vec<u8>,
}

/// What a request needs from the client: its clock, resolver and TLS
/// configuration for `https`.
pub(crate) struct Context<'a> {
    pub clock: &'a dyn Clock,
    pub resolver: &'a ResolverConfig,
    pub tls: Option<&'a Arc<rustls::ClientConfig>>,
}

struct Url<'a> {
    https: bool,
    host: &'a str,
    port: u16,
    target: &'a str,
}

fn parse_url(url: &str) -> Result<Url<'_>> {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(Error::client(format!("not an http(s) URL: {url}")));
    };
    let (authority, target) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let default_port = if https { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || !port.is_empty() => match port.parse() {
            Ok(port) => (host, port),
            Err(_) => (authority, default_port),
        },
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(Url {
        https,
        host,
        port,
        target,
    })
}

/// What to call the endpoint in errors: scheme, host and port, never the
/// path or query (which may carry a token).
fn origin(url: &Url<'_>) -> String {
    let scheme = if url.https { "https" } else { "http" };
    format!("{scheme}://{}:{}", url.host, url.port)
}

fn failure(url: &Url<'_>, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Authentication {
        message: format!("the request to {} failed: {what}", origin(url)),
    })
}

/// Sends `request` and reads the whole response, all before `deadline`.
pub(crate) fn send(
    request: &Request<'_>,
    deadline: Instant,
    context: &Context<'_>,
) -> Result<Response> {
    let url = parse_url(request.url)?;
    let left = |what: &str| -> Result<Duration> {
        deadline
            .checked_duration_since(context.clock.now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| failure(&url, format!("timed out {what}")))
    };
    let addresses: Vec<SocketAddr> = match url.host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, url.port)],
        Err(_) => {
            crate::shell::dns::resolve_host(context.resolver, url.host, url.port, Some(deadline))
                .map_err(|e| failure(&url, format!("resolving the host name ({e})")))?
        }
    };
    let address = addresses
        .first()
        .ok_or_else(|| failure(&url, "the host name has no address"))?;
    let socket = TcpStream::connect_timeout(address, left("connecting")?)
        .map_err(|e| failure(&url, format!("connecting ({e})")))?;
    let mut message = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        request.method,
        url.target,
        url.host,
        request.body.len()
    );
    for (name, value) in request.headers {
        message.push_str(&format!("{name}: {value}\r\n"));
    }
    message.push_str("\r\n");
    let mut bytes = message.into_bytes();
    bytes.extend_from_slice(request.body);
    if url.https {
        let tls = context
            .tls
            .ok_or_else(|| failure(&url, "no TLS configuration for https"))?;
        let name = rustls::pki_types::ServerName::try_from(url.host.to_owned())
            .map_err(|_| failure(&url, "the host is not a valid TLS server name"))?;
        let connection = rustls::ClientConnection::new(tls.clone(), name)
            .map_err(|e| failure(&url, format!("starting TLS ({e})")))?;
        let stream = rustls::StreamOwned::new(connection, socket);
        exchange(stream, &bytes, &url, &left)
    } else {
        exchange(socket, &bytes, &url, &left)
    }
}

/// Something with a TCP socket under it whose timeouts can be set.
trait Timed: Read + Write {
    fn set_timeouts(&mut self, timeout: Duration) -> std::io::Result<()>;
}

impl Timed for TcpStream {
    fn set_timeouts(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
}

impl Timed for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn set_timeouts(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.sock.set_timeouts(timeout)
    }
}

fn exchange(
    mut stream: impl Timed,
    request: &[u8],
    url: &Url<'_>,
    left: &dyn Fn(&str) -> Result<Duration>,
) -> Result<Response> {
    let io = |e: std::io::Error| {
        let timed_out = matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        );
        failure(
            url,
            if timed_out {
                "timed out".to_string()
            } else {
                e.to_string()
            },
        )
    };
    stream.set_timeouts(left("sending")?).map_err(io)?;
    stream.write_all(request).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        stream
            .set_timeouts(left("reading the response")?)
            .map_err(io)?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            // A TLS peer that closes without close_notify: the body's
            // length is checked below.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io(e)),
        }
        if received.len() > MAX_BODY + 16 * 1024 {
            return Err(failure(
                url,
                format!("the response is over {MAX_BODY} bytes"),
            ));
        }
        if let Some(response) = complete(&received, url, false)? {
            return Ok(response);
        }
    }
    complete(&received, url, true)?.ok_or_else(|| failure(url, "the response ended early"))
}

/// The response in `bytes` if it is whole: its headers and as much body as
/// `Content-Length` says (or all of it, once the peer closed, without one).
fn complete(bytes: &[u8], url: &Url<'_>, closed: bool) -> Result<Option<Response>> {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&bytes[..end])
        .map_err(|_| failure(url, "the response's headers are not text"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.strip_prefix("HTTP/1."))
        .and_then(|line| line.get(2..5))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| failure(url, "the response has no HTTP/1.x status line"))?;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| failure(url, "the response's Content-Length is not a number"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(failure(url, "chunked responses are not supported"));
        }
    }
    let body = &bytes[end + 4..];
    match length {
        Some(length) if length > MAX_BODY => Err(failure(
            url,
            format!("the response is over {MAX_BODY} bytes"),
        )),
        Some(length) if body.len() >= length => Ok(Some(Response {
            status,
            body: body[..length].to_vec(),
        })),
        Some(_) => Ok(None),
        // Without a length the body ends when the peer closes.
        None if closed => Ok(Some(Response {
            status,
            body: body.to_vec(),
        })),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("http://169.254.170.2/v2/credentials?id=1").unwrap();
        assert_eq!(
            (u.https, u.host, u.port, u.target),
            (false, "169.254.170.2", 80, "/v2/credentials?id=1")
        );
        let u = parse_url("https://sts.amazonaws.com").unwrap();
        assert_eq!(
            (u.https, u.host, u.port, u.target),
            (true, "sts.amazonaws.com", 443, "/")
        );
        let u = parse_url("http://127.0.0.1:8080/x").unwrap();
        assert_eq!((u.host, u.port), ("127.0.0.1", 8080));
        assert!(parse_url("ftp://x").is_err());
    }

    #[test]
    fn responses() {
        let url = parse_url("http://h/").unwrap();
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let r = complete(whole, &url, false).unwrap().unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
        assert!(complete(&whole[..whole.len() - 1], &url, true)
            .unwrap()
            .is_none());
        let e = complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n",
            &url,
            false,
        );
        assert!(e.is_err());
        assert!(complete(b"SSH-2.0\r\n\r\n", &url, false).is_err());
    }
}
