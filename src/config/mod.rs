//! Configuration: the `discovery` section, parsed, validated and compiled.
//!
//! `Config` is the only thing the engine takes. It is built from a JSON/YAML file read here
//! ([`Config::from_file`]) or from an already evaluated object — a TS/JS config loaded on the
//! JS side, or an object handed to the Node API ([`Config::from_value`]). Every error names
//! the origin, the path inside it (`discovery.toolRules[2].pattern[0]`) and the reason.
//! `${VAR}` references are kept as written and expanded only at launch (see `expand`).
//!
//! Which file is read is decided by [`locate`]; other clients' files are imported by
//! [`sources`] (the `sources` list, a client's file passed as the config, or zero-config).

pub(crate) mod document;
pub mod expand;
mod http;
pub mod http_auth;
mod humanize;
mod load;
pub mod locate;
mod rate;
mod schema;
pub mod sources;
pub mod store;
mod telemetry;
mod validate;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::consent::Scope;
use crate::consent::{Place, Skipped};
use crate::error::{Error, Result};
use crate::rules::{CallerMatcher, PatternList, Rule, RuleSet};

pub(crate) use document::{read_document, read_limited};
pub use http::{HttpSpec, DEFAULT_DRAIN_TIMEOUT_MS};
pub use http_auth::HttpAuthSpec;
pub use load::ZERO_CONFIG_ORIGIN;
pub use locate::{locate, Environment, Located, CONFIG_ENV};
pub use rate::{RateLimitsSpec, RateSpec};
pub use schema::json_schema;
pub use store::StoreSpec;
pub use telemetry::TelemetrySpec;

/// Default per-call timeout (DESIGN §6).
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// Default time a server gets to start and answer `initialize` + `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Default time an unused session stays open (DESIGN §6: 5 minutes).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Default cap on one tool result: about 250k tokens of text, more than any model reads at once.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;
/// Default size at which the audit log is rotated.
pub const DEFAULT_AUDIT_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// The `discovery` section as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct DiscoverySection {
    /// `false`: serve no servers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Catalog snapshots: tools known at start without connecting.
    #[serde(default)]
    pub cache: CacheSpec,
    /// The downstream MCP servers.
    #[serde(default)]
    pub servers: Vec<ServerSpec>,
    /// Imports from other clients' configs: `{ type, path? }` each (see `sources`), checked
    /// and read when the config is built.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<sources::SourceSpec>")]
    pub sources: Vec<Value>,
    /// Enable, disable and tag tools by pattern, in order (the first rule that sets `enabled`
    /// decides; any `enabled: true` turns on whitelist mode).
    #[serde(default)]
    pub tool_rules: Vec<ToolRuleSpec>,
    /// Tools shown to the client directly, beside the five meta-tools: `server:tool` patterns
    /// (globs, `/regex/flags`, a leading `!` hides), read in order. Named
    /// `<server>__<tool>` (or a rewritten name with a hash when that is not a valid name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose: Vec<String>,
    /// Default for every server's `idleTimeoutMs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Larger tool results are cut, with a marker saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_bytes: Option<usize>,
    /// The JSON Lines log of every `execute_tool`.
    #[serde(default)]
    pub audit: AuditSpec,
    #[serde(default)]
    pub security: SecuritySpec,
    /// Search: the optional semantic tier.
    #[serde(default)]
    pub search: SearchSpec,
    /// Base URL of the MCP Registry that `anygpt-discovery add` and `registry search` ask
    /// (default: the official one). The gateway itself never contacts a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// `serve --http`: listen address, canonical URL, Host/Origin allow-lists, drain time.
    #[serde(default, skip_serializing_if = "is_default")]
    pub http: HttpSpec,
    /// OpenTelemetry traces over OTLP/HTTP, and `traceparent` passed to downstream servers in
    /// `_meta`: off unless `endpoint` is set.
    #[serde(default, skip_serializing_if = "is_default")]
    pub telemetry: TelemetrySpec,
    /// The store replicas share (Redis, Valkey): catalog, vectors, pins, sign-ins, per-user
    /// tokens, rate limits. Off unless `url` is set: everything stays in this process.
    #[serde(default, skip_serializing_if = "is_default")]
    pub store: StoreSpec,
    /// Tool calls a caller, and a downstream server, may take a second (token buckets in the
    /// store, so replicas share them); past it a call answers `RATE_LIMITED` with when to retry.
    #[serde(default, skip_serializing_if = "is_default")]
    pub rate_limits: RateLimitsSpec,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Default for DiscoverySection {
    fn default() -> Self {
        Self {
            enabled: true,
            cache: CacheSpec::default(),
            servers: Vec::new(),
            sources: Vec::new(),
            tool_rules: Vec::new(),
            expose: Vec::new(),
            idle_timeout_ms: None,
            max_result_bytes: None,
            audit: AuditSpec::default(),
            security: SecuritySpec::default(),
            search: SearchSpec::default(),
            registry: None,
            http: HttpSpec::default(),
            telemetry: TelemetrySpec::default(),
            store: StoreSpec::default(),
            rate_limits: RateLimitsSpec::default(),
        }
    }
}

impl DiscoverySection {
    #[must_use]
    pub fn max_result_bytes(&self) -> usize {
        self.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES)
    }
}

/// `discovery.search`: the semantic tier (a sentence-embedding model fused with the lexical
/// ranking). Without a model search is lexical, with no error.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct SearchSpec {
    /// `false`: lexical search only, even when a model is installed.
    #[serde(default = "yes")]
    pub semantic: bool,
    /// The model folder (or the weights package's folder), relative to the config file;
    /// default: `ANYGPT_SEARCH_MODEL`, else `@anygpt/discovery-model-minilm` next to this package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Default for SearchSpec {
    fn default() -> Self {
        Self {
            semantic: true,
            model: None,
        }
    }
}

/// `discovery.security`: what the gateway does with tools its trust checks mark, and with the
/// requests servers send its client.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct SecuritySpec {
    /// Refuse to execute a tool with poisoning or shadowing warnings until it is trusted; also
    /// refuse (to the server) a forwarded elicitation or sampling request the checks flag.
    #[serde(default)]
    pub block_flagged: bool,
    /// What a tool that changed since it was first seen may do: run (`warn`) or not (`block`).
    #[serde(default)]
    pub on_tool_change: OnToolChange,
    /// How many elicitation and sampling requests each server may have forwarded to the client.
    #[serde(default)]
    pub forwarded: ForwardedLimits,
}

/// `discovery.security.forwarded`: per server, past either limit a request is refused to the
/// server at once (a JSON-RPC error saying which limit), never queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct ForwardedLimits {
    /// Requests of one server waiting for the client's answer at once (0: forward none).
    #[serde(default = "default_forwarded_concurrent")]
    pub max_concurrent: u32,
    /// Requests of one server forwarded in any 60 seconds.
    #[serde(default = "default_forwarded_per_minute")]
    pub per_minute: u32,
}

impl Default for ForwardedLimits {
    fn default() -> Self {
        Self {
            max_concurrent: default_forwarded_concurrent(),
            per_minute: default_forwarded_per_minute(),
        }
    }
}

fn default_forwarded_concurrent() -> u32 {
    4
}

fn default_forwarded_per_minute() -> u32 {
    30
}

/// `discovery.security.onToolChange`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[derive(schemars::JsonSchema)]
pub enum OnToolChange {
    /// Mark it and log it; it still runs.
    #[default]
    Warn,
    /// Mark it; refuse to run it until trusted.
    Block,
}

/// `discovery.audit`: the JSON Lines log of every `execute_tool`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct AuditSpec {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Defaults to `audit.jsonl` in the platform state directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Log argument values too (off: only their keys, since values may hold secrets).
    #[serde(default)]
    pub include_arguments: bool,
    /// Rotate (to `.1`) when the file grows past this.
    #[serde(default = "default_audit_max_bytes")]
    pub max_bytes: u64,
}

impl Default for AuditSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            path: None,
            include_arguments: false,
            max_bytes: DEFAULT_AUDIT_MAX_BYTES,
        }
    }
}

fn default_audit_max_bytes() -> u64 {
    DEFAULT_AUDIT_MAX_BYTES
}

