//! Per-user downstream credentials (`connection.oauth.perUser`): each caller's own token for a
//! server, kept sealed in the store (`crate::store`) under (issuer, subject, server), and the
//! browser sign-in that earns it, which the gateway's `/connect` routes run so that any replica
//! completes it.
//!
//! The flow, every step's state in the store with a TTL of [`FLOW_TTL`] and taken (read and
//! deleted in one step) when used, so it works once and on any replica:
//! 1. a call by a caller without a token: [`begin`] keeps a random `state` bound to the caller
//!    and the server; the call answers with `/connect/<server>?state=…`;
//! 2. `/connect/<server>`: a page names the caller the link is for ([`link_caller`], the state
//!    left unspent) and asks the person to continue; continuing ([`authorize`]) takes the
//!    state; discovery as the shared sign-in
//!    does it (rmcp: protected-resource metadata, then the authorization server's), the client
//!    pre-registered or registered dynamically (kept in the store per authorization server and
//!    redirect URI), the PKCE verifier kept under the authorization request's own `state`
//!    ([`StoreStates`], rmcp's state store) beside the flow (who, which server, which client);
//!    the browser goes to the authorization endpoint the discovery named, nowhere else;
//! 3. `/connect/callback` ([`peek_flow`], [`take_flow`], [`exchange`]): the face checks the
//!    browser is the one that continued ([`Flow::browser`]), the flow is taken, the code exchanged
//!    with the verifier, and the tokens kept sealed ([`StoreCredentials`]).
//!
//! A server with `tokenExchange` has no sign-in: [`token`] trades the caller's own token for
//! one of the server (`exchange`, RFC 8693).
//!
//! A token about to expire is refreshed under a store lock, read again once the lock is held
//! (another replica may have refreshed it meanwhile), so two replicas never spend one refresh
//! token together and concurrent calls refresh once. Tokens register as secrets of their server when
//! read or written: no log, audit line or answer shows them.

use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, CredentialRefreshGuard, CredentialStore, OAuthClientConfig, StateStore,
    StoredAuthorizationState, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use super::lock::{acquire, now_secs, store_failed, Held};
use super::{auth_error_text, browser, register_secrets, Settings, CLIENT_NAME};
use crate::caller::Caller;
use crate::config::ServerSpec;
use crate::hash::{random_hex, sha256_hex};
use crate::store::{Lock, Store, StoreError};

/// How long a sign-in link, and the sign-in it starts, stay usable.
pub(crate) const FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// A token this close to its expiry is refreshed before use (at most half its lifetime, at
/// least a second: rmcp's own rule, so a token found due here is refreshed there).
const REFRESH_AHEAD_SECS: u64 = 30;

/// Why a per-user credential could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error(
        "this sign-in link was used already, has expired (links last {} minutes), or is not one the gateway gave: call the tool again for a new link",
        FLOW_TTL.as_secs() / 60
    )]
    UnknownState,
    #[error("this sign-in link is for another server than `{0}`")]
    OtherServer(String),
    #[error("{server} needs each caller's own sign-in, and this call has no authenticated caller: call it through `serve --http` with a token from one of `discovery.http.auth.issuers`")]
    NoCaller { server: String },
    #[error("signing in to {server}: {reason}")]
    Auth { server: String, reason: String },
    #[error("{0} is not a per-user server of this gateway")]
    NotPerUser(String),
    #[error(transparent)]
    Exchange(#[from] super::exchange::ExchangeError),
}

impl CredentialError {
    /// Bounded: an authorization server's error text (its `error_description`, up to rmcp's
    /// 1 MiB body) reaches the model, a browser page and the log through this.
    fn auth(server: &str, error: &AuthError) -> Self {
        Self::Auth {
            server: server.to_owned(),
            reason: crate::upstream::error::clip(&auth_error_text(error)),
        }
    }
}

/// Where `caller`'s tokens for `server` are kept: the server's name (readable by an operator)
/// and a digest of the whole (issuer, subject, server) — JSON, so no pair of values reads as
/// another. The sealed value is bound to this name: moved under another caller's, it does not
/// open.
pub(crate) fn credential_key(store: &Store, caller: &Caller, server: &str) -> String {
    let whole = serde_json::json!([caller.issuer, caller.subject, server]).to_string();
    store.key(&["cred", server, &sha256_hex(whole.as_bytes())])
}

/// One caller's tokens for one server, in the store (rmcp's credential store).
#[derive(Clone)]
pub(crate) struct StoreCredentials {
    store: Store,
    key: String,
    server: String,
    /// The refresh lock is held by whoever uses this (see [`refresh`]): rmcp must not take it.
    locked: bool,
}

