//! Fetching the secrets of the cloud mechanisms, inline, inside the
//! operation's deadline (nothing runs in the background): MONGODB-AWS
//! credentials from the auth spec's sources in its order, and MONGODB-OIDC
//! access tokens (the machine callback, or `ENVIRONMENT:test|k8s|azure|gcp`).
//!
//! ```text
//! URI user/password ─> cached (fresh until 5 min before expiry) ─> AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
//!   ─> AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN: STS AssumeRoleWithWebIdentity (EKS)
//!   ─> AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: the ECS endpoint ─> else EC2 IMDSv2
//! ```
//!
//! Environment variables are read on every authentication (Lambda may
//! rotate them) and never cached; what an endpoint returned is. Tests
//! point the endpoints and the environment elsewhere through
//! [`crate::unversioned::CloudEnvironment`], which nothing else sets.

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::proto::auth::aws::{credential_error, AwsCredentials};
use crate::proto::auth::Authenticator;
use crate::proto::options::oidc::{CallbackContext, CallbackKind};
use crate::proto::options::Credential;
use crate::shell::http::{self, Context, Request};
use crate::unversioned::CloudEnvironment;

const ECS_BASE: &str = "http://169.254.170.2";
const EC2_BASE: &str = "http://169.254.169.254";
const STS_URL: &str = "https://sts.amazonaws.com/";

/// What a fetch reads: the environment, the endpoints, the HTTP context,
/// the deadline and the calendar time.
pub(crate) struct Fetch<'a> {
    pub cloud: Option<&'a Arc<CloudEnvironment>>,
    pub http: Context<'a>,
    pub deadline: Instant,
    pub unix_time: u64,
}

impl Fetch<'_> {
    /// An environment variable (a test's, when it set its own), empty
    /// counted as unset.
    fn var(&self, name: &str) -> Option<String> {
        let value = match self.cloud.and_then(|c| c.variables.as_ref()) {
            Some(variables) => variables.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        value.filter(|v| !v.is_empty())
    }

    fn endpoint<'b>(
        &'b self,
        pick: fn(&CloudEnvironment) -> Option<&String>,
        default: &'b str,
    ) -> &'b str {
        self.cloud
            .and_then(|c| pick(c))
            .map_or(default, String::as_str)
    }

    fn send(&self, request: &Request<'_>, what: &str) -> Result<Vec<u8>> {
        let response = http::send(request, self.deadline, &self.http)
            .map_err(|e| credential_error(format!("asking the {what}: {e}")))?;
        if response.status != 200 {
            return Err(credential_error(format!(
                "the {what} answered HTTP status {}",
                response.status
            )));
        }
        Ok(response.body)
    }

    fn json(&self, request: &Request<'_>, what: &str) -> Result<serde_json::Value> {
        let body = self.send(request, what)?;
        // serde_json's message could quote the body, which holds secrets.
        serde_json::from_slice(&body)
            .map_err(|_| credential_error(format!("the {what}'s reply is not valid JSON")))
    }
}

/// MONGODB-AWS credentials by the auth spec's order of sources.
pub(crate) fn aws_credentials(
    authenticator: &mut Authenticator,
    fetch: &Fetch<'_>,
) -> Result<AwsCredentials> {
    if let Some(credentials) = authenticator.aws_uri_credentials() {
        return Ok(credentials);
    }
    if let Some(credentials) = authenticator.cached_aws_credentials(fetch.unix_time) {
        return Ok(credentials);
    }
    if let Some(credentials) = environment_credentials(fetch)? {
        return Ok(credentials);
    }
    let credentials = if fetch.var("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() {
        assume_role_with_web_identity(fetch)?
    } else if let Some(relative) = fetch.var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        ecs_credentials(fetch, &relative)?
    } else {
        ec2_credentials(fetch)?
    };
    if !credentials.fresh_at(fetch.unix_time) {
        return Err(credential_error(
            "the temporary credentials the endpoint returned expire within five minutes",
        ));
    }
    authenticator.cache_aws_credentials(credentials.clone());
    Ok(credentials)
}

/// What Lambda sets: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
/// `AWS_SESSION_TOKEN`.
fn environment_credentials(fetch: &Fetch<'_>) -> Result<Option<AwsCredentials>> {
    match (
        fetch.var("AWS_ACCESS_KEY_ID"),
        fetch.var("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(Some(AwsCredentials {
            access_key_id,
            secret_access_key,
            session_token: fetch.var("AWS_SESSION_TOKEN"),
            expiration: None,
        })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(credential_error(
            "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
        )),
        (None, Some(_)) => Err(credential_error(
            "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not",
        )),
    }
}

