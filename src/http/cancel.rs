//! Cancelling a sessionless request from another request.
//!
//! Without a session, a 2025-11-25 client's `notifications/cancelled` arrives as a POST of
//! its own, which rmcp's stateless mode accepts and drops; the request it names runs on, and
//! so does its downstream call. The official SDK cancels this way (it keeps the response
//! stream open). So the face keeps, for each request whose answer is streaming, a token under
//! (caller, JSON-RPC id); a cancellation from the same caller ends that answer stream, which
//! cancels the handler and, through it, the downstream call — as a client closing the
//! stream does.
//!
//! Ids are chosen by clients, so two clients of one caller could name the same id: both
//! requests are then cancelled. Callers are told apart once authentication names them
//! (`crate::caller::Caller`); without auth every client is the one local user. This works
//! within one process: a cancellation reaching another replica finds nothing to cancel there
//! (the client closing its stream works everywhere).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Longest request id (as JSON text) tracked; a longer one is never cancelled this way.
const MAX_ID_CHARS: usize = 256;

type Key = (String, String);

/// The requests in flight that a cancellation may name.
#[derive(Debug, Default)]
pub struct InFlight {
    requests: Mutex<HashMap<Key, Vec<(u64, CancellationToken)>>>,
    serial: std::sync::atomic::AtomicU64,
}

/// A request's place in [`InFlight`], freed on drop.
#[derive(Debug)]
pub struct Registration {
    in_flight: Arc<InFlight>,
    key: Key,
    serial: u64,
    pub token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut requests = self.in_flight.lock();
        if let Some(tokens) = requests.get_mut(&self.key) {
            tokens.retain(|(serial, _)| *serial != self.serial);
            if tokens.is_empty() {
                requests.remove(&self.key);
            }
        }
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<(u64, CancellationToken)>>> {
        self.requests
            .lock()
            .expect("in-flight lock is never poisoned: no panics while held")
    }

    /// Track the request `id` of `caller` until the registration drops.
    pub fn register(self: &Arc<Self>, caller: String, id: String) -> Option<Registration> {
        if id.len() > MAX_ID_CHARS {
            return None;
        }
        let serial = self.serial.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = CancellationToken::new();
        let key = (caller, id);
        self.lock()
            .entry(key.clone())
            .or_default()
            .push((serial, token.clone()));
        Some(Registration {
            in_flight: self.clone(),
            key,
            serial,
            token,
        })
    }

    /// Cancel `caller`'s request `id`, if it is in flight here. Returns whether one was.
    pub fn cancel(&self, caller: String, id: String) -> bool {
        let tokens = self.lock().remove(&(caller, id)).unwrap_or_default();
        for (_, token) in &tokens {
            token.cancel();
        }
        !tokens.is_empty()
    }
}

/// The ids a message names: its own (a request), and the one it cancels.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ids {
    pub id: Option<String>,
    pub cancels: Option<String>,
}

impl Ids {
    #[must_use]
    pub fn of(body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<serde_json::Value>,
            method: Option<String>,
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "requestId")]
            request_id: Option<serde_json::Value>,
        }
        let Ok(head) = serde_json::from_slice::<Head>(body) else {
            return Self::default();
        };
        let text = |v: serde_json::Value| {
            matches!(v, serde_json::Value::String(_) | serde_json::Value::Number(_)).then(|| v.to_string())
        };
        let cancels = (head.method.as_deref() == Some("notifications/cancelled"))
            .then(|| head.params.and_then(|p| p.request_id).and_then(text))
            .flatten();
        Self {
            id: head.method.is_some().then_some(head.id).flatten().and_then(text),
            cancels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::Caller;

    #[test]
    fn a_cancellation_names_the_request_of_its_caller_only() {
        let in_flight = Arc::new(InFlight::default());
        let mine = in_flight.register("alice".into(), "5".into()).unwrap();
        let theirs = in_flight.register("bob".into(), "5".into()).unwrap();
        assert!(in_flight.cancel("alice".into(), "5".into()));
        assert!(mine.token.is_cancelled());
        assert!(!theirs.token.is_cancelled());
        drop(theirs);
        assert!(!in_flight.cancel("bob".into(), "5".into()), "freed on drop");
    }

    #[test]
    fn callers_alike_in_their_first_200_characters_are_told_apart() {
        let issuer = "https://login.example.test/tenant/v2.0";
        let caller = |subject: String| Caller {
            issuer: Some(issuer.to_owned()),
            subject: Some(subject),
            ..Caller::default()
        };
        let (one, other) = (
            caller(format!("{}-one", "s".repeat(190))),
            caller(format!("{}-two", "s".repeat(190))),
        );
        assert_eq!(one.label(), other.label(), "the labels are cut alike");
        assert_ne!(one.identity(), other.identity());
        let in_flight = Arc::new(InFlight::default());
        let mine = in_flight.register(one.identity(), "1".into()).unwrap();
        assert!(!in_flight.cancel(other.identity(), "1".into()));
        assert!(!mine.token.is_cancelled());
        assert_ne!(Caller::local().identity(), caller("local".into()).identity());
    }

    #[test]
    fn ids_of_messages() {
        let request = Ids::of(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#);
        assert_eq!(request.id.as_deref(), Some("\"a\""));
        let cancel = Ids::of(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#);
        assert_eq!(
            cancel,
            Ids {
                id: None,
                cancels: Some("3".into())
            }
        );
    }
}
