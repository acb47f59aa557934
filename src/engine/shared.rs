//! What replicas share through the store (`discovery.store`), as the engine uses it: the
//! store handle of this process (kept across reloads), why it could not be opened, whether
//! the catalog has been read from it yet (`/readyz`), and the catalog's tool lists.
//!
//! Tool lists: each server's list is kept under `<prefix>:catalog:<snapshot stem>` (the
//! snapshot file's text, versioned by when it was listed, so racing replicas converge on the
//! newest), and a message on `<prefix>:catalog-changed` tells the other replicas, which read
//! it and index it. A replica that (re)subscribes reads every list again, so one that missed
//! messages while the store was down catches up when it is back.
//!
//! Tool pins (trust on first use) are shared the same way: one hash per server,
//! `<prefix>:pins:<server>`, tool name → pin. A first sighting is written only where the tool
//! has no pin yet, so the first replica to see a tool decides its pin; an approval (`trust`)
//! overwrites. Every replica takes the store's pins over its own and reviews the server's
//! tools again, so a tool changed since the team first saw it is marked on every replica, and
//! trusting it anywhere trusts it everywhere.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::catalog::snapshot;
use crate::config::{ServerSpec, StoreSpec};
use crate::store::{Health, Store, StoreError};

/// How long a start waits for the store's tool lists before going on without them.
const PREFETCH_DEADLINE: Duration = Duration::from_secs(5);

/// One of this process's own lists as last written: version, text, change message.
type OwnList = (u64, String, Vec<u8>);

/// When the store's pins taken over a replica's mark a server's tools again
/// (`State::adopt_pins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Review {
    /// Not now: the tools are reviewed next (a start, before indexing).
    Never,
    IfChanged,
    Always,
}

/// The message telling replicas what changed in the store.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(super) enum Changed {
    /// A server's tool list.
    Tools {
        server: String,
        stem: String,
        version: u64,
        replica: String,
    },
    /// A server's tool pins (first sightings, approvals).
    Pins { server: String },
}

#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    /// This process's own map, for what must go on when the shared store does not answer
    /// (rate-limit buckets).
    pub fallback: Store,
    /// Why `discovery.store` could not be opened: the gateway then runs on a map of its own,
    /// and says so in logs and `/readyz`.
    pub problem: Option<String>,
    /// The spec the store was opened from: a reload that changes it is told to restart.
    spec: StoreSpec,
    /// True once the catalog has been read from the shared store (at once without one).
    synced: watch::Sender<bool>,
    /// The version (listed-at, ms) of each server's list this process holds, by stem.
    versions: Mutex<HashMap<String, u64>>,
    /// The lists this process got from its own servers, last of each (store key → version,
    /// text, change message): written again when the store is back, since a write that failed
    /// (or a store restarted empty) would otherwise never reach the other replicas.
    own: Mutex<HashMap<String, OwnList>>,
}

impl Shared {
    /// The store `spec` names, or this process's map (without one, or when it cannot be
    /// opened: the reason is logged and kept).
    #[must_use]
    pub fn open(spec: &StoreSpec) -> Self {
        let (store, problem) = match Store::open(spec) {
            Ok(Some(store)) => (store, None),
            Ok(None) => (Store::memory(), None),
            Err(error) => {
                tracing::error!("{error}: running without the shared store");
                (Store::memory(), Some(error.to_string()))
            }
        };
        let synced = watch::channel(!store.is_shared()).0;
        Self {
            store,
            fallback: Store::memory(),
            problem,
            spec: spec.clone(),
            synced,
            versions: Mutex::default(),
            own: Mutex::default(),
        }
    }

    /// Warn when a reloaded config names another store: the handle is the process's.
    pub fn check_reload(&self, spec: &StoreSpec) {
        if *spec != self.spec {
            tracing::warn!("discovery.store changed: the new store is used after a restart");
        }
    }