fn yes() -> bool {
    true
}

/// `discovery.cache`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct CacheSpec {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Seconds.
    #[serde(default = "default_ttl")]
    pub ttl: u64,
}

impl Default for CacheSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl: default_ttl(),
        }
    }
}

fn default_ttl() -> u64 {
    3600
}

/// One downstream server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct ServerSpec {
    /// Unique, no `:` or whitespace: tools are addressed as `server:tool`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How the server is started (stdio) or reached (http, sse).
    pub connection: ConnectionSpec,
    /// Per-call default for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How long the server gets to start and list its tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_ms: Option<u64>,
    /// How long an unused session stays open; the next call reconnects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Tools declared in a custom source's `tools`: indexed without connecting, replaced by
    /// the list the server reports once it connects. Not part of the launch spec (a snapshot
    /// or reload never depends on it), nor of our own config format.
    #[serde(skip)]
    #[schemars(skip)]
    pub static_tools: Vec<rmcp::model::Tool>,
}

impl ServerSpec {
    #[must_use]
    pub fn call_timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS)
    }

    #[must_use]
    pub fn startup_timeout_ms(&self) -> u64 {
        self.startup_timeout_ms.unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS)
    }

    /// This server's idle timeout, else the section's, else the default.
    #[must_use]
    pub fn idle_timeout_ms(&self, section_default: Option<u64>) -> u64 {
        self.idle_timeout_ms
            .or(section_default)
            .unwrap_or(DEFAULT_IDLE_TIMEOUT_MS)
    }

    /// What this spec holds that is a secret of its server, registered as soon as the config
    /// is loaded, before any launch: a log line or an answer may quote a value before the
    /// server starts (the model passing a key as an argument, a debug log of it). `${VAR}`s are
    /// expanded as a launch would; one that cannot be is skipped here, and the launch reports it.
    #[must_use]
    pub fn secret_values(&self) -> Vec<String> {
        use crate::secrets::{arg_secrets, setting_secrets_named, url_secrets};
        let conn = &self.connection;
        let expand = |text: &str| expand::expand_env(text).ok();
        let args: Vec<String> = conn.args.iter().filter_map(|a| expand(a)).collect();
        let mut values = arg_secrets(&args);
        for (name, written) in conn.env.iter().chain(&conn.headers) {
            if let Some(value) = expand(written) {
                values.extend(setting_secrets_named(name, written, &value));
            }
        }
        if let Some(url) = conn
            .url
            .as_deref()
            .and_then(expand)
            .and_then(|u| reqwest::Url::parse(&u).ok())
        {
            values.extend(url_secrets(&url));
        }
        // An OAuth client secret is one whatever it looks like; the tokens it earns register
        // when the token store reads or writes them (`upstream::oauth`).
        if let Some(secret) = conn
            .oauth
            .as_ref()
            .and_then(|o| o.client_secret.as_deref())
            .and_then(expand)
        {
            values.push(secret);
        }
        values
    }
}

/// Transport of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(schemars::JsonSchema)]
pub enum TransportKind {
    /// A local process speaking MCP on stdin/stdout.
    #[default]
    Stdio,
    /// Streamable HTTP, falling back to legacy HTTP+SSE when the server does not speak it.
    Http,
    /// Legacy HTTP+SSE only (MCP 2024-11-05): `url` is the event stream.
    Sse,
}

/// `connection`: stdio (`command`, `args`, `env`, `cwd`) or http (`url`, `headers`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
#[schemars(transform = schema::connection_union)]
pub struct ConnectionSpec {
    /// `stdio` (the default), `http` (streamable HTTP, falling back to HTTP+SSE) or `sse`.
    #[serde(rename = "type", default)]
    pub kind: TransportKind,
    /// stdio: the program to run (`npx`, `node`, `uvx`, a path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments. `${VAR}` and `${VAR:-default}` expand from the environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: added to the gateway's environment; `${VAR}` expands at launch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: working folder, relative to the config file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// http/sse: the server's URL (for `sse`, its event stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// http/sse: sent with every request; `${VAR}` expands.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// http: how to sign in when the server asks for it (MCP authorization, OAuth 2.1). Without
    /// it a server that answers 401 is still signed in to, by dynamic client registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSpec>,
}

/// `connection.oauth`: the client identity and grant for a server behind OAuth sign-in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct OAuthSpec {
    /// A client id registered with the authorization server beforehand (used before a Client
    /// ID Metadata Document or dynamic registration). `${VAR}` expands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of `clientId`, for a confidential client. `${VAR}` expands; kept out of every
    /// log, answer and `config show`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// HTTPS URL of a Client ID Metadata Document naming this client, used as its client id
    /// where the authorization server supports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The client name sent with dynamic registration (default `anygpt-discovery`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// Scopes to ask for; without them, those the server's challenge names, else all it lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `authorizationCode` (the default: a person signs in in a browser) or
    /// `clientCredentials` (machine to machine: `clientId` and `clientSecret`, no browser).
    #[serde(default, skip_serializing_if = "OAuthGrant::is_default")]
    pub grant: OAuthGrant,
    /// The loopback port the browser is sent back to (default: a free one). Set it when the
    /// pre-registered client allows one redirect URI only: `http://127.0.0.1:<port>/callback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port: Option<u16>,
    /// Each caller signs in with their own account (`serve --http` with `auth.issuers`): the
    /// gateway keeps one connection per caller, each with that caller's token, never one
    /// shared sign-in. A call by someone not signed in yet answers with a link to
    /// `<publicUrl origin>/connect/<server>` (a URL-mode elicitation) that runs the sign-in in
    /// their browser; tokens are kept sealed in `discovery.store` per (issuer, subject,
    /// server). The tool list is that of the first caller who connected, or the declared
    /// `tools`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_user: bool,
    /// With `perUser`: most connections to this server kept open at once (one per caller;
    /// the least recently used closes first). Default 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_user_connections: Option<u32>,
    /// With `perUser`, where the server trusts the team's identity provider: no sign-in
    /// link; each caller's verified token (from `discovery.http.auth.issuers`) is exchanged
    /// at the provider for one for this server (RFC 8693 token exchange), as the gateway's
    /// client `clientId` / `clientSecret`, asking for `scopes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchangeSpec>,
}

/// `connection.oauth.tokenExchange`: where and how a caller's token is exchanged (RFC 8693).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct TokenExchangeSpec {
    /// The identity provider's token endpoint (https://, or http:// on loopback). `${VAR}`
    /// expands.
    pub token_endpoint: String,
    /// `audience` of the request: the name the provider knows this server by, if it wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `resource` of the request (RFC 8707); default the server's `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Whose tokens are exchanged: the `issuer` of one of `discovery.http.auth.issuers` (the
    /// provider at `tokenEndpoint`). Needed when more than one issuer is trusted, so no
    /// caller's token is ever sent to a provider that did not issue it; left out, the one
    /// trusted issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// What the caller's token is to the provider: `accessToken` (the default) or `jwt`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub subject_token_type: SubjectTokenType,
}

/// The `subject_token_type` of a token exchange.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[derive(schemars::JsonSchema)]
pub enum SubjectTokenType {
    /// `urn:ietf:params:oauth:token-type:access_token`
    #[default]
    AccessToken,
    /// `urn:ietf:params:oauth:token-type:jwt`
    Jwt,
}

impl SubjectTokenType {
    /// The token type URI RFC 8693 names it by.
    #[must_use]
    pub fn uri(self) -> &'static str {
        match self {
            Self::AccessToken => "urn:ietf:params:oauth:token-type:access_token",
            Self::Jwt => "urn:ietf:params:oauth:token-type:jwt",
        }
    }
}

/// Connections one per-user server keeps open unless `maxUserConnections` says.
pub const DEFAULT_MAX_USER_CONNECTIONS: u32 = 64;

impl OAuthSpec {
    /// Most per-caller connections of a per-user server.
    #[must_use]
    pub fn max_user_connections(&self) -> usize {
        self.max_user_connections.unwrap_or(DEFAULT_MAX_USER_CONNECTIONS).max(1) as usize
    }
}

