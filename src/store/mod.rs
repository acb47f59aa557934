//! The store gateways share (`discovery.store`): a Redis-protocol server for replicas, or a
//! map in this process when none is configured, behind one API.
//!
//! What it owns: connecting (lazily, reconnecting with backoff), the key space (`<prefix>:…`),
//! sealing secrets at rest ([`seal`]), and the store's health as replicas report it
//! ([`Health`]). What is kept in it, and when, belongs to its users: catalog snapshots and
//! their change messages (`engine::shared`), semantic vectors (`search::semantic`), sign-in
//! state and per-user tokens (`upstream`), rate-limit buckets (`rate`).
//!
//! Every operation fails fast with [`StoreError::Unavailable`] when the server does not
//! answer: the gateway keeps serving from memory and says why, it never waits on the store.

mod memory;
mod remote;
pub mod seal;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::StoreSpec;

pub use seal::Sealer;

/// What a subscription delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Subscribed (again): messages sent while not subscribed are lost, so read what you
    /// follow again.
    Connected,
    /// A message on the channel.
    Message(Vec<u8>),
    /// The subscription dropped (why); it is renewed by itself.
    Lost(String),
}

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{place}: {source}")]
    Expand {
        place: String,
        source: crate::config::expand::ExpandError,
    },
    #[error("discovery.store.url: {0}")]
    BadUrl(#[from] crate::config::store::BadStoreUrl),
    /// The driver refused the URL (its text, scrubbed).
    #[error("discovery.store.url: {0}")]
    Url(String),
    #[error("discovery.store.key {0}")]
    Key(#[from] seal::KeyError),
    #[error("the store {at} does not answer: {reason}")]
    Unavailable { at: String, reason: String },
    #[error("discovery.store.key is not set: secrets are not written to the store without it (set it to `openssl rand -base64 32`, the same on every replica)")]
    NoKey,
}

/// The store's state as this process saw it last.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// A shared (Redis) store, not this process's own map.
    pub shared: bool,
    /// Where it is (password left out).
    pub at: String,
    /// The last operation succeeded (or none failed yet).
    pub up: bool,
    /// Why the last operation failed, when `up` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One operation succeeded since this process started.
    pub reached: bool,
}

#[derive(Debug)]
enum Backend {
    Memory(memory::Memory),
    /// Boxed: the driver's client and connection manager are large.
    Remote(Box<remote::Remote>),
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    prefix: String,
    sealer: Option<Sealer>,
    health: Mutex<Health>,
    /// This process among replicas: messages it sent itself are recognised.
    replica: String,
}

/// A handle on the store (cheap to clone).
#[derive(Debug, Clone)]
pub struct Store(Arc<Inner>);

impl Store {
    /// A store in this process only.
    #[must_use]
    pub fn memory() -> Self {
        Self::assemble(
            Backend::Memory(memory::Memory::new()),
            crate::config::store::DEFAULT_PREFIX,
            "memory".to_owned(),
            None,
        )
    }

    /// The store `spec` names (`None` when it names none), its references expanded and
    /// registered as secrets. Nothing is connected yet: the first operation connects.
    pub fn open(spec: &StoreSpec) -> Result<Option<Self>, StoreError> {
        let Some(written) = &spec.url else { return Ok(None) };
        let expand = |place: &str, text: &str| {
            crate::config::expand::expand_env(text).map_err(|source| StoreError::Expand {
                place: place.to_owned(),
                source,
            })
        };
        // Variables holding the store's password or key are the gateway's, not its servers'.
        crate::secrets::withhold_variables(
            std::iter::once(written)
                .chain(&spec.key)
                .flat_map(|text| crate::config::expand::referenced_variables(text)),
        );
        let url = expand("discovery.store.url", written)?;
        let parsed = crate::config::store::check_url(&url)?;
        let mut secrets = crate::secrets::url_secrets(&parsed);
        let sealer = match &spec.key {
            Some(written) => {
                let key = expand("discovery.store.key", written)?;
                secrets.push(key.trim().to_owned());
                Some(Sealer::from_base64(&key)?)
            }
            None => None,
        };
        crate::secrets::register("store", secrets);
        let at = crate::secrets::redact_url(&url);
        let remote = remote::Remote::new(&url)
            .map_err(|e| StoreError::Url(crate::secrets::scrub(&e.to_string()).into_owned()))?;
        Ok(Some(Self::assemble(
            Backend::Remote(Box::new(remote)),
            spec.prefix(),
            at,
            sealer,
        )))
    }