impl StoreCredentials {
    pub(crate) fn new(store: &Store, caller: &Caller, server: &str) -> Self {
        Self::at(store, credential_key(store, caller, server), server)
    }

    /// Credentials kept under `key` (see [`credential_key`] for a caller's, `super::shared` for
    /// a server's one sign-in).
    pub(super) fn at(store: &Store, key: String, server: &str) -> Self {
        Self {
            store: store.clone(),
            key,
            server: server.to_owned(),
            locked: false,
        }
    }

    /// The same credentials for a holder of their refresh lock: rmcp takes none.
    pub(super) fn locked(self) -> Self {
        Self { locked: true, ..self }
    }

    /// The lock that one refresh of these credentials holds, across replicas.
    pub(super) async fn refresh_lock(&self) -> Result<Lock, AuthError> {
        acquire(&self.store, &format!("refresh:{}", sha256_hex(self.key.as_bytes()))).await
    }
}

#[async_trait::async_trait]
impl CredentialStore for StoreCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(bytes) = self.store.get_sealed(&self.key).await.map_err(|e| store_failed(&e))? else {
            return Ok(None);
        };
        let Ok(credentials) = serde_json::from_slice::<StoredCredentials>(&bytes) else {
            tracing::warn!(server = %self.server, "a stored per-user credential is unreadable: ignored");
            return Ok(None);
        };
        register_secrets(&self.server, &credentials);
        Ok(Some(credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        register_secrets(&self.server, &credentials);
        let bytes = serde_json::to_vec(&credentials).map_err(|e| AuthError::InternalError(e.to_string()))?;
        self.store
            .set_sealed(&self.key, &bytes, None)
            .await
            .map_err(|e| store_failed(&e))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store.delete(&self.key).await.map_err(|e| store_failed(&e))
    }

    /// The authorization server refused the refresh token (`invalid_grant`): the credentials
    /// are dropped, so the caller's next call asks them to sign in at once instead of spending
    /// a discovery and a refresh on the dead token at every call (and every poll of a call
    /// waiting for the sign-in). Called under the refresh lock; only if they are still these.
    async fn on_refresh_token_rejected(&self, credentials: &StoredCredentials) -> Result<(), AuthError> {
        let stored = self.load().await?;
        let same = |c: &StoredCredentials| serde_json::to_value(c).ok();
        if stored
            .as_ref()
            .and_then(same)
            .is_some_and(|s| Some(s) == same(credentials))
        {
            tracing::info!(server = %self.server, "the refresh token was refused: the caller signs in again");
            self.clear().await?;
        }
        Ok(())
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        if self.locked {
            return Ok(None);
        }
        let lock = self.refresh_lock().await?;
        Ok(Some(CredentialRefreshGuard::new(Held(Some(lock)))))
    }
}

impl Held {
    /// Hold the refresh lock of `credentials` (waiting for another replica's refresh).
    pub(super) async fn take(credentials: &StoreCredentials) -> Result<Self, AuthError> {
        Ok(Self(Some(credentials.refresh_lock().await?)))
    }
}

/// PKCE verifiers of sign-ins under way, in the store (rmcp's state store), sealed.
#[derive(Clone)]
pub(crate) struct StoreStates(Store);

impl StoreStates {
    fn key(&self, csrf: &str) -> String {
        self.0.key(&["connect", "pkce", &sha256_hex(csrf.as_bytes())])
    }
}

#[async_trait::async_trait]
impl StateStore for StoreStates {
    async fn save(&self, csrf_token: &str, state: StoredAuthorizationState) -> Result<(), AuthError> {
        let bytes = serde_json::to_vec(&state).map_err(|e| AuthError::InternalError(e.to_string()))?;
        self.0
            .set_sealed(&self.key(csrf_token), &bytes, Some(FLOW_TTL))
            .await
            .map_err(|e| store_failed(&e))
    }

    async fn load(&self, csrf_token: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        let bytes = self
            .0
            .get_sealed(&self.key(csrf_token))
            .await
            .map_err(|e| store_failed(&e))?;
        Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    async fn delete(&self, csrf_token: &str) -> Result<(), AuthError> {
        self.0.delete(&self.key(csrf_token)).await.map_err(|e| store_failed(&e))
    }
}

/// Who a sign-in link is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Bound {
    server: String,
    issuer: Option<String>,
    subject: Option<String>,
    /// The caller's readable name ([`Caller::name`]), for the page that names whom it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl Bound {
    fn caller(&self) -> Caller {
        Caller {
            issuer: self.issuer.clone(),
            subject: self.subject.clone(),
            name: self.name.clone(),
            ..Caller::default()
        }
    }
}

