//! Following the other replicas through the store (`engine::shared`): announcements of tool
//! lists and pins applied to whatever state the engine holds, and everything read again after
//! each (re)subscription.

use std::sync::{Arc, PoisonError, RwLock, Weak};

use super::shared::{channel, Changed, Review};
use super::state::State;
use crate::catalog::snapshot;
use crate::config::ServerSpec;
use crate::store::{Delivery, Store};

/// Follow the other replicas' list changes into whatever state `engine` holds, until the
/// engine is gone. Needs the tokio runtime.
pub(super) fn follow(engine: Weak<RwLock<Arc<State>>>, store: &Store) {
    let mut deliveries = store.subscribe(&channel(store));
    tokio::spawn(async move {
        while let Some(delivery) = deliveries.recv().await {
            let Some(state) = engine
                .upgrade()
                .map(|e| e.read().unwrap_or_else(PoisonError::into_inner).clone())
            else {
                return;
            };
            // The start reads the store itself; what arrives meanwhile is read after it.
            state.indexed().await;
            match delivery {
                Delivery::Connected => {
                    // A store back from an outage may have missed writes, or restarted empty.
                    state.shared.rewrite_own().await;
                    restore_pins(&state).await;
                    resync(&state).await;
                }
                Delivery::Message(bytes) => match serde_json::from_slice::<Changed>(&bytes) {
                    Ok(Changed::Tools {
                        server,
                        stem,
                        version: _,
                        replica,
                    }) if replica != state.shared.store.replica() => read_changed(&state, &server, &stem).await,
                    Ok(Changed::Pins { server }) => read_pins(&state, &[server], Review::Always).await,
                    _ => {}
                },
                Delivery::Lost(why) => {
                    state.shared.store.note_lost(&why);
                    tracing::warn!(reason = %crate::secrets::scrub(&why), "lost the store's change messages: serving from memory until it is back");
                }
            }
        }
    });
}

/// Put this replica's pins back where the store has none.
async fn restore_pins(state: &Arc<State>) {
    for spec in state.config.servers() {
        if let Some(fields) = state.own_pins(&spec.name) {
            state.shared.restore_pins(&spec.name, fields).await;
        }
    }
}

/// Read every server's list from the store and index those newer than the one held.
async fn resync(state: &Arc<State>) {
    let specs: Vec<ServerSpec> = state.config.servers().to_vec();
    let keys: Vec<String> = specs
        .iter()
        .map(|s| state.shared.catalog_key(&snapshot::stem(s)))
        .collect();
    let Ok(found) = state.shared.store.get_versioned(&keys).await else {
        return;
    };
    for (spec, found) in specs.iter().zip(found) {
        if let Some((version, bytes)) = found {
            apply(state, spec, version, bytes).await;
        }
    }
    let servers: Vec<String> = specs.into_iter().map(|s| s.name).collect();
    read_pins(state, &servers, Review::IfChanged).await;
    if state.is_indexed() {
        state.shared.mark_synced();
    }
}

/// Take the store's pins of `servers` over this replica's, and review those servers' tools
/// again where they changed.
async fn read_pins(state: &Arc<State>, servers: &[String], review: Review) {
    let Ok(found) = state.shared.fetch_pins(servers).await else {
        return;
    };
    let state = state.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for (server, fields) in found {
            state.adopt_pins(&server, &fields, review);
        }
    })
    .await;
}

async fn read_changed(state: &Arc<State>, server: &str, announced: &str) {
    let Some(spec) = state.config.servers().iter().find(|s| s.name == server) else {
        return;
    };
    let stem = snapshot::stem(spec);
    // Another launch spec or gateway version: not this replica's list.
    if stem != announced {
        return;
    }
    let key = state.shared.catalog_key(&stem);
    if let Ok(mut found) = state.shared.store.get_versioned(&[key]).await {
        if let Some((version, bytes)) = found.pop().flatten() {
            apply(state, spec, version, bytes).await;
        }
    }
}

/// Index a list read from the store, if newer than the one held (off the runtime's threads:
/// indexing thousands of tools is CPU).
async fn apply(state: &Arc<State>, spec: &ServerSpec, version: u64, bytes: Vec<u8>) {
    if !state.shared.take_if_newer(&snapshot::stem(spec), version) {
        return;
    }
    let state = state.clone();
    let spec = spec.clone();
    let _ = tokio::task::spawn_blocking(move || state.apply_shared_list(&spec, &bytes)).await;
}