    fn assemble(backend: Backend, prefix: &str, at: String, sealer: Option<Sealer>) -> Self {
        let shared = matches!(backend, Backend::Remote(_));
        Self(Arc::new(Inner {
            backend,
            prefix: prefix.to_owned(),
            sealer,
            health: Mutex::new(Health {
                shared,
                at,
                up: true,
                reason: None,
                reached: !shared,
            }),
            replica: replica_id(),
        }))
    }

    /// Whether this is a store replicas share.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        matches!(self.0.backend, Backend::Remote(_))
    }

    /// Whether [`Store::set_sealed`] can write here: a shared store needs `discovery.store.key`.
    #[must_use]
    pub fn can_seal(&self) -> bool {
        self.0.sealer.is_some() || !self.is_shared()
    }

    /// This process's id among replicas (random per start).
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.0.replica
    }

    /// `<prefix>:<parts joined by ':'>`.
    #[must_use]
    pub fn key(&self, parts: &[&str]) -> String {
        let mut key = self.0.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    #[must_use]
    pub fn health(&self) -> Health {
        self.0.health.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Record that the connection to the store dropped (a subscription saw it), so that
    /// `/readyz` and `discovery_store_up` say so before an operation fails.
    pub fn note_lost(&self, reason: &str) {
        let mut health = self.0.health.lock().unwrap_or_else(PoisonError::into_inner);
        let reason = crate::secrets::scrub(reason).into_owned();
        if health.up {
            tracing::warn!(store = %health.at, %reason, "the store does not answer: serving from memory");
        }
        health.up = false;
        health.reason = Some(reason);
    }

    /// Record how an operation went, logging when the store goes down or comes back.
    fn observe<T>(&self, outcome: redis::RedisResult<T>) -> Result<T, StoreError> {
        let mut health = self.0.health.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(value) => {
                if !health.up {
                    tracing::info!(store = %health.at, "the store answers again");
                }
                health.up = true;
                health.reason = None;
                health.reached = true;
                Ok(value)
            }
            Err(error) => {
                let reason = crate::secrets::scrub(&error.to_string()).into_owned();
                if health.up {
                    tracing::warn!(store = %health.at, %reason, "the store does not answer: serving from memory");
                }
                health.up = false;
                health.reason = Some(reason.clone());
                Err(StoreError::Unavailable {
                    at: health.at.clone(),
                    reason,
                })
            }
        }
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.get(key)),
            Backend::Remote(r) => self.observe(r.get(key).await),
        }
    }

    /// Write `value` under `key`, for `ttl` when given.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => {
                m.set(key, value, ttl);
                Ok(())
            }
            Backend::Remote(r) => self.observe(r.set(key, value, ttl).await),
        }
    }

    /// Write `value` under `key` only if nothing is there; whether it was written.
    pub async fn set_if_absent(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.set_nx(key, value, ttl)),
            Backend::Remote(r) => self.observe(r.set_nx(key, value, ttl).await),
        }
    }

    /// Read and delete in one step: of two replicas taking one key, one gets it.
    pub async fn take(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.take(key)),
            Backend::Remote(r) => self.observe(r.take(key).await),
        }
    }

    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => {
                m.delete(key);
                Ok(())
            }
            Backend::Remote(r) => self.observe(r.delete(key).await),
        }
    }

    /// Write `value` under `key` unless what is there has a version at least `version`;
    /// whether it was written. Racing writers converge on the highest version.
    pub async fn put_versioned(&self, key: &str, version: u64, value: &[u8]) -> Result<bool, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.put_versioned(key, version, value)),
            Backend::Remote(r) => self.observe(r.put_versioned(key, version, value).await),
        }
    }

    /// The versioned values under `keys` (one round trip), in order.
    pub async fn get_versioned(&self, keys: &[String]) -> Result<Vec<Option<(u64, Vec<u8>)>>, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.get_versioned(keys)),
            Backend::Remote(r) => self.observe(r.get_versioned(keys).await),
        }
    }

    /// Fields of the hash `hash`, in order.
    pub async fn hash_get(&self, hash: &str, fields: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.hget_many(hash, fields)),
            Backend::Remote(r) => self.observe(r.hget_many(hash, fields).await),
        }
    }

    pub async fn hash_set(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => {
                m.hset_many(hash, pairs);
                Ok(())
            }
            Backend::Remote(r) => self.observe(r.hset_many(hash, pairs).await),
        }
    }

    /// Set the fields of `hash` that are not set yet (others keep their value).
    pub async fn hash_set_if_absent(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => {
                m.hset_nx_many(hash, pairs);
                Ok(())
            }
            Backend::Remote(r) => self.observe(r.hset_nx_many(hash, pairs).await),
        }
    }

    /// Every field of each of `hashes` (one round trip), in order.
    pub async fn hash_all(&self, hashes: &[String]) -> Result<Vec<Vec<(Vec<u8>, Vec<u8>)>>, StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.hget_all(hashes)),
            Backend::Remote(r) => self.observe(r.hget_all(hashes).await),
        }
    }

    /// Take one token of the bucket `key` (refilled at `per_second`, holding at most `burst`):
    /// `None` when taken, else how long until one is there. Buckets idle a minute past full
    /// are forgotten.
    pub async fn take_token(&self, key: &str, per_second: f64, burst: u32) -> Result<Option<Duration>, StoreError> {
        let full_in = Duration::from_secs_f64((f64::from(burst) / per_second).min(86_400.0));
        let ttl = full_in + Duration::from_secs(60);
        match &self.0.backend {
            Backend::Memory(m) => Ok(m.take_token(key, per_second, burst, ttl)),
            Backend::Remote(r) => self.observe(r.take_token(key, per_second, burst, ttl).await),
        }
    }

    pub async fn publish(&self, channel: &str, payload: &[u8]) -> Result<(), StoreError> {
        match &self.0.backend {
            Backend::Memory(m) => {
                m.publish(channel, payload);
                Ok(())
            }
            Backend::Remote(r) => self.observe(r.publish(channel, payload).await),
        }
    }

    /// Messages published on `channel` from now on, until the receiver is dropped. Needs
    /// the tokio runtime.
    #[must_use]
    pub fn subscribe(&self, channel: &str) -> mpsc::Receiver<Delivery> {
        match &self.0.backend {
            Backend::Memory(m) => m.subscribe(channel),
            Backend::Remote(r) => r.subscribe(channel),
        }
    }

    /// Write a secret sealed with the store key (refused without one when shared; a
    /// process's own map keeps it as it is, like its memory does).
    pub async fn set_sealed(&self, key: &str, plain: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        let value = match (&self.0.sealer, self.is_shared()) {
            (Some(sealer), _) => sealer.seal(key, plain),
            (None, false) => plain.to_vec(),
            (None, true) => return Err(StoreError::NoKey),
        };
        self.set(key, &value, ttl).await
    }

    /// A secret written by [`Store::set_sealed`]: `None` when missing, or when it does not
    /// open with this key at this place (tampered, moved, another key), which is logged.
    pub async fn get_sealed(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(value) = self.get(key).await? else {
            return Ok(None);
        };
        self.open_sealed(key, value)
    }

    /// [`Store::take`] of a sealed secret.
    pub async fn take_sealed(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(value) = self.take(key).await? else {
            return Ok(None);
        };
        self.open_sealed(key, value)
    }

    fn open_sealed(&self, key: &str, value: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        match (&self.0.sealer, self.is_shared()) {
            (Some(sealer), _) => {
                let opened = sealer.open(key, &value);
                if opened.is_none() {
                    tracing::warn!(key, "a sealed value in the store does not open with this key: ignored");
                }
                Ok(opened)
            }
            (None, false) => Ok(Some(value)),
            (None, true) => Err(StoreError::NoKey),
        }
    }

    /// Hold the lock `name` for at most `ttl` (a holder that dies frees it then); `None` when
    /// another holds it.
    pub async fn lock(&self, name: &str, ttl: Duration) -> Result<Option<Lock>, StoreError> {
        let key = self.key(&["lock", name]);
        let token = format!("{}:{}", self.0.replica, crate::hash::random_hex(8));
        let held = self.set_if_absent(&key, token.as_bytes(), Some(ttl)).await?;
        Ok(held.then(|| Lock {
            store: self.clone(),
            key,
            token,
        }))
    }
}

/// A held lock; [`Lock::release`] frees it (only if it is still this holder's).
#[derive(Debug)]
pub struct Lock {
    store: Store,
    key: String,
    token: String,
}

impl Lock {
    pub async fn release(self) -> Result<(), StoreError> {
        match &self.store.0.backend {
            Backend::Memory(m) => {
                m.delete_if(&self.key, self.token.as_bytes());
                Ok(())
            }
            Backend::Remote(r) => self
                .store
                .observe(r.delete_if(&self.key, self.token.as_bytes()).await)
                .map(drop),
        }
    }
}

/// A random id for this process: the pid alone repeats across containers.
fn replica_id() -> String {
    format!("{}-{}", std::process::id(), crate::hash::random_hex(6))
}

#[cfg(test)]
pub(crate) mod tests;
