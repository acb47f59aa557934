//! The stdio MCP server the AI client talks to: five meta-tools over the engine.
//!
//! `meta_tool` turns a `tools/call` into one `MetaTool` value (or a JSON-RPC -32602 naming
//! the bad field); each meta-tool lives in `tools/`, owns its arguments, its definition and
//! how it applies to the engine. `server` is the rmcp handler and the serve loop with its
//! shutdown. Engine errors become `isError` results with the compact JSON body; downstream
//! results of `execute_tool` pass through unchanged.

mod meta_tool;
mod server;
mod tools;

pub use meta_tool::{definitions, MetaTool};
pub use server::{serve, serve_stdio, Gateway};
