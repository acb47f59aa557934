//! Who is asking, over HTTP: the gateway as an OAuth 2.1 resource server (MCP authorization).
//!
//! Owns: checking `discovery.http.auth` ([`HttpAuthSpec`]) once at start, the access-token
//! check of every request (a JWT of a configured issuer, or the static bearer token), the
//! answers to refused requests ([`Denied`]: 401/403 with `WWW-Authenticate`), and the
//! protected resource metadata (RFC 9728) that tells clients where to get a token. It hands
//! the rest of the HTTP face the [`Caller`] a request proved, in the request's extensions.
//!
//! Leaves to others: the routes, the bind address and Origin/Host checks (`http`), and what a
//! caller may see (`rules`). The token itself stays here: the middleware removes the
//! `Authorization` header once checked, so nothing behind it — and no downstream server —
//! ever receives it. It is never logged and no error text holds any part of it.

mod crypto;
mod denied;
mod jwks;
mod jwt;
mod metadata;
mod static_token;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::{FromFnLayer, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::future::BoxFuture;
use jsonwebtoken::Algorithm;

pub use self::denied::Denied;
use self::denied::{Challenge, Problem};
use self::jwks::{KeySet, Source, Timing};
use self::jwt::Issuer;
use self::metadata::{Metadata, WELL_KNOWN};
use self::static_token::StaticToken;
use crate::caller::Caller;
use crate::config::http_auth::{HttpAuthSpec, IssuerSpec, JwtAlgorithm};
use crate::error::{Error, Result};

/// The subject of requests made with the static bearer token (toolRules may name it).
pub const STATIC_SUBJECT: &str = "static";

/// Where errors in the settings point.
const ORIGIN: &str = "discovery.http.auth";
/// The largest `Authorization` header read. Entra ID tokens with many groups reach ~8 KiB.
const MAX_AUTHORIZATION_BYTES: usize = 16 * 1024;
const MAX_LEEWAY_SECONDS: u64 = 600;
const MIN_STATIC_TOKEN_CHARS: usize = 32;

/// Checks the access token of each request. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    mode: Mode,
    leeway: u64,
    resource: String,
    challenge: Arc<Challenge>,
    metadata: Metadata,
}

enum Mode {
    Jwt {
        issuers: Vec<Issuer>,
        verified: VerifiedCache,
    },
    Static(Box<StaticToken>),
}

/// Tokens that verified lately, by the SHA-256 of the token: a client sends the same token
/// with every request, and checking its signature each time is most of the cost of a request
/// (a token is never kept, only its digest). An entry lives [`VERIFIED_TTL`] at most and is
/// never used past the token's `exp`, so a key the issuer withdraws stops verifying its tokens
/// within that time, as a refused token is checked anew each time.
type VerifiedCache = moka::sync::Cache<[u8; 32], Arc<jwt::Verified>>;
const VERIFIED_TTL: std::time::Duration = std::time::Duration::from_secs(60);
const VERIFIED_CAPACITY: u64 = 10_000;