/// EKS: the web identity token exchanged at STS for temporary credentials.
fn assume_role_with_web_identity(fetch: &Fetch<'_>) -> Result<AwsCredentials> {
    let path = fetch.var("AWS_WEB_IDENTITY_TOKEN_FILE").unwrap_or_default();
    let role_arn = fetch.var("AWS_ROLE_ARN").ok_or_else(|| {
        credential_error("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not")
    })?;
    let token = std::fs::read_to_string(&path).map_err(|e| {
        credential_error(format!(
            "reading AWS_WEB_IDENTITY_TOKEN_FILE {path:?}: {}",
            e.kind()
        ))
    })?;
    let session_name = match fetch.var("AWS_ROLE_SESSION_NAME") {
        Some(name) => name,
        None => {
            let nonce = crate::shell::rng::client_nonce()?;
            let suffix: String = nonce.bytes()[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("mongo-inline-{suffix}")
        }
    };
    let body = format!(
        "Action=AssumeRoleWithWebIdentity&RoleSessionName={}&RoleArn={}&WebIdentityToken={}&\
         Version=2011-06-15",
        percent_encode(&session_name),
        percent_encode(&role_arn),
        percent_encode(token.trim())
    );
    let request = Request {
        method: "POST",
        url: fetch.endpoint(|c| c.sts.as_ref(), STS_URL),
        headers: &[
            ("Accept", "application/json"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body: body.as_bytes(),
    };
    let reply = fetch.json(&request, "STS AssumeRoleWithWebIdentity endpoint")?;
    // STS nests the credentials: {AssumeRoleWithWebIdentityResponse:
    // {AssumeRoleWithWebIdentityResult: {Credentials: {...}}}}.
    let credentials = reply
        .pointer("/AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials")
        .or_else(|| reply.get("Credentials"))
        .ok_or_else(|| credential_error("the STS reply has no Credentials"))?;
    AwsCredentials::from_reply(credentials, "SessionToken", "STS")
}

/// ECS: the task's credentials at the container endpoint.
fn ecs_credentials(fetch: &Fetch<'_>, relative: &str) -> Result<AwsCredentials> {
    let url = format!("{}{relative}", fetch.endpoint(|c| c.ecs.as_ref(), ECS_BASE));
    let request = Request {
        method: "GET",
        url: &url,
        headers: &[("Accept", "application/json")],
        body: b"",
    };
    let reply = fetch.json(&request, "ECS endpoint")?;
    AwsCredentials::from_reply(&reply, "Token", "ECS endpoint")
}

/// EC2: IMDSv2's session token, the instance role's name, then its
/// credentials.
fn ec2_credentials(fetch: &Fetch<'_>) -> Result<AwsCredentials> {
    let base = fetch.endpoint(|c| c.ec2.as_ref(), EC2_BASE);
    let token_url = format!("{base}/latest/api/token");
    let token = fetch.send(
        &Request {
            method: "PUT",
            url: &token_url,
            headers: &[("X-aws-ec2-metadata-token-ttl-seconds", "30")],
            body: b"",
        },
        "EC2 metadata service (IMDSv2 token)",
    )?;
    let token = String::from_utf8(token)
        .map_err(|_| credential_error("the EC2 metadata token is not text"))?;
    let headers = [("X-aws-ec2-metadata-token", token.trim())];
    let roles_url = format!("{base}/latest/meta-data/iam/security-credentials/");
    let roles = fetch.send(
        &Request {
            method: "GET",
            url: &roles_url,
            headers: &headers,
            body: b"",
        },
        "EC2 metadata service (role name)",
    )?;
    let role = String::from_utf8_lossy(&roles)
        .lines()
        .next()
        .map(str::trim)
        .filter(|r| !r.is_empty() && !r.contains(['/', '?', '#']))
        .map(str::to_owned)
        .ok_or_else(|| credential_error("the EC2 instance has no IAM role"))?;
    let credentials_url = format!("{roles_url}{role}");
    let reply = fetch.json(
        &Request {
            method: "GET",
            url: &credentials_url,
            headers: &headers,
            body: b"",
        },
        "EC2 metadata service",
    )?;
    AwsCredentials::from_reply(&reply, "Token", "EC2 metadata service")
}

const AZURE_BASE: &str = "http://169.254.169.254";
const GCP_BASE: &str = "http://metadata";
const K8S_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

fn oidc_error(what: impl std::fmt::Display) -> crate::error::Error {
    crate::error::Error::new(crate::error::ErrorKind::Authentication {
        message: format!("MONGODB-OIDC: {what}"),
    })
}

/// A fresh MONGODB-OIDC access token: from the machine callback, or the
/// built-in environment the `ENVIRONMENT` property names.
pub(crate) fn oidc_token(credential: &Credential, fetch: &Fetch<'_>) -> Result<String> {
    let property = |name: &str| {
        credential
            .mechanism_properties
            .as_ref()
            .and_then(|p| p.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
            .and_then(|(_, v)| v.as_str())
            .map(str::to_owned)
    };
    let token = if let Some(CallbackKind::Machine(callback)) = &credential.oidc_callback.kind {
        let context = CallbackContext::new(Some(fetch.deadline), credential.username.clone());
        callback(context)
            .map_err(|e| oidc_error(format!("the callback failed: {e}")))?
            .access_token
    } else {
        match property("ENVIRONMENT").as_deref() {
            Some("test") => {
                let path = fetch.var("OIDC_TOKEN_FILE").ok_or_else(|| {
                    oidc_error("ENVIRONMENT:test reads OIDC_TOKEN_FILE, which is not set")
                })?;
                read_token_file(&path, "OIDC_TOKEN_FILE")?
            }
            Some("k8s") => {
                let (path, name) = match (
                    fetch.var("AZURE_FEDERATED_TOKEN_FILE"),
                    fetch.var("AWS_WEB_IDENTITY_TOKEN_FILE"),
                ) {
                    (Some(azure), _) => (azure, "AZURE_FEDERATED_TOKEN_FILE"),
                    (None, Some(aws)) => (aws, "AWS_WEB_IDENTITY_TOKEN_FILE"),
                    (None, None) => (K8S_TOKEN_FILE.to_owned(), "the service account token"),
                };
                read_token_file(&path, name)?
            }
            Some("azure") => azure_token(
                fetch,
                &property("TOKEN_RESOURCE").unwrap_or_default(),
                credential,
            )?,
            Some("gcp") => gcp_token(fetch, &property("TOKEN_RESOURCE").unwrap_or_default())?,
            _ => return Err(oidc_error("no callback and no known ENVIRONMENT")),
        }
    };
    if token.trim().is_empty() {
        return Err(oidc_error("the access token is empty"));
    }
    Ok(token.trim().to_owned())
}

fn read_token_file(path: &str, name: &str) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| oidc_error(format!("reading {name} ({path:?}): {}", e.kind())))
}

/// Azure's instance metadata service: a managed identity's token for the
/// resource (`client_id` is the user name, when given).
fn azure_token(fetch: &Fetch<'_>, resource: &str, credential: &Credential) -> Result<String> {
    let mut url = format!(
        "{}/metadata/identity/oauth2/token?api-version=2018-02-01&resource={}",
        fetch.endpoint(|c| c.azure.as_ref(), AZURE_BASE),
        percent_encode(resource)
    );
    if let Some(client_id) = &credential.username {
        url.push_str(&format!("&client_id={}", percent_encode(client_id)));
    }
    let request = Request {
        method: "GET",
        url: &url,
        headers: &[("Accept", "application/json"), ("Metadata", "true")],
        body: b"",
    };
    let body = metadata_body(fetch, &request, "Azure instance metadata service")?;
    let reply: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|_| oidc_error("the Azure instance metadata service's reply is not valid JSON"))?;
    reply
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            oidc_error("the Azure instance metadata service's reply has no access_token")
        })
}