impl ServerSpec {
    /// Whether each caller connects to this server with their own credentials.
    #[must_use]
    pub fn is_per_user(&self) -> bool {
        self.connection.oauth.as_ref().is_some_and(|o| o.per_user)
    }

    /// How callers' tokens are exchanged for this per-user server's, if they are (else each
    /// caller signs in through a link).
    #[must_use]
    pub fn token_exchange(&self) -> Option<&TokenExchangeSpec> {
        self.connection
            .oauth
            .as_ref()
            .filter(|o| o.per_user)
            .and_then(|o| o.token_exchange.as_ref())
    }
}

/// `connection.oauth.grant`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[derive(schemars::JsonSchema)]
pub enum OAuthGrant {
    #[default]
    AuthorizationCode,
    ClientCredentials,
}

impl OAuthGrant {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
    fn is_default(&self) -> bool {
        *self == Self::AuthorizationCode
    }
}

impl ConnectionSpec {
    /// Every setting that `${VAR}`s expand in, each with its place under `at` (`….args[0]`,
    /// `….env.KEY`): the syntax check at load and the unset-variable warnings look at the same
    /// settings a launch expands.
    pub(crate) fn expandable<'a>(&'a self, at: &'a str) -> impl Iterator<Item = (String, &'a String)> + 'a {
        let args = self
            .args
            .iter()
            .enumerate()
            .map(move |(i, a)| (format!("{at}.args[{i}]"), a));
        let env = self.env.iter().map(move |(k, v)| (format!("{at}.env.{k}"), v));
        let headers = self.headers.iter().map(move |(k, v)| (format!("{at}.headers.{k}"), v));
        let command = self.command.iter().map(move |c| (format!("{at}.command"), c));
        let cwd = self.cwd.iter().map(move |c| (format!("{at}.cwd"), c));
        let url = self.url.iter().map(move |u| (format!("{at}.url"), u));
        let oauth = self.oauth.iter().flat_map(move |o| {
            let id = o.client_id.iter().map(move |v| (format!("{at}.oauth.clientId"), v));
            let exchange = o
                .token_exchange
                .iter()
                .map(move |x| (format!("{at}.oauth.tokenExchange.tokenEndpoint"), &x.token_endpoint));
            id.chain(
                o.client_secret
                    .iter()
                    .map(move |v| (format!("{at}.oauth.clientSecret"), v)),
            )
            .chain(exchange)
        });
        args.chain(env)
            .chain(headers)
            .chain(command)
            .chain(cwd)
            .chain(url)
            .chain(oauth)
    }
}

/// One entry of `toolRules`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct ToolRuleSpec {
    /// Only this server's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Globs (`*github*`), regexes (`/issue/i`) and negations (`!*delete*`), read in order.
    pub pattern: OneOrMany,
    /// The first matching rule that sets this decides; any `true` turns on whitelist mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Added from every matching rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Only for these callers of the HTTP face (never the local user): a matching caller rule
    /// that says `enabled: false` hides the tools from them, one that says `true` lets them see
    /// and run the tools. Must set `enabled`; takes no `tags`; never turns on whitelist mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callers: Option<CallersSpec>,
    /// Ask the human before each call: `true` (refused when the client cannot ask),
    /// `"when-supported"` (asked when the client can, run otherwise) or `false`. The first
    /// matching rule that sets this decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<ConfirmSpec>,
}

/// `confirm` of a tool rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[derive(schemars::JsonSchema)]
pub enum ConfirmSpec {
    /// `true`: always ask, refuse when the client cannot; `false`: never ask.
    Always(bool),
    /// `"when-supported"`: ask when the client can.
    Mode(ConfirmMode),
}

/// The named `confirm` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[derive(schemars::JsonSchema)]
pub enum ConfirmMode {
    WhenSupported,
}

/// `callers` of a toolRule: a caller matches when its subject matches `subjects` or one of its
/// groups matches `groups` (patterns as in `pattern`, read in order).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct CallersSpec {
    /// Patterns over the caller's subject (the token's `sub`), e.g. `["alice", "svc-*"]`;
    /// `["*"]` is every authenticated caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subjects: Option<Vec<String>>,
    /// Patterns over the caller's groups (the configured groups or roles claim), e.g.
    /// `["admins"]` or `["!contractors", "*"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
}

/// `pattern: "x"` or `pattern: ["x", "y"]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
#[derive(schemars::JsonSchema)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    #[must_use]
    pub fn as_slice(&self) -> &[String] {
        match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        }
    }
}

/// A validated configuration with its rules compiled.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub discovery: DiscoverySection,
    /// Where it came from: a file path, or `<object>`.
    pub origin: String,
    rules: RuleSet,
    /// `discovery.expose`, compiled.
    expose: crate::expose::Expose,
    /// The `confirm` of the tool rules, compiled.
    confirm: crate::confirm::ConfirmRules,
    /// The config file (if any), then every source file read.
    files: Vec<std::path::PathBuf>,
    /// Every source file looked for, found or not.
    looked: Vec<std::path::PathBuf>,
    /// What was looked at and found (stderr at info level).
    notes: Vec<String>,
    /// What will likely fail later: a command not on PATH, an unset variable (stderr, warn).
    warnings: Vec<String>,
    /// Where the config itself came from: the user's own place, or an approved project file.
    /// What a config may name (paths it writes to) depends on it.
    pub scope: Scope,
    /// Project places passed over for want of approval (the fix is in each).
    skipped: Vec<Skipped>,
    /// Project places in use, with the content hash each was approved on.
    approved: Vec<(Place, String)>,
}

impl Config {
    /// Parse and validate a document `{ "discovery": { … } }`. A bare discovery section
    /// (an object without a `discovery` key) is accepted too, as the Node API allows, and so
    /// is a client's own file (`mcpServers`, `servers` or `context_servers` at the top). When
    /// `origin` is an `anygpt.config.*` file only its `discovery` section is read. Sources are
    /// imported here, so this reads their files.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` naming `origin`, the path inside the document and the reason.
    pub fn from_value(value: Value, origin: &str) -> Result<Self> {
        load::from_value(value, origin, &Environment::current(), Scope::User)
    }

    /// [`Config::from_value`] for the machine `env` describes (tests use a temporary HOME).
    ///
    /// # Errors
    /// As [`Config::from_value`].
    pub fn from_value_in(value: Value, origin: &str, env: &Environment) -> Result<Self> {
        load::from_value(value, origin, env, Scope::User)
    }

    /// Load what [`locate`] chose: the file, or zero-config (every known client's config that
    /// exists). A TS/JS winner is an error here: the JS side evaluates it and calls
    /// [`Config::from_value`].
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn load(located: &Located, env: &Environment) -> Result<Self> {
        let mut config = match &located.file {
            Some(path) => {
                let approved = located.approved.as_ref().map(|(_, hash)| hash.as_str());
                load::from_file_approved(path, env, located.scope, approved)?
            }
            None => load::zero_config(located, env),
        };
        if let Some(approved) = &located.approved {
            config.approved.insert(0, approved.clone());
        }
        config.add_skipped(located.skipped.iter().cloned());
        Ok(config)
    }

    /// [`Config::from_value`] for an object evaluated from a file `locate` chose (a TS/JS
    /// config), with that file's scope and what the search passed over.
    ///
    /// # Errors
    /// As [`Config::from_value`].
    pub fn from_located_value(value: Value, origin: &str, located: &Located, env: &Environment) -> Result<Self> {
        let from_search = located.file.as_deref() == Some(std::path::Path::new(origin));
        let scope = if from_search { located.scope } else { Scope::User };
        let mut config = load::from_value(value, origin, env, scope)?;
        if let Some(approved) = located.approved.as_ref().filter(|_| from_search) {
            config.approved.insert(0, approved.clone());
        }
        config.add_skipped(located.skipped.iter().cloned());
        Ok(config)
    }

    /// Every file this config was built from: the config file itself (if it came from one),
    /// then each source file read, in order. What a file watcher watches to reload.
    #[must_use]
    pub fn files_read(&self) -> &[std::path::PathBuf] {
        &self.files
    }

