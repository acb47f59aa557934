//! @anygpt/discovery — an MCP gateway.
//!
//! An AI client connects to one stdio MCP server and, through five meta-tools
//! (`list_mcp_servers`, `search_tools`, `list_tools`, `get_tool_details`, `execute_tool`),
//! finds and runs the tools of many downstream MCP servers without holding their schemas.
//!
//! # Layout
//! ```text
//! config   ── load + validate (file or object)   ──►  ServerSpec[] + compiled RuleSet
//! rules    ── patterns (glob, /regex/flags, !negation) and rule evaluation
//! catalog  ── every tool per server with enabled/tags applied, summaries, on-disk snapshots
//! search   ── ranking over the catalog, "did you mean" suggestions
//! upstream ── one supervisor handle per downstream server: spawn or dial, handshake, calls,
//!             idle close, restart with backoff, process groups; typed errors; new tool
//!             lists leave as events the engine applies to the catalog
//! engine   ── Engine facade: list/search/details/execute/reload/close; argument validation,
//!             result caps
//! audit    ── the JSON Lines log of every execute
//! expose   ── `discovery.expose`: tools shown directly beside the five, and their names
//! confirm  ── `confirm` in toolRules: which calls need a human yes, and the question asked
//! stats    ── per server and tool: calls, errors by code, latency (in memory, or from the
//!             audit log)
//! text     ── texts others chose, cut to a length before they are quoted
//! caller   ── who is asking: the local user, or a caller the HTTP face authenticated
//! paths    ── platform cache/state directories, atomic writes
//! secrets  ── what counts as a secret in a launch spec, the register, scrubbing
//! secret_store ── named secrets in the OS keychain (or an owner-only file): `${secret:NAME}`
//! gateway  ── the MCP face exposing the five meta-tools (one handler for stdio and HTTP)
//! telemetry ── OpenTelemetry traces (off unless configured): W3C trace context in, a server
//!             span per request, a client span per downstream call (`traceparent` sent in
//!             `_meta`), batched OTLP/HTTP JSON export that never makes a call wait
//! http     ── team face: axum routes around the gateway handler (`serve --http`): /mcp
//!             sessionless, Host/Origin allow-lists, /healthz, /readyz, /metrics, drain;
//!             no per-client state; `http::auth` checks access tokens (OAuth resource
//!             server, static bearer token) and proves the caller
//! mcp_registry ── the MCP Registry API (`add`, `registry search`): server.json → ServerSpec
//! setup    ── a client's servers moved behind the gateway (its file edited in place, kept
//!             backed up) and restored; what the move saves in tokens
//! cli      ── clap commands over the engine (shared by the native bin and the npm bin)
//! watch    ── live reload: the config's files watched while serving, a change reloads
//! node     ── napi bindings (thin: convert types, call the engine)
//! error    ── one error enum with stable codes
//! ```
//! Data flows one way: config → catalog → search; the engine owns catalog and upstream;
//! gateway, http, cli and node only call the engine.

pub(crate) mod audit;
pub mod caller;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod confirm;
pub mod consent;
pub mod engine;
pub mod error;
pub mod expose;
pub mod gateway;
pub(crate) mod hash;
pub mod http;
pub(crate) mod lenient_json;
pub(crate) mod mcp_registry;
pub mod paths;
pub(crate) mod registry;
pub mod rules;
pub mod search;
pub(crate) mod secret_store;
// Public for `bench/scrub_fp.rs`, which measures its rules on real catalogs and configs.
#[doc(hidden)]
pub mod secrets;
pub(crate) mod setup;
pub mod shutdown;
pub mod stats;
pub mod store;
pub mod telemetry;
pub(crate) mod text;
pub mod trust;
pub(crate) mod upstream;
pub(crate) mod watch;

#[cfg(feature = "node")]
pub mod node;

pub use caller::Caller;
pub use config::Config;
pub use engine::Engine;
pub use error::{Error, ErrorCode, Result};
pub use upstream::UpstreamError;