/// GCP's metadata server: an identity token for the audience.
fn gcp_token(fetch: &Fetch<'_>, audience: &str) -> Result<String> {
    let url = format!(
        "{}/computeMetadata/v1/instance/service-accounts/default/identity?audience={}",
        fetch.endpoint(|c| c.gcp.as_ref(), GCP_BASE),
        percent_encode(audience)
    );
    let request = Request {
        method: "GET",
        url: &url,
        headers: &[("Metadata-Flavor", "Google")],
        body: b"",
    };
    let body = metadata_body(fetch, &request, "GCP metadata server")?;
    String::from_utf8(body).map_err(|_| oidc_error("the GCP metadata server's token is not text"))
}

/// A metadata reply's body; another status than 200 is an error that
/// includes the body (the auth spec asks for it: it says what is wrong).
fn metadata_body(fetch: &Fetch<'_>, request: &Request<'_>, what: &str) -> Result<Vec<u8>> {
    let response = http::send(request, fetch.deadline, &fetch.http)
        .map_err(|e| oidc_error(format!("asking the {what}: {e}")))?;
    if response.status != 200 {
        let body = String::from_utf8_lossy(&response.body);
        let body: String = body.chars().take(500).collect();
        return Err(oidc_error(format!(
            "the {what} answered HTTP status {}: {body}",
            response.status
        )));
    }
    Ok(response.body)
}

/// RFC 3986 percent-encoding of everything but the unreserved characters.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_encoding_keeps_only_unreserved_characters() {
        assert_eq!(
            super::percent_encode("arn:aws:iam::1:role/x y~"),
            "arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx%20y~"
        );
    }
}
