//! The connections of a per-user server (`connection.oauth.perUser`): one handle per caller
//! identity, each opened with that caller's own token, never shared.
//!
//! The server's own handle stands for it in the pool (its name, its state) but never connects:
//! a call goes through the caller's handle, created on the caller's first call and running the
//! same state machine as any server's (idle close, restarts). A handle whose caller's token
//! changed (refreshed, or signed in again) is replaced, the old one retired once its calls end.
//! At most `maxUserConnections` handles are kept per server; past it the least recently used is
//! retired. Their tool lists are reported under the server's name: the catalog holds the list
//! the last caller's connection gave, snapshotted and shared through the store like any
//! server's, and shown to every caller the rules let see it — a server lists the same tools to
//! every account (what a tool may touch is the account's business, checked when it runs).
//! Their prompts and resources are the caller's own, never kept (`engine::offers`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::{lock, Connector, Handle};
use crate::config::ServerSpec;

/// The per-caller handles of one per-user server.
pub(super) struct Users<C: Connector> {
    cap: usize,
    by_caller: Mutex<HashMap<String, Entry<C>>>,
}

struct Entry<C: Connector> {
    /// A digest of the token the handle was opened with (the token itself is in its spec only).
    token: Vec<u8>,
    handle: Arc<Handle<C>>,
    used: Instant,
}

impl<C: Connector> Users<C> {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            by_caller: Mutex::default(),
        }
    }

    /// The handle of `identity` if it was opened with `token`; else `make` a new one, and the
    /// handles to retire: the one it replaces, and the least recently used past the cap.
    pub(super) fn get_or_make(
        &self,
        identity: &str,
        token: &str,
        make: impl FnOnce() -> Arc<Handle<C>>,
    ) -> (Arc<Handle<C>>, Vec<Arc<Handle<C>>>) {
        let digest = digest(token);
        let mut by_caller = lock(&self.by_caller);
        let now = Instant::now();
        if let Some(entry) = by_caller.get_mut(identity).filter(|e| e.token == digest) {
            entry.used = now;
            return (entry.handle.clone(), Vec::new());
        }
        let mut retired: Vec<_> = by_caller.remove(identity).map(|e| e.handle).into_iter().collect();
        while by_caller.len() >= self.cap {
            let Some(oldest) = by_caller.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some(entry) = by_caller.remove(&oldest) {
                retired.push(entry.handle);
            }
        }
        let handle = make();
        by_caller.insert(
            identity.to_owned(),
            Entry {
                token: digest,
                handle: handle.clone(),
                used: now,
            },
        );
        (handle, retired)
    }

    /// The handle of `identity`, if one is open (whatever token it was opened with).
    pub(super) fn get(&self, identity: &str) -> Option<Arc<Handle<C>>> {
        lock(&self.by_caller).get(identity).map(|e| e.handle.clone())
    }

    /// Every handle, taken out (the server closes or is retired).
    pub(super) fn drain(&self) -> Vec<Arc<Handle<C>>> {
        lock(&self.by_caller).drain().map(|(_, e)| e.handle).collect()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.by_caller).len()
    }
}

fn digest(token: &str) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
        .as_ref()
        .to_vec()
}

/// Whether `token` is a bearer token as RFC 6750 writes them (`b64token`): nothing a header
/// or the spec's `${VAR}` expansion would read as more than the token.
pub(crate) fn is_bearer_token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

/// The spec of one caller's connection: the server's, with the caller's token as its bearer
/// and no sign-in of its own (a 401 means the caller signs in again, through the gateway).
/// The token must be a bearer token ([`is_bearer_token`]).
pub(super) fn caller_spec(spec: &ServerSpec, token: &str) -> ServerSpec {
    debug_assert!(is_bearer_token(token));
    let mut spec = spec.clone();
    spec.connection.oauth = None;
    spec.connection
        .headers
        .retain(|name, _| !name.eq_ignore_ascii_case("authorization"));
    spec.connection
        .headers
        .insert("Authorization".to_owned(), format!("Bearer {token}"));
    spec
}
