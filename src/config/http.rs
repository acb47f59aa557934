//! `discovery.http`: how `serve --http` listens and whom it answers (the face is `crate::http`).
//!
//! Every field is optional: `serve --http HOST:PORT` alone serves loopback with the default
//! allow-lists. The canonical URL (`publicUrl`) is what clients are told to use; it widens the
//! Host and Origin allow-lists to itself and is the audience tokens must name once auth is
//! configured.

use serde::{Deserialize, Serialize};

/// Default time calls in flight get to finish after SIGTERM/SIGINT before they are cut.
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 10_000;

/// `discovery.http`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct HttpSpec {
    /// Where `serve --http` listens when the command line names no address: `HOST:PORT`
    /// (default `127.0.0.1:8080`). A non-loopback address is refused until auth is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The gateway's canonical URL as clients reach it (`https://mcp.example.com/mcp`): its
    /// host is allowed in `Host`, its origin in `Origin`, and it is the audience of tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// More `Host` values to answer (`name` or `name:port`), beside loopback on the bound port
    /// and `publicUrl`'s host. Anything else gets 403 (DNS rebinding protection).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (`https://app.example.com:443`, `http://localhost:*`),
    /// beside loopback on the bound port and `publicUrl`'s origin. A request with any other
    /// `Origin` gets 403; requests without `Origin` (not from a browser) are not affected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// After SIGTERM/SIGINT, how long calls in flight may still run before they are cut and
    /// the downstream servers closed (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout_ms: Option<u64>,
    /// Give clients before protocol 2026-07-28 a session (`Mcp-Session-Id`) held in this
    /// process, so a downstream server's elicitation, sampling or roots request reaches them
    /// during a call (default false: sessionless, any replica answers). Such a client must
    /// reach this same process for the session's life: one replica, or sticky routing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy_sessions: bool,
    /// Requests one authenticated caller may have answered at once (default 64; an answer
    /// that streams counts until it ends); past it, 429 with `Retry-After`. The local user
    /// (no auth) is not limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight_per_caller: Option<std::num::NonZeroU32>,
    /// Who may use `/mcp`: access tokens of OAuth issuers (team mode), or one static bearer
    /// token on loopback. Without it only loopback addresses are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<super::HttpAuthSpec>,
}

impl HttpSpec {
    #[must_use]
    pub fn drain_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.drain_timeout_ms.unwrap_or(DEFAULT_DRAIN_TIMEOUT_MS))
    }
}