    pub fn mark_synced(&self) {
        self.synced.send_replace(true);
    }

    #[must_use]
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Why this replica is not ready because of the store, if it is not: the store could not
    /// be opened, or it has never answered since start (after that, a store going down
    /// leaves the replica serving from memory, and ready).
    #[must_use]
    pub fn not_ready(&self) -> Option<String> {
        if let Some(problem) = &self.problem {
            return Some(format!("the store cannot be used: {problem}"));
        }
        if self.is_synced() {
            return None;
        }
        let health = self.store.health();
        Some(match health.reason {
            Some(reason) => format!("the store {} does not answer: {reason}", health.at),
            None => format!("reading the catalog from the store {}", health.at),
        })
    }

    #[must_use]
    pub fn health(&self) -> Health {
        self.store.health()
    }
}

impl Shared {
    pub(super) fn catalog_key(&self, stem: &str) -> String {
        self.store.key(&["catalog", stem])
    }

    fn channel(&self) -> String {
        channel(&self.store)
    }

    /// Whether `version` of the list under `stem` is newer than the one held; if so it is
    /// now the one held.
    pub(super) fn take_if_newer(&self, stem: &str, version: u64) -> bool {
        let mut versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
        let held = versions.entry(stem.to_owned()).or_insert(0);
        let newer = version > *held;
        if newer {
            *held = version;
        }
        newer
    }

    /// The shared store's list of each of `specs` (by server name), read in one round trip;
    /// from a blocking thread. `Ok(empty)` without a shared store.
    pub(super) fn prefetch_blocking(
        &self,
        specs: &[&ServerSpec],
    ) -> Result<HashMap<String, (u64, Vec<u8>)>, StoreError> {
        if !self.store.is_shared() {
            return Ok(HashMap::new());
        }
        let keys: Vec<String> = specs
            .iter()
            .map(|spec| self.catalog_key(&snapshot::stem(spec)))
            .collect();
        let read = tokio::runtime::Handle::current().block_on(async {
            tokio::time::timeout(PREFETCH_DEADLINE, self.store.get_versioned(&keys))
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::Unavailable {
                        at: self.store.health().at,
                        reason: "no answer within 5 s".to_owned(),
                    })
                })
        })?;
        Ok(specs
            .iter()
            .zip(read)
            .filter_map(|(spec, found)| found.map(|found| (spec.name.clone(), found)))
            .collect())
    }

    /// Put a list this process got from its server into the shared store and tell the other
    /// replicas, in the background (a store that does not answer is logged by the store).
    pub(super) fn publish_list(&self, spec: &ServerSpec, text: String, version: u64) {
        let stem = snapshot::stem(spec);
        self.take_if_newer(&stem, version);
        if !self.store.is_shared() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let key = self.catalog_key(&stem);
        let channel = self.channel();
        let message = Changed::Tools {
            server: spec.name.clone(),
            stem,
            version,
            replica: store.replica().to_owned(),
        };
        let message = serde_json::to_vec(&message).expect("a change message serializes");
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), (version, text.clone(), message.clone()));
        runtime.spawn(async move {
            if matches!(store.put_versioned(&key, version, text.as_bytes()).await, Ok(true)) {
                let _ = store.publish(&channel, &message).await;
            }
        });
    }

    /// Write this process's own lists again (the store converges on the newest version of
    /// each), telling the others of those the store did not have.
    pub(super) async fn rewrite_own(&self) {
        let own: Vec<_> = self
            .own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(key, entry)| (key.clone(), entry.clone()))
            .collect();
        let channel = self.channel();
        for (key, (version, text, message)) in own {
            if matches!(self.store.put_versioned(&key, version, text.as_bytes()).await, Ok(true)) {
                let _ = self.store.publish(&channel, &message).await;
            }
        }
    }
}

/// A server's pins as the store has them: tool name → pin JSON.
pub(super) type PinFields = Vec<(String, Vec<u8>)>;

