//! FNV-1a, the one content hash of the crate: snapshot fingerprints, trust pins, stored
//! findings and result-cache keys. Not cryptographic: it tells versions of our own data apart
//! and is stable across runs and builds (unlike `std`'s randomly seeded hasher). SHA-256 where
//! no one may make two inputs meet: approved files' contents, model files, store keys named
//! after callers and tokens.

/// FNV-1a, 64 bit.
#[must_use]
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a continued from `hash` (a previous result), to hash several parts without joining them.
#[must_use]
pub fn fnv1a_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SHA-256 of `bytes`, lowercase hex.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// `bytes` as lowercase hex (ids, digests).
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// `N` bytes from the system's random source (ids, keys).
#[must_use]
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source works");
    bytes
}

/// `bytes` random bytes as lowercase hex.
#[must_use]
pub fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buffer = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buffer)
        .expect("the system's random source works");
    hex(&buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_test_vectors_and_continues_across_parts() {
        // A changed algorithm would orphan every snapshot and pin on disk.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_from(fnv1a(b"foo"), b"bar"), fnv1a(b"foobar"));
    }
}
