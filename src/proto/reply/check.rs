//! Reading a reply's `ok` field: a server-side failure becomes an [`Error`].
//! Pure, so the SDAM rules make the same command error of a hello's
//! `ok: 0` as the shell makes of any command's.

use std::time::Duration;

use bson::Document;

use crate::error::{CommandError, Error, Result};
use crate::proto::address::ServerAddress;

/// Turns a reply with `ok: 0` into an [`Error`] carrying the server's code,
/// message, labels and topologyVersion; passes `ok: 1` replies through.
pub fn check_reply(reply: Document, address: &ServerAddress) -> Result<Document> {
    if crate::proto::reply::is_ok(&reply) {
        return Ok(reply);
    }
    let code = match reply.get("code") {
        Some(bson::Bson::Int32(c)) => *c,
        Some(bson::Bson::Int64(c)) => *c as i32,
        Some(bson::Bson::Double(c)) => *c as i32,
        _ => 0,
    };
    let labels: Vec<String> = reply
        .get_array("errorLabels")
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    // A reply that was decoded re-encodes; were it not to, the error
    // would only lack `server_response`.
    let raw = bson::RawDocumentBuf::from_document(&reply).ok();
    let error = CommandError {
        code,
        code_name: reply.get_str("codeName").unwrap_or_default().to_string(),
        message: reply
            .get_str("errmsg")
            .unwrap_or("the server gave no message")
            .to_string(),
        topology_version: reply.get_document("topologyVersion").ok().cloned(),
        address: Some(address.clone()),
        base_backoff: base_backoff(&reply),
        // Last: the fields above are read from it first.
        raw_response: Some(reply),
    };
    let mut error = Error::from(error).with_labels(labels);
    if let Some(raw) = raw {
        error = error.with_server_response(raw);
    }
    Err(error)
}

/// The reply's `baseBackoffMS` (a number of milliseconds, sent with
/// overload errors); a negative or non-numeric value is ignored, a fraction
/// kept (the retry policy follows any positive value), a huge one saturated
/// (the policy caps the backoff).
fn base_backoff(reply: &Document) -> Option<Duration> {
    match reply.get("baseBackoffMS")? {
        bson::Bson::Int32(n) => u64::try_from(*n).ok().map(Duration::from_millis),
        bson::Bson::Int64(n) => u64::try_from(*n).ok().map(Duration::from_millis),
        bson::Bson::Double(n) if n.is_finite() && *n >= 0.0 => {
            Some(Duration::try_from_secs_f64(n / 1000.0).unwrap_or(Duration::MAX))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(value: impl Into<bson::Bson>) -> Option<Duration> {
        base_backoff(&bson::doc! { "ok": 0, "baseBackoffMS": value.into() })
    }

    #[test]
    fn base_backoff_reads_every_number_type_and_refuses_the_rest() {
        assert_eq!(of(50), Some(Duration::from_millis(50)));
        assert_eq!(of(50_i64), Some(Duration::from_millis(50)));
        assert_eq!(of(0.5), Some(Duration::from_micros(500)));
        assert_eq!(of(0), Some(Duration::ZERO));
        assert_eq!(of(1e300), Some(Duration::MAX));
        assert_eq!(of(-1), None);
        assert_eq!(of(-1.0), None);
        assert_eq!(of(f64::NAN), None);
        assert_eq!(of("50"), None);
        assert_eq!(base_backoff(&bson::doc! { "ok": 0 }), None);
    }
}
