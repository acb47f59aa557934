//! `discovery.store`: the shared store of replicas, as written in the config (off unless `url`
//! is set). `crate::store` connects to it and keeps what replicas share there.

use serde::{Deserialize, Serialize};

/// The key prefix when the config names none.
pub const DEFAULT_PREFIX: &str = "anygpt";

/// `discovery.store`: a Redis-protocol server (Redis, Valkey) that replicas of one gateway
/// share: catalog snapshots, semantic vectors, trust pins, sign-in state, per-user downstream
/// tokens, rate-limit buckets. Without it everything stays in this process and its cache
/// folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct StoreSpec {
    /// `redis://[user:password@]host[:port][/db]` or `rediss://…` (TLS). Usually a reference
    /// (`${ANYGPT_STORE_URL}`) so the password stays out of the file; kept out of every log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The key that seals tokens at rest in the store (AES-256-GCM): 32 bytes, base64
    /// (`openssl rand -base64 32`), usually `${ANYGPT_STORE_KEY}` from a Kubernetes Secret. Every
    /// replica needs the same one. Without it nothing secret is written to the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Prefix of every key and channel (default `anygpt`): gateways of different teams can
    /// share one server under different prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl StoreSpec {
    /// Whether a store is configured.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.url.is_some()
    }

    #[must_use]
    pub fn prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
    }

    /// Checks serde cannot express, each as `(path, reason)`. References (`${…}`) are checked
    /// for syntax here and expanded when the store is opened.
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        const AT: &str = "discovery.store";
        if let Some(url) = &self.url {
            let path = format!("{AT}.url");
            super::expand::check(url).map_err(|e| (path.clone(), e.to_string()))?;
            if !url.contains("${") {
                check_url(url).map_err(|reason| (path, reason.to_string()))?;
            }
        }
        if let Some(key) = &self.key {
            let path = format!("{AT}.key");
            super::expand::check(key).map_err(|e| (path.clone(), e.to_string()))?;
            if self.url.is_none() {
                return Err((
                    path,
                    "is set but `url` is not: name the store the key is for".to_owned(),
                ));
            }
        }
        if let Some(prefix) = &self.prefix {
            let fine = !prefix.is_empty()
                && prefix.len() <= 64
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !fine {
                return Err((
                    format!("{AT}.prefix"),
                    "must be 1 to 64 letters, digits, `-`, `_` or `.`".to_owned(),
                ));
            }
        }
        Ok(())
    }
}

/// Why a store URL is not one.
#[derive(Debug, thiserror::Error)]
pub enum BadStoreUrl {
    #[error("not a URL ({0}): write `redis://host:6379` (or `rediss://` for TLS)")]
    NotAUrl(#[source] url::ParseError),
    #[error("names no host: write `redis://host:6379`")]
    NoHost,
    #[error("scheme `{0}` is not a store: write `redis://host:6379` (or `rediss://` for TLS)")]
    Scheme(String),
}

/// `url` parsed, if it names a Redis-protocol server.
pub fn check_url(url: &str) -> Result<reqwest::Url, BadStoreUrl> {
    let parsed = reqwest::Url::parse(url).map_err(BadStoreUrl::NotAUrl)?;
    match parsed.scheme() {
        "redis" | "rediss" | "valkey" | "valkeys" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(parsed),
        "redis" | "rediss" | "valkey" | "valkeys" => Err(BadStoreUrl::NoHost),
        other => Err(BadStoreUrl::Scheme(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> StoreSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn off_unless_a_url_is_set() {
        assert!(!StoreSpec::default().is_on());
        let on = spec(serde_json::json!({ "url": "redis://127.0.0.1:6379" }));
        assert!(on.is_on());
        assert_eq!(on.prefix(), "anygpt");
        on.check().unwrap();
        spec(serde_json::json!({ "url": "${ANYGPT_STORE_URL}", "key": "${ANYGPT_STORE_KEY}" }))
            .check()
            .unwrap();
    }

    #[test]
    fn bad_settings_name_their_place_and_fix() {
        let (path, reason) = spec(serde_json::json!({ "url": "http://cache:6379" }))
            .check()
            .unwrap_err();
        assert_eq!(path, "discovery.store.url");
        assert!(reason.contains("redis://"), "{reason}");
        let (path, _) = spec(serde_json::json!({ "url": "redis://" })).check().unwrap_err();
        assert_eq!(path, "discovery.store.url");
        let (path, reason) = spec(serde_json::json!({ "key": "abc" })).check().unwrap_err();
        assert_eq!(path, "discovery.store.key");
        assert!(reason.contains("url"), "{reason}");
        let (path, _) = spec(serde_json::json!({ "url": "redis://a", "prefix": "a b" }))
            .check()
            .unwrap_err();
        assert_eq!(path, "discovery.store.prefix");
        assert!(serde_json::from_value::<StoreSpec>(serde_json::json!({ "uri": "redis://a" })).is_err());
    }
}
