//! Loopback stand-ins for what cloud authentication talks to, since there
//! is no AWS or identity provider here:
//! - [`AuthProxy`]: a MongoDB server side that answers the MONGODB-AWS
//!   SASL conversation itself (checking the client's nonce and verifying
//!   the SigV4 signature with the secret it knows, independently of the
//!   driver's signer) and forwards every other command to a real server.
//! - [`HttpStub`]: a loopback HTTP server answering canned responses per
//!   request line (ECS, EC2 IMDSv2, STS), or hanging, and recording what
//!   it was asked.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use base64::Engine as _;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use ring::{digest, hmac};

use super::raw::{
    encode_op_reply, parse_op_msg, parse_op_query, parse_op_reply, read_frame, Frame, OpMsg,
    OP_MSG, OP_QUERY,
};

/// The key the fake identity provider signs its JWTs with (HS256).
pub const JWT_KEY: &[u8] = b"the fake identity provider's key";

/// A JWT signed with [`JWT_KEY`] for `subject`.
pub fn jwt(subject: &str) -> String {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let unsigned = format!(
        "{}.{}",
        b64(br#"{"alg":"HS256","typ":"JWT"}"#),
        b64(format!(r#"{{"sub":"{subject}"}}"#).as_bytes())
    );
    let signature = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, JWT_KEY),
        unsigned.as_bytes(),
    );
    format!("{unsigned}.{}", b64(signature.as_ref()))
}

/// Whether `token` is a JWT the fake identity provider signed.
fn jwt_valid(token: &str) -> bool {
    let Some((unsigned, signature)) = token.rsplit_once('.') else {
        return false;
    };
    let Ok(signature) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(signature) else {
        return false;
    };
    hmac::verify(
        &hmac::Key::new(hmac::HMAC_SHA256, JWT_KEY),
        unsigned.as_bytes(),
        &signature,
    )
    .is_ok()
}

/// An AWS identity the fake server accepts.
#[derive(Clone, Debug)]
pub struct AwsIdentity {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

/// What the fake server saw of the conversations.
#[derive(Default, Debug)]
pub struct AuthLog {
    /// saslStart commands received, by mechanism.
    pub starts: Vec<String>,
    /// Conversations that succeeded.
    pub successes: usize,
    /// OIDC speculative authentications accepted inside a hello.
    pub speculative: usize,
    /// Why conversations failed.
    pub failures: Vec<String>,
}

/// The fake server side of the authentication conversations.
pub struct AuthProxy {
    port: u16,
    log: Arc<Mutex<AuthLog>>,
    /// Answer saslStart with a server nonce that does not extend the client's.
    pub forge_nonce: Arc<Mutex<bool>>,
    /// Answer the next `find` with ReauthenticationRequired (391).
    pub reauthenticate_next_find: Arc<Mutex<bool>>,
}

struct Shared {
    identities: Vec<AwsIdentity>,
    log: Arc<Mutex<AuthLog>>,
    forge_nonce: Arc<Mutex<bool>>,
    reauthenticate_next_find: Arc<Mutex<bool>>,
}

impl AuthProxy {
    /// Listens on 127.0.0.1, forwarding what it does not answer to
    /// 127.0.0.1:`upstream`, accepting `identities`.
    pub fn start(upstream: u16, identities: Vec<AwsIdentity>) -> AuthProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy binds");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(AuthLog::default()));
        let forge_nonce = Arc::new(Mutex::new(false));
        let reauthenticate_next_find = Arc::new(Mutex::new(false));
        let shared = Arc::new(Shared {
            identities,
            log: log.clone(),
            forge_nonce: forge_nonce.clone(),
            reauthenticate_next_find: reauthenticate_next_find.clone(),
        });
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let shared = shared.clone();
                thread::spawn(move || serve(client, upstream, &shared));
            }
        });
        AuthProxy {
            port,
            log,
            forge_nonce,
            reauthenticate_next_find,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn uri(&self, path_and_options: &str) -> String {
        format!("mongodb://127.0.0.1:{}/{path_and_options}", self.port)
    }

    /// A copy of what the server saw so far.
    pub fn successes(&self) -> usize {
        self.log.lock().unwrap().successes
    }

    pub fn failures(&self) -> Vec<String> {
        self.log.lock().unwrap().failures.clone()
    }

    pub fn starts(&self) -> Vec<String> {
        self.log.lock().unwrap().starts.clone()
    }

    pub fn speculative(&self) -> usize {
        self.log.lock().unwrap().speculative
    }
}

/// Per socket: the AWS conversation's nonces and host.
#[derive(Default)]
struct Conversation {
    server_nonce: Vec<u8>,
}

const STS_HOST: &str = "sts.us-west-2.amazonaws.com";