/// The middleware [`Authenticator::layer`] returns, named so the HTTP face can hold it.
pub type AuthLayer = FromFnLayer<Guard, Authenticator, (State<Authenticator>, Request)>;
/// The middleware function inside [`AuthLayer`].
pub type Guard = fn(State<Authenticator>, Request, Next) -> BoxFuture<'static, Response>;

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &self.inner.mode {
            Mode::Jwt { issuers, .. } => format!("{} issuer(s)", issuers.len()),
            Mode::Static(_) => "static token".to_owned(),
        };
        f.debug_struct("Authenticator")
            .field("resource", &self.inner.resource)
            .field("mode", &mode)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Check `spec` and build the authenticator for `resource`, the canonical URL of the
    /// gateway's `/mcp` endpoint (`discovery.http.publicUrl`, else `http://HOST:PORT/mcp` of
    /// the bind address): the audience tokens must name and the metadata's `resource`. Each
    /// issuer's keys are read now: a `jwksFile` that cannot be read is an error; a `jwksUri`
    /// that cannot be fetched is a warning, and the keys are fetched again when a token arrives.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` naming the setting (`discovery.http.auth: issuers[0].jwksUri`)
    /// and the fix.
    pub async fn from_spec(spec: &HttpAuthSpec, resource: &str) -> Result<Self> {
        Self::build(spec, resource, Timing::default()).await
    }

    async fn build(spec: &HttpAuthSpec, resource: &str, timing: Timing) -> Result<Self> {
        crypto::install();
        if spec.leeway_seconds > MAX_LEEWAY_SECONDS {
            return Err(Error::config(
                ORIGIN,
                "leewaySeconds",
                format!(
                    "{} s is more clock skew than any clock has; at most {MAX_LEEWAY_SECONDS}",
                    spec.leeway_seconds
                ),
            ));
        }
        let resource = resource.trim().to_owned();
        let resource_url = check_resource(&resource)?;
        for (i, scope) in spec.scopes_supported.iter().enumerate() {
            check_scope(scope, &format!("scopesSupported[{i}]"))?;
        }
        let mode = mode_of(spec, &resource, timing).await?;
        let required = required_scopes(&mode);
        let (authorization_servers, scopes_supported) = published(&mode, spec, &required);
        let path = resource_url.path();
        let metadata = Metadata::new(&resource, path, &authorization_servers, &scopes_supported);
        let origin = resource_url.origin().ascii_serialization();
        let suffix = path.trim_end_matches('/');
        let challenge = Arc::new(Challenge {
            metadata_url: format!("{origin}{WELL_KNOWN}{suffix}"),
            scope: required.join(" "),
        });
        Ok(Self {
            inner: Arc::new(Inner {
                mode,
                leeway: spec.leeway_seconds,
                resource,
                challenge,
                metadata,
            }),
        })
    }

    /// The canonical URL of the protected resource (the `/mcp` endpoint).
    #[must_use]
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// Whether the static bearer token is the way in: one user, so loopback only.
    #[must_use]
    pub fn is_static_token(&self) -> bool {
        matches!(self.inner.mode, Mode::Static(_))
    }

    /// Refuse to serve the static bearer token on an address others can reach.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` when `addr` is not a loopback address in static-token mode.
    pub fn check_bind(&self, addr: SocketAddr) -> Result<()> {
        if self.is_static_token() && !addr.ip().is_loopback() {
            return Err(Error::config(
                ORIGIN,
                "token",
                format!(
                    "a static bearer token serves one user on loopback, and `{addr}` is reachable from other machines: \
                     bind 127.0.0.1, or configure `issuers` for a team"
                ),
            ));
        }
        Ok(())
    }

    /// Check the request's `Authorization: Bearer` token and return the caller it proves.
    ///
    /// # Errors
    /// [`Denied`] — no token, a bad one (401), or one without the needed scope (403).
    pub async fn authenticate(&self, headers: &HeaderMap) -> std::result::Result<Caller, Denied> {
        let token = bearer_token(headers).map_err(|p| self.deny(p))?;
        match &self.inner.mode {
            Mode::Static(expected) if expected.matches(token) => Ok(Caller {
                subject: Some(STATIC_SUBJECT.to_owned()),
                ..Caller::default()
            }),
            Mode::Static(_) => Err(self.deny(Problem::InvalidToken("the token is not the one configured"))),
            Mode::Jwt { issuers, verified } => {
                let digest = token_digest(token);
                let now = jsonwebtoken::get_current_timestamp();
                if let Some(known) = verified.get(&digest) {
                    if known
                        .expires_at
                        .is_some_and(|exp| now < exp.saturating_add(self.inner.leeway))
                    {
                        return Ok(known.caller.clone());
                    }
                    verified.invalidate(&digest);
                }
                let fresh = jwt::verify(issuers, token, self.inner.leeway)
                    .await
                    .map_err(|p| self.deny(p))?;
                let caller = fresh.caller.clone();
                verified.insert(digest, Arc::new(fresh));
                Ok(caller)
            }
        }
    }

    fn deny(&self, problem: Problem) -> Denied {
        Denied::new(problem, Arc::clone(&self.inner.challenge))
    }

    /// The protected resource metadata routes (RFC 9728), to merge into the HTTP face's
    /// router outside the [`layer`](Self::layer): clients read them before they have a token.
    pub fn metadata_router(&self) -> Router {
        self.inner.metadata.router()
    }

    /// The middleware that lets a request through only with a valid token: it puts the
    /// [`Caller`] into the request's extensions and removes the `Authorization` header, or
    /// answers [`Denied`].
    pub fn layer(&self) -> AuthLayer {
        axum::middleware::from_fn_with_state(self.clone(), guard as Guard)
    }
}