/// A sign-in under way, between the authorization request and its callback.
#[derive(Serialize, Deserialize)]
pub(crate) struct Flow {
    bound: Bound,
    client_id: String,
    client_secret: Option<String>,
    redirect_uri: String,
    /// SHA-256 (hex) of the value the browser that started the sign-in holds: the callback
    /// must come from that browser (one that was sent the authorization address by somebody
    /// else would sign in for them).
    browser: String,
}

impl Flow {
    /// The server the sign-in is for.
    pub(crate) fn server(&self) -> &str {
        &self.bound.server
    }

    /// SHA-256 (hex) of the value the browser that started this sign-in was given.
    pub(crate) fn browser(&self) -> &str {
        &self.browser
    }
}

/// A client registered dynamically for per-user sign-ins at one authorization server.
#[derive(Serialize, Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
}

fn state_key(store: &Store, state: &str) -> String {
    store.key(&["connect", "state", &sha256_hex(state.as_bytes())])
}

/// Where the link last given to `caller` for `server` is named while it is young (half of
/// [`FLOW_TTL`]): their calls meanwhile get that link again instead of a new state each, so a
/// caller calling in a loop keeps one or two states in the store, not one per call.
fn pending_key(store: &Store, caller: &Caller, server: &str) -> String {
    let whole = serde_json::json!([caller.issuer, caller.subject, server]).to_string();
    store.key(&["connect", "pending", &sha256_hex(whole.as_bytes())])
}

/// Where the sign-in under way for the authorization request `csrf` is kept. `flow-b`: flows
/// bound to a browser ([`Flow::browser`]); a replica of a version before that, sharing the
/// store, finds none of them (it would finish one without checking the browser).
fn flow_key(store: &Store, csrf: &str) -> String {
    store.key(&["connect", "flow-b", &sha256_hex(csrf.as_bytes())])
}

/// Where the client registered at `issuer` for `redirect_uri` is kept.
fn client_key(store: &Store, issuer: &str, redirect_uri: &str) -> String {
    let whole = serde_json::json!([issuer, redirect_uri]).to_string();
    store.key(&["connect", "client", &sha256_hex(whole.as_bytes())])
}

/// Where the secret of the client `client_id` registered at `issuer` is kept (what a refresh,
/// which knows the client but not the redirect URI it was registered with, reads).
fn secret_key(store: &Store, issuer: &str, client_id: &str) -> String {
    let whole = serde_json::json!([issuer, client_id]).to_string();
    store.key(&["connect", "secret", &sha256_hex(whole.as_bytes())])
}

/// Digests of tokens a server answered 401 to, most recent last (bounded): a per-user token
/// revoked before its expiry is dropped at its caller's next call instead of failing until then.
static REFUSED: std::sync::Mutex<std::collections::VecDeque<Vec<u8>>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
/// Refused tokens remembered.
const MAX_REFUSED: usize = 1024;

/// A server answered 401 to a request that carried `token` as a fixed bearer.
pub(crate) fn refused(token: &str) {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
        .as_ref()
        .to_vec();
    let mut refused = REFUSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !refused.contains(&digest) {
        if refused.len() >= MAX_REFUSED {
            refused.pop_front();
        }
        refused.push_back(digest);
    }
}

fn was_refused(token: &str) -> bool {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
        .as_ref()
        .to_vec();
    REFUSED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&digest)
}

/// Whether `spec`'s server refused `token` (see [`refused`]); if so, `caller`'s credentials
/// for it are dropped, so their next call signs in again (or, with token exchange, exchanges
/// again).
pub(crate) async fn drop_if_refused(store: &Store, spec: &ServerSpec, caller: &Caller, token: &str) -> bool {
    if !was_refused(token) {
        return false;
    }
    let server = spec.name.as_str();
    if spec.token_exchange().is_some() {
        super::exchange::forget(store, caller, server, token).await;
        return true;
    }
    let credentials = StoreCredentials::new(store, caller, server);
    // Only if it is still that token: another replica may have stored a new one.
    let stored = credentials.load().await.ok().flatten();
    let same = stored
        .as_ref()
        .and_then(|s| s.token_response.as_ref())
        .and_then(|r| serde_json::to_value(r).ok())
        .is_some_and(|fields| fields.get("access_token").and_then(serde_json::Value::as_str) == Some(token));
    if same {
        tracing::info!(%server, caller = %caller.label(), "the server refused this caller's token: they sign in again");
        let _ = credentials.clear().await;
    }
    true
}

