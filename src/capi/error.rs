//! The error a C caller receives: `mi_error`, with its domain, code, labels
//! and message, allocated here and released by `mi_error_free`.

use std::ffi::{c_char, CString};
use std::ptr;

/// What kind of failure an `mi_error` reports (`mi_error_domain` in C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Domain {
    /// A bad argument: NULL, invalid UTF-8 or BSON, an unknown option, a bad URI,
    /// an unusable TLS file or option.
    Argument = 1,
    /// A socket failed or could not be opened; a `mongodb+srv` look-up failed.
    Network = 2,
    /// The server answered `ok: 0`; `code` is its error code.
    Command = 3,
    /// A write statement failed or its write concern was not met; `code` is the server's.
    Write = 4,
    /// No suitable server was found in time.
    ServerSelection = 5,
    /// The operation's `timeoutMS` passed.
    Timeout = 6,
    /// The server's reply broke the protocol.
    Protocol = 7,
    /// Authentication failed.
    Authentication = 8,
    /// A TLS handshake failed.
    Tls = 9,
    /// The server's wire versions do not overlap the driver's.
    IncompatibleServer = 10,
    /// The client, a session or a transaction was used in a way its state
    /// does not allow (also: a shut-down client, sessions unsupported).
    Client = 11,
    /// A bug in the library (a caught panic, or a rule of its own broken);
    /// the message says where.
    Internal = 12,
}

impl Domain {
    /// The domain of an `mi_error_domain` value; `Client` for one this
    /// library does not define.
    pub(crate) fn from_raw(value: i32) -> Domain {
        use Domain::*;
        [
            Argument,
            Network,
            Command,
            Write,
            ServerSelection,
            Timeout,
            Protocol,
            Authentication,
            Tls,
            IncompatibleServer,
            Client,
            Internal,
        ]
        .into_iter()
        .find(|d| *d as i32 == value)
        .unwrap_or(Client)
    }
}

/// A failure on its way to C.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub(crate) domain: Domain,
    pub(crate) code: i32,
    pub(crate) message: String,
    pub(crate) labels: Vec<String>,
    /// What else the error knows, as BSON (a client bulk write's write
    /// errors, write concern errors and partial result).
    pub(crate) details: Option<Box<bson::Document>>,
}

impl Failure {
    /// A failure without code or labels.
    pub(crate) fn new(domain: Domain, message: impl Into<String>) -> Self {
        Failure {
            domain,
            code: 0,
            message: message.into(),
            labels: Vec::new(),
            details: None,
        }
    }

    /// A bad argument named `name`.
    pub(crate) fn argument(name: &str, problem: &str) -> Self {
        Failure::new(Domain::Argument, format!("argument `{name}` {problem}"))
    }

    /// A panic caught at the boundary.
    pub(crate) fn from_panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Failure::new(Domain::Internal, format!("internal error (panic): {what}"))
    }

    /// Moves the failure to the heap in its C layout; `mi_error_free`
    /// releases it.
    pub(crate) fn into_raw(self) -> *mut MiError {
        let labels: Box<[*mut c_char]> = self.labels.into_iter().map(c_string).collect();
        let label_count = labels.len();
        let labels = if label_count == 0 {
            ptr::null_mut()
        } else {
            Box::into_raw(labels).cast::<*mut c_char>()
        };
        // A document of strings and numbers the driver built always encodes;
        // one that did not would only lose the details, not the error.
        let details = self
            .details
            .and_then(|d| bson::to_vec(&*d).ok())
            .map(Vec::into_boxed_slice);
        let details_len = details.as_ref().map_or(0, |d| d.len());
        let details = details.map_or(ptr::null_mut(), |d| Box::into_raw(d).cast::<u8>());
        Box::into_raw(Box::new(MiError {
            domain: self.domain as i32,
            code: self.code,
            message: c_string(self.message),
            labels,
            label_count,
            details,
            details_len,
        }))
    }
}

/// A string for C: interior NULs (never expected in messages) become `?`
/// rather than truncating or failing.
pub(crate) fn c_string(s: String) -> *mut c_char {
    let s = if s.contains('\0') {
        s.replace('\0', "?")
    } else {
        s
    };
    CString::new(s).expect("NULs were replaced").into_raw()
}

/// `mi_error`: owned by the caller once returned, freed by `mi_error_free`.
#[repr(C)]
#[derive(Debug)]
pub struct MiError {
    /// An `mi_error_domain` value.
    pub domain: i32,
    /// The server's error code (or a write error's), 0 when there is none.
    pub code: i32,
    /// What went wrong, NUL-terminated UTF-8.
    pub message: *mut c_char,
    /// `label_count` error labels (`RetryableWriteError`, ...), or NULL.
    pub labels: *mut *mut c_char,
    /// How many labels.
    pub label_count: usize,
    /// A BSON document of what else the error knows, or NULL: for a
    /// client bulk write, `{writeErrors: {"i": {code, message, details?}},
    /// writeConcernErrors: [...], partialResult?}`.
    pub details: *mut u8,
    /// The details' length in bytes.
    pub details_len: usize,
}