fn guard(State(auth): State<Authenticator>, mut request: Request, next: Next) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        match auth.authenticate(request.headers()).await {
            Ok(caller) => {
                request.headers_mut().remove(header::AUTHORIZATION);
                request.extensions_mut().insert(caller);
                next.run(request).await
            }
            Err(denied) => {
                tracing::debug!(status = %denied.status(), reason = denied.description(), "request refused");
                denied.into_response()
            }
        }
    })
}

fn token_digest(token: &str) -> [u8; 32] {
    let mut digest = [0; 32];
    digest.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    digest
}

/// The way in `spec` configures: issuers or the static token, exactly one.
async fn mode_of(spec: &HttpAuthSpec, resource: &str, timing: Timing) -> Result<Mode> {
    match (spec.issuers.is_empty(), &spec.token) {
        (false, Some(_)) => Err(Error::config(
            ORIGIN,
            "token",
            "configure either `issuers` (OAuth access tokens) or `token` (one user on loopback), not both",
        )),
        (true, None) => Err(Error::config(
            ORIGIN,
            "(section)",
            "no way to authenticate: add `issuers` (OAuth access tokens) or `token: \"${secret:NAME}\"` (one user on loopback)",
        )),
        (true, Some(token)) => Ok(Mode::Static(Box::new(static_token(token)?))),
        (false, None) => Ok(Mode::Jwt {
            issuers: issuers(&spec.issuers, resource, timing).await?,
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_CAPACITY)
                .time_to_live(VERIFIED_TTL)
                .build(),
        }),
    }
}

/// What the metadata publishes: the authorization servers, and the scopes (`scopesSupported`,
/// else the scopes every token needs). The static token has no authorization server.
fn published(mode: &Mode, spec: &HttpAuthSpec, required: &[String]) -> (Vec<String>, Vec<String>) {
    match mode {
        Mode::Jwt { issuers, .. } => {
            let servers = issuers.iter().map(|i| i.id.clone()).collect();
            let scopes = if spec.scopes_supported.is_empty() {
                required.to_vec()
            } else {
                spec.scopes_supported.clone()
            };
            (servers, scopes)
        }
        Mode::Static(_) => (Vec::new(), Vec::new()),
    }
}

/// The token of the request's one `Authorization: Bearer` header (RFC 6750 §2.1).
fn bearer_token(headers: &HeaderMap) -> std::result::Result<&str, Problem> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next().ok_or(Problem::Missing)?;
    if values.next().is_some() {
        return Err(Problem::InvalidToken(
            "the request has more than one Authorization header",
        ));
    }
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(Problem::InvalidToken("the Authorization header is larger than 16 KiB"));
    }
    let value = value
        .to_str()
        .map_err(|_| Problem::InvalidToken("the Authorization header is not printable ASCII"))?;
    let (scheme, token) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Problem::InvalidToken(
            "the Authorization header is not `Bearer <token>`",
        ));
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(Problem::InvalidToken(
            "the Authorization header is `Bearer` without a token",
        ));
    }
    Ok(token)
}

