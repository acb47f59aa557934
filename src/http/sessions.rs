//! `discovery.http.legacySessions`: sessions for clients before protocol 2026-07-28, kept in
//! this process, so that what a downstream server asks during a call (elicitation, sampling,
//! roots) reaches such a client on its request's stream and the client's answer — a POST of its
//! own carrying the session id — comes back to the call waiting for it. Off by default: the
//! face is sessionless and any replica answers any request. With it on, a 2025-11-25 client's
//! `initialize` mints an `Mcp-Session-Id` (rmcp's session manager holds the session), and that
//! client must reach the same process for the session's life (one replica, or sticky routing);
//! a replica that never saw the session answers 404 and the client starts a new one.
//! 2026-07-28 clients stay sessionless either way (their questions travel as input-required
//! rounds).
//!
//! This module keeps sessions within bounds and each one to the caller who opened it:
//! - a request naming a session another caller opened is answered 404, as an unknown session
//!   is (a session id seen in a log or a proxy is no way into another user's calls);
//! - at most [`MAX_PER_CALLER`] sessions per caller and [`MAX_SESSIONS`] in all; past either,
//!   a new session is refused (429 / 503 with the reason);
//! - a session idle for [`IDLE`] is closed (rmcp stops its worker then; its handle is removed
//!   here so it counts no more): found out when it is named again or when a new session would
//!   open, never by a sweep on every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::session::SessionManager;

use crate::caller::Caller;

/// Sessions one caller may hold at once.
pub const MAX_PER_CALLER: usize = 16;
/// Sessions the process holds at once.
pub const MAX_SESSIONS: usize = 1024;
/// A session without a request for this long is closed.
pub const IDLE: Duration = Duration::from_secs(300);

const SESSION_HEADER: &str = "mcp-session-id";

/// The sessions of this process and whose each one is.
pub(super) struct Sessions {
    pub manager: Arc<LocalSessionManager>,
    owners: Mutex<HashMap<String, Owned>>,
}

struct Owned {
    caller: String,
    seen: Instant,
}

impl Sessions {
    pub fn new() -> Arc<Self> {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(IDLE);
        let mut manager = LocalSessionManager::default();
        manager.session_config = config;
        Arc::new(Self {
            manager: Arc::new(manager),
            owners: Mutex::default(),
        })
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forget (and close) the sessions idle past [`IDLE`].
    fn prune(&self, now: Instant) {
        let idle: Vec<String> = {
            let mut owners = self.owners();
            let idle: Vec<String> = owners
                .iter()
                .filter(|(_, owned)| now.duration_since(owned.seen) >= IDLE)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &idle {
                owners.remove(id);
            }
            idle
        };
        for id in idle {
            self.close(id);
        }
    }

    /// Close a forgotten session in rmcp's manager too (its worker stops on its own when
    /// idle, but its handle stays there until closed).
    fn close(&self, id: String) {
        let manager = self.manager.clone();
        tokio::spawn(async move {
            let _ = manager.close_session(&id.into()).await;
        });
    }

    /// Whether `caller` may use the session `id`: its own, or one this process does not know
    /// or has let go of for idleness (rmcp answers those 404 itself).
    fn check(&self, id: &str, caller: &str, now: Instant) -> bool {
        let mut owners = self.owners();
        if owners
            .get(id)
            .is_some_and(|owned| now.duration_since(owned.seen) >= IDLE)
        {
            owners.remove(id);
            drop(owners);
            self.close(id.to_owned());
            return true;
        }
        match owners.get_mut(id) {
            Some(owned) if owned.caller == caller => {
                owned.seen = now;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Why `caller` may not open another session, if it may not.
    fn refusal(&self, caller: &str) -> Option<(StatusCode, String)> {
        let owners = self.owners();
        let mine = owners.values().filter(|o| o.caller == caller).count();
        if mine >= MAX_PER_CALLER {
            return Some((
                StatusCode::TOO_MANY_REQUESTS,
                format!("this user already has {mine} open sessions (at most {MAX_PER_CALLER}); end one (DELETE /mcp with its Mcp-Session-Id) or wait {} s for idle ones to close", IDLE.as_secs()),
            ));
        }
        if owners.len() >= MAX_SESSIONS {
            return Some((
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the gateway holds {MAX_SESSIONS} sessions, its most; try again later"),
            ));
        }
        None
    }
}

/// The layer around `/mcp` when sessions are on (inside authentication, which leaves the
/// request's `Caller`).
pub(super) async fn keep(State(sessions): State<Arc<Sessions>>, request: Request, next: Next) -> Response {
    let now = Instant::now();
    let caller = Caller::identity_in(request.extensions());
    let named = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &named {
        if !sessions.check(id, &caller, now) {
            tracing::info!("a request named another caller's session: answered as an unknown session");
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    } else if request.method() == Method::POST && !sessionless(&request) {
        // Only a request that may open a session needs the count of those still open.
        sessions.prune(now);
        if let Some((status, why)) = sessions.refusal(&caller) {
            return (status, why).into_response();
        }
    }
    let closing = request.method() == Method::DELETE;
    let response = next.run(request).await;
    let minted = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| HeaderValue::to_str(v).ok());
    if let Some(id) = minted.filter(|_| named.is_none()) {
        sessions.owners().insert(id.to_owned(), Owned { caller, seen: now });
    } else if let Some(id) = named.filter(|_| closing && response.status().is_success()) {
        sessions.owners().remove(&id);
    }
    response
}

/// Whether a request is of protocol 2026-07-28 or later (its version header says so, which
/// rmcp checks against the body), so it never opens a session.
fn sessionless(request: &Request) -> bool {
    request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|version| version >= "2026-07-28")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_is_its_openers_alone_and_sessions_are_bounded() {
        let sessions = Sessions::new();
        let now = Instant::now();
        sessions.owners().insert(
            "s1".into(),
            Owned {
                caller: "alice".into(),
                seen: now,
            },
        );
        assert!(sessions.check("s1", "alice", now));
        assert!(!sessions.check("s1", "bob", now), "bob cannot use alice's session");
        assert!(
            sessions.check("unknown", "bob", now),
            "unknown ids are rmcp's to refuse"
        );
        for i in 0..MAX_PER_CALLER {
            sessions.owners().insert(
                format!("a{i}"),
                Owned {
                    caller: "alice".into(),
                    seen: now,
                },
            );
        }
        let (status, why) = sessions.refusal("alice").unwrap();
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(why.contains("at most 16"), "{why}");
        assert!(sessions.refusal("bob").is_none(), "bob's count is his own");
        sessions.prune(now + IDLE);
        assert!(sessions.owners().is_empty(), "idle sessions are forgotten");
        assert!(sessions.refusal("alice").is_none());
        // One named again after its idle time is let go, whoever names it (rmcp answers 404).
        sessions.owners().insert(
            "s2".into(),
            Owned {
                caller: "alice".into(),
                seen: now,
            },
        );
        assert!(!sessions.check("s2", "bob", now));
        assert!(sessions.check("s2", "bob", now + IDLE));
        assert!(sessions.owners().is_empty(), "the idle session is forgotten");
    }
}
