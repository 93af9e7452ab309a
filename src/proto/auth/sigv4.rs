//! AWS Signature Version 4, as much of it as MONGODB-AWS signs: a request
//! with path `/`, no query string and one value per header. Pure: the date
//! and the credentials are passed in. Tested against AWS's published test
//! suite (`fixtures/sigv4/vectors.json`, its source named there).
//!
//! ```text
//! canonical request ──sha256──> string to sign ──HMAC(signing key)──> signature
//! signing key = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), service), "aws4_request")
//! ```
//!
//! No crate fits: `aws-sigv4` pulls in the AWS SDK's runtime types (and
//! `http`), while the algorithm is three hashes and four HMACs over `ring`,
//! which is already the TLS crypto provider.

use ring::{digest, hmac};

/// What is signed: the method, the path, the headers (name, value) and the
/// body.
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The absolute path, already in canonical form (`/` for MONGODB-AWS).
    pub path: &'a str,
    /// Every header to sign, `Host` and `X-Amz-Date` included.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

/// Where and as whom a request is signed.
pub struct Scope<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// The secret access key.
    pub secret_access_key: &'a str,
    /// The region (`us-east-1`).
    pub region: &'a str,
    /// The service (`sts`).
    pub service: &'a str,
    /// `X-Amz-Date`: `YYYYMMDD'T'HHMMSS'Z'`.
    pub amz_date: &'a str,
}

/// A signed request's intermediate steps (compared with the test suite's
/// files one by one) and its `Authorization` header.
#[derive(Debug, PartialEq, Eq)]
pub struct Signature {
    /// The `.creq` step.
    pub canonical_request: String,
    /// The `.sts` step.
    pub string_to_sign: String,
    /// The `.authz` step: the `Authorization` header's value.
    pub authorization: String,
}

/// Signs `request` for `scope`.
pub fn sign(request: &Request<'_>, scope: &Scope<'_>) -> Signature {
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), collapse_spaces(value)))
        .collect();
    headers.sort();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let canonical_request = format!(
        "{}\n{}\n\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        request.path,
        hex(digest::digest(&digest::SHA256, request.body).as_ref())
    );
    let date = scope.amz_date.get(..8).unwrap_or(scope.amz_date);
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{credential_scope}\n{}",
        scope.amz_date,
        hex(digest::digest(&digest::SHA256, canonical_request.as_bytes()).as_ref())
    );
    let mut key = format!("AWS4{}", scope.secret_access_key).into_bytes();
    for part in [date, scope.region, scope.service, "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    let signature = hex(&hmac_sha256(&key, string_to_sign.as_bytes()));
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{credential_scope}, SignedHeaders={signed_headers}, \
         Signature={signature}",
        scope.access_key_id
    );
    Signature {
        canonical_request,
        string_to_sign,
        authorization,
    }
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// A header value trimmed, its runs of spaces made one (SigV4's rule).
fn collapse_spaces(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `X-Amz-Date` for a time in seconds since the Unix epoch (UTC).
pub fn amz_date(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let seconds = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The calendar date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Seconds since the Unix epoch of an ISO 8601 UTC time as AWS writes it
/// (`2019-11-07T00:26:07Z`, fractions of a second ignored), or `None`.
pub fn parse_iso8601(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<u64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 || !text.ends_with('Z') {
        return None;
    }
    // days_from_civil, the inverse of civil_from_days.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's test suite: each case's canonical request, string to sign and
    /// `Authorization` header, compared step by step.
    #[test]
    fn aws_signature_v4_test_suite() {
        let text = include_str!("../../../fixtures/sigv4/vectors.json");
        let suite: serde_json::Value = serde_json::from_str(text).unwrap();
        let config = &suite["config"];
        let tests = suite["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 7);
        for case in tests {
            let name = case["name"].as_str().unwrap();
            let headers: Vec<(&str, &str)> = case["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap(), h[1].as_str().unwrap()))
                .collect();
            let request = Request {
                method: case["method"].as_str().unwrap(),
                path: case["path"].as_str().unwrap(),
                headers: &headers,
                body: case["body"].as_str().unwrap().as_bytes(),
            };
            let scope = Scope {
                access_key_id: config["accessKeyId"].as_str().unwrap(),
                secret_access_key: config["secretAccessKey"].as_str().unwrap(),
                region: config["region"].as_str().unwrap(),
                service: config["service"].as_str().unwrap(),
                amz_date: "20150830T123600Z",
            };
            let signed = sign(&request, &scope);
            assert_eq!(
                signed.canonical_request,
                case["creq"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(
                signed.string_to_sign,
                case["sts"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(
                signed.authorization,
                case["authz"].as_str().unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(amz_date(0), "19700101T000000Z");
        // The suite's date, and a leap day.
        let t = parse_iso8601("2015-08-30T12:36:00Z").unwrap();
        assert_eq!(amz_date(t), "20150830T123600Z");
        let leap = parse_iso8601("2024-02-29T23:59:59Z").unwrap();
        assert_eq!(amz_date(leap), "20240229T235959Z");
        assert_eq!(parse_iso8601("2024-02-29T23:59:59.123Z"), Some(leap));
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2024-02-29 23:59:59Z",
            "yesterday",
            "2024-02-29T23:59:59",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
