//! Sealing values at rest: AES-256-GCM (ring) with a random 96-bit nonce per value, and the
//! value's store key as associated data, so a sealed token copied under another key (another
//! user's, another server's) does not open.
//!
//! Layout: `AG1` · nonce (12 bytes) · ciphertext with its 16-byte tag.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

const MAGIC: &[u8] = b"AG1";

/// Why a store key could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("is not base64 (write 32 random bytes in base64: `openssl rand -base64 32`)")]
    NotBase64,
    #[error("is {0} bytes once decoded; AES-256-GCM needs exactly 32 (`openssl rand -base64 32`)")]
    Length(usize),
}

/// The key every replica seals and opens with.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer([REDACTED])")
    }
}

impl Sealer {
    /// The sealer of a base64 (standard or URL alphabet, padded or not) 32-byte key.
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        let bytes = decode_base64(text.trim()).ok_or(KeyError::NotBase64)?;
        Self::from_bytes(&bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| KeyError::Length(bytes.len()))?;
        Ok(Self {
            key: LessSafeKey::new(unbound),
            random: SystemRandom::new(),
        })
    }

    /// `plain` sealed for the store key `place`.
    #[must_use]
    pub fn seal(&self, place: &str, plain: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source answers");
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(place.as_bytes()),
                &mut sealed,
            )
            .expect("AES-GCM seals any value shorter than 64 GiB");
        let mut out = Vec::with_capacity(MAGIC.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// What `sealed` holds, if it was sealed with this key for `place` and not changed since.
    #[must_use]
    pub fn open(&self, place: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        let rest = sealed.strip_prefix(MAGIC)?;
        if rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, cipher) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buffer = cipher.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(place.as_bytes()), &mut buffer)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// Base64 of either alphabet, padding optional.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0u32;
    for byte in text.bytes().filter(|&b| b != b'=') {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((buffer >> bits) & 0xff).expect("masked to a byte"));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // "0123456789abcdef" twice

    #[test]
    fn a_sealed_value_opens_only_at_its_place_with_its_key() {
        let key = Sealer::from_base64(KEY).unwrap();
        let sealed = key.seal("anygpt:token:alice", b"secret-token");
        assert!(
            !sealed.windows(6).any(|w| w == b"secret"),
            "the token is not readable in the store"
        );
        assert_eq!(key.open("anygpt:token:alice", &sealed).unwrap(), b"secret-token");
        assert!(key.open("anygpt:token:bob", &sealed).is_none(), "moved to another key");
        let mut flipped = sealed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(key.open("anygpt:token:alice", &flipped).is_none(), "tampered with");
        let other = Sealer::from_bytes(&[7u8; 32]).unwrap();
        assert!(other.open("anygpt:token:alice", &sealed).is_none(), "another key");
        assert_ne!(
            sealed,
            key.seal("anygpt:token:alice", b"secret-token"),
            "a fresh nonce each time"
        );
    }

    #[test]
    fn keys_of_the_wrong_shape_are_refused_with_the_fix() {
        assert_eq!(Sealer::from_base64("not base64!").unwrap_err(), KeyError::NotBase64);
        let short = Sealer::from_base64("c2hvcnQ=").unwrap_err();
        assert_eq!(short, KeyError::Length(5));
        assert!(short.to_string().contains("openssl rand -base64 32"));
        // The URL alphabet without padding is the same key.
        assert!(Sealer::from_base64(KEY.trim_end_matches('=')).is_ok());
    }
}