fn serve(mut client: TcpStream, upstream: u16, shared: &Shared) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let mut conversation = Conversation::default();
    while let Ok(Some(frame)) = read_frame(&mut client) {
        if let Some(bytes) = hello_with_speculation(&frame, &mut server, shared) {
            if client.write_all(&bytes).is_err() {
                return;
            }
            continue;
        }
        let parsed = (frame.op_code == OP_MSG)
            .then(|| parse_op_msg(&frame.body).ok())
            .flatten();
        let command = parsed.as_ref().map(OpMsg::merged);
        let answer = command
            .as_ref()
            .and_then(|c| answer_sasl(c, &mut conversation, shared));
        let bytes = match answer {
            Some(reply) => OpMsg {
                flags: 0,
                body: reply,
                sequences: Vec::new(),
            }
            .encode(frame.request_id + 1_000_000, frame.request_id),
            None => {
                if server.write_all(&frame.to_bytes()).is_err() {
                    return;
                }
                match read_frame(&mut server) {
                    Ok(Some(reply)) => reply.to_bytes(),
                    _ => return,
                }
            }
        };
        if client.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn payload(command: &Document) -> Option<Document> {
    match command.get("payload") {
        Some(Bson::Binary(b)) => Document::from_reader(b.bytes.as_slice()).ok(),
        _ => None,
    }
}

fn refuse(shared: &Shared, why: String) -> Document {
    shared.log.lock().unwrap().failures.push(why);
    doc! { "ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed." }
}

/// A hello carrying a MONGODB-OIDC speculative saslStart: forwarded
/// without it, the reply given a speculative answer when the JWT is valid.
fn hello_with_speculation(
    frame: &Frame,
    server: &mut TcpStream,
    shared: &Shared,
) -> Option<Vec<u8>> {
    let (mut command, legacy) = match frame.op_code {
        OP_QUERY => (parse_op_query(&frame.body).ok()?.command(), true),
        OP_MSG => (parse_op_msg(&frame.body).ok()?.merged(), false),
        _ => return None,
    };
    let speculation = command
        .get_document("speculativeAuthenticate")
        .ok()?
        .clone();
    if speculation.get_str("mechanism") != Ok("MONGODB-OIDC") {
        return None;
    }
    command.remove("speculativeAuthenticate");
    let accepted = payload(&speculation)
        .and_then(|p| p.get_str("jwt").ok().map(jwt_valid))
        .unwrap_or(false);
    let mut reply = if legacy {
        let query = super::raw::OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            query: command,
        };
        server.write_all(&query.encode(frame.request_id)).ok()?;
        parse_op_reply(&read_frame(server).ok()??.body).ok()?
    } else {
        let message = OpMsg {
            flags: 0,
            body: command,
            sequences: Vec::new(),
        };
        server
            .write_all(&message.encode(frame.request_id, 0))
            .ok()?;
        parse_op_msg(&read_frame(server).ok()??.body).ok()?.body
    };
    if accepted {
        shared.log.lock().unwrap().speculative += 1;
        reply.insert(
            "speculativeAuthenticate",
            doc! { "conversationId": 1, "done": true, "payload": binary(Vec::new()) },
        );
    }
    Some(if legacy {
        encode_op_reply(frame.request_id + 1_000_000, frame.request_id, &reply)
    } else {
        OpMsg {
            flags: 0,
            body: reply,
            sequences: Vec::new(),
        }
        .encode(frame.request_id + 1_000_000, frame.request_id)
    })
}

fn answer_sasl(
    command: &Document,
    conversation: &mut Conversation,
    shared: &Shared,
) -> Option<Document> {
    if command.contains_key("find") {
        let mut once = shared.reauthenticate_next_find.lock().unwrap();
        if *once {
            *once = false;
            return Some(doc! {
                "ok": 0, "code": 391, "codeName": "ReauthenticationRequired",
                "errmsg": "Reauthentication required",
            });
        }
        return None;
    }
    if command.get_str("mechanism") == Ok("MONGODB-OIDC") && command.contains_key("saslStart") {
        shared
            .log
            .lock()
            .unwrap()
            .starts
            .push("MONGODB-OIDC".into());
        let token = payload(command).and_then(|p| p.get_str("jwt").ok().map(str::to_owned));
        return Some(match token {
            Some(token) if jwt_valid(&token) => {
                shared.log.lock().unwrap().successes += 1;
                doc! { "ok": 1, "conversationId": 1, "done": true, "payload": binary(Vec::new()) }
            }
            _ => refuse(shared, "invalid JWT".into()),
        });
    }
    if command.contains_key("saslStart") {
        let mechanism = command.get_str("mechanism").unwrap_or_default().to_owned();
        shared.log.lock().unwrap().starts.push(mechanism.clone());
        if mechanism != "MONGODB-AWS" {
            return None;
        }
        let Some(Bson::Binary(nonce)) = payload(command).and_then(|p| p.get("r").cloned()) else {
            return Some(refuse(shared, "no client nonce".into()));
        };
        if nonce.bytes.len() != 32 {
            return Some(refuse(shared, "client nonce not 32 bytes".into()));
        }
        let mut server_nonce = if *shared.forge_nonce.lock().unwrap() {
            vec![0xAB; 32]
        } else {
            nonce.bytes.clone()
        };
        server_nonce.extend((0..32u8).map(|i| i.wrapping_mul(7)));
        conversation.server_nonce = server_nonce.clone();
        let first = doc! { "s": binary(server_nonce), "h": STS_HOST };
        let mut bytes = Vec::new();
        first.to_writer(&mut bytes).unwrap();
        return Some(
            doc! { "ok": 1, "conversationId": 1, "done": false, "payload": binary(bytes) },
        );
    }
    if command.contains_key("saslContinue") && !conversation.server_nonce.is_empty() {
        let reply = match verify(command, conversation, shared) {
            Ok(()) => {
                shared.log.lock().unwrap().successes += 1;
                doc! { "ok": 1, "conversationId": 1, "done": true, "payload": binary(Vec::new()) }
            }
            Err(why) => refuse(shared, why),
        };
        conversation.server_nonce.clear();
        return Some(reply);
    }
    None
}