/// The access token `caller` has for `spec`'s server, refreshed first when it is about to
/// expire, or exchanged for theirs at the identity provider (`tokenExchange`, see
/// `exchange`); `None` when they must sign in (never did, or the refresh was refused).
pub(crate) async fn token(
    store: &Store,
    spec: &ServerSpec,
    caller: &Caller,
) -> Result<Option<String>, CredentialError> {
    if caller.is_local() {
        return Err(CredentialError::NoCaller {
            server: spec.name.clone(),
        });
    }
    if let Some(exchange) = spec.token_exchange() {
        return Ok(Some(super::exchange::token(store, spec, exchange, caller).await?));
    }
    let credentials = StoreCredentials::new(store, caller, &spec.name);
    match due(&credentials, None)
        .await
        .map_err(|e| CredentialError::auth(&spec.name, &e))?
    {
        Due::Fresh(token) => Ok(Some(token)),
        Due::Missing => Ok(None),
        Due::Refresh {
            stored,
            credentials,
            held: _held,
        } => refresh(store, spec, credentials, &stored).await,
    }
}

/// What a use of stored credentials needs now.
pub(super) enum Due {
    /// The stored access token, fresh enough to send.
    Fresh(String),
    /// Nothing stored (never signed in, or signed out): a sign-in is needed.
    Missing,
    /// The token is due for a refresh: the refresh lock is held (until `held` drops) and
    /// `stored` was read after taking it; `credentials` take no lock of their own, so the
    /// refresh that runs through them saves under this one.
    Refresh {
        stored: Box<StoredCredentials>,
        credentials: StoreCredentials,
        held: Held,
    },
}

/// Whether `credentials` hold a token to send as it is, or one to refresh; `rejected`: a token
/// the server refused (due whatever its expiry says). One refresh at a time across replicas:
/// the lock is taken only for a due token, and the credentials read again once it is held,
/// so whoever waited finds the token another replica refreshed meanwhile.
pub(super) async fn due(credentials: &StoreCredentials, rejected: Option<&str>) -> Result<Due, AuthError> {
    use std::ops::ControlFlow::{Break, Continue};
    // The lock is taken only for a due token; whoever waited for it reads again.
    let held = match settled(credentials.load().await?, rejected) {
        Break(due) => return Ok(due),
        Continue(_) => Held::take(credentials).await?,
    };
    match settled(credentials.load().await?, rejected) {
        Break(due) => Ok(due),
        Continue(stored) => Ok(Due::Refresh {
            stored: Box::new(stored),
            credentials: credentials.clone().locked(),
            held,
        }),
    }
}

/// What `stored` allows as it is: nothing (a sign-in is needed), or a token fresh enough to
/// send that is not `rejected`; else it is due for a refresh (`Continue`).
fn settled(stored: Option<StoredCredentials>, rejected: Option<&str>) -> std::ops::ControlFlow<Due, StoredCredentials> {
    use std::ops::ControlFlow::{Break, Continue};
    let Some(stored) = stored.filter(|s| s.token_response.is_some()) else {
        return Break(Due::Missing);
    };
    let fresh = stored
        .token_response
        .as_ref()
        .and_then(|r| fresh_token(r, stored.token_received_at))
        .filter(|token| Some(token.as_str()) != rejected);
    match fresh {
        Some(token) => Break(Due::Fresh(token)),
        None => Continue(stored),
    }
}

/// The access token of `response` unless it expires within [`REFRESH_AHEAD_SECS`] (read
/// through its JSON: rmcp does not re-export the `oauth2` trait that reads it).
pub(super) fn fresh_token(
    response: &rmcp::transport::auth::OAuthTokenResponse,
    received_at: Option<u64>,
) -> Option<String> {
    let fields = serde_json::to_value(response).ok()?;
    let token = fields.get("access_token")?.as_str()?.to_owned();
    match (
        fields.get("expires_in").and_then(serde_json::Value::as_u64),
        received_at,
    ) {
        (Some(lifetime), Some(received)) => {
            let ahead = REFRESH_AHEAD_SECS.min(lifetime / 2).max(1);
            let remaining = received.saturating_add(lifetime).saturating_sub(now_secs());
            (remaining >= ahead).then_some(token)
        }
        _ => Some(token),
    }
}