impl Shared {
    /// The store's pins of each of `servers` (one round trip); servers without any left out.
    pub(super) async fn fetch_pins(&self, servers: &[String]) -> Result<Vec<(String, PinFields)>, StoreError> {
        if !self.store.is_shared() {
            return Ok(Vec::new());
        }
        let hashes: Vec<String> = servers.iter().map(|s| pins_key(&self.store, s)).collect();
        let found = self.store.hash_all(&hashes).await?;
        Ok(servers
            .iter()
            .zip(found)
            .filter(|(_, fields)| !fields.is_empty())
            .map(|(server, fields)| {
                let fields = fields
                    .into_iter()
                    .filter_map(|(name, pin)| String::from_utf8(name).ok().map(|name| (name, pin)))
                    .collect();
                (server.clone(), fields)
            })
            .collect())
    }

    /// [`Shared::fetch_pins`] from a blocking thread, bounded.
    pub(super) fn fetch_pins_blocking(&self, servers: &[String]) -> Result<Vec<(String, PinFields)>, StoreError> {
        tokio::runtime::Handle::current().block_on(async {
            tokio::time::timeout(PREFETCH_DEADLINE, self.fetch_pins(servers))
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::Unavailable {
                        at: self.store.health().at,
                        reason: "no answer within 5 s".to_owned(),
                    })
                })
        })
    }

    /// Write a server's pins to the store and tell every replica (see [`share_pins`]).
    pub(super) async fn share_pins(
        &self,
        server: &str,
        fields: Vec<(String, Vec<u8>, bool)>,
    ) -> Result<(), StoreError> {
        if !self.store.is_shared() {
            return Ok(());
        }
        share_pins(&self.store, server, fields).await
    }

    /// [`Shared::share_pins`] in the background (first sightings while indexing).
    pub(super) fn share_pins_later(&self, server: &str, fields: Vec<(String, Vec<u8>, bool)>) {
        if !self.store.is_shared() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let server = server.to_owned();
        runtime.spawn(async move {
            let _ = share_pins(&store, &server, fields).await;
        });
    }
}

impl Shared {
    /// Put `server`'s pins back where the store has none (after it came back, perhaps
    /// restarted empty): as first sightings only, so nothing another replica decided meanwhile
    /// is overwritten.
    pub(super) async fn restore_pins(&self, server: &str, fields: Vec<(String, Vec<u8>, bool)>) {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = fields
            .into_iter()
            .map(|(name, pin, _)| (name.into_bytes(), pin))
            .collect();
        let _ = self
            .store
            .hash_set_if_absent(&pins_key(&self.store, server), &pairs)
            .await;
    }
}

/// Where replicas announce what changed.
pub(super) fn channel(store: &Store) -> String {
    store.key(&["catalog-changed"])
}

fn pins_key(store: &Store, server: &str) -> String {
    store.key(&["pins", server])
}

/// Write a server's pins — first sightings only where the tool has none, approvals over
/// whatever is there — and tell every replica (the writer too: if another replica's pin won,
/// it takes that one).
async fn share_pins(store: &Store, server: &str, fields: Vec<(String, Vec<u8>, bool)>) -> Result<(), StoreError> {
    let (approved, seen): (Vec<_>, Vec<_>) = fields.into_iter().partition(|(_, _, approved)| *approved);
    let pairs = |list: Vec<(String, Vec<u8>, bool)>| -> Vec<(Vec<u8>, Vec<u8>)> {
        list.into_iter()
            .map(|(name, pin, _)| (name.into_bytes(), pin))
            .collect()
    };
    let key = pins_key(store, server);
    store.hash_set_if_absent(&key, &pairs(seen)).await?;
    store.hash_set(&key, &pairs(approved)).await?;
    let message = serde_json::to_vec(&Changed::Pins {
        server: server.to_owned(),
    })
    .expect("a change message serializes");
    store.publish(&channel(store), &message).await
}
