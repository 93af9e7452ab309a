//! The shell's one source of randomness: generators seeded from the
//! operating system here and nowhere else, then passed to whoever draws
//! (the monitor's choice among servers, session ids, retry jitter), and
//! seeds a forked child does not share with its parent or its siblings. Clippy's `disallowed-methods` (see `clippy.toml`) keeps
//! other modules from seeding their own.
// The one place allowed to seed from the system.
#![allow(clippy::disallowed_methods)]

/// A generator seeded from the operating system's randomness (through
/// fastrand's thread-local generator, which std's hasher keys seed).
/// Called once per client; its parts fork their generators from it.
pub(crate) fn from_os() -> fastrand::Rng {
    fastrand::Rng::new()
}

/// A seed for a random generator that differs between a parent and each of
/// its forked children, even though their generators' states are copies:
/// the process id and the wall clock are mixed into a draw from `fastrand`'s
/// (copied) thread-local generator.
pub(crate) fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let pid = u64::from(std::process::id());
    mix(fastrand::u64(..) ^ mix(pid) ^ mix(nanos.rotate_left(32)))
}

/// Fresh randomness for one authentication conversation: 32 bytes from
/// the operating system's cryptographic source (not fastrand: a nonce must
/// not be predictable). SCRAM sends 24 of them base64 encoded, MONGODB-AWS
/// all 32.
pub(crate) fn client_nonce() -> crate::error::Result<crate::proto::auth::ClientNonce> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| crate::error::Error::client("the operating system's random source failed"))?;
    Ok(crate::proto::auth::ClientNonce::new(bytes))
}

/// SplitMix64's finaliser: spreads every input bit over the whole output.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixing_separates_neighbouring_inputs() {
        assert_ne!(mix(1), mix(2));
        assert_ne!(mix(1) >> 32, mix(2) >> 32);
    }

    #[test]
    fn nonces_are_fresh() {
        let a = client_nonce().unwrap();
        assert_ne!(a.bytes(), client_nonce().unwrap().bytes());
    }
}
