//! MONGODB-OIDC's machine callback: how a program hands the driver an
//! access token from an identity provider the built-in environments
//! (`ENVIRONMENT:test|azure|gcp|k8s`) do not cover. Shaped like the
//! official driver's `options::oidc`, synchronous.
//!
//! ```
//! use mongo_inline::options::{oidc, AuthMechanism, Credential};
//! let mut credential = Credential::default();
//! credential.mechanism = Some(AuthMechanism::MongoDbOidc);
//! credential.oidc_callback = oidc::Callback::machine(|_context| {
//!     // Ask the identity provider; here, a token an agent keeps fresh.
//!     let token = std::env::var("MY_IDP_TOKEN").unwrap_or_default();
//!     Ok(oidc::IdpServerResponse::new(token))
//! });
//! ```

use std::sync::Arc;
use std::time::Instant;

type MachineFn = dyn Fn(CallbackContext) -> crate::error::Result<IdpServerResponse> + Send + Sync;

/// The callback that returns an OIDC access token; the default is none.
#[derive(Clone, Default)]
pub struct Callback {
    pub(crate) kind: Option<CallbackKind>,
}

#[derive(Clone)]
pub(crate) enum CallbackKind {
    Machine(Arc<MachineFn>),
    /// The human (browser) flow, which this driver refuses.
    Human,
}

impl Callback {
    /// A machine (workload) callback: called, inline, when the driver needs
    /// a token (the first authentication, or after the server rejected the
    /// cached one), never more often than every 100 ms.
    pub fn machine(
        callback: impl Fn(CallbackContext) -> crate::error::Result<IdpServerResponse>
            + Send
            + Sync
            + 'static,
    ) -> Callback {
        Callback {
            kind: Some(CallbackKind::Machine(Arc::new(callback))),
        }
    }

    /// The human (browser) flow's callback. This driver does not run that
    /// flow: a client given one refuses to start, saying so.
    pub fn human(
        _callback: impl Fn(CallbackContext) -> crate::error::Result<IdpServerResponse>
            + Send
            + Sync
            + 'static,
    ) -> Callback {
        Callback {
            kind: Some(CallbackKind::Human),
        }
    }

    /// Whether a callback was given.
    pub fn is_set(&self) -> bool {
        self.kind.is_some()
    }
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            None => f.write_str("Callback(None)"),
            Some(CallbackKind::Machine(_)) => f.write_str("Callback(machine)"),
            Some(CallbackKind::Human) => f.write_str("Callback(human)"),
        }
    }
}

impl PartialEq for Callback {
    fn eq(&self, other: &Self) -> bool {
        match (&self.kind, &other.kind) {
            (None, None) | (Some(CallbackKind::Human), Some(CallbackKind::Human)) => true,
            (Some(CallbackKind::Machine(a)), Some(CallbackKind::Machine(b))) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Where the identity provider is and how to ask it (the server's
/// `IdpInfo`). The server sends it in the human (browser) flow only, which
/// this driver does not run, so a machine callback never receives one; the
/// type is here so that code written for the official driver compiles.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, typed_builder::TypedBuilder)]
#[serde(rename_all = "camelCase")]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct IdpServerInfo {
    /// The identity provider's address.
    pub issuer: String,
    /// The client id the application presents to the identity provider.
    pub client_id: Option<String>,
    /// The scopes the application asks for.
    pub request_scopes: Option<Vec<String>>,
}

/// What the driver tells the callback.
#[derive(Clone, Debug, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct CallbackContext {
    /// When the callback must have returned: the operation's deadline, or
    /// a minute from the call without one (the auth spec's default).
    pub timeout: Option<Instant>,
    /// The callback API's version: 1.
    pub version: u32,
    /// The credential's user name, if any.
    pub username: Option<String>,
    /// A refresh token from an earlier response: the human flow's, so
    /// always `None` here (a machine callback is simply called again).
    pub refresh_token: Option<String>,
    /// The identity provider's details: the human flow's, so always `None`
    /// here.
    pub idp_info: Option<IdpServerInfo>,
}

impl CallbackContext {
    pub(crate) fn new(timeout: Option<Instant>, username: Option<String>) -> CallbackContext {
        CallbackContext {
            timeout,
            version: 1,
            username,
            refresh_token: None,
            idp_info: None,
        }
    }
}

/// What the callback returns.
///
/// ```
/// use mongo_inline::options::oidc::IdpServerResponse;
/// let response = IdpServerResponse::builder().access_token("eyJ...").build();
/// assert!(response.expires.is_none());
/// ```
#[derive(Clone, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct IdpServerResponse {
    /// The access token (a JWT), sent to the server as is.
    #[builder(!default)]
    pub access_token: String,
    /// When the token expires, if known (not used for caching: the auth
    /// spec caches a token until the server refuses it).
    pub expires: Option<Instant>,
    /// A refresh token (the human flow's; ignored).
    pub refresh_token: Option<String>,
}

impl IdpServerResponse {
    /// A response carrying `access_token` (the same as
    /// `IdpServerResponse::builder().access_token(..).build()`).
    pub fn new(access_token: impl Into<String>) -> IdpServerResponse {
        IdpServerResponse::builder()
            .access_token(access_token)
            .build()
    }
}

impl std::fmt::Debug for IdpServerResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdpServerResponse")
            .field("access_token", &"<redacted>")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}
