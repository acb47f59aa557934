//! Connections to downstream MCP servers.
//!
//! Three layers, each owning one concern:
//! - `process` + `process_tree` + `reaper` + `diagnostics` + `launcher`: the OS side — a
//!   server runs in its own process group (job object on Windows) so the whole tree (`npx` →
//!   `node` → …, setsid grandchildren found through `/proc`) can be ended at once, even when
//!   the gateway dies of SIGKILL (the `reaper` watchdog); what it printed and how it exited;
//!   why a spawn failed and which file a bare command names on Windows (`npx` → `npx.cmd`);
//! - `connection`: one live rmcp client session — spawn, handshake, list tools, call, with
//!   progress routing and `tools/list_changed` events; `lines` is its stdio transport,
//!   `http` the HTTP client under rmcp's streamable-HTTP one (lost sessions as real servers
//!   report them), `sse` the legacy HTTP+SSE transport it falls back to, `url_text` how
//!   their URLs and errors are shown;
//! - `pool`: every configured server, its status, connecting with bounded concurrency,
//!   backoff after failures, reconnecting a crashed session, closing idle ones, and closing
//!   everything on shutdown.
//!
//! The engine owns the pool; nothing above the engine touches a connection.

mod connection;
mod diagnostics;
mod http;
mod launcher;
mod lines;
mod pool;
mod process;
mod process_tree;
#[cfg(unix)]
mod reaper;
mod sse;
mod url_text;

pub use connection::{CallFailure, Connection, ProgressSink, ProgressUpdate, UpstreamEvent};
pub use pool::{CallGuard, Pool, Server, ServerStatus};
pub use url_text::scrub_known;
