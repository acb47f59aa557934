//! The stdio MCP server the AI client talks to: five meta-tools over the engine.
//!
//! `meta_tool` turns a `tools/call` into one `MetaTool` value; an unknown tool name is a
//! JSON-RPC -32602, malformed arguments an `isError` `VALIDATION_ERROR` result naming the field
//! (SEP-1303). Each meta-tool lives in `tools/`, owns its arguments, its definition and how it
//! applies to the engine. `server` is the rmcp handler and the serve loop with its shutdown;
//! `wire` frames the client connection (answering malformed lines, classified by `inbound`,
//! that rmcp would drop) and `bound` keeps every message toward the client within size caps.
//! `forwarded` names, checks and bounds the requests downstream servers send the client during
//! an `execute_tool` (elicitation, sampling).
//! `to_client` is how a call reaches its client with a question (a session's request, a
//! 2026-07-28 round, or nobody); `rounds` runs the calls that ask in rounds of input-required
//! results with a sealed `requestState`.
//! `confirm` asks the client's human (elicitation) before a call toolRules `confirm` covers.
//! `exposed` lists and runs the tools `discovery.expose` shows beside the five, and says
//! when they change.
//! `offers` passes on the servers' prompts, resources and completions (named and routed by
//! `engine::offers`).
//! Engine errors become `isError` results with the compact JSON body; downstream results of
//! `execute_tool` pass through unchanged (bounded by `maxResultBytes`).

mod announce;
mod bound;
pub(crate) mod confirm;
pub(crate) mod exposed;
mod forwarded;
mod inbound;
pub(crate) mod meta_tool;
mod offers;
mod rounds;
mod server;
mod sign_in;
mod to_client;
mod tools;
mod wire;

pub use meta_tool::{definitions, MetaTool, Rejected};
pub use server::{serve, serve_stdio, Gateway};
pub use sign_in::SignInOrigin;
/// Longest request accepted from a client, on stdio (a line) and over HTTP (a body).
pub(crate) use wire::MAX_LINE_BYTES as MAX_REQUEST_BYTES;