/// Refresh `stored` through rmcp (the caller holds the store lock); `None` when the
/// authorization server refused: the caller signs in again.
async fn refresh(
    store: &Store,
    spec: &ServerSpec,
    credentials: StoreCredentials,
    stored: &StoredCredentials,
) -> Result<Option<String>, CredentialError> {
    let server = spec.name.as_str();
    let fail = |e: &AuthError| CredentialError::auth(server, e);
    let settings = Settings::from_spec(spec.connection.oauth.as_ref()).map_err(|e| CredentialError::Auth {
        server: server.to_owned(),
        reason: e.to_string(),
    })?;
    let mut manager = manager_for(spec).await.map_err(|e| fail(&e))?;
    let secret = match (&settings.client_id, &settings.client_secret) {
        (Some(_), secret) => secret.clone(),
        (None, _) => registered_secret(store, stored).await,
    };
    let mut config = OAuthClientConfig::new(stored.client_id.clone(), super::UNUSED_REDIRECT);
    if let Some(secret) = secret {
        config = config.with_client_secret(secret);
    }
    manager.configure_client(config).map_err(|e| fail(&e))?;
    manager.set_credential_store(credentials);
    match manager.get_access_token().await {
        Ok(token) => Ok(Some(token)),
        Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => Ok(None),
        Err(error) => Err(fail(&error)),
    }
}

/// The secret of the dynamically registered client `stored` was issued to, if kept.
async fn registered_secret(store: &Store, stored: &StoredCredentials) -> Option<String> {
    let issuer = stored.issuer.as_deref()?;
    let bytes = store
        .get_sealed(&secret_key(store, issuer, &stored.client_id))
        .await
        .ok()??;
    String::from_utf8(bytes).ok()
}

/// A manager for `spec`'s server with its authorization server's metadata.
async fn manager_for(spec: &ServerSpec) -> Result<AuthorizationManager, AuthError> {
    let url = crate::config::expand::expand_env(spec.connection.url.as_deref().unwrap_or_default())
        .map_err(|e| AuthError::InternalError(format!("url: {e}")))?;
    let mut manager = AuthorizationManager::new_allowing_private_addresses(url.as_str()).await?;
    let resolution = manager.resolve_metadata().await?;
    manager.set_metadata(resolution.metadata);
    Ok(manager)
}

/// A sign-in link's `state` for `caller` and `server`, kept for [`FLOW_TTL`]: the one given
/// them last while it is young and not continued, else a new one.
pub(crate) async fn begin(store: &Store, server: &str, caller: &Caller) -> Result<String, CredentialError> {
    if caller.is_local() {
        return Err(CredentialError::NoCaller {
            server: server.to_owned(),
        });
    }
    let pending = pending_key(store, caller, server);
    if let Some(state) = store
        .get_sealed(&pending)
        .await?
        .and_then(|bytes| String::from_utf8(bytes).ok())
    {
        // Unless it was continued meanwhile (`authorize` takes it; opening the page does not).
        if store.get(&state_key(store, &state)).await?.is_some() {
            return Ok(state);
        }
    }
    let state = random_hex(32);
    let bound = Bound {
        server: server.to_owned(),
        issuer: caller.issuer.clone(),
        subject: caller.subject.clone(),
        name: caller.name.clone(),
    };
    let bytes = serde_json::to_vec(&bound).expect("a bound state serializes");
    store
        .set_sealed(&state_key(store, &state), &bytes, Some(FLOW_TTL))
        .await?;
    store.set_sealed(&pending, state.as_bytes(), Some(FLOW_TTL / 2)).await?;
    Ok(state)
}

/// The caller a sign-in link's `state` was given to, the link left unspent: whom the page that
/// asks the person opening it to continue names.
pub(crate) async fn link_caller(store: &Store, spec: &ServerSpec, state: &str) -> Result<Caller, CredentialError> {
    Ok(bound_for(store.get_sealed(&state_key(store, state)).await?, spec)?.caller())
}

/// The link state `bytes` hold (`None`: no such link), if it was given for `spec`'s server and
/// that server still signs each caller in.
fn bound_for(bytes: Option<Vec<u8>>, spec: &ServerSpec) -> Result<Bound, CredentialError> {
    let bytes = bytes.ok_or(CredentialError::UnknownState)?;
    let bound: Bound = serde_json::from_slice(&bytes).map_err(|_| CredentialError::UnknownState)?;
    if bound.server != spec.name {
        return Err(CredentialError::OtherServer(spec.name.clone()));
    }
    if !spec.is_per_user() {
        return Err(CredentialError::NotPerUser(spec.name.clone()));
    }
    Ok(bound)
}

