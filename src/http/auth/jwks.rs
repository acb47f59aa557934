//! An issuer's signing keys (its JWK Set), from a URL or a file, cached.
//!
//! Keys rotate: a token may name (`kid`) a key published after the set was read, so an
//! unknown key refreshes the set, and the set is read again when it is old — in the
//! background while its keys still verify, so no request waits on the issuer. Refreshes are
//! rate-limited per issuer — a flood of tokens naming random keys reads the set at most once
//! per [`Timing::min_refresh`] — and one refresh runs at a time. A failed refresh keeps the
//! keys already known.
//!
//! Only public signature keys are kept: symmetric (`oct`) keys, encryption keys and keys of
//! curves we do not verify are skipped when the set is read, so no token can be checked
//! against them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use tokio::time::Instant;

/// The largest JWK Set read. Real ones hold a handful of keys (a few KiB).
const MAX_JWKS_BYTES: usize = 512 * 1024;
/// The most keys kept from one set.
const MAX_KEYS: usize = 100;
/// How long a fetch of the set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the set may and must be read again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// The least time between two reads, whatever tokens arrive.
    pub min_refresh: Duration,
    /// The age at which the set is read again before it is used.
    pub max_age: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            min_refresh: Duration::from_secs(30),
            max_age: Duration::from_secs(15 * 60),
        }
    }
}

/// Where the set comes from.
#[derive(Debug, Clone)]
pub(super) enum Source {
    Url(reqwest::Url),
    File(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(url) => write!(f, "{url}"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A key of the set, with what it may verify.
#[derive(Clone)]
pub(super) struct Key {
    decoding: DecodingKey,
    family: AlgorithmFamily,
    /// The key's own `alg`, when the set names one: then only that algorithm.
    algorithm: Option<Algorithm>,
    curve: Option<EllipticCurve>,
}

impl Key {
    pub(super) fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }

    fn verifies(&self, algorithm: Algorithm) -> bool {
        let curve_fits = match (algorithm, &self.curve) {
            (Algorithm::ES256, Some(curve)) => *curve == EllipticCurve::P256,
            (Algorithm::ES384, Some(curve)) => *curve == EllipticCurve::P384,
            (Algorithm::EdDSA, Some(curve)) => *curve == EllipticCurve::Ed25519,
            (_, curve) => curve.is_none(),
        };
        self.family == algorithm.family() && self.algorithm.is_none_or(|a| a == algorithm) && curve_fits
    }
}

#[derive(Default)]
struct Keys {
    by_id: HashMap<String, Vec<Key>>,
    /// Every key, with or without an id: a token that names no key uses the only one that fits.
    all: Vec<Key>,
    read_at: Option<Instant>,
}

/// Why no key verifies a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyMiss {
    /// The token names a key the set does not hold (after a refresh, when one was allowed).
    UnknownKey,
    /// The token names no key and more than one (or no) key fits its algorithm.
    Ambiguous,
    /// The set has never been read (the issuer was unreachable at start and since).
    Unavailable,
}

/// One issuer's keys.
pub(super) struct KeySet {
    source: Source,
    client: reqwest::Client,
    timing: Timing,
    keys: RwLock<Arc<Keys>>,
    /// When the set was last read (successfully or not); held while reading, so one read runs
    /// at a time and the others wait for its keys.
    last_read: tokio::sync::Mutex<Option<Instant>>,
    /// A background refresh of an old set is under way (one at a time).
    refreshing: AtomicBool,
}

/// A set that cannot be read: where, and why (never a token, only the set's own problem).
#[derive(Debug, thiserror::Error)]
#[error("cannot read the JWK Set at {source_name}: {reason}")]
pub(super) struct ReadError {
    source_name: String,
    #[source]
    reason: Unreadable,
}

/// Why a JWK Set could not be read (the texts name no token, only the set's own problem).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unreadable {
    #[error("{}", describe(.0))]
    Request(#[source] reqwest::Error),
    #[error("answered HTTP {0}")]
    Status(reqwest::StatusCode),
    #[error("answered more than {MAX_JWKS_BYTES} bytes")]
    AnsweredTooMuch,
    #[error("{0}")]
    File(#[from] std::io::Error),
    #[error("not a regular file")]
    NotAFile,
    #[error("larger than {MAX_JWKS_BYTES} bytes")]
    FileTooLarge,
    #[error("{0}")]
    Reader(#[from] tokio::task::JoinError),
    #[error("not a JWK Set (an object with a `keys` array): {0}")]
    NotAKeySet(#[source] serde_json::Error),
}

impl KeySet {
    pub(super) fn new(source: Source, client: reqwest::Client, timing: Timing) -> Self {
        Self {
            source,
            client,
            timing,
            keys: RwLock::new(Arc::new(Keys::default())),
            last_read: tokio::sync::Mutex::new(None),
            refreshing: AtomicBool::new(false),
        }
    }

    pub(super) fn source(&self) -> &Source {
        &self.source
    }

    /// Read the set now (at start). Counts as a read for the rate limit.
    pub(super) async fn load(&self) -> Result<usize, ReadError> {
        let mut last = self.last_read.lock().await;
        *last = Some(Instant::now());
        let keys = self.read().await?;
        let count = keys.all.len();
        self.replace(keys);
        Ok(count)
    }

    /// The key that verifies a token naming `kid` and signed with `algorithm`.
    pub(super) async fn find(self: &Arc<Self>, kid: Option<&str>, algorithm: Algorithm) -> Result<Key, KeyMiss> {
        let current = self.current();
        if let Ok(key) = pick(&current, kid, algorithm) {
            let old = current.read_at.is_none_or(|at| at.elapsed() >= self.timing.max_age);
            if old {
                self.refresh_in_background();
            }
            return Ok(key);
        }
        self.refresh().await;
        let current = self.current();
        if current.read_at.is_none() {
            return Err(KeyMiss::Unavailable);
        }
        pick(&current, kid, algorithm)
    }

    fn refresh_in_background(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            this.refresh().await;
            this.refreshing.store(false, Ordering::Release);
        });
    }

    fn current(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn replace(&self, keys: Keys) {
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
    }

    /// Read the set again unless it was read less than `min_refresh` ago.
    async fn refresh(&self) {
        let mut last = self.last_read.lock().await;
        if last.is_some_and(|at| at.elapsed() < self.timing.min_refresh) {
            return;
        }
        *last = Some(Instant::now());
        match self.read().await {
            Ok(keys) => self.replace(keys),
            // The keys known stay in use; the next read is allowed after `min_refresh`.
            Err(err) => tracing::warn!("{err}; keeping the keys already known"),
        }
    }

    async fn read(&self) -> Result<Keys, ReadError> {
        let read = match &self.source {
            Source::Url(url) => self.fetch(url).await,
            Source::File(path) => read_file(path).await,
        };
        read.and_then(|bytes| parse(&bytes)).map_err(|reason| ReadError {
            source_name: self.source.to_string(),
            reason,
        })
    }

    async fn fetch(&self, url: &reqwest::Url) -> Result<Vec<u8>, Unreadable> {
        let mut response = self
            .client
            .get(url.clone())
            .header("accept", "application/jwk-set+json, application/json")
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .map_err(Unreadable::Request)?;
        let status = response.status();
        if !status.is_success() {
            return Err(Unreadable::Status(status));
        }
        if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err(Unreadable::AnsweredTooMuch);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(Unreadable::Request)? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(Unreadable::AnsweredTooMuch);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        format!("did not answer within {} s", FETCH_TIMEOUT.as_secs())
    } else if err.is_connect() {
        "cannot be reached".to_owned()
    } else {
        format!("broke off: {err}")
    }
}

async fn read_file(path: &std::path::Path) -> Result<Vec<u8>, Unreadable> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let file = std::fs::File::open(&path)?;
        if !file.metadata()?.is_file() {
            return Err(Unreadable::NotAFile);
        }
        let mut bytes = Vec::new();
        file.take(MAX_JWKS_BYTES as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(Unreadable::FileTooLarge);
        }
        Ok(bytes)
    })
    .await?
}

