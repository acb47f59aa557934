//! What servers announce about their prompts and resources outside any request: a changed
//! prompt or resource list, an updated resource. The client handler of every session
//! publishes here; whoever passes them on (the gateway's MCP face) listens while it serves.
//!
//! A process-wide registry, as request forwarding is (`client::forward_requests`): events
//! carry the server's name, and the sessions that publish them are created deep below the
//! engine, where no per-gateway sink reaches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock;

/// One announcement of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferEvent {
    /// `notifications/prompts/list_changed`.
    PromptsChanged,
    /// `notifications/resources/list_changed`.
    ResourcesChanged,
    /// `notifications/resources/updated` for `uri` (as the server knows it).
    ResourceUpdated { uri: String },
}

/// Told each event with the name of the server it came from. Runs on the session's task:
/// it must not block.
pub type OfferListener = Arc<dyn Fn(&str, &OfferEvent) + Send + Sync>;

static LISTENERS: Mutex<Vec<(u64, OfferListener)>> = Mutex::new(Vec::new());

/// Keeps a listener registered; dropping it removes it.
pub struct Listening(u64);

impl Drop for Listening {
    fn drop(&mut self) {
        lock(&LISTENERS).retain(|(id, _)| *id != self.0);
    }
}

/// Tell `listener` every event of every server while the guard lives.
#[must_use]
pub fn listen_offers(listener: OfferListener) -> Listening {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&LISTENERS).push((id, listener));
    Listening(id)
}

/// Tell every listener what `server` announced.
pub(super) fn publish(server: &str, event: &OfferEvent) {
    let listeners: Vec<OfferListener> = lock(&LISTENERS).iter().map(|(_, l)| l.clone()).collect();
    for listener in listeners {
        listener(server, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_hears_events_while_its_guard_lives() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = heard.clone();
        let guard = listen_offers(Arc::new(move |server: &str, event: &OfferEvent| {
            lock(&sink).push((server.to_owned(), event.clone()));
        }));
        publish("offer-events-test", &OfferEvent::PromptsChanged);
        drop(guard);
        publish("offer-events-test", &OfferEvent::ResourcesChanged);
        let heard: Vec<_> = lock(&heard)
            .iter()
            .filter(|(server, _)| server == "offer-events-test")
            .cloned()
            .collect();
        assert_eq!(heard, [("offer-events-test".to_owned(), OfferEvent::PromptsChanged)]);
    }
}
