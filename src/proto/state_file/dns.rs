//! DNS answers a new process may reuse until their TTL: the SRV and TXT
//! records of a `mongodb+srv` name, and the addresses of member host names.
//! Each is bound to the client's binding (which holds the SRV name or the
//! seed list), so another connection string never reads them; a torn or
//! hostile entry is refused by the decoder like any other. What a forged
//! answer can do is what a forged DNS answer can: send the client to
//! another address, where TLS (when on) still verifies the server's name,
//! and authentication its keys.

use std::net::IpAddr;

use super::{DecodeError, Reader};
use crate::proto::srv::SrvTarget;

/// The longest a remembered answer is trusted, whatever its TTL: an hour
/// (a resolver's `/etc/hosts` answers carry a TTL of a day).
pub const DNS_MAX_TTL_SECS: u64 = 60 * 60;

/// At most this many SRV targets, TXT records and addresses per entry.
const MAX_ITEMS: usize = 64;
/// The largest entry body kept (the format's lengths are 16 bits).
const MAX_BODY_BYTES: usize = 16 * 1024;

/// The SRV and TXT answers of a `mongodb+srv` name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvAnswer {
    /// The SRV targets, each with the TTL it had when looked up.
    pub targets: Vec<SrvTarget>,
    /// The TXT records, each as its list of strings.
    pub txt_records: Vec<Vec<Vec<u8>>>,
    /// Unix seconds after which the answer is stale.
    pub expires: u64,
}

/// The addresses a member's host name resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAddresses {
    /// The host name as the seed list or a hello wrote it.
    pub host: String,
    /// Its addresses, in the resolver's order.
    pub ips: Vec<IpAddr>,
    /// Unix seconds after which the answer is stale.
    pub expires: u64,
}

/// When an answer looked up at `now` with `ttl` seconds stops being
/// trusted; none when it should not be remembered at all (a TTL of zero).
pub fn expiry(now: u64, ttl: u32) -> Option<u64> {
    (ttl > 0).then(|| now + u64::from(ttl).min(DNS_MAX_TTL_SECS))
}

impl SrvAnswer {
    /// The answer with each target's TTL cut to what is left of it at
    /// `now` (so that SRV polling comes when it would have); none when
    /// stale.
    pub fn fresh_at(&self, now: u64) -> Option<SrvAnswer> {
        let left = self.expires.checked_sub(now).filter(|&left| left > 0)?;
        let left = u32::try_from(left).unwrap_or(u32::MAX);
        let mut answer = self.clone();
        for target in &mut answer.targets {
            target.ttl = target.ttl.min(left);
        }
        Some(answer)
    }

    pub(super) fn encode(&self) -> Option<Vec<u8>> {
        if self.targets.len() > MAX_ITEMS || self.txt_records.len() > MAX_ITEMS {
            return None;
        }
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.expires.to_le_bytes());
        out.push(self.targets.len() as u8);
        for target in &self.targets {
            short_bytes(&mut out, target.host.as_bytes())?;
            out.extend_from_slice(&target.port.to_le_bytes());
            out.extend_from_slice(&target.ttl.to_le_bytes());
        }
        out.push(self.txt_records.len() as u8);
        for record in &self.txt_records {
            if record.len() > MAX_ITEMS {
                return None;
            }
            out.push(record.len() as u8);
            for text in record {
                short_bytes(&mut out, text)?;
            }
        }
        (out.len() <= MAX_BODY_BYTES).then_some(out)
    }

    pub(super) fn decode(body: &[u8]) -> Result<SrvAnswer, DecodeError> {
        let mut reader = Reader(body);
        let expires = reader.u64()?;
        let count = bounded(reader.u8()?)?;
        let mut targets = Vec::with_capacity(count);
        for _ in 0..count {
            let host = text(reader.short_bytes()?)?;
            let port = reader.u16()?;
            let ttl = reader.u32()?;
            targets.push(SrvTarget { host, port, ttl });
        }
        let count = bounded(reader.u8()?)?;
        let mut txt_records = Vec::with_capacity(count);
        for _ in 0..count {
            let strings = bounded(reader.u8()?)?;
            let mut record = Vec::with_capacity(strings);
            for _ in 0..strings {
                record.push(reader.short_bytes()?.to_vec());
            }
            txt_records.push(record);
        }
        finished(&reader)?;
        Ok(SrvAnswer {
            targets,
            txt_records,
            expires,
        })
    }
}

impl HostAddresses {
    /// Whether the answer is still trusted at `now`.
    pub fn fresh_at(&self, now: u64) -> bool {
        now < self.expires
    }

    pub(super) fn encode(&self) -> Option<Vec<u8>> {
        if self.ips.is_empty() || self.ips.len() > MAX_ITEMS {
            return None;
        }
        let mut out = Vec::with_capacity(32 + self.host.len());
        out.extend_from_slice(&self.expires.to_le_bytes());
        short_bytes(&mut out, self.host.as_bytes())?;
        out.push(self.ips.len() as u8);
        for ip in &self.ips {
            match ip {
                IpAddr::V4(v4) => {
                    out.push(4);
                    out.extend_from_slice(&v4.octets());
                }
                IpAddr::V6(v6) => {
                    out.push(6);
                    out.extend_from_slice(&v6.octets());
                }
            }
        }
        Some(out)
    }

    pub(super) fn decode(body: &[u8]) -> Result<HostAddresses, DecodeError> {
        let mut reader = Reader(body);
        let expires = reader.u64()?;
        let host = text(reader.short_bytes()?)?;
        if host.is_empty() {
            return Err(DecodeError("an address entry has no host name"));
        }
        let count = bounded(reader.u8()?)?;
        let mut ips = Vec::with_capacity(count);
        for _ in 0..count {
            ips.push(match reader.u8()? {
                4 => {
                    let mut octets = [0u8; 4];
                    octets.copy_from_slice(reader.take(4)?);
                    IpAddr::from(octets)
                }
                6 => {
                    let mut octets = [0u8; 16];
                    octets.copy_from_slice(reader.take(16)?);
                    IpAddr::from(octets)
                }
                _ => return Err(DecodeError("an address entry has an unknown address kind")),
            });
        }
        if ips.is_empty() {
            return Err(DecodeError("an address entry has no address"));
        }
        finished(&reader)?;
        Ok(HostAddresses { host, ips, expires })
    }
}

/// A length byte and `bytes`; none when they do not fit one.
fn short_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Option<()> {
    out.push(u8::try_from(bytes.len()).ok()?);
    out.extend_from_slice(bytes);
    Some(())
}

fn bounded(count: u8) -> Result<usize, DecodeError> {
    let count = usize::from(count);
    if count > MAX_ITEMS {
        return Err(DecodeError("a DNS entry has too many items"));
    }
    Ok(count)
}

fn text(bytes: &[u8]) -> Result<String, DecodeError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| DecodeError("a DNS entry's host name is not UTF-8"))
}

fn finished(reader: &Reader<'_>) -> Result<(), DecodeError> {
    if reader.0.is_empty() {
        Ok(())
    } else {
        Err(DecodeError("a DNS entry has bytes after its end"))
    }
}
