//! The static bearer token: one user, on loopback, without an authorization server.
//!
//! The token is not kept: only an HMAC of it under a key drawn at start, and a presented
//! token is checked by `ring::hmac::verify`, which compares in constant time whatever the
//! lengths — so neither the comparison's time nor a memory dump gives the token away.

use ring::hmac;

pub(super) struct StaticToken {
    key: hmac::Key,
    tag: hmac::Tag,
}

impl StaticToken {
    /// Keep a token's check. `None` when the system's random source fails.
    pub(super) fn new(token: &str) -> Option<Self> {
        let rng = ring::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng).ok()?;
        let tag = hmac::sign(&key, token.as_bytes());
        Some(Self { key, tag })
    }

    /// Whether `presented` is the token.
    pub(super) fn matches(&self, presented: &str) -> bool {
        hmac::verify(&self.key, presented.as_bytes(), self.tag.as_ref()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::StaticToken;

    #[test]
    fn only_the_same_token_matches() {
        let token = StaticToken::new("0123456789abcdef0123456789abcdef").unwrap();
        assert!(token.matches("0123456789abcdef0123456789abcdef"));
        assert!(!token.matches("0123456789abcdef0123456789abcdeF"));
        assert!(!token.matches("0123456789abcdef"));
        assert!(!token.matches(""));
    }
}