/// Checks the client's final message the way STS would: the signature of
/// GetCallerIdentity with the headers MONGODB-AWS requires, recomputed
/// with the known secret.
fn verify(command: &Document, conversation: &Conversation, shared: &Shared) -> Result<(), String> {
    let payload = payload(command).ok_or("no payload")?;
    let authorization = payload.get_str("a").map_err(|_| "no a")?;
    let date = payload.get_str("d").map_err(|_| "no d")?;
    let token = payload.get_str("t").ok();
    let credential = authorization
        .split("Credential=")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .ok_or("no Credential")?;
    let identity = shared
        .identities
        .iter()
        .find(|i| i.access_key_id == credential)
        .ok_or_else(|| "unknown access key".to_string())?;
    if identity.session_token.as_deref() != token {
        return Err("wrong session token".into());
    }
    let nonce = base64::engine::general_purpose::STANDARD.encode(&conversation.server_nonce);
    let mut headers = vec![
        ("content-length", "43".to_string()),
        (
            "content-type",
            "application/x-www-form-urlencoded".to_string(),
        ),
        ("host", STS_HOST.to_string()),
        ("x-amz-date", date.to_string()),
    ];
    if let Some(token) = token {
        headers.push(("x-amz-security-token", token.to_string()));
    }
    headers.push(("x-mongodb-gs2-cb-flag", "n".to_string()));
    headers.push(("x-mongodb-server-nonce", nonce));
    let names: Vec<&str> = headers.iter().map(|(n, _)| *n).collect();
    let canonical: String = headers.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let body_hash = hex(digest::digest(
        &digest::SHA256,
        b"Action=GetCallerIdentity&Version=2011-06-15",
    )
    .as_ref());
    let request = format!("POST\n/\n\n{canonical}\n{}\n{body_hash}", names.join(";"));
    let day = &date[..8];
    let scope = format!("{day}/us-west-2/sts/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex(digest::digest(&digest::SHA256, request.as_bytes()).as_ref())
    );
    let mut key = format!("AWS4{}", identity.secret_access_key).into_bytes();
    for part in [day, "us-west-2", "sts", "aws4_request"] {
        key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), part.as_bytes())
            .as_ref()
            .to_vec();
    }
    let signature =
        hex(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), to_sign.as_bytes()).as_ref());
    let expected = format!(
        "AWS4-HMAC-SHA256 Credential={credential}/{scope}, SignedHeaders={}, Signature={signature}",
        names.join(";")
    );
    if authorization != expected {
        return Err("signature mismatch".into());
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A canned HTTP answer.
#[derive(Clone, Debug)]
pub enum Canned {
    /// Status and body.
    Reply(u16, String),
    /// Accept, read the request, never answer.
    Hang,
}

/// A request the stub received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub target: String,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// A loopback HTTP server with canned answers by "METHOD /path".
pub struct HttpStub {
    port: u16,
    routes: Arc<Mutex<HashMap<String, Canned>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl HttpStub {
    pub fn start(routes: &[(&str, Canned)]) -> HttpStub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the stub binds");
        let port = listener.local_addr().unwrap().port();
        let routes = Arc::new(Mutex::new(
            routes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<HashMap<_, _>>(),
        ));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (r, log) = (routes.clone(), received.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (r, log) = (r.clone(), log.clone());
                thread::spawn(move || answer_http(stream, &r, &log));
            }
        });
        HttpStub {
            port,
            routes,
            received,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn set(&self, route: &str, canned: Canned) {
        self.routes
            .lock()
            .unwrap()
            .insert(route.to_string(), canned);
    }
}

fn answer_http(
    mut stream: TcpStream,
    routes: &Mutex<HashMap<String, Canned>>,
    log: &Mutex<Vec<Received>>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let (head, body) = loop {
        let Ok(n) = stream.read(&mut buffer) else {
            return;
        };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buffer[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]).to_string();
        let length = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            break (
                head,
                String::from_utf8_lossy(&data[end + 4..end + 4 + length]).to_string(),
            );
        }
    };
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default().to_string();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    log.lock().unwrap().push(Received {
        method: method.clone(),
        target: target.clone(),
        headers,
        body,
    });
    let path = target.split('?').next().unwrap_or_default();
    let canned = routes
        .lock()
        .unwrap()
        .get(&format!("{method} {path}"))
        .cloned();
    match canned {
        Some(Canned::Hang) => thread::sleep(Duration::from_secs(30)),
        Some(Canned::Reply(status, body)) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        None => {
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
            );
        }
    }
}
