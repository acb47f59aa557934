//! What replicas share through the store (`discovery.store`), as the engine uses it: the
//! store handle of this process (kept across reloads), why it could not be opened, and
//! whether the catalog has been read from it yet (`/readyz`).

use tokio::sync::watch;

use crate::config::StoreSpec;
use crate::store::{Health, Store};

#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    /// Why `discovery.store` could not be opened: the gateway then runs on a map of its own,
    /// and says so in logs and `/readyz`.
    pub problem: Option<String>,
    /// The spec the store was opened from: a reload that changes it is told to restart.
    spec: StoreSpec,
    /// True once the catalog has been read from the shared store (at once without one).
    synced: watch::Sender<bool>,
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
            problem,
            spec: spec.clone(),
            synced,
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