/// The usable keys of a JWK Set document. A key we cannot use is skipped, not an error: a set
/// often also holds encryption keys or keys for other curves.
fn parse(bytes: &[u8]) -> Result<Keys, Unreadable> {
    #[derive(serde::Deserialize)]
    struct Document {
        keys: Vec<serde_json::Value>,
    }
    let document: Document = serde_json::from_slice(bytes).map_err(Unreadable::NotAKeySet)?;
    let mut keys = Keys {
        read_at: Some(Instant::now()),
        ..Keys::default()
    };
    for value in document.keys.into_iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        let Some(key) = usable(&jwk) else {
            continue;
        };
        if let Some(id) = &jwk.common.key_id {
            keys.by_id.entry(id.clone()).or_default().push(key.clone());
        }
        keys.all.push(key);
    }
    Ok(keys)
}

fn usable(jwk: &Jwk) -> Option<Key> {
    let common = &jwk.common;
    if matches!(common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    if let Some(ops) = &common.key_operations {
        if !ops.contains(&KeyOperations::Verify) {
            return None;
        }
    }
    let algorithm = match common.key_algorithm {
        Some(alg) => Some(alg.to_string().parse::<Algorithm>().ok()?),
        None => None,
    };
    let (family, curve) = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => (AlgorithmFamily::Rsa, None),
        AlgorithmParameters::EllipticCurve(params)
            if matches!(params.curve, EllipticCurve::P256 | EllipticCurve::P384) =>
        {
            (AlgorithmFamily::Ec, Some(params.curve.clone()))
        }
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
            (AlgorithmFamily::Ed, Some(EllipticCurve::Ed25519))
        }
        // Symmetric keys (`oct`), other curves, unknown types: never used to verify.
        _ => return None,
    };
    if algorithm.is_some_and(|a| a.family() != family) {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        decoding,
        family,
        algorithm,
        curve,
    })
}

fn pick(keys: &Keys, kid: Option<&str>, algorithm: Algorithm) -> Result<Key, KeyMiss> {
    if let Some(kid) = kid {
        return keys
            .by_id
            .get(kid)
            .and_then(|candidates| candidates.iter().find(|k| k.verifies(algorithm)))
            .cloned()
            .ok_or(KeyMiss::UnknownKey);
    }
    let mut fitting = keys.all.iter().filter(|k| k.verifies(algorithm));
    match (fitting.next(), fitting.next()) {
        (Some(only), None) => Ok(only.clone()),
        _ => Err(KeyMiss::Ambiguous),
    }
}