    /// [`Config::files_read`] plus every client file looked for but not found: what a file
    /// watcher watches so that creating, say, a Claude Desktop config is noticed too.
    #[must_use]
    pub fn files_to_watch(&self) -> Vec<std::path::PathBuf> {
        let mut files = self.files.clone();
        for path in &self.looked {
            if !files.contains(path) {
                files.push(path.clone());
            }
        }
        files
    }

    /// Lines for stderr saying where the config came from and what each source held.
    #[must_use]
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Lines for stderr about what will likely fail when a server starts (each names the
    /// file, the place inside it and the fix).
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Project places passed over for want of approval: what `list_mcp_servers`, `list`,
    /// `config sources` and stderr name, each with the command that approves it.
    #[must_use]
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Project places in use, each with the content hash it was approved on.
    #[must_use]
    pub fn approved(&self) -> &[(Place, String)] {
        &self.approved
    }

    /// Add places the search passed over before this config was chosen.
    pub(crate) fn add_skipped(&mut self, skipped: impl IntoIterator<Item = Skipped>) {
        for skip in skipped {
            if !self.skipped.contains(&skip) {
                self.skipped.push(skip);
            }
        }
    }

    /// Read a JSON (comments and trailing commas allowed) or YAML file, by extension.
    ///
    /// # Errors
    /// An unreadable file, a syntax error, or an invalid config.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        load::from_file(path, &Environment::current(), Scope::User)
    }

    /// An empty config (no servers, no rules).
    #[must_use]
    pub fn empty() -> Self {
        Self {
            origin: "<defaults>".into(),
            ..Self::default()
        }
    }

    /// The compiled tool rules.
    #[must_use]
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The compiled `discovery.expose`.
    #[must_use]
    pub fn expose(&self) -> &crate::expose::Expose {
        &self.expose
    }

    /// Which tools ask the human before a call.
    #[must_use]
    pub fn confirm(&self) -> &crate::confirm::ConfirmRules {
        &self.confirm
    }

    /// Servers, or none when `discovery.enabled` is false.
    #[must_use]
    pub fn servers(&self) -> &[ServerSpec] {
        if self.discovery.enabled {
            &self.discovery.servers
        } else {
            &[]
        }
    }