/// The resource URL, parsed: absolute http(s), no query or fragment (RFC 8707 §2).
fn check_resource(resource: &str) -> Result<reqwest::Url> {
    // The URL comes from `discovery.http.publicUrl` (or the bind address).
    let bad = |why: &str| Error::config("discovery.http", "publicUrl", format!("`{resource}` {why}"));
    let url = reqwest::Url::parse(resource).map_err(|e| bad(&format!("is not an absolute URL ({e})")))?;
    if !matches!(url.scheme(), "https" | "http") || url.host().is_none() {
        return Err(bad(
            "is not an http(s) URL with a host, e.g. `https://mcp.example.com/mcp`",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad(
            "has a query or fragment, which a resource identifier may not (RFC 8707)",
        ));
    }
    Ok(url)
}

/// An OAuth scope token (RFC 6749 §3.3): printable ASCII without space, `"` or `\`. Checked
/// so every challenge header is well-formed.
fn check_scope(scope: &str, path: &str) -> Result<()> {
    let valid = !scope.is_empty() && scope.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E));
    if valid {
        Ok(())
    } else {
        Err(Error::config(
            ORIGIN,
            path,
            format!("`{scope}` is not a scope: one word of printable ASCII without `\"` or `\\`"),
        ))
    }
}

/// The static token's check, from its reference. The token must come from a reference — a
/// token written in a config file ends up in a repository or a backup.
fn static_token(written: &str) -> Result<StaticToken> {
    let bad = |why: String| Error::config(ORIGIN, "token", why);
    if !crate::secrets::is_single_reference(written.trim()) {
        return Err(bad(
            "must be a reference, `${secret:NAME}` (run `anygpt-discovery secret set NAME`) or `${ENV_VAR}`, \
             not the token itself"
                .to_owned(),
        ));
    }
    let token = crate::config::expand::expand_env(written.trim()).map_err(|e| bad(e.to_string()))?;
    let token = token.trim().to_owned();
    if token.chars().count() < MIN_STATIC_TOKEN_CHARS {
        return Err(bad(format!(
            "the token `{written}` names is shorter than {MIN_STATIC_TOKEN_CHARS} characters: \
             make one with `openssl rand -hex 32`"
        )));
    }
    // Scrubbed from every log and error from now on.
    crate::secrets::register(ORIGIN, [token.clone()]);
    StaticToken::new(&token).ok_or_else(|| bad("the system's random source failed".to_owned()))
}

async fn issuers(specs: &[IssuerSpec], resource: &str, timing: Timing) -> Result<Vec<Issuer>> {
    crate::upstream::install_crypto_provider();
    // Keys are fetched from the configured URL only: no redirect to anywhere else.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Error::config(ORIGIN, "issuers", format!("cannot build an HTTP client: {e}")))?;
    let mut issuers: Vec<Issuer> = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let at = |field: &str| format!("issuers[{i}].{field}");
        let issuer = spec.issuer.trim();
        if issuer.is_empty() {
            return Err(Error::config(
                ORIGIN,
                at("issuer"),
                "is empty: write the issuer's identifier, its tokens' `iss`",
            ));
        }
        if issuers.iter().any(|known| known.id == issuer) {
            return Err(Error::config(
                ORIGIN,
                at("issuer"),
                format!("`{issuer}` is listed twice"),
            ));
        }
        if spec.algorithms.is_empty() {
            return Err(Error::config(
                ORIGIN,
                at("algorithms"),
                "is empty: list the algorithms the issuer signs with, e.g. [\"RS256\"]",
            ));
        }
        if spec.groups_claim.trim().is_empty() {
            return Err(Error::config(
                ORIGIN,
                at("groupsClaim"),
                "is empty: name the claim holding groups, e.g. `groups` or `roles`",
            ));
        }
        for (j, scope) in spec.required_scopes.iter().enumerate() {
            check_scope(scope, &at(&format!("requiredScopes[{j}]")))?;
        }
        let audience = spec
            .audience
            .as_ref()
            .map_or_else(|| vec![resource.to_owned()], crate::config::http_auth::Audience::values);
        if audience.is_empty() || audience.iter().any(|a| a.trim().is_empty()) {
            return Err(Error::config(ORIGIN, at("audience"), "holds no value or an empty one"));
        }
        let source = key_source(spec, &at)?;
        let keys = Arc::new(KeySet::new(source, client.clone(), timing));
        load_keys(&keys, &at).await?;
        issuers.push(Issuer {
            id: issuer.to_owned(),
            keys,
            audience,
            algorithms: spec.algorithms.iter().map(|a| algorithm(*a)).collect(),
            groups_claim: spec.groups_claim.trim().to_owned(),
            required_scopes: spec.required_scopes.clone(),
        });
    }
    Ok(issuers)
}