/// `/connect/<server>?state=…` continued: take the link's state (one use) and start the
/// authorization request for the browser holding the value whose SHA-256 (hex) is `browser`;
/// the address of the authorization endpoint to send it to, with the request's state.
pub(crate) async fn authorize(
    store: &Store,
    spec: &ServerSpec,
    state: &str,
    redirect_uri: &str,
    browser: &str,
) -> Result<Authorization, CredentialError> {
    let server = spec.name.as_str();
    let bound = bound_for(store.take_sealed(&state_key(store, state)).await?, spec)?;
    let fail = |e: &AuthError| CredentialError::auth(server, e);
    let settings = Settings::from_spec(spec.connection.oauth.as_ref()).map_err(|e| CredentialError::Auth {
        server: server.to_owned(),
        reason: e.to_string(),
    })?;
    let mut manager = manager_for(spec).await.map_err(|e| fail(&e))?;
    let metadata = manager.resolve_metadata().await.map_err(|e| fail(&e))?.metadata;
    // Checked before registering a client there: a page we would not open makes it useless.
    browser::SignInPage::check(server, &metadata.authorization_endpoint).map_err(|e| fail(&e))?;
    let endpoint = metadata.authorization_endpoint.clone();
    manager.set_metadata(metadata.clone());
    let issuer = super::registration_key(&metadata);
    let (client_id, client_secret) = match &settings.client_id {
        Some(id) => (id.clone(), settings.client_secret.clone()),
        None => registered_client(store, server, &mut manager, &settings, &issuer, redirect_uri)
            .await
            .map_err(|e| fail(&e))?,
    };
    let mut config = OAuthClientConfig::new(client_id.clone(), redirect_uri);
    if let Some(secret) = &client_secret {
        config = config.with_client_secret(secret.clone());
    }
    manager.configure_client(config).map_err(|e| fail(&e))?;
    manager.set_state_store(StoreStates(store.clone()));
    let scopes = if settings.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        settings.scopes.clone()
    };
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let address = manager.get_authorization_url(&scopes).await.map_err(|e| fail(&e))?;
    let page = browser::SignInPage::check(server, &address).map_err(|e| fail(&e))?;
    if !same_endpoint(page.as_str(), &endpoint) {
        return Err(CredentialError::Auth {
            server: server.to_owned(),
            reason: "the authorization address is not the discovered authorization endpoint".into(),
        });
    }
    let csrf = Url::parse(page.as_str())
        .ok()
        .and_then(|u| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()))
        .ok_or_else(|| CredentialError::Auth {
            server: server.to_owned(),
            reason: "the authorization URL has no state".into(),
        })?;
    let flow = Flow {
        bound,
        client_id,
        client_secret,
        redirect_uri: redirect_uri.to_owned(),
        browser: browser.to_owned(),
    };
    let bytes = serde_json::to_vec(&flow).expect("a flow serializes");
    store
        .set_sealed(&flow_key(store, &csrf), &bytes, Some(FLOW_TTL))
        .await?;
    Ok(Authorization {
        address: page.as_str().to_owned(),
        state: csrf,
    })
}

/// Where a continued sign-in sends the browser, and the authorization request's own `state`
/// (what the callback brings back and the flow is kept under).
#[derive(Debug)]
pub(crate) struct Authorization {
    pub(crate) address: String,
    pub(crate) state: String,
}

/// Whether `address` is `endpoint` with a query added (same origin and path).
fn same_endpoint(address: &str, endpoint: &str) -> bool {
    match (Url::parse(address), Url::parse(endpoint)) {
        (Ok(a), Ok(e)) => a.origin() == e.origin() && a.path() == e.path(),
        _ => false,
    }
}

