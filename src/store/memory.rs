//! The store of one process: the same operations as the Redis store over a map, for a gateway
//! without `discovery.store` (sign-in state, per-user tokens and rate-limit buckets then live
//! and die with the process, which is all one process needs).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc};

use super::Delivery;

/// Entries kept at most: past it, expired ones are dropped, then the oldest write.
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug)]
enum Value {
    Bytes(Vec<u8>),
    Versioned(u64, Vec<u8>),
    Hash(HashMap<Vec<u8>, Vec<u8>>),
    Bucket { tokens: f64, at: Instant },
}

#[derive(Debug)]
struct Entry {
    value: Value,
    expires: Option<Instant>,
    written: Instant,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|at| at > now)
    }
}

#[derive(Debug)]
pub struct Memory {
    entries: Mutex<HashMap<String, Entry>>,
    channels: Mutex<HashMap<String, broadcast::Sender<Vec<u8>>>>,
}

impl Memory {
    pub fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>, Instant) -> T) -> T {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, entry| entry.live(now));
            if entries.len() >= MAX_ENTRIES {
                let oldest = entries.iter().min_by_key(|(_, e)| e.written).map(|(k, _)| k.clone());
                if let Some(key) = oldest {
                    entries.remove(&key);
                }
            }
        }
        f(&mut entries, now)
    }

    fn live<'a>(entries: &'a mut HashMap<String, Entry>, key: &str, now: Instant) -> Option<&'a mut Entry> {
        if entries.get(key).is_some_and(|e| !e.live(now)) {
            entries.remove(key);
        }
        entries.get_mut(key)
    }

    fn insert(entries: &mut HashMap<String, Entry>, key: &str, value: Value, ttl: Option<Duration>, now: Instant) {
        entries.insert(
            key.to_owned(),
            Entry {
                value,
                expires: ttl.map(|ttl| now + ttl),
                written: now,
            },
        );
    }

    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.with(|entries, now| match Self::live(entries, key, now).map(|e| &e.value) {
            Some(Value::Bytes(bytes)) => Some(bytes.clone()),
            _ => None,
        })
    }

    pub fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) {
        self.with(|entries, now| Self::insert(entries, key, Value::Bytes(value.to_vec()), ttl, now));
    }

    pub fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> bool {
        self.with(|entries, now| {
            if Self::live(entries, key, now).is_some() {
                return false;
            }
            Self::insert(entries, key, Value::Bytes(value.to_vec()), ttl, now);
            true
        })
    }

    pub fn take(&self, key: &str) -> Option<Vec<u8>> {
        self.with(|entries, now| {
            Self::live(entries, key, now)?;
            match entries.remove(key).map(|e| e.value) {
                Some(Value::Bytes(bytes)) => Some(bytes),
                _ => None,
            }
        })
    }

    pub fn delete(&self, key: &str) {
        self.with(|entries, _| entries.remove(key));
    }

    pub fn delete_if(&self, key: &str, value: &[u8]) -> bool {
        self.with(|entries, now| {
            let same = matches!(Self::live(entries, key, now).map(|e| &e.value), Some(Value::Bytes(b)) if b == value);
            if same {
                entries.remove(key);
            }
            same
        })
    }

    pub fn put_versioned(&self, key: &str, version: u64, value: &[u8]) -> bool {
        self.with(|entries, now| {
            let newer = match Self::live(entries, key, now).map(|e| &e.value) {
                Some(Value::Versioned(current, _)) => version > *current,
                _ => true,
            };
            if newer {
                Self::insert(entries, key, Value::Versioned(version, value.to_vec()), None, now);
            }
            newer
        })
    }

    pub fn get_versioned(&self, keys: &[String]) -> Vec<Option<(u64, Vec<u8>)>> {
        self.with(|entries, now| {
            keys.iter()
                .map(|key| match Self::live(entries, key, now).map(|e| &e.value) {
                    Some(Value::Versioned(version, bytes)) => Some((*version, bytes.clone())),
                    _ => None,
                })
                .collect()
        })
    }

    pub fn hget_many(&self, hash: &str, fields: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        self.with(|entries, now| match Self::live(entries, hash, now).map(|e| &e.value) {
            Some(Value::Hash(map)) => fields.iter().map(|f| map.get(f).cloned()).collect(),
            _ => vec![None; fields.len()],
        })
    }

    pub fn hset_many(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) {
        self.with_hash(hash, |map| map.extend(pairs.iter().cloned()));
    }

    pub fn hset_nx_many(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) {
        self.with_hash(hash, |map| {
            for (field, value) in pairs {
                map.entry(field.clone()).or_insert_with(|| value.clone());
            }
        });
    }

    /// Run `f` on the hash `hash`, made empty first when it is missing or not a hash.
    fn with_hash(&self, hash: &str, f: impl FnOnce(&mut HashMap<Vec<u8>, Vec<u8>>)) {
        self.with(|entries, now| {
            if !matches!(Self::live(entries, hash, now).map(|e| &e.value), Some(Value::Hash(_))) {
                Self::insert(entries, hash, Value::Hash(HashMap::new()), None, now);
            }
            if let Some(Entry {
                value: Value::Hash(map),
                ..
            }) = entries.get_mut(hash)
            {
                f(map);
            }
        });
    }

    pub fn hget_all(&self, hashes: &[String]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        self.with(|entries, now| {
            hashes
                .iter()
                .map(|hash| match Self::live(entries, hash, now).map(|e| &e.value) {
                    Some(Value::Hash(map)) => map.iter().map(|(f, v)| (f.clone(), v.clone())).collect(),
                    _ => Vec::new(),
                })
                .collect()
        })
    }

    /// See [`super::Store::take_token`]: the same arithmetic as the Redis script.
    pub fn take_token(&self, key: &str, per_second: f64, burst: u32, ttl: Duration) -> Option<Duration> {
        self.with(|entries, now| {
            let burst = f64::from(burst);
            let tokens = match Self::live(entries, key, now).map(|e| &e.value) {
                Some(Value::Bucket { tokens, at }) => {
                    (tokens + now.duration_since(*at).as_secs_f64() * per_second).min(burst)
                }
                _ => burst,
            };
            let (left, wait) = if tokens >= 1.0 {
                (tokens - 1.0, None)
            } else {
                (tokens, Some(Duration::from_secs_f64((1.0 - tokens) / per_second)))
            };
            Self::insert(entries, key, Value::Bucket { tokens: left, at: now }, Some(ttl), now);
            wait
        })
    }

    pub fn publish(&self, channel: &str, payload: &[u8]) {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = channels.get(channel) {
            let _ = sender.send(payload.to_vec());
        }
    }

    pub fn subscribe(&self, channel: &str) -> mpsc::Receiver<Delivery> {
        let mut receiver = {
            let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
            channels
                .entry(channel.to_owned())
                .or_insert_with(|| broadcast::channel(256).0)
                .subscribe()
        };
        let (sender, delivered) = mpsc::channel(256);
        tokio::spawn(async move {
            if sender.send(Delivery::Connected).await.is_err() {
                return;
            }
            loop {
                let next = match receiver.recv().await {
                    Ok(payload) => Delivery::Message(payload),
                    // Missed messages: the subscriber reads everything again, as after a reconnect.
                    Err(broadcast::error::RecvError::Lagged(_)) => Delivery::Connected,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if sender.send(next).await.is_err() {
                    return;
                }
            }
        });
        delivered
    }
}