fn key_source(spec: &IssuerSpec, at: &dyn Fn(&str) -> String) -> Result<Source> {
    match (&spec.jwks_uri, &spec.jwks_file) {
        (Some(_), Some(_)) => Err(Error::config(
            ORIGIN,
            at("jwksFile"),
            "set `jwksUri` or `jwksFile`, not both",
        )),
        (None, None) => Err(Error::config(
            ORIGIN,
            at("jwksUri"),
            "is missing: set the issuer's JWK Set URL (its `jwks_uri`) or a `jwksFile`",
        )),
        (Some(uri), None) => {
            let url = reqwest::Url::parse(uri.trim())
                .map_err(|e| Error::config(ORIGIN, at("jwksUri"), format!("`{uri}` is not an absolute URL ({e})")))?;
            let loopback = crate::config::is_loopback_host(&url);
            // Keys fetched over plain HTTP can be swapped on the way, and then any token verifies.
            if url.scheme() != "https" && !(url.scheme() == "http" && loopback) {
                return Err(Error::config(
                    ORIGIN,
                    at("jwksUri"),
                    format!("`{uri}` must be https (http only on loopback): keys read over plain HTTP can be replaced by anyone on the way"),
                ));
            }
            Ok(Source::Url(url))
        }
        (None, Some(file)) => {
            let path = match file.trim().strip_prefix("~/") {
                Some(rest) => crate::config::Environment::current().home.map(|home| home.join(rest)),
                None => Some(PathBuf::from(file.trim())),
            };
            match path {
                Some(path) if path.is_absolute() => Ok(Source::File(path)),
                _ => Err(Error::config(
                    ORIGIN,
                    at("jwksFile"),
                    format!("`{file}` is not an absolute path: write the whole path (or `~/…`)"),
                )),
            }
        }
    }
}

async fn load_keys(keys: &KeySet, at: &(dyn Fn(&str) -> String + Sync)) -> Result<()> {
    match (keys.load().await, keys.source()) {
        (Ok(0), source) => tracing::warn!("the JWK Set at {source} holds no signature key this gateway can use"),
        (Ok(_), _) => {}
        (Err(err), Source::File(_)) => return Err(Error::config(ORIGIN, at("jwksFile"), err.to_string())),
        // The issuer may be starting too; its keys are fetched again when a token arrives.
        (Err(err), Source::Url(_)) => tracing::warn!("{err}; fetching it again when a token arrives"),
    }
    Ok(())
}

fn algorithm(algorithm: JwtAlgorithm) -> Algorithm {
    match algorithm {
        JwtAlgorithm::RS256 => Algorithm::RS256,
        JwtAlgorithm::RS384 => Algorithm::RS384,
        JwtAlgorithm::RS512 => Algorithm::RS512,
        JwtAlgorithm::PS256 => Algorithm::PS256,
        JwtAlgorithm::PS384 => Algorithm::PS384,
        JwtAlgorithm::PS512 => Algorithm::PS512,
        JwtAlgorithm::ES256 => Algorithm::ES256,
        JwtAlgorithm::ES384 => Algorithm::ES384,
        JwtAlgorithm::EdDSA => Algorithm::EdDSA,
    }
}

/// Every issuer's required scopes, each once, in order: what a client without a token is
/// told to ask for.
fn required_scopes(mode: &Mode) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    if let Mode::Jwt { issuers, .. } = mode {
        for scope in issuers.iter().flat_map(|i| &i.required_scopes) {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
    }
    scopes
}