/// The client registered before at `issuer` for `redirect_uri`, else a new registration, kept.
async fn registered_client(
    store: &Store,
    server: &str,
    manager: &mut AuthorizationManager,
    settings: &Settings,
    issuer: &str,
    redirect_uri: &str,
) -> Result<(String, Option<String>), AuthError> {
    let key = client_key(store, issuer, redirect_uri);
    if let Ok(Some(bytes)) = store.get_sealed(&key).await {
        if let Ok(client) = serde_json::from_slice::<Registered>(&bytes) {
            if let Some(secret) = &client.client_secret {
                crate::secrets::register(server, [secret.clone()]);
            }
            return Ok((client.client_id, client.client_secret));
        }
    }
    let scopes = if settings.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        settings.scopes.clone()
    };
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let name = settings.client_name.as_deref().unwrap_or(CLIENT_NAME);
    let config = manager
        .register_client(name, redirect_uri, &scopes)
        .await
        .map_err(|e| AuthError::RegistrationFailed(format!("Dynamic registration failed: {e}")))?;
    let client = Registered {
        client_id: config.client_id.clone(),
        client_secret: config.client_secret.clone(),
    };
    let bytes = serde_json::to_vec(&client).expect("a client serializes");
    // Two replicas registering at once: each uses its own; the last kept is reused later.
    let kept = async {
        if let Some(secret) = &client.client_secret {
            crate::secrets::register(server, [secret.clone()]);
            store
                .set_sealed(&secret_key(store, issuer, &client.client_id), secret.as_bytes(), None)
                .await?;
        }
        store.set_sealed(&key, &bytes, None).await
    };
    if let Err(error) = kept.await {
        tracing::warn!(%server, "the registered client is not kept: {error}");
    }
    Ok((client.client_id, client.client_secret))
}

/// `/connect/callback`: the sign-in the authorization request's `state` names, taken (one use).
pub(crate) async fn take_flow(store: &Store, csrf: &str) -> Result<Flow, CredentialError> {
    flow_of(store.take_sealed(&flow_key(store, csrf)).await?)
}

/// [`take_flow`] without taking it: what the callback checks its browser against first.
pub(crate) async fn peek_flow(store: &Store, csrf: &str) -> Result<Flow, CredentialError> {
    flow_of(store.get_sealed(&flow_key(store, csrf)).await?)
}

fn flow_of(bytes: Option<Vec<u8>>) -> Result<Flow, CredentialError> {
    let bytes = bytes.ok_or(CredentialError::UnknownState)?;
    serde_json::from_slice(&bytes).map_err(|_| CredentialError::UnknownState)
}