    /// The config as written, secrets replaced by `***`: every `env` and `headers` value,
    /// a URL's password and secret query values, and credential arguments (`--token=…`,
    /// key-shaped values), by the rules of `crate::secrets`. Values that only reference a
    /// variable (`${TOKEN}`) are kept: they name a secret, they are not one.
    #[must_use]
    pub fn redacted(&self) -> Value {
        let mut section = self.discovery.clone();
        for server in &mut section.servers {
            let conn = &mut server.connection;
            let oauth_secret = conn.oauth.as_mut().and_then(|o| o.client_secret.as_mut());
            for value in conn
                .env
                .values_mut()
                .chain(conn.headers.values_mut())
                .chain(oauth_secret)
            {
                if !crate::secrets::is_single_reference(value) {
                    crate::secrets::MASK.clone_into(value);
                }
            }
            conn.args = crate::secrets::redact_args(&conn.args);
            if let Some(description) = &mut server.description {
                if let std::borrow::Cow::Owned(masked) = crate::secrets::mask_key_shaped(description) {
                    *description = masked;
                }
            }
            if let Some(url) = &mut conn.url {
                *url = crate::secrets::redact_url(url);
            }
        }
        let telemetry = &mut section.telemetry;
        for value in telemetry.headers.values_mut() {
            if !crate::secrets::is_single_reference(value) {
                crate::secrets::MASK.clone_into(value);
            }
        }
        if let Some(endpoint) = &mut telemetry.endpoint {
            *endpoint = crate::secrets::redact_url(endpoint);
        }
        let store = &mut section.store;
        if let Some(url) = &mut store.url {
            *url = crate::secrets::redact_url(url);
        }
        if let Some(key) = &mut store.key {
            if !crate::secrets::is_single_reference(key) {
                crate::secrets::MASK.clone_into(key);
            }
        }
        let mut shown = serde_json::json!({ "discovery": section });
        // Anything else that quotes a secret already registered (a description, a `cwd`).
        crate::secrets::scrub_json(&mut shown);
        shown
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks serde cannot express; compiles the rules.
fn validate_section(section: &DiscoverySection, origin: &str) -> Result<RuleSet> {
    let err = |path: String, reason: String| Error::config(origin, path, reason);
    // 0 would close every session right after each call and respawn the server per call.
    if section.idle_timeout_ms == Some(0) {
        return Err(err("discovery.idleTimeoutMs".into(), "must be greater than 0".into()));
    }
    if section.max_result_bytes == Some(0) {
        return Err(err("discovery.maxResultBytes".into(), "must be greater than 0".into()));
    }
    section.telemetry.check().map_err(|(path, reason)| err(path, reason))?;
    section.store.check().map_err(|(path, reason)| err(path, reason))?;
    section
        .rate_limits
        .check()
        .map_err(|(path, reason)| err(path, reason))?;
    let mut seen = std::collections::HashSet::new();
    for (i, server) in section.servers.iter().enumerate() {
        let at = format!("discovery.servers[{i}]");
        validate_server(server, &at).map_err(|(path, reason)| err(path, reason))?;
        if !seen.insert(server.name.as_str()) {
            return Err(err(
                format!("{at}.name"),
                format!(
                    "duplicate server name `{}`: rename one (tools are addressed as `server:tool`)",
                    server.name
                ),
            ));
        }
    }
    check_per_user_servers(section).map_err(|(path, reason)| err(path, reason))?;
    let mut rules = Vec::with_capacity(section.tool_rules.len());
    for (i, spec) in section.tool_rules.iter().enumerate() {
        let at = format!("discovery.toolRules[{i}]");
        let patterns = spec.pattern.as_slice();
        if patterns.is_empty() {
            return Err(err(format!("{at}.pattern"), "pattern list is empty".into()));
        }
        let compiled = PatternList::parse(patterns).map_err(|(j, e)| {
            let path = match spec.pattern {
                OneOrMany::One(_) => format!("{at}.pattern"),
                OneOrMany::Many(_) => format!("{at}.pattern[{j}]"),
            };
            err(path, e.to_string())
        })?;
        let callers = match &spec.callers {
            Some(callers) => Some(validate_callers(spec, callers, &at).map_err(|(path, reason)| err(path, reason))?),
            None => None,
        };
        rules.push(Rule {
            server: spec.server.clone(),
            patterns: compiled,
            enabled: spec.enabled,
            tags: spec.tags.clone(),
            callers,
        });
    }
    Ok(RuleSet::new(rules))
}

/// A toolRule's `callers`, compiled; the rule around it must fit a caller rule (module docs of
/// `rules::rule_set`).
fn validate_callers(
    spec: &ToolRuleSpec,
    callers: &CallersSpec,
    at: &str,
) -> std::result::Result<CallerMatcher, (String, String)> {
    if spec.enabled.is_none() {
        return Err((
            format!("{at}.enabled"),
            "a rule with `callers` must set `enabled`: `false` hides the tools from those callers, `true` lets them see and run them".into(),
        ));
    }
    if !spec.tags.is_empty() {
        return Err((
            format!("{at}.tags"),
            "a rule with `callers` cannot add tags (tags are searched by every caller): move the tags to a rule without `callers`".into(),
        ));
    }
    let list = |field: &str,
                patterns: Option<&Vec<String>>|
     -> std::result::Result<Option<PatternList>, (String, String)> {
        let Some(patterns) = patterns else {
            return Ok(None);
        };
        if patterns.is_empty() {
            return Err((
                format!("{at}.callers.{field}"),
                format!("pattern list is empty: name at least one {field} pattern (`[\"*\"]` matches every caller), or leave `{field}` out"),
            ));
        }
        PatternList::parse(patterns).map(Some).map_err(|(j, e)| {
            (
                format!("{at}.callers.{field}[{j}]"),
                format!("{e}: write a glob (`admins`, `team-*`) or a regex (`/^team-/i`), `!` in front to exclude"),
            )
        })
    };
    let matcher = CallerMatcher {
        subjects: list("subjects", callers.subjects.as_ref())?,
        groups: list("groups", callers.groups.as_ref())?,
    };
    if matcher.subjects.is_none() && matcher.groups.is_none() {
        return Err((
            format!("{at}.callers"),
            "names no caller: give `subjects` and/or `groups` (`subjects: [\"*\"]` is every authenticated caller)"
                .into(),
        ));
    }
    Ok(matcher)
}

/// `discovery.expose` compiled, or the error naming the bad entry.
fn compile_expose(section: &DiscoverySection, origin: &str) -> Result<crate::expose::Expose> {
    crate::expose::Expose::parse(&section.expose)
        .map_err(|(i, e)| Error::config(origin, format!("discovery.expose[{i}]"), e.to_string()))
}

/// The `confirm` of every tool rule, with the rule's server and patterns (checked already by
/// [`validate_section`]).
fn compile_confirm(section: &DiscoverySection) -> crate::confirm::ConfirmRules {
    crate::confirm::ConfirmRules::new(section.tool_rules.iter().filter_map(|spec| {
        let confirm = spec.confirm?;
        let patterns = PatternList::parse(spec.pattern.as_slice()).ok()?;
        Some((spec.server.clone(), patterns, confirm))
    }))
}

pub(crate) fn validate_server(server: &ServerSpec, at: &str) -> std::result::Result<(), (String, String)> {
    if server.name.trim().is_empty() {
        return Err((
            format!("{at}.name"),
            "server name is empty: give the server a name".into(),
        ));
    }
    if server.name.contains(':') || server.name.chars().any(char::is_whitespace) {
        return Err((
            format!("{at}.name"),
            format!(
                "server name `{}` may not contain `:` or whitespace (tools are addressed as `server:tool`): use `-` instead",
                server.name
            ),
        ));
    }
    for (field, value) in [
        ("timeoutMs", server.timeout_ms),
        ("startupTimeoutMs", server.startup_timeout_ms),
        ("idleTimeoutMs", server.idle_timeout_ms),
    ] {
        if value == Some(0) {
            return Err((format!("{at}.{field}"), "must be greater than 0".into()));
        }
    }
    let conn = &server.connection;
    let at = format!("{at}.connection");
    match conn.kind {
        TransportKind::Stdio if conn.command.as_deref().is_none_or(|c| c.trim().is_empty()) => {
            return Err((format!("{at}.command"), "a stdio connection needs a `command`".into()));
        }
        TransportKind::Http | TransportKind::Sse if conn.url.as_deref().is_none_or(|u| u.trim().is_empty()) => {
            return Err((format!("{at}.url"), "an http or sse connection needs a `url`".into()));
        }
        _ => {}
    }
    if let Some(oauth) = &conn.oauth {
        check_oauth(oauth, conn.kind, &format!("{at}.oauth"))?;
    }
    for (path, text) in conn.expandable(&at) {
        expand::check(text).map_err(|e| (path, e.to_string()))?;
    }
    Ok(())
}

/// `connection.oauth`: only http servers sign in, and the client-credentials grant needs the
/// client's id and secret.
fn check_oauth(oauth: &OAuthSpec, kind: TransportKind, at: &str) -> Result<(), (String, String)> {
    if oauth.per_user && kind != TransportKind::Http {
        return Err((
            format!("{at}.perUser"),
            "per-user credentials are for remote `http` servers (a local process has no accounts to sign in to): set `type: \"http\"` and `url`, or remove `perUser`".into(),
        ));
    }
    if kind != TransportKind::Http {
        return Err((
            at.to_owned(),
            "only `http` connections sign in with OAuth: remove `oauth` or set `type: \"http\"`".into(),
        ));
    }
    if oauth.grant == OAuthGrant::ClientCredentials && (oauth.client_id.is_none() || oauth.client_secret.is_none()) {
        return Err((
            format!("{at}.grant"),
            "`clientCredentials` needs `clientId` and `clientSecret` (the client signs in as itself)".into(),
        ));
    }
    if oauth.client_secret.is_some() && oauth.client_id.is_none() {
        return Err((
            format!("{at}.clientSecret"),
            "a `clientSecret` needs the `clientId` it belongs to".into(),
        ));
    }
    if oauth.per_user {
        check_per_user(oauth, at)?;
    }
    if let Some(exchange) = &oauth.token_exchange {
        check_token_exchange(oauth, exchange, at)?;
    }
    if let Some(url) = &oauth.client_metadata_url {
        if !url.starts_with("https://") {
            return Err((
                format!("{at}.clientMetadataUrl"),
                "must be an https:// URL (a Client ID Metadata Document)".into(),
            ));
        }
    }
    Ok(())
}

/// `oauth.perUser`: a person signs in, so no client-credentials grant, and the sign-in comes
/// back to the gateway's `/connect/callback`, never to a loopback port.
fn check_per_user(oauth: &OAuthSpec, at: &str) -> Result<(), (String, String)> {
    if oauth.grant == OAuthGrant::ClientCredentials {
        return Err((
            format!("{at}.perUser"),
            "`perUser` needs each person's own sign-in; `clientCredentials` signs in as the gateway: remove one".into(),
        ));
    }
    if oauth.redirect_port.is_some() {
        return Err((
            format!("{at}.redirectPort"),
            "a `perUser` sign-in returns to the gateway's `/connect/callback`, not a loopback port: remove `redirectPort` (register `<publicUrl origin>/connect/callback` with a pre-registered client)".into(),
        ));
    }
    if oauth.max_user_connections == Some(0) {
        return Err((format!("{at}.maxUserConnections"), "must be greater than 0".into()));
    }
    Ok(())
}

/// `oauth.tokenExchange`: for per-user servers, as a client the provider knows, to a token
/// endpoint no one can read the caller's token from on the way.
fn check_token_exchange(oauth: &OAuthSpec, exchange: &TokenExchangeSpec, at: &str) -> Result<(), (String, String)> {
    let here = format!("{at}.tokenExchange");
    if !oauth.per_user {
        return Err((
            here,
            "token exchange gets each caller their own token: set `perUser: true` beside it, or remove `tokenExchange`"
                .into(),
        ));
    }
    if oauth.client_id.is_none() {
        return Err((
            format!("{at}.clientId"),
            "token exchange asks the identity provider as the gateway's client: set `clientId` (and `clientSecret` for a confidential client)".into(),
        ));
    }
    // A `${VAR}` endpoint is checked when it expands, at the exchange.
    if !exchange.token_endpoint.contains("${") {
        check_secure_endpoint(&exchange.token_endpoint)
            .map_err(|reason| (format!("{here}.tokenEndpoint"), reason.to_string()))?;
    }
    for (field, value) in [("audience", &exchange.audience), ("resource", &exchange.resource)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err((
                format!("{here}.{field}"),
                "must not be empty: give a value or remove it".into(),
            ));
        }
    }
    Ok(())
}

/// `tokenExchange.issuer`: one of the trusted issuers, and named whenever there is a choice,
/// so a caller's token goes only to the provider that issued it.
fn check_exchange_issuer(exchange: &TokenExchangeSpec, issuers: &[&str], at: &str) -> Result<(), (String, String)> {
    match &exchange.issuer {
        Some(issuer) if !issuers.contains(&issuer.trim()) => Err((
            at.to_owned(),
            format!(
                "`{issuer}` is not one of `discovery.http.auth.issuers` ({}): name the issuer whose tokens the provider at `tokenEndpoint` exchanges",
                issuers.join(", ")
            ),
        )),
        None if issuers.len() > 1 => Err((
            at.to_owned(),
            "several issuers are trusted: name the one whose tokens the provider at `tokenEndpoint` exchanges, so no other issuer's token is sent there".into(),
        )),
        _ => Ok(()),
    }
}

/// Name the issuer of each `tokenExchange` that leaves it out: the one issuer the config trusts
/// ([`check_exchange_issuer`] refuses an unnamed one when several are). Pinned when the config
/// loads, so a reload that drops an issuer stops its tokens being exchanged at once, although
/// `serve --http` accepts that issuer's tokens until it restarts (its auth applies at start).
fn pin_exchange_issuers(section: &mut DiscoverySection) {
    let [only] = section
        .http
        .auth
        .as_ref()
        .map(|auth| auth.issuers.as_slice())
        .unwrap_or_default()
    else {
        return;
    };
    let only = only.issuer.trim().to_owned();
    for server in &mut section.servers {
        if let Some(exchange) = server
            .connection
            .oauth
            .as_mut()
            .filter(|o| o.per_user)
            .and_then(|o| o.token_exchange.as_mut())
        {
            exchange.issuer.get_or_insert_with(|| only.clone());
        }
    }
}

/// Why a URL is not an endpoint a credential may be sent to.
#[derive(Debug, thiserror::Error)]
pub enum InsecureEndpoint {
    #[error("`{0}` is not an absolute URL ({1})")]
    NotUrl(String, url::ParseError),
    #[error("`{0}` must be https (http only on loopback): a token sent over plain HTTP is read by anyone on the way")]
    PlainHttp(String),
}

/// `text` as an endpoint a credential may be sent to: https, or http on loopback only.
pub(crate) fn check_secure_endpoint(text: &str) -> Result<url::Url, InsecureEndpoint> {
    let url = url::Url::parse(text.trim()).map_err(|e| InsecureEndpoint::NotUrl(text.to_owned(), e))?;
    if url.scheme() == "https" || (url.scheme() == "http" && is_loopback_host(&url)) {
        return Ok(url);
    }
    Err(InsecureEndpoint::PlainHttp(text.to_owned()))
}

/// Whether `url` names this machine (`localhost` or a loopback address).
#[must_use]
pub fn is_loopback_host(url: &url::Url) -> bool {
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Per-user servers need callers who are someone: `discovery.http.auth.issuers` (a static
/// bearer token names nobody), and no fixed `Authorization` header (that would be one shared
/// credential).
fn check_per_user_servers(section: &DiscoverySection) -> Result<(), (String, String)> {
    for (i, server) in section.servers.iter().enumerate() {
        if !server.is_per_user() {
            continue;
        }
        if server.name == "callback" {
            return Err((
                format!("discovery.servers[{i}].name"),
                "a `perUser` server may not be named `callback` (its sign-in page would be the gateway's /connect/callback): rename it".into(),
            ));
        }
        let at = format!("discovery.servers[{i}].connection");
        if server
            .connection
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"))
        {
            return Err((
                format!("{at}.headers.Authorization"),
                "a `perUser` server gets each caller's own token; a fixed Authorization header would be shared by all: remove it".into(),
            ));
        }
        if section.http.auth.as_ref().is_none_or(|auth| auth.issuers.is_empty()) {
            return Err((
                format!("{at}.oauth.perUser"),
                "per-user credentials need callers the gateway knows: configure `discovery.http.auth.issuers` (team sign-in) and serve with `serve --http`, or remove `perUser`".into(),
            ));
        }
        if let Some(exchange) = server.token_exchange() {
            let issuers: Vec<&str> = section
                .http
                .auth
                .iter()
                .flat_map(|auth| auth.issuers.iter().map(|i| i.issuer.trim()))
                .collect();
            check_exchange_issuer(exchange, &issuers, &format!("{at}.oauth.tokenExchange.issuer"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_err(value: Value) -> (String, String) {
        match Config::from_value(value, "test.json").unwrap_err() {
            Error::Configuration { path, reason, origin } => {
                assert_eq!(origin, "test.json");
                (path, reason)
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    fn server(name: &str) -> Value {
        json!({ "name": name, "connection": { "command": "node", "args": ["x.js"] } })
    }

    #[test]
    fn minimal_config_loads_with_defaults() {
        let config = Config::from_value(json!({ "discovery": { "servers": [server("a")] } }), "x").unwrap();
        assert!(config.discovery.enabled);
        assert_eq!(config.discovery.cache.ttl, 3600);
        assert_eq!(config.servers()[0].connection.kind, TransportKind::Stdio);
        assert_eq!(config.servers()[0].call_timeout_ms(), DEFAULT_CALL_TIMEOUT_MS);
    }

    #[test]
    fn bare_section_is_accepted() {
        let config = Config::from_value(json!({ "servers": [server("a")] }), "x").unwrap();
        assert_eq!(config.servers().len(), 1);
    }

    #[test]
    fn disabled_discovery_has_no_servers() {
        let config = Config::from_value(
            json!({ "discovery": { "enabled": false, "servers": [server("a")] } }),
            "x",
        )
        .unwrap();
        assert!(config.servers().is_empty());
    }

    #[test]
    fn bad_rule_pattern_names_rule_and_pattern_index() {
        let (path, reason) = config_err(json!({ "discovery": { "toolRules": [
            { "pattern": "*ok*" }, { "pattern": ["*ok*"] }, { "pattern": ["*a*", "/(x/"] }
        ] } }));
        assert_eq!(path, "discovery.toolRules[2].pattern[1]");
        assert!(reason.contains("/(x/"), "{reason}");
    }

    #[test]
    fn a_caller_rule_is_checked_where_it_is_wrong_with_the_fix() {
        let rule = |rule: Value| config_err(json!({ "discovery": { "toolRules": [{ "pattern": "*" }, rule] } }));
        let (path, reason) =
            rule(json!({ "pattern": "*", "enabled": false, "callers": { "groups": ["admins", "/(x/"] } }));
        assert_eq!(path, "discovery.toolRules[1].callers.groups[1]");
        assert!(reason.contains("/(x/") && reason.contains("write a glob"), "{reason}");
        let (path, reason) = rule(json!({ "pattern": "*", "enabled": false, "callers": { "subjects": [] } }));
        assert_eq!(path, "discovery.toolRules[1].callers.subjects");
        assert!(reason.contains("pattern list is empty"), "{reason}");
        let (path, reason) = rule(json!({ "pattern": "*", "enabled": false, "callers": {} }));
        assert_eq!(path, "discovery.toolRules[1].callers");
        assert!(reason.contains("`subjects` and/or `groups`"), "{reason}");
        let (path, reason) = rule(json!({ "pattern": "*", "callers": { "subjects": ["bob"] } }));
        assert_eq!(path, "discovery.toolRules[1].enabled");
        assert!(reason.contains("must set `enabled`"), "{reason}");
        let (path, reason) =
            rule(json!({ "pattern": "*", "enabled": true, "tags": ["x"], "callers": { "subjects": ["bob"] } }));
        assert_eq!(path, "discovery.toolRules[1].tags");
        assert!(reason.contains("move the tags"), "{reason}");
        let (path, reason) = rule(json!({ "pattern": "*", "enabled": true, "callers": { "users": ["bob"] } }));
        assert_eq!(path, "discovery.toolRules[1].callers.users");
        assert!(reason.contains("subjects"), "{reason}");
    }

    #[test]
    fn a_caller_rule_that_enables_is_no_whitelist() {
        let config = Config::from_value(
            json!({ "toolRules": [{ "pattern": "*", "enabled": true, "callers": { "groups": ["admins"] } }] }),
            "x",
        )
        .unwrap();
        assert!(!config.rules().is_whitelist());
        assert!(config.rules().decide("any", "tool").enabled);
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let (path, reason) = config_err(json!({ "discovery": { "servers": [
            { "name": "a", "connection": { "command": "x", "args": "not-a-list" } }
        ] } }));
        assert_eq!(path, "discovery.servers[0].connection.args");
        assert_eq!(reason, "expected a list, found the string \"not-a-list\"");
    }

    #[test]
    fn unknown_field_is_rejected_with_its_path() {
        let (path, reason) = config_err(json!({ "discovery": { "toolrules": [] } }));
        assert_eq!(path, "discovery.toolrules");
        assert_eq!(
            reason,
            "unknown key `toolrules` (did you mean `toolRules`?); remove it or use one of: \
             enabled, cache, servers, sources, toolRules, expose, idleTimeoutMs, maxResultBytes, audit, security, search, registry, http, telemetry, store, rateLimits"
        );
    }

    #[test]
    fn zero_section_limits_are_rejected() {
        for key in ["idleTimeoutMs", "maxResultBytes"] {
            let (path, reason) = config_err(json!({ "discovery": { key: 0 } }));
            assert_eq!(path, format!("discovery.{key}"));
            assert_eq!(reason, "must be greater than 0");
        }
    }

    #[test]
    fn stdio_without_command_is_rejected() {
        let (path, _) = config_err(json!({ "discovery": { "servers": [{ "name": "a", "connection": {} }] } }));
        assert_eq!(path, "discovery.servers[0].connection.command");
    }

    #[test]
    fn remote_connections_need_a_url_and_know_their_types() {
        for kind in ["http", "sse"] {
            let (path, reason) =
                config_err(json!({ "discovery": { "servers": [{ "name": "a", "connection": { "type": kind } }] } }));
            assert_eq!(path, "discovery.servers[0].connection.url");
            assert!(reason.contains("needs a `url`"), "{reason}");
        }
        let sse = json!({ "servers": [{ "name": "a", "connection": { "type": "sse", "url": "http://h/sse" } }] });
        let config = Config::from_value(sse, "x").unwrap();
        assert_eq!(config.servers()[0].connection.kind, TransportKind::Sse);
        let (path, reason) = config_err(
            json!({ "discovery": { "servers": [{ "name": "a", "connection": { "type": "websocket", "url": "ws://h" } }] } }),
        );
        assert_eq!(path, "discovery.servers[0].connection.type");
        assert_eq!(reason, "unknown value `websocket`; use one of: stdio, http, sse");
    }

    #[test]
    fn duplicate_and_malformed_server_names_are_rejected() {
        let (path, reason) = config_err(json!({ "discovery": { "servers": [server("a"), server("a")] } }));
        assert_eq!(path, "discovery.servers[1].name");
        assert!(reason.contains("duplicate"));
        let (path, _) = config_err(json!({ "discovery": { "servers": [server("a:b")] } }));
        assert_eq!(path, "discovery.servers[0].name");
    }

    #[test]
    fn malformed_variable_reference_is_rejected_at_load() {
        let (path, reason) = config_err(json!({ "discovery": { "servers": [
            { "name": "a", "connection": { "command": "x", "env": { "TOKEN": "${OPEN" } } }
        ] } }));
        assert_eq!(path, "discovery.servers[0].connection.env.TOKEN");
        assert!(reason.contains("unterminated"));
        // The command is expanded at launch like every other setting, so it is checked too.
        let (path, reason) = config_err(json!({ "discovery": { "servers": [
            { "name": "a", "connection": { "command": "${HOME/bin/x" } }
        ] } }));
        assert_eq!(path, "discovery.servers[0].connection.command");
        assert!(reason.contains("unterminated"));
    }

    #[test]
    fn root_must_be_an_object() {
        let (path, reason) = config_err(json!([1, 2]));
        assert_eq!(path, "(root)");
        assert!(reason.contains("an array"));
    }

    #[test]
    fn redacted_hides_literal_secrets_but_keeps_references() {
        let config = Config::from_value(
            json!({ "discovery": { "servers": [
            { "name": "a", "connection": { "command": "x", "env": { "A": "ghp_literal", "B": "${TOKEN}" } } }
        ] } }),
            "x",
        )
        .unwrap();
        let shown = config.redacted().to_string();
        assert!(!shown.contains("ghp_literal"));
        assert!(shown.contains("${TOKEN}"));
    }

    #[test]
    fn telemetry_headers_and_endpoint_password_are_masked_and_bad_settings_refused() {
        let config = Config::from_value(
            json!({ "discovery": { "telemetry": {
                "endpoint": "https://otel:collector-pass-9f2c@otel.example:4318",
                "headers": { "x-api-key": "literal-collector-key-1234", "authorization": "${secret:otel}" }
            } } }),
            "x",
        )
        .unwrap();
        let shown = config.redacted().to_string();
        assert!(!shown.contains("literal-collector-key-1234"), "{shown}");
        assert!(!shown.contains("collector-pass-9f2c"), "{shown}");
        assert!(shown.contains("\"${secret:otel}\""), "{shown}");
        let error = Config::from_value(json!({ "discovery": { "telemetry": { "samplingRatio": 2 } } }), "x")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("x: discovery.telemetry.samplingRatio: must be from 0 to 1"),
            "{error}"
        );
    }

    #[test]
    fn an_oauth_client_secret_is_masked_and_the_oauth_block_is_checked() {
        let config = Config::from_value(
            json!({ "discovery": { "servers": [{ "name": "a", "connection": {
                "type": "http", "url": "https://mcp.example.com/mcp",
                "oauth": { "clientId": "anygpt", "clientSecret": "literal-client-secret", "scopes": ["read"] }
            } }] } }),
            "x",
        )
        .unwrap();
        let shown = config.redacted().to_string();
        assert!(!shown.contains("literal-client-secret"), "{shown}");
        assert!(shown.contains("\"clientId\":\"anygpt\""), "{shown}");

        let refused = |connection: Value| {
            Config::from_value(
                json!({ "discovery": { "servers": [{ "name": "a", "connection": connection }] } }),
                "x",
            )
            .unwrap_err()
            .to_string()
        };
        assert!(refused(json!({ "command": "x", "oauth": {} })).contains("only `http` connections sign in"));
        assert!(refused(
            json!({ "type": "http", "url": "https://h/mcp", "oauth": { "clientSecret": "s3cret-value" } })
        )
        .contains("needs the `clientId`"));
        assert!(
            refused(json!({ "type": "http", "url": "https://h/mcp", "oauth": { "grant": "clientCredentials", "clientId": "c" } }))
                .contains("`clientCredentials` needs `clientId` and `clientSecret`")
        );
        assert!(refused(
            json!({ "type": "http", "url": "https://h/mcp", "oauth": { "clientMetadataUrl": "http://h/c.json" } })
        )
        .contains("must be an https:// URL"));
    }

    #[test]
    fn per_user_credentials_need_an_http_server_and_team_sign_in() {
        let team = json!({ "auth": { "issuers": [{ "issuer": "https://id.example", "jwksUri": "https://id.example/jwks" }] } });
        let with = |connection: Value, http: &Value| {
            Config::from_value(
                json!({ "discovery": { "http": http, "servers": [{ "name": "gh", "connection": connection }] } }),
                "x",
            )
        };
        let per_user = json!({ "type": "http", "url": "https://h/mcp", "oauth": { "perUser": true } });
        let config = with(per_user.clone(), &team).unwrap();
        assert!(config.servers()[0].is_per_user());
        assert_eq!(
            config.servers()[0]
                .connection
                .oauth
                .as_ref()
                .unwrap()
                .max_user_connections(),
            DEFAULT_MAX_USER_CONNECTIONS as usize
        );
        let error = with(per_user, &json!({})).unwrap_err().to_string();
        assert!(
            error.contains("discovery.servers[0].connection.oauth.perUser: per-user credentials need callers")
                && error.contains("discovery.http.auth.issuers"),
            "{error}"
        );
        let error = with(json!({ "command": "x", "oauth": { "perUser": true } }), &team)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("oauth.perUser: per-user credentials are for remote `http` servers"),
            "{error}"
        );
        let error = with(
            json!({ "type": "http", "url": "https://h/mcp", "headers": { "Authorization": "Bearer x" }, "oauth": { "perUser": true } }),
            &team,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("headers.Authorization: a `perUser` server"), "{error}");
        let error = with(
            json!({ "type": "http", "url": "https://h/mcp", "oauth": { "perUser": true, "grant": "clientCredentials", "clientId": "c", "clientSecret": "s" } }),
            &team,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("`perUser` needs each person's own sign-in"), "{error}");
        let error = with(
            json!({ "type": "http", "url": "https://h/mcp", "oauth": { "perUser": true, "maxUserConnections": 0 } }),
            &team,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("maxUserConnections: must be greater than 0"), "{error}");
    }

    #[test]
    fn token_exchange_is_for_per_user_servers_with_a_client_and_a_safe_endpoint() {
        let team = json!({ "auth": { "issuers": [{ "issuer": "https://id.example", "jwksUri": "https://id.example/jwks" }] } });
        let with = |oauth: Value| {
            Config::from_value(
                json!({ "discovery": { "http": team, "servers": [{ "name": "gh", "connection": { "type": "http", "url": "https://h/mcp", "oauth": oauth } }] } }),
                "x",
            )
        };
        let good = json!({ "perUser": true, "clientId": "gateway", "clientSecret": "${IDP_SECRET}",
            "tokenExchange": { "tokenEndpoint": "https://id.example/token", "audience": "gh", "subjectTokenType": "jwt" } });
        let config = with(good).unwrap();
        let exchange = config.servers()[0].token_exchange().unwrap();
        assert_eq!(
            exchange.subject_token_type.uri(),
            "urn:ietf:params:oauth:token-type:jwt"
        );
        assert_eq!(exchange.audience.as_deref(), Some("gh"));
        // Unnamed, the issuer is the one trusted, pinned: a reload that drops it stops its
        // tokens being exchanged, though the running HTTP face still accepts them.
        assert_eq!(exchange.issuer.as_deref(), Some("https://id.example"));
        let loopback = json!({ "perUser": true, "clientId": "g", "tokenExchange": { "tokenEndpoint": "http://127.0.0.1:9/token" } });
        assert!(with(loopback).unwrap().servers()[0].token_exchange().is_some());
        for (oauth, says) in [
            (
                json!({ "clientId": "g", "tokenExchange": { "tokenEndpoint": "https://id.example/token" } }),
                "oauth.tokenExchange: token exchange gets each caller their own token: set `perUser: true`",
            ),
            (
                json!({ "perUser": true, "tokenExchange": { "tokenEndpoint": "https://id.example/token" } }),
                "oauth.clientId: token exchange asks the identity provider as the gateway's client",
            ),
            (
                json!({ "perUser": true, "clientId": "g", "tokenExchange": { "tokenEndpoint": "http://id.example/token" } }),
                "tokenExchange.tokenEndpoint: `http://id.example/token` must be https (http only on loopback)",
            ),
            (
                json!({ "perUser": true, "clientId": "g", "tokenExchange": { "tokenEndpoint": "/token" } }),
                "tokenExchange.tokenEndpoint: `/token` is not an absolute URL",
            ),
            (
                json!({ "perUser": true, "clientId": "g", "tokenExchange": { "tokenEndpoint": "https://id.example/token", "audience": " " } }),
                "tokenExchange.audience: must not be empty",
            ),
        ] {
            let error = with(oauth).unwrap_err().to_string();
            assert!(error.contains(says), "{error}\n  wanted: {says}");
        }
        // With two trusted issuers, the one exchanged must be named, and be one of them.
        let two = json!({ "auth": { "issuers": [
            { "issuer": "https://id.example", "jwksUri": "https://id.example/jwks" },
            { "issuer": "https://partner.example", "jwksUri": "https://partner.example/jwks" } ] } });
        let with_issuer = |issuer: Value| {
            let mut exchange = json!({ "tokenEndpoint": "https://id.example/token" });
            if !issuer.is_null() {
                exchange["issuer"] = issuer;
            }
            Config::from_value(
                json!({ "discovery": { "http": two, "servers": [{ "name": "gh", "connection": { "type": "http", "url": "https://h/mcp",
                    "oauth": { "perUser": true, "clientId": "g", "tokenExchange": exchange } } }] } }),
                "x",
            )
        };
        let error = with_issuer(Value::Null).unwrap_err().to_string();
        assert!(
            error.contains("tokenExchange.issuer: several issuers are trusted"),
            "{error}"
        );
        let error = with_issuer(json!("https://elsewhere.example")).unwrap_err().to_string();
        assert!(
            error.contains("`https://elsewhere.example` is not one of `discovery.http.auth.issuers`"),
            "{error}"
        );
        assert!(with_issuer(json!("https://partner.example")).is_ok());
    }

    /// Every validation message, exactly as a user reads it: file, path inside it, the fix.
    mod messages {
        use super::*;

        fn error(section: &Value) -> String {
            Config::from_value(json!({ "discovery": section }), "/p/mcp-discovery.config.json")
                .unwrap_err()
                .to_string()
        }

        fn one_server(connection: &Value) -> Value {
            json!({ "servers": [{ "name": "gh", "connection": connection }] })
        }

        #[test]
        fn unknown_key_wrong_type_and_missing_key() {
            assert_eq!(
                error(&json!({ "servers": [{ "name": "a", "connection": { "command": "x", "agrs": [] } }] })),
                "/p/mcp-discovery.config.json: discovery.servers[0].connection.agrs: unknown key `agrs` (did you mean `args`?); \
                 remove it or use one of: type, command, args, env, cwd, url, headers, oauth"
            );
            assert_eq!(
                error(&json!({ "cache": { "ttl": -5 } })),
                "/p/mcp-discovery.config.json: discovery.cache.ttl: expected a whole number (0 or more), found -5"
            );
            assert_eq!(
                error(&json!({ "servers": [{ "connection": { "command": "x" } }] })),
                "/p/mcp-discovery.config.json: discovery.servers[0]: missing key `name`: add it"
            );
            assert_eq!(
                error(&json!({ "toolRules": [{ "pattern": 3 }] })),
                "/p/mcp-discovery.config.json: discovery.toolRules[0].pattern: expected a pattern string or a list of pattern strings"
            );
        }

        #[test]
        fn invalid_glob_and_regex_name_rule_and_pattern() {
            assert_eq!(
                error(&json!({ "toolRules": [{ "pattern": "*" }, { "pattern": ["ok", "a[b"] }] })),
                "/p/mcp-discovery.config.json: discovery.toolRules[1].pattern[1]: invalid pattern `a[b`: unclosed character class; missing ']'"
            );
            let regex = error(&json!({ "toolRules": [{ "pattern": "/(x/" }] }));
            assert!(
                regex.starts_with(
                    "/p/mcp-discovery.config.json: discovery.toolRules[0].pattern: invalid pattern `/(x/`: "
                ),
                "{regex}"
            );
        }

        #[test]
        fn names() {
            let two = json!({ "servers": [server("a"), server("a")] });
            assert_eq!(
                error(&two),
                "/p/mcp-discovery.config.json: discovery.servers[1].name: duplicate server name `a`: rename one (tools are addressed as `server:tool`)"
            );
            assert_eq!(
                error(&json!({ "servers": [server("a b")] })),
                "/p/mcp-discovery.config.json: discovery.servers[0].name: server name `a b` may not contain `:` or whitespace (tools are addressed as `server:tool`): use `-` instead"
            );
            assert_eq!(
                error(&json!({ "servers": [server(" ")] })),
                "/p/mcp-discovery.config.json: discovery.servers[0].name: server name is empty: give the server a name"
            );
        }

        #[test]
        fn missing_cwd_command_not_on_path_and_unset_variable_are_warnings() {
            let config = Config::from_value(
                json!({ "discovery": one_server(&json!({
                    "command": "no-such-command-anygpt",
                    "cwd": "/nonexistent/dir",
                    "env": { "TOKEN": "${ANYGPT_TEST_UNSET_VAR}", "OK": "${ANYGPT_TEST_UNSET_VAR2:-x}" },
                })) }),
                "/p/c.json",
            )
            .unwrap();
            assert_eq!(
                config.warnings(),
                [
                    "/p/c.json: discovery.servers[0].connection.env.TOKEN: server `gh` uses `${ANYGPT_TEST_UNSET_VAR}`, which is not set: \
                     set it before starting, or write `${ANYGPT_TEST_UNSET_VAR:-default}`",
                    "/p/c.json: discovery.servers[0].connection.cwd: folder `/nonexistent/dir` of server `gh` does not exist: \
                     create it or fix `cwd` (the server will fail to start)",
                    "/p/c.json: discovery.servers[0].connection.command: `no-such-command-anygpt` of server `gh` is not on PATH: \
                     install it or write its full path (the server will fail to start)",
                ]
            );
        }

        #[test]
        fn no_message_names_a_rust_type() {
            for section in [
                json!({ "cache": "x" }),
                json!({ "servers": {} }),
                json!({ "audit": "yes" }),
                json!({ "servers": [{ "name": "a", "connection": [] }] }),
                json!({ "toolRules": [{ "pattern": {} }] }),
            ] {
                let text = error(&section);
                for word in ["struct", "Spec", "enum", "OneOrMany", "Vec", "sequence", "u64"] {
                    assert!(!text.contains(word), "{section}: {text}");
                }
            }
        }
    }
}
