//! MONGODB-AWS: the SASL conversation's messages (BSON payloads), the
//! checks on what the server sends, and the credentials' shapes as the
//! AWS endpoints return them. Pure: the nonce, the time and the
//! credentials are passed in; the shell fetches credentials
//! (`src/shell/cloud.rs`).
//!
//! ```text
//! client first {r: nonce(32), p: 'n'} ──> server first {s: nonce(32)+server(32), h: sts host}
//! client final {a: SigV4 Authorization of GetCallerIdentity, d: X-Amz-Date, t: session token?} ──> done
//! ```

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};

use super::sigv4;
use crate::error::{Error, ErrorKind, Result};

/// The body of the signed request: the server sends it to STS.
const GET_CALLER_IDENTITY: &str = "Action=GetCallerIdentity&Version=2011-06-15";

/// Credentials are renewed this long before they expire (the auth spec:
/// AWS makes new ones available at least five minutes before).
pub const EXPIRY_MARGIN_SECONDS: u64 = 300;

/// AWS credentials: an access key, its secret and, for temporary ones, a
/// session token and when they expire. Nothing of them is ever printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
    /// When temporary credentials expire, in seconds since the Unix epoch.
    pub expiration: Option<u64>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AwsCredentials(<redacted>)")
    }
}

impl AwsCredentials {
    /// Whether these credentials may still be used at `unix_time`: more
    /// than five minutes before they expire (or they never do).
    pub fn fresh_at(&self, unix_time: u64) -> bool {
        self.expiration
            .is_none_or(|expiry| expiry > unix_time.saturating_add(EXPIRY_MARGIN_SECONDS))
    }

    /// Reads the credentials out of an ECS, EC2 or STS JSON reply, already
    /// parsed: `AccessKeyId`, `SecretAccessKey`, the session token under
    /// `token_field` (`Token`, or STS' `SessionToken`) and `Expiration`
    /// (ISO 8601, or STS' seconds since the epoch). `source` names the
    /// endpoint in errors, which never quote the reply.
    pub fn from_reply(
        reply: &serde_json::Value,
        token_field: &str,
        source: &str,
    ) -> Result<AwsCredentials> {
        let text = |field: &str| -> Result<String> {
            match reply.get(field) {
                Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                _ => Err(credential_error(format!(
                    "the {source}'s reply has no {field} string"
                ))),
            }
        };
        let expiration = match reply.get("Expiration") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => {
                Some(sigv4::parse_iso8601(s).ok_or_else(|| {
                    credential_error(format!(
                        "the {source}'s Expiration is not an ISO 8601 UTC time"
                    ))
                })?)
            }
            Some(serde_json::Value::Number(n)) => n.as_f64().map(|seconds| seconds as u64),
            Some(_) => {
                return Err(credential_error(format!(
                    "the {source}'s Expiration is neither a time nor a number"
                )))
            }
        };
        Ok(AwsCredentials {
            access_key_id: text("AccessKeyId")?,
            secret_access_key: text("SecretAccessKey")?,
            session_token: Some(text(token_field)?),
            expiration,
        })
    }
}

/// An error obtaining AWS credentials (the authentication cannot start).
pub fn credential_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Authentication {
        message: format!("MONGODB-AWS: {what}"),
    })
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn to_bytes(document: &Document) -> Vec<u8> {
    let mut bytes = Vec::new();
    document
        .to_writer(&mut bytes)
        .expect("a document of strings and binaries serializes");
    bytes
}

/// The client-first payload: the client nonce and the gs2-cb-flag `n`
/// (no channel binding, as the spec requires).
pub fn client_first(nonce: &[u8; 32]) -> Vec<u8> {
    to_bytes(&doc! { "r": binary(nonce.to_vec()), "p": 110_i32 })
}

/// What the server's first message says, checked.
#[derive(Debug, Clone)]
pub struct ServerFirst {
    server_nonce: Vec<u8>,
    host: String,
    region: String,
}

/// Reads and checks the server's first payload: a 64-byte nonce that
/// starts with ours, and a valid STS host name.
pub fn server_first(payload: &[u8], client_nonce: &[u8; 32]) -> Result<ServerFirst> {
    let document = Document::from_reader(payload)
        .map_err(|_| conversation_error("the server's first payload is not a BSON document"))?;
    let server_nonce = match document.get("s") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => {
            return Err(conversation_error(
                "the server's first payload has no nonce ('s')",
            ))
        }
    };
    if server_nonce.len() != 64 {
        return Err(conversation_error(format!(
            "the server's nonce is {} bytes long, not 64",
            server_nonce.len()
        )));
    }
    if server_nonce[..32] != client_nonce[..] {
        return Err(conversation_error(
            "the server's nonce does not start with the client's (a replayed or forged reply)",
        ));
    }
    let host = match document.get("h") {
        Some(Bson::String(h)) => h.clone(),
        _ => {
            return Err(conversation_error(
                "the server's first payload has no STS host ('h')",
            ))
        }
    };
    let region = region(&host)?;
    Ok(ServerFirst {
        server_nonce,
        host,
        region,
    })
}

