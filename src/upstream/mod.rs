//! Connections to downstream MCP servers.
//!
//! Layers, each owning one concern:
//! - `process` + `process_tree` + `reaper` + `diagnostics` + `launcher`: the OS side — a
//!   server runs in its own process group (job object on Windows) so the whole tree (`npx` →
//!   `node` → …, setsid grandchildren found through `/proc`) can be ended at once, even when
//!   the gateway dies of SIGKILL (the `reaper` watchdog); what it printed and how it exited;
//!   why a spawn failed and which file a bare command names on Windows (`npx` → `npx.cmd`);
//! - transports: `stdio` spawns a server and watches its pipes, `lines` frames its messages;
//!   `remote` dials HTTP servers — `http` under rmcp's streamable-HTTP client (lost sessions
//!   as real servers report them), `sse` the legacy HTTP+SSE transport it falls back to,
//!   `url_text` how their URLs and errors are shown; every transport registers its spec's
//!   secrets with `crate::secrets` when it expands the spec, and texts leave here scrubbed;
//! - `oauth`: signing in to remote servers behind the MCP authorization spec — discovery,
//!   client identity, browser and loopback callback, refresh and step-up, the token store;
//! - `listing`: a server's tool list read tool by tool — invalid tools dropped with their
//!   reason, a name served once, a cap on how many are kept (and read);
//! - `client`: the MCP client we present to a server and the handshake every transport ends
//!   in, below both the transports and `connection`;
//! - `offer_events`: prompt and resource announcements of any session, to whoever listens;
//! - `connection`: one live rmcp client session — open, call with progress routing, re-list
//!   on `tools/list_changed`, close;
//! - `supervisor`: one handle per configured server — its state machine, connect slots,
//!   restart policy (backoff), idle close, shutdown — and the events the engine applies;
//! - `error`: why a server failed, typed, every text bounded.
//!
//! The engine owns the supervisor; nothing above the engine touches a connection.

mod client;
mod connection;
mod diagnostics;
mod error;
mod http;
mod launcher;
mod lines;
mod listing;
mod oauth;
mod offer_events;
mod process;
mod process_tree;
#[cfg(unix)]
mod reaper;
mod remote;
mod sse;
mod stdio;
mod supervisor;
mod url_text;

pub use crate::secrets::scrub as scrub_known;
pub use client::{forward_requests, ProgressSink, ProgressUpdate, RequestForwarder};
pub use error::UpstreamError;
/// Most bytes of one message to or from a stdio server (one line).
pub(crate) use lines::MAX_LINE_BYTES as MAX_MESSAGE_BYTES;
pub use listing::{as_listed, DroppedTool, ListingNotes};
pub(crate) use oauth::keychain::Keychain;
pub(crate) use oauth::per_user;
pub(crate) use oauth::{
    forget as forget_sign_in, is_waiting as sign_in_waiting, sign_in_wanted, stored_sign_ins, StoredSignIn,
};
pub use offer_events::{listen_offers, Listening, OfferEvent, OfferListener};
pub(crate) use remote::{install_crypto_provider, sign_in_now};
#[cfg(test)]
pub(crate) use supervisor::Trouble;
pub(crate) use supervisor::{
    is_bearer_token, CallError, Dial, Events, Handle, PoolChanges, ServerState, Supervisor, UpstreamEvent,
};

/// Lock one of upstream's mutexes. None is ever poisoned: no code panics while holding one.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .expect("upstream locks are never poisoned: no panics while held")
}