/// Exchange the callback's `code` (with the PKCE verifier kept under `csrf`) for the flow's
/// caller's tokens, kept sealed.
pub(crate) async fn exchange(
    store: &Store,
    spec: &ServerSpec,
    flow: &Flow,
    code: &str,
    csrf: &str,
    issuer: Option<&str>,
) -> Result<(), CredentialError> {
    let server = spec.name.as_str();
    let fail = |e: &AuthError| CredentialError::auth(server, e);
    if !spec.is_per_user() {
        return Err(CredentialError::NotPerUser(server.to_owned()));
    }
    let mut manager = manager_for(spec).await.map_err(|e| fail(&e))?;
    let mut config = OAuthClientConfig::new(flow.client_id.clone(), flow.redirect_uri.clone());
    if let Some(secret) = &flow.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    manager.configure_client(config).map_err(|e| fail(&e))?;
    manager.set_state_store(StoreStates(store.clone()));
    let credentials = StoreCredentials::new(store, &flow.bound.caller(), server);
    // Kept under the refresh lock: a refresh of the caller's previous token under way (on any
    // replica) would otherwise save it over the sign-in that replaces it.
    let _held = Held(Some(credentials.refresh_lock().await.map_err(|e| fail(&e))?));
    manager.set_credential_store(credentials);
    manager
        .exchange_code_for_token_with_issuer(code, csrf, issuer)
        .await
        .map_err(|e| fail(&e))?;
    tracing::info!(%server, caller = %flow.bound.caller().label(), "signed in (per-user credentials)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(issuer: &str, subject: &str) -> Caller {
        Caller {
            issuer: Some(issuer.into()),
            subject: Some(subject.into()),
            ..Caller::default()
        }
    }

    #[test]
    fn a_credential_key_is_one_per_issuer_subject_and_server_and_names_no_one() {
        let store = Store::memory();
        let alice = credential_key(&store, &caller("https://id.example", "alice"), "gh");
        assert!(
            alice.starts_with(&format!("{}:cred:gh:", crate::config::store::DEFAULT_PREFIX)),
            "{alice}"
        );
        assert!(!alice.contains("alice") && !alice.contains("id.example"), "{alice}");
        assert_eq!(
            alice,
            credential_key(&store, &caller("https://id.example", "alice"), "gh")
        );
        assert_ne!(
            alice,
            credential_key(&store, &caller("https://id.example", "bob"), "gh")
        );
        assert_ne!(
            alice,
            credential_key(&store, &caller("https://other.example", "alice"), "gh")
        );
        assert_ne!(
            alice,
            credential_key(&store, &caller("https://id.example", "alice"), "jira")
        );
        // No split of the same characters between issuer and subject names the same key.
        assert_ne!(
            credential_key(&store, &caller("a", "bc"), "gh"),
            credential_key(&store, &caller("ab", "c"), "gh")
        );
    }

    #[tokio::test]
    async fn a_sign_in_link_works_once_and_only_for_its_server() {
        let store = Store::memory();
        let alice = caller("https://id.example", "alice");
        let state = begin(&store, "gh", &alice).await.unwrap();
        assert_eq!(state.len(), 64);
        let bob = begin(&store, "gh", &caller("https://id.example", "bob")).await.unwrap();
        assert_ne!(state, bob, "random per caller");
        let spec: ServerSpec = serde_json::from_value(serde_json::json!({
            "name": "jira", "connection": { "type": "http", "url": "http://127.0.0.1:9/mcp", "oauth": { "perUser": true } }
        }))
        .unwrap();
        // Another server's link is refused (and spent).
        let other = authorize(&store, &spec, &state, "http://127.0.0.1/connect/callback", "b").await;
        assert!(matches!(other, Err(CredentialError::OtherServer(_))), "{other:?}");
        let again = authorize(&store, &spec, &state, "http://127.0.0.1/connect/callback", "b").await;
        assert!(matches!(again, Err(CredentialError::UnknownState)), "{again:?}");
        let made_up = authorize(&store, &spec, &"0".repeat(64), "http://127.0.0.1/connect/callback", "b").await;
        assert!(matches!(made_up, Err(CredentialError::UnknownState)), "{made_up:?}");
        assert!(matches!(
            begin(&store, "gh", &Caller::local()).await,
            Err(CredentialError::NoCaller { .. })
        ));
    }

    #[tokio::test]
    async fn a_caller_calling_again_gets_the_same_unopened_link_not_a_new_state_each_time() {
        let store = Store::memory();
        let alice = caller("https://id.example", "alice");
        let first = begin(&store, "gh", &alice).await.unwrap();
        // A client (or a model) calling in a loop before anyone opens the link: one state in
        // the store, not one per call.
        for _ in 0..100 {
            assert_eq!(begin(&store, "gh", &alice).await.unwrap(), first);
        }
        assert_ne!(begin(&store, "jira", &alice).await.unwrap(), first, "per server");
        // Opened (taken): the next call gets a new link, and that one is reused in turn.
        store.take(&state_key(&store, &first)).await.unwrap();
        let second = begin(&store, "gh", &alice).await.unwrap();
        assert_ne!(second, first);
        assert_eq!(begin(&store, "gh", &alice).await.unwrap(), second);
    }

    #[test]
    fn an_authorization_servers_error_text_is_bounded() {
        let huge = AuthError::TokenRefreshFailed(format!("invalid_request: {}", "x".repeat(1024 * 1024)));
        let shown = CredentialError::auth("gh", &huge).to_string();
        assert!(
            shown.len() < crate::upstream::error::MAX_TEXT_BYTES + 100,
            "{} bytes",
            shown.len()
        );
        assert!(shown.starts_with("signing in to gh: ") && shown.ends_with("more bytes cut]"));
    }

    #[tokio::test]
    async fn tokens_are_kept_per_caller_and_a_fresh_one_is_used_as_it_is() {
        let store = Store::memory();
        let (alice, bob) = (caller("i", "alice"), caller("i", "bob"));
        let response = serde_json::from_value(serde_json::json!({
            "access_token": "alice-access-token-0123456789", "token_type": "Bearer", "expires_in": 3600
        }))
        .unwrap();
        let credentials = StoredCredentials::new("client".into(), Some(response), vec![], Some(now_secs()));
        StoreCredentials::new(&store, &alice, "gh")
            .save(credentials)
            .await
            .unwrap();
        let spec: ServerSpec = serde_json::from_value(serde_json::json!({
            "name": "gh", "connection": { "type": "http", "url": "http://127.0.0.1:9/mcp", "oauth": { "perUser": true } }
        }))
        .unwrap();
        assert_eq!(
            token(&store, &spec, &alice).await.unwrap().as_deref(),
            Some("alice-access-token-0123456789")
        );
        assert_eq!(token(&store, &spec, &bob).await.unwrap(), None, "bob never signed in");
        assert_eq!(
            crate::secrets::scrub("sent alice-access-token-0123456789"),
            "sent ***",
            "a token is a secret once read or written"
        );
    }
}