/// The auth spec's region calculation, with its host checks.
pub fn region(host: &str) -> Result<String> {
    if host.is_empty() || host.len() > 255 {
        return Err(conversation_error(format!(
            "the STS host the server names is {} bytes long; it must be 1 to 255",
            host.len()
        )));
    }
    if host.split('.').any(str::is_empty) {
        return Err(conversation_error(format!(
            "the STS host {host:?} the server names has an empty label"
        )));
    }
    // The spec's table says sts.amazonaws.com (its pseudocode, aws.amazonaws.com).
    if host == "sts.amazonaws.com" || host == "aws.amazonaws.com" || !host.contains('.') {
        return Ok("us-east-1".into());
    }
    Ok(host.split('.').nth(1).unwrap_or("us-east-1").to_owned())
}

fn conversation_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Authentication {
        message: format!("MONGODB-AWS: {what}"),
    })
}

/// The client-final payload: the `Authorization` header of the signed
/// `GetCallerIdentity` request, its date and the session token, if any.
pub fn client_final(server: &ServerFirst, credentials: &AwsCredentials, unix_time: u64) -> Vec<u8> {
    use base64::Engine as _;
    let amz_date = sigv4::amz_date(unix_time);
    let nonce = base64::engine::general_purpose::STANDARD.encode(&server.server_nonce);
    let length = GET_CALLER_IDENTITY.len().to_string();
    let mut headers = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Content-Length", length.as_str()),
        ("Host", server.host.as_str()),
        ("X-Amz-Date", amz_date.as_str()),
        ("X-MongoDB-Server-Nonce", nonce.as_str()),
        ("X-MongoDB-GS2-CB-Flag", "n"),
    ];
    if let Some(token) = &credentials.session_token {
        headers.push(("X-Amz-Security-Token", token.as_str()));
    }
    let signed = sigv4::sign(
        &sigv4::Request {
            method: "POST",
            path: "/",
            headers: &headers,
            body: GET_CALLER_IDENTITY.as_bytes(),
        },
        &sigv4::Scope {
            access_key_id: &credentials.access_key_id,
            secret_access_key: &credentials.secret_access_key,
            region: &server.region,
            service: "sts",
            amz_date: &amz_date,
        },
    );
    let mut payload = doc! { "a": signed.authorization, "d": amz_date.clone() };
    if let Some(token) = &credentials.session_token {
        payload.insert("t", token.clone());
    }
    to_bytes(&payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_region_table() {
        let cases = [
            ("sts.amazonaws.com", Some("us-east-1")),
            ("aws.amazonaws.com", Some("us-east-1")),
            ("sts.us-west-2.amazonaws.com", Some("us-west-2")),
            ("sts.us-west-2.amazonaws.com.ch", Some("us-west-2")),
            ("example.com", Some("com")),
            ("localhost", Some("us-east-1")),
            ("sts..com", None),
            (".amazonaws.com", None),
            ("sts.amazonaws.", None),
            ("", None),
        ];
        for (host, expected) in cases {
            assert_eq!(region(host).ok().as_deref(), expected, "{host}");
        }
        assert!(region(&"a".repeat(256)).is_err());
    }

    #[test]
    fn the_server_nonce_must_extend_the_clients() {
        let ours = [1u8; 32];
        let reply = |nonce: Vec<u8>, host: &str| to_bytes(&doc! { "s": binary(nonce), "h": host });
        let mut good = ours.to_vec();
        good.extend([2u8; 32]);
        assert!(server_first(&reply(good.clone(), "sts.amazonaws.com"), &ours).is_ok());
        let mut forged = vec![9u8; 32];
        forged.extend([2u8; 32]);
        let e = server_first(&reply(forged, "sts.amazonaws.com"), &ours).unwrap_err();
        assert!(
            e.to_string().contains("does not start with the client's"),
            "{e}"
        );
        let e = server_first(&reply(ours.to_vec(), "sts.amazonaws.com"), &ours).unwrap_err();
        assert!(e.to_string().contains("32 bytes long, not 64"), "{e}");
        let e = server_first(&reply(good, "sts..com"), &ours).unwrap_err();
        assert!(e.to_string().contains("empty label"), "{e}");
        let e = server_first(b"junk", &ours).unwrap_err();
        assert!(e.to_string().contains("not a BSON document"), "{e}");
    }

    #[test]
    fn credentials_from_endpoint_replies() {
        let ecs = serde_json::json!({
            "AccessKeyId": "AKID", "SecretAccessKey": "SECRET", "Token": "TOKEN",
            "Expiration": "2030-01-01T00:00:00Z", "RoleArn": "arn"
        });
        let c = AwsCredentials::from_reply(&ecs, "Token", "ECS endpoint").unwrap();
        assert_eq!(c.session_token.as_deref(), Some("TOKEN"));
        let expiry = c.expiration.unwrap();
        assert!(c.fresh_at(expiry - 301));
        assert!(!c.fresh_at(expiry - 300), "five minutes before is too late");
        let sts = serde_json::json!({
            "AccessKeyId": "AKID", "SecretAccessKey": "SECRET", "SessionToken": "T",
            "Expiration": 1.9e9
        });
        let c = AwsCredentials::from_reply(&sts, "SessionToken", "STS").unwrap();
        assert_eq!(c.expiration, Some(1_900_000_000));
        let broken = serde_json::json!({ "AccessKeyId": "AKID", "SecretAccessKey": "SECRET" });
        let e = AwsCredentials::from_reply(&broken, "Token", "EC2 endpoint").unwrap_err();
        assert_eq!(
            e.to_string(),
            "authentication failed: MONGODB-AWS: the EC2 endpoint's reply has no Token string"
        );
        assert_eq!(format!("{c:?}"), "AwsCredentials(<redacted>)");
    }
}
