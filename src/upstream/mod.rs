//! Connections to downstream MCP servers.
//!
//! Three layers, each owning one concern:
//! - `process`: the OS side — a server runs in its own process group so the whole tree
//!   (`npx` → `node` → …) can be ended at once;
//! - `connection`: one live rmcp client session — spawn, handshake, list tools, call;
//! - `pool`: every configured server, its status, connecting with bounded concurrency,
//!   reconnecting a closed session on the next call, closing everything on shutdown.
//!
//! The engine owns the pool; nothing above the engine touches a connection.

mod connection;
mod pool;
mod process;

pub use connection::{CallFailure, Connection};
pub use pool::{Pool, Server, ServerStatus};
