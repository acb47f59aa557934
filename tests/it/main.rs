//! Integration tests, one binary (fewer links on two cores).
//!
//! They drive the gateway with rmcp's client: in-process over a duplex pipe, and the native
//! binary over stdio against the reference servers installed by `npm install`.

mod gateway_in_process;
mod native_bin;
mod search_catalog;
mod visibility;
