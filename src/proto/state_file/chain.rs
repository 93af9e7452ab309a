//! Certificate chains that passed full verification, remembered so that a
//! new process presented exactly the same chain skips building and
//! checking it again (rustls cannot write a TLS 1.3 session ticket out of
//! the process, so resumption cannot do this for us).
//!
//! An entry names the server (the name the handshake was for), the trust
//! it was verified under (a hash of the trust anchors), the chain (a hash
//! of its certificates, in order) and the time it stops vouching: the
//! leaf's notAfter or [`CHAIN_MAX_AGE_SECS`] after the verification,
//! whichever comes first. The shell's verifier
//! (`shell::tls::remembered`) still checks every handshake's signature
//! against the leaf's key, so the server still proves it holds that key;
//! what is skipped is only the chain's path to a trust anchor, its
//! signatures, validity periods and name check, which gave the same answer
//! for the same bytes under the same trust.

use ring::digest;

use super::{DecodeError, Reader};

/// How long a verified chain vouches for itself at most, however far its
/// leaf's notAfter lies: a day, after which the chain is verified again
/// (and the remembered answer renewed).
pub const CHAIN_MAX_AGE_SECS: u64 = 24 * 60 * 60;

/// The longest server name kept (DNS names are at most 253 bytes).
const MAX_SERVER_NAME_BYTES: usize = 255;

/// A chain that passed full verification for a server name under a trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedChain {
    /// The name the handshake verified the chain for (a DNS name or an IP
    /// address, as rustls' `ServerName` writes it).
    pub server_name: String,
    /// The hash of the trust anchors it was verified under.
    pub trust: [u8; 32],
    /// The hash of the chain's certificates ([`VerifiedChain::digest`]).
    pub chain: [u8; 32],
    /// Unix seconds after which it vouches for nothing.
    pub valid_until: u64,
}

impl VerifiedChain {
    /// The hash of a chain as a server presents it: the leaf, then the
    /// intermediates in order, each length-prefixed so that no two chains
    /// hash alike by moving bytes between certificates.
    pub fn digest<'a>(
        end_entity: &'a [u8],
        intermediates: impl IntoIterator<Item = &'a [u8]>,
    ) -> [u8; 32] {
        let mut context = digest::Context::new(&digest::SHA256);
        for certificate in std::iter::once(end_entity).chain(intermediates) {
            context.update(&(certificate.len() as u64).to_le_bytes());
            context.update(certificate);
        }
        let mut hash = [0u8; 32];
        hash.copy_from_slice(context.finish().as_ref());
        hash
    }

    /// Whether this entry vouches for `chain` presented by `server_name`
    /// under `trust` at `now` (unix seconds).
    pub fn vouches_for(
        &self,
        server_name: &str,
        trust: &[u8; 32],
        chain: &[u8; 32],
        now: u64,
    ) -> bool {
        now <= self.valid_until
            && &self.chain == chain
            && &self.trust == trust
            && self.server_name == server_name
    }

    /// Whether this newer entry takes `old`'s place (same server, same
    /// trust: one chain per server is enough).
    pub fn replaces(&self, old: &VerifiedChain) -> bool {
        self.server_name == old.server_name && self.trust == old.trust
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.server_name.len());
        let name =
            &self.server_name.as_bytes()[..self.server_name.len().min(MAX_SERVER_NAME_BYTES)];
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&self.trust);
        out.extend_from_slice(&self.chain);
        out.extend_from_slice(&self.valid_until.to_le_bytes());
        out
    }

    pub(super) fn decode(body: &[u8]) -> Result<VerifiedChain, DecodeError> {
        let mut reader = Reader(body);
        let name_len = usize::from(reader.u8()?);
        if name_len == 0 {
            return Err(DecodeError("a chain entry has no server name"));
        }
        let server_name = std::str::from_utf8(reader.take(name_len)?)
            .map_err(|_| DecodeError("a chain entry's server name is not UTF-8"))?
            .to_owned();
        let mut trust = [0u8; 32];
        trust.copy_from_slice(reader.take(32)?);
        let mut chain = [0u8; 32];
        chain.copy_from_slice(reader.take(32)?);
        let valid_until = reader.u64()?;
        if !reader.0.is_empty() {
            return Err(DecodeError("a chain entry has bytes after its end"));
        }
        Ok(VerifiedChain {
            server_name,
            trust,
            chain,
            valid_until,
        })
    }
}

/// The notAfter of a DER certificate, in unix seconds; none when the
/// bytes are not a certificate this reader understands (the caller then
/// remembers nothing).
pub fn certificate_not_after(der: &[u8]) -> Option<u64> {
    let (certificate, _) = element(der, SEQUENCE)?;
    let (tbs, _) = element(certificate, SEQUENCE)?;
    // [0] EXPLICIT version, when present, then the serial number.
    let rest = match element(tbs, VERSION_TAG) {
        Some((_, rest)) => rest,
        None => tbs,
    };
    let (_, rest) = element(rest, INTEGER)?;
    let (_, rest) = element(rest, SEQUENCE)?; // signature algorithm
    let (_, rest) = element(rest, SEQUENCE)?; // issuer
    let (validity, _) = element(rest, SEQUENCE)?;
    let (_, _not_before, rest) = any_element(validity)?;
    let (tag, not_after, _) = any_element(rest)?;
    der_time(tag, not_after)
}

const INTEGER: u8 = 0x02;
const SEQUENCE: u8 = 0x30;
const VERSION_TAG: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The contents of the element at the front of `input` when its tag is
/// `tag`, and what follows it.
fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, contents, rest) = any_element(input)?;
    (found == tag).then_some((contents, rest))
}

/// The tag, contents and the rest of the element at the front of `input`
/// (definite lengths up to four bytes; anything else is none).
fn any_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, mut input) = input.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let bytes = usize::from(first & 0x7f);
        if bytes == 0 || bytes > 4 || input.len() < bytes {
            return None;
        }
        let (len_bytes, rest) = input.split_at(bytes);
        input = rest;
        len_bytes
            .iter()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b))
    };
    if input.len() < len {
        return None;
    }
    let (contents, rest) = input.split_at(len);
    Some((tag, contents, rest))
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`), as RFC 5280 requires them, in unix seconds.
fn der_time(tag: u8, text: &[u8]) -> Option<u64> {
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&text[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&text[..4])?, &text[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let [month, day, hour, minute, second] = [0, 2, 4, 6, 8].map(|at| digits(&rest[at..at + 2]));
    let (month, day) = (month?, day?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (hour, minute, second) = (hour?, minute?, second?);
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn digits(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |n, b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`); none before 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let year = if month <= 2 {
        year.checked_sub(1)?
    } else {
        year
    };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era).checked_sub(719_468)
}
