//! Signing in to remote servers that sit behind the MCP authorization spec (OAuth 2.1).
//!
//! Built on rmcp's `auth` feature, which owns the protocol: protected-resource metadata from
//! the 401's `WWW-Authenticate` (`resource_metadata`) or the well-known paths (RFC 9728),
//! authorization-server metadata (RFC 8414, then `OpenID` discovery, then the 2025-03-26 root
//! endpoints) with issuer checks, the client identity in the spec's order (a pre-registered
//! `clientId`/`clientSecret`, a Client ID Metadata Document, dynamic registration RFC 7591),
//! PKCE S256, `resource` (RFC 8707) in every authorization and token request, scope
//! selection (the challenge's, else `scopes_supported`, else none), `client_secret_basic` /
//! `client_secret_post` / `none`, refresh, and the client-credentials grant.
//!
//! What is ours: when to sign in and how a person does it. [`Authorizer`] is one server's
//! sign-in state. Requests carry its token; a 401 refreshes the token silently once, then
//! starts a sign-in; a 403 `insufficient_scope` signs in again for the scopes it names, at
//! most [`MAX_STEP_UPS`] times per request. A sign-in opens the browser (`browser`) and
//! waits for the loopback callback in the background for [`SIGN_IN_WINDOW`]; the connect or
//! call that needed it waits only part of its own time limit, then fails with a
//! [`NEEDS_SIGN_IN`] error naming the command that fixes it, and the next attempt picks up
//! the sign-in the person finished meanwhile. A browser opens only for someone who needs the
//! server: a call of its tools in flight ([`sign_in_wanted`]) or `auth login`; a background
//! connect of a server nobody used fails at once with [`NEEDS_SIGN_IN`] instead (it still joins
//! a sign-in already open, and still refreshes a token silently). Tokens live in `store` (the
//! OS keychain, else an owner-only file; per server and resource) — or, with a shared
//! `discovery.store`, sealed there for every replica (`shared`: one sign-in, one refresh under
//! the store's lock) — registered as secrets of
//! their server, beside the client registered dynamically at each authorization server: a
//! restart reuses that client (on the loopback port it was registered with) instead of
//! registering another, and drops it when the authorization server answers `invalid_client`.
//!
//! rmcp's `AuthClient` (its transport wrapper) is not used: it refreshes on a 401 but leaves
//! sign-in and step-up to the caller, and ours must sit inside our own HTTP client
//! (`upstream::http`) anyway, whose session rules it would otherwise bypass.

mod browser;
mod exchange;
pub(crate) mod keychain;
mod lock;
pub(crate) mod per_user;
mod shared;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, CredentialStore, OAuthClientConfig,
};
use tokio::sync::watch;

use super::error::UpstreamError;
use crate::config::{expand, OAuthGrant, OAuthSpec};

use shared::{Keeper, SharedSignIn};
pub(crate) use store::TokenStore;
use store::{register_secrets, Location, RegisteredClient};

/// What a server's status and errors start with while it waits for a person to sign in.
pub(crate) const NEEDS_SIGN_IN: &str = "needs sign-in";

/// How long the loopback listener of one sign-in waits for the browser.
const SIGN_IN_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Sign-ins for more scopes (403 `insufficient_scope`) one request may start: a server that
/// asks again after each one would otherwise loop.
pub(crate) const MAX_STEP_UPS: usize = 2;

/// The name a dynamically registered client gives itself unless `oauth.clientName` says.
const CLIENT_NAME: &str = "anygpt-discovery";

/// The redirect URI given to a client configured only to refresh or exchange credentials:
/// neither sends it, and rmcp's client type needs one.
const UNUSED_REDIRECT: &str = "http://127.0.0.1/callback";

/// `connection.oauth` with `${VAR}`s expanded.
#[derive(Clone, Default)]
struct Settings {
    client_id: Option<String>,
    client_secret: Option<String>,
    client_metadata_url: Option<String>,
    client_name: Option<String>,
    scopes: Vec<String>,
    grant: OAuthGrant,
    redirect_port: Option<u16>,
}

impl Settings {
    fn from_spec(spec: Option<&OAuthSpec>) -> Result<Self, UpstreamError> {
        let Some(spec) = spec else { return Ok(Self::default()) };
        let expand = |field: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| expand::expand_env(v).map_err(|e| UpstreamError::spec(format!("oauth.{field}"), e)))
                .transpose()
        };
        Ok(Self {
            client_id: expand("clientId", &spec.client_id)?,
            client_secret: expand("clientSecret", &spec.client_secret)?,
            client_metadata_url: spec.client_metadata_url.clone(),
            client_name: spec.client_name.clone(),
            scopes: spec.scopes.clone(),
            grant: spec.grant,
            redirect_port: spec.redirect_port,
        })
    }
}

/// One server's sign-in: its token store, the authorization manager holding the client
/// configured for it, and how long a request may wait for a person.
pub(crate) struct Authorizer {
    server: String,
    resource: Url,
    settings: Settings,
    /// Where the sign-in is kept: this machine, or the store replicas share.
    store: Keeper,
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// Whether the token store was read for this server already: most servers never sign in,
    /// and their requests must not read a file each. A sign-in (ours, or `auth login`'s,
    /// found by the next connect) fills `manager`.
    store_read: std::sync::atomic::AtomicBool,
    /// Held while deciding whether to start a sign-in, so concurrent 401s start one.
    starting: tokio::sync::Mutex<()>,
    wait: Duration,
    /// Whether this authorizer may open a browser with no call in flight (`auth login`).
    interactive: bool,
    /// Why the last sign-in did not give a token (read by the connect that needed it).
    failure: Mutex<Option<UpstreamError>>,
}

impl Authorizer {
    /// `wait`: how long a request that needs a sign-in waits for it before it fails with
    /// [`NEEDS_SIGN_IN`] (the sign-in itself goes on for [`SIGN_IN_WINDOW`]); `shared`: the
    /// store replicas share, when one is configured (the sign-in is kept there).
    pub(crate) fn new(
        server: &str,
        url: &Url,
        spec: Option<&OAuthSpec>,
        wait: Duration,
        shared: Option<&crate::store::Store>,
    ) -> Result<Self, UpstreamError> {
        let settings = Settings::from_spec(spec)?;
        if let Some(secret) = &settings.client_secret {
            crate::secrets::register(server, [secret.clone()]);
        }
        Ok(Self {
            server: server.to_owned(),
            resource: url.clone(),
            settings,
            store: Keeper::new(server, &resource_key(url), shared),
            manager: tokio::sync::Mutex::default(),
            store_read: std::sync::atomic::AtomicBool::new(false),
            starting: tokio::sync::Mutex::default(),
            wait,
            interactive: false,
            failure: Mutex::default(),
        })
    }

    /// The same authorizer for a person at a terminal (`auth login`): it opens the browser
    /// whether or not a call needs the server.
    pub(crate) fn interactive(mut self) -> Self {
        self.interactive = true;
        self
    }

    /// The access token to send, refreshed first when it expired; `None` before any sign-in
    /// (the request goes out without one and the server's 401 starts the sign-in).
    pub(crate) async fn token(&self) -> Result<Option<String>, AuthError> {
        let mut slot = self.manager.lock().await;
        // A shared store is read each time: another replica may have signed in.
        let shared = self.store.shared();
        if slot.is_none() && (shared.is_some() || !self.store_read.swap(true, std::sync::atomic::Ordering::Relaxed)) {
            *slot = self.manager_from_store().await?;
        }
        let Some(manager) = slot.as_ref() else { return Ok(None) };
        if let Some(shared) = shared {
            let token = self.shared_token(manager, shared, None).await?;
            if token.is_none() {
                *slot = None;
            }
            return Ok(token);
        }
        match manager.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(error) if is_client_refused(&error) => {
                // Without a token the server's 401 starts a sign-in, which registers again.
                self.forget_refused_client().await;
                *slot = None;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// A fresh token after the server refused `rejected`: one silent refresh.
    pub(crate) async fn refreshed(&self, rejected: &str) -> Option<String> {
        let slot = self.manager.lock().await;
        let manager = slot.as_ref()?;
        if let Some(shared) = self.store.shared() {
            return match self.shared_token(manager, shared, Some(rejected)).await {
                Ok(fresh) => fresh.filter(|fresh| fresh != rejected),
                Err(error) => {
                    tracing::info!(server = %self.server, "no fresh token in the shared store ({}); signing in again", auth_error_text(&error));
                    None
                }
            };
        }
        if let Err(error) = manager.refresh_token().await {
            tracing::info!(server = %self.server, "the refresh token was not accepted ({error}); signing in again");
            if is_client_refused(&error) {
                self.forget_refused_client().await;
            }
            return None;
        }
        manager.get_access_token().await.ok().filter(|fresh| fresh != rejected)
    }

    /// The shared store's token for this server, refreshed under the store's lock when due
    /// (or when it is `rejected`); `None` when a sign-in is needed.
    async fn shared_token(
        &self,
        manager: &AuthorizationManager,
        shared: &SharedSignIn,
        rejected: Option<&str>,
    ) -> Result<Option<String>, AuthError> {
        let held = match shared.due(rejected).await? {
            per_user::Due::Fresh(token) => return Ok(Some(token)),
            per_user::Due::Missing => return Ok(None),
            per_user::Due::Refresh { held, .. } => held,
        };
        // rmcp reads the credentials again and saves the new ones through the keeper, whose
        // store takes no lock of its own: this one is held until the save.
        let outcome = manager.refresh_token().await;
        drop(held);
        match outcome {
            Ok(response) => Ok(serde_json::to_value(&response)
                .ok()
                .and_then(|fields| fields.get("access_token")?.as_str().map(str::to_owned))),
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => Ok(None),
            Err(error) if is_client_refused(&error) => {
                self.forget_refused_client().await;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Sign in as the server's `challenge` (its `WWW-Authenticate`) asks, waiting up to
    /// this authorizer's wait for the person; the token on success. `sent`: the token the
    /// server refused, if any (a shared store's token other than it is another replica's
    /// sign-in, used instead of a new one).
    pub(crate) async fn sign_in(&self, challenge: &str, sent: Option<&str>) -> Result<String, AuthError> {
        let outcome = self.sign_in_inner(challenge, sent).await;
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = outcome.as_ref().err().map(upstream_error);
        outcome
    }

    /// Why the last sign-in failed, once: [`UpstreamError::NeedsSignIn`] when nobody signed
    /// in, else the sign-in's own failure.
    pub(crate) fn take_failure(&self) -> Option<UpstreamError> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Join the sign-in under way or start one, and wait for it until this authorizer's wait
    /// is up; a registered client the token endpoint refused is replaced by a new registration
    /// once (a second browser page).
    async fn sign_in_inner(&self, challenge: &str, sent: Option<&str>) -> Result<String, AuthError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut registered_again = false;
        loop {
            let pending = {
                let _starting = self.starting.lock().await;
                if let Some(token) = self.signed_in_elsewhere(sent).await {
                    return Ok(token);
                }
                match pending_for(&self.server) {
                    Some(pending) => pending,
                    None if self.interactive || is_wanted(&self.server) => self.start(challenge, sent).await?,
                    // A background connect: nobody is there to sign in, so nothing opens.
                    None => return Err(AuthError::AuthorizationFailed(sign_in_not_started_text(&self.server))),
                }
            };
            match tokio::time::timeout_at(deadline, pending.finished()).await {
                Ok(Ok(())) => break,
                Ok(Err(SignInFailed::ClientRefused(reason))) if !registered_again => {
                    tracing::info!(server = %self.server, "{reason}; signing in with a new registration");
                    registered_again = true;
                }
                Ok(Err(SignInFailed::Failed(reason) | SignInFailed::ClientRefused(reason))) => {
                    return Err(AuthError::AuthorizationFailed(reason));
                }
                Err(_) => return Err(AuthError::AuthorizationFailed(needs_sign_in_text(&self.server))),
            }
        }
        let mut slot = self.manager.lock().await;
        *slot = self.manager_from_store().await?;
        let manager = slot.as_ref().ok_or(AuthError::AuthorizationRequired)?;
        manager.get_access_token().await
    }

    /// A token another replica signed in for, from the shared store, other than `sent` (read
    /// only: a refresh was tried already, and a step-up needs a new sign-in, not a refresh).
    async fn signed_in_elsewhere(&self, sent: Option<&str>) -> Option<String> {
        let token = self.store.shared()?.fresh_other_than(sent).await?;
        tracing::info!(server = %self.server, "signed in by another replica: using its sign-in");
        Some(token)
    }

    /// A manager for this server with the store's credentials, or `None` without any.
    async fn manager_from_store(&self) -> Result<Option<AuthorizationManager>, AuthError> {
        // Another process (`auth login`) may have signed in since the last read.
        self.store.reread();
        let Some(stored) = self.store.load().await?.filter(|s| s.token_response.is_some()) else {
            return Ok(None);
        };
        let mut manager = self.new_manager().await?;
        if !manager.initialize_from_store().await? {
            return Ok(None);
        }
        // The credentials name the client only; a confidential client refreshes with its
        // secret, from the config or from its registration.
        let secret = match (&self.settings.client_id, &self.settings.client_secret) {
            (Some(id), Some(secret)) => Some((id.clone(), secret.clone())),
            (Some(_), None) => None,
            (None, _) => match &stored.issuer {
                Some(issuer) => self
                    .store
                    .registered_client(issuer)
                    .await
                    .filter(|c| c.client_id == stored.client_id)
                    .and_then(|c| c.client_secret.map(|secret| (c.client_id, secret))),
                None => None,
            },
        };
        if let Some((id, secret)) = secret {
            manager.configure_client(OAuthClientConfig::new(id, UNUSED_REDIRECT).with_client_secret(secret))?;
        }
        Ok(Some(manager))
    }

    /// The authorization server no longer knows the client the stored tokens were issued to:
    /// forget the client (when it was ours, from a registration) and those tokens.
    async fn forget_refused_client(&self) {
        if self.settings.client_id.is_some() {
            return;
        }
        let Ok(Some(stored)) = self.store.load().await else {
            return;
        };
        let Some(issuer) = &stored.issuer else { return };
        tracing::warn!(server = %self.server, "the authorization server no longer knows this gateway's client; registering again at the next sign-in");
        if let Err(error) = self.store.forget_client(issuer, &stored.client_id).await {
            tracing::warn!(server = %self.server, "{}", auth_error_text(&error));
        }
    }

    async fn new_manager(&self) -> Result<AuthorizationManager, AuthError> {
        // Private addresses allowed: company servers sign in at `sso.corp` (10.x). rmcp still
        // refuses link-local and metadata-service hosts, and loopback unless the server is.
        let mut manager = AuthorizationManager::new_allowing_private_addresses(self.resource.as_str()).await?;
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// Discover, identify the client and begin the grant: the client-credentials exchange
    /// at once, or the browser and a background wait for its callback.
    async fn start(&self, challenge: &str, sent: Option<&str>) -> Result<Arc<Pending>, AuthError> {
        let mut manager = self.new_manager().await?;
        let resolution = manager.resolve_metadata_from_challenge(Some(challenge)).await?;
        if self.settings.grant != OAuthGrant::ClientCredentials {
            // Before registering a client there: a page we would not open makes it useless.
            browser::SignInPage::check(&self.server, &resolution.metadata.authorization_endpoint)?;
        }
        let registration = self
            .registers_dynamically(&resolution.metadata)
            .then(|| registration_key(&resolution.metadata));
        manager.set_metadata(resolution.metadata);
        if self.settings.grant == OAuthGrant::ClientCredentials {
            // Replicas share one token: the grant runs under the store's lock, unless another
            // replica's token is there once it is held.
            let exclusive = match self.store.shared() {
                Some(shared) => Some(shared.exclusive(sent).await?),
                None => None,
            };
            if !matches!(exclusive, Some((_, Some(_)))) {
                self.client_credentials(&mut manager).await?;
            }
            return Ok(Arc::new(Pending::finished_ok()));
        }
        let (listener, registered) = match &registration {
            Some(issuer) => {
                let (listener, client) = self.registered_client(&mut manager, issuer).await?;
                (listener, Some(client))
            }
            None => (listen(self.settings.redirect_port).await?, None),
        };
        let mut request = self.request(&listener.redirect_uri, challenge);
        if let Some(client) = &registered {
            request = request.with_preregistered_client(client.client_id.clone());
            if let Some(secret) = &client.client_secret {
                request = request.with_client_secret(secret.clone());
            }
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| error)?;
        let kept = registration.zip(registered).map(|(issuer, client)| KeptClient {
            store: self.store.clone(),
            issuer,
            client_id: client.client_id,
        });
        let page = browser::SignInPage::check(&self.server, session.get_authorization_url())?;
        let state = Url::parse(page.as_str())
            .ok()
            .and_then(|u| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()))
            .ok_or_else(|| AuthError::InternalError("the authorization URL has no state".into()))?;
        browser::open(&page, &self.server);
        let (done, finished) = watch::channel(None);
        let pending = Arc::new(Pending { finished });
        register_pending(&self.server, &pending);
        let server = self.server.clone();
        let registered = pending.clone();
        tokio::spawn(async move {
            let outcome = tokio::time::timeout(SIGN_IN_WINDOW, complete(listener, session, state, &server, kept))
                .await
                .unwrap_or_else(|_| {
                    Err(SignInFailed::Failed(format!(
                        "nobody signed in to {server} within {} minutes",
                        SIGN_IN_WINDOW.as_secs() / 60
                    )))
                });
            if let Err(reason) = &outcome {
                tracing::warn!(%server, "sign-in failed: {reason}");
            } else {
                tracing::info!(%server, "signed in");
            }
            unregister_pending(&server, &registered);
            let _ = done.send(Some(outcome));
        });
        Ok(pending)
    }

    /// Whether this sign-in identifies the client by dynamic registration (RFC 7591): neither a
    /// configured client nor a metadata document the authorization server accepts.
    fn registers_dynamically(&self, metadata: &AuthorizationMetadata) -> bool {
        let cimd = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        self.settings.client_id.is_none() && !(cimd && self.settings.client_metadata_url.is_some())
    }

    /// The client registered at `issuer` before, with a listener on the port of its redirect
    /// URI; else a new registration (kept for the next sign-in) with a listener of its own.
    async fn registered_client(
        &self,
        manager: &mut AuthorizationManager,
        issuer: &str,
    ) -> Result<(browser::Listener, RegisteredClient), AuthError> {
        if let Some(client) = self.store.registered_client(issuer).await {
            if let Some(listener) = self.listen_for(&client).await {
                tracing::debug!(server = %self.server, "signing in with the client registered before");
                return Ok((listener, client));
            }
            tracing::info!(server = %self.server, redirect_uri = %client.redirect_uri,
                "the registered client's loopback port is taken; registering another client");
        }
        let listener = listen(self.settings.redirect_port).await?;
        let scopes = if self.settings.scopes.is_empty() {
            manager.select_initial_scopes(&[]).await
        } else {
            self.settings.scopes.clone()
        };
        let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let name = self.settings.client_name.as_deref().unwrap_or(CLIENT_NAME);
        let config = manager
            .register_client(name, &listener.redirect_uri, &scopes)
            .await
            .map_err(|e| AuthError::RegistrationFailed(format!("Dynamic registration failed: {e}")))?;
        let client = RegisteredClient {
            client_id: config.client_id,
            client_secret: config.client_secret,
            redirect_uri: listener.redirect_uri.clone(),
        };
        if let Err(error) = self.store.remember_client(issuer, client.clone()).await {
            tracing::warn!(server = %self.server, "the registered client is not kept: {}", auth_error_text(&error));
        }
        Ok((listener, client))
    }

    /// A listener on the port `client` was registered with, unless the config asks for
    /// another or the port is taken.
    async fn listen_for(&self, client: &RegisteredClient) -> Option<browser::Listener> {
        let port = Url::parse(&client.redirect_uri).ok()?.port()?;
        if self.settings.redirect_port.is_some_and(|wanted| wanted != port) {
            return None;
        }
        let listener = browser::Listener::bind(Some(port)).await.ok()?;
        (listener.redirect_uri == client.redirect_uri).then_some(listener)
    }

    fn request(&self, redirect_uri: &str, challenge: &str) -> AuthorizationRequest {
        let settings = &self.settings;
        let mut request = AuthorizationRequest::new(redirect_uri)
            .with_client_name(settings.client_name.clone().unwrap_or_else(|| CLIENT_NAME.into()))
            .with_challenge(challenge);
        request = if settings.scopes.is_empty() {
            request.with_initial_scope_selection()
        } else {
            request.with_scopes(settings.scopes.clone())
        };
        if let Some(id) = &settings.client_id {
            request = request.with_preregistered_client(id.clone());
        }
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret.clone());
        }
        if let Some(url) = &settings.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        request
    }

    async fn client_credentials(&self, manager: &mut AuthorizationManager) -> Result<(), AuthError> {
        let (Some(client_id), Some(client_secret)) = (&self.settings.client_id, &self.settings.client_secret) else {
            return Err(AuthError::InternalError(
                "the client-credentials grant needs clientId and clientSecret".into(),
            ));
        };
        let config = ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            scopes: self.settings.scopes.clone(),
            resource: Some(self.resource.to_string()),
        };
        manager.configure_client_credentials(&config)?;
        manager.exchange_client_credentials(&config).await?;
        Ok(())
    }
}

/// Why a sign-in in the browser did not complete, as a person reads it (scrubbed): it becomes
/// the `AuthorizationFailed` reason of every request that waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SignInFailed {
    #[error("{0}")]
    Failed(String),
    /// The token endpoint no longer knows the registered client (now forgotten): a sign-in
    /// with a new registration may succeed.
    #[error("{0}")]
    ClientRefused(String),
}

/// The registered client a sign-in uses, to forget when the authorization server refuses it.
struct KeptClient {
    store: Keeper,
    issuer: String,
    client_id: String,
}

/// The browser's callback, then the code exchanged for tokens (saved by the manager). A
/// registered client the token endpoint no longer knows is forgotten, and said so: the
/// waiting request signs in once more, registering again.
async fn complete(
    listener: browser::Listener,
    session: AuthorizationSession,
    state: String,
    server: &str,
    registered: Option<KeptClient>,
) -> Result<(), SignInFailed> {
    match listener.callback(&state, server).await {
        browser::Callback::Code { code, state, issuer } => {
            let outcome = session
                .handle_callback_with_issuer(&code, &state, issuer.as_deref())
                .await;
            if let (Err(error), Some(client)) = (&outcome, registered) {
                if is_client_refused(error) {
                    if let Err(forget) = client.store.forget_client(&client.issuer, &client.client_id).await {
                        tracing::warn!(%server, "{}", auth_error_text(&forget));
                    }
                    return Err(SignInFailed::ClientRefused(format!(
                        "the authorization server no longer knows this gateway's client ({})",
                        auth_error_text(error)
                    )));
                }
            }
            outcome
                .map(|_| ())
                .map_err(|e| SignInFailed::Failed(auth_error_text(&e)))
        }
        browser::Callback::Refused(why) => Err(SignInFailed::Failed(format!(
            "the authorization server refused the sign-in: {why}"
        ))),
    }
}

/// Whether the authorization server refused the client itself (RFC 6749 §5.2): rmcp passes the
/// token endpoint's error code through in the error's text only.
fn is_client_refused(error: &AuthError) -> bool {
    error.to_string().contains("invalid_client")
}

/// A loopback listener for the browser's callback.
async fn listen(port: Option<u16>) -> Result<browser::Listener, AuthError> {
    browser::Listener::bind(port)
        .await
        .map_err(|e| AuthError::InternalError(format!("cannot listen on 127.0.0.1 for the sign-in: {e}")))
}

/// The key a registered client is kept under: the authorization server's issuer (its token
/// endpoint when the metadata names none).
fn registration_key(metadata: &AuthorizationMetadata) -> String {
    metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone())
}

/// The text of an auth error as a person reads it, scrubbed (a token endpoint's error body
/// may quote what we sent).
pub(crate) fn auth_error_text(error: &AuthError) -> String {
    let text = match error {
        // Our own texts, whole.
        AuthError::AuthorizationFailed(text) if sign_in_needed(error).is_some() => text.clone(),
        AuthError::AuthorizationRequired => "the server needs a sign-in".to_owned(),
        other => other.to_string(),
    };
    crate::secrets::scrub(&text).into_owned()
}

/// What a failed sign-in means for the server: [`UpstreamError::NeedsSignIn`] when it waits
/// for a person (nobody signed in, or the wait ran out), else a failed handshake.
pub(crate) fn upstream_error(error: &AuthError) -> UpstreamError {
    match sign_in_needed(error) {
        Some(detail) => UpstreamError::NeedsSignIn {
            detail: crate::secrets::scrub(detail).into_owned(),
        },
        None => UpstreamError::handshake(auth_error_text(error)),
    }
}

/// Whether `error` is ours, saying the server waits for a person to sign in; its text if so.
/// rmcp's `AuthError` carries text only, so this is the one place where that text is read:
/// past it, the need is typed ([`UpstreamError::NeedsSignIn`]).
pub(crate) fn sign_in_needed(error: &AuthError) -> Option<&str> {
    match error {
        AuthError::AuthorizationFailed(text) if text.starts_with(NEEDS_SIGN_IN) => Some(text),
        _ => None,
    }
}

/// What a server waiting for a person says, with the one command that fixes it.
pub(crate) fn needs_sign_in_text(server: &str) -> String {
    format!(
        "{NEEDS_SIGN_IN}: sign in to {server} in the browser window the gateway opened (its address is on the \
         gateway's stderr), or run `anygpt-discovery auth login {server}`"
    )
}

/// What a server says when a background connect found it needs a sign-in and opened nothing.
pub(crate) fn sign_in_not_started_text(server: &str) -> String {
    format!(
        "{NEEDS_SIGN_IN}: the first call of one of {server}'s tools opens its sign-in page, or run \
         `anygpt-discovery auth login {server}`"
    )
}

/// The key a server's tokens are kept under: its URL without query or fragment (the
/// resource the tokens are for, RFC 8707).
fn resource_key(url: &Url) -> String {
    let mut resource = url.clone();
    resource.set_query(None);
    resource.set_fragment(None);
    resource.to_string()
}

/// A sign-in waiting for the browser, shared by every request that needs it.
pub(crate) struct Pending {
    finished: watch::Receiver<Option<Result<(), SignInFailed>>>,
}

impl Pending {
    fn finished_ok() -> Self {
        let (_, finished) = watch::channel(Some(Ok(())));
        Self { finished }
    }

    async fn finished(&self) -> Result<(), SignInFailed> {
        let mut finished = self.finished.clone();
        let outcome = finished.wait_for(Option::is_some).await;
        match outcome {
            Ok(value) => value.clone().unwrap_or(Ok(())),
            Err(_) => Err(SignInFailed::Failed("the sign-in ended".to_owned())),
        }
    }
}

/// Calls in flight that may start a sign-in, by server.
static WANTED: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

/// While the guard lives, a sign-in `server` asks for may open the browser: a call of its
/// tools needs it.
#[must_use]
pub(crate) fn sign_in_wanted(server: &str) -> SignInWanted {
    *WANTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .entry(server.to_owned())
        .or_default() += 1;
    SignInWanted(server.to_owned())
}

/// A call that may start a sign-in of its server; see [`sign_in_wanted`].
pub(crate) struct SignInWanted(String);

impl Drop for SignInWanted {
    fn drop(&mut self) {
        let mut wanted = WANTED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(map) = wanted.as_mut() {
            if let Some(count) = map.get_mut(&self.0) {
                *count -= 1;
                if *count == 0 {
                    map.remove(&self.0);
                }
            }
        }
    }
}

fn is_wanted(server: &str) -> bool {
    WANTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|m| m.contains_key(server))
}

/// Sign-ins waiting for a browser, by server: a reconnect or a second request joins the one
/// already open instead of opening another window.
static PENDING: Mutex<Option<HashMap<String, Arc<Pending>>>> = Mutex::new(None);

fn pending_for(server: &str) -> Option<Arc<Pending>> {
    PENDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(server).cloned())
}

/// Whether `server` has a sign-in waiting for the browser.
pub(crate) fn is_waiting(server: &str) -> bool {
    pending_for(server).is_some()
}

fn register_pending(server: &str, pending: &Arc<Pending>) {
    PENDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(server.to_owned(), pending.clone());
}

fn unregister_pending(server: &str, pending: &Arc<Pending>) {
    let mut map = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(map) = map.as_mut() {
        if map.get(server).is_some_and(|p| Arc::ptr_eq(p, pending)) {
            map.remove(server);
        }
    }
}

/// `spec`'s sign-in in the shared store, when one is given that can hold it.
fn shared_sign_in(spec: &crate::config::ServerSpec, shared: Option<&crate::store::Store>) -> Option<SharedSignIn> {
    let store = shared.filter(|s| s.can_seal())?;
    let url = expand::expand_env(spec.connection.url.as_deref()?).ok()?;
    let resource = resource_key(&Url::parse(&url).ok()?);
    Some(SharedSignIn::new(store, &spec.name, &resource, None))
}

/// What is kept for `spec`'s server, per resource, and where: the shared store's sign-in
/// first (when `shared` names one), then this machine's. No token text.
pub(crate) async fn stored_sign_ins(
    spec: &crate::config::ServerSpec,
    shared: Option<&crate::store::Store>,
) -> Vec<StoredSignIn> {
    let mut found = Vec::new();
    if let Some(sign_in) = shared_sign_in(spec, shared) {
        if let (Ok(Some(credentials)), Some(store)) = (sign_in.peek().await, shared) {
            let at = store.health().at;
            found.extend(described(
                [(sign_in.resource().to_owned(), credentials)],
                &format!("the shared store ({at})"),
            ));
        }
    }
    let (resources, location) = TokenStore::resources(&spec.name).await;
    let kept_in = location_text(&location, keychain::Keychain::process().why_off());
    found.extend(described(resources, &kept_in));
    found
}

/// Sign-ins as `auth status` shows them, all kept in `kept_in`.
fn described(
    resources: impl IntoIterator<Item = (String, rmcp::transport::auth::StoredCredentials)>,
    kept_in: &str,
) -> Vec<StoredSignIn> {
    resources
        .into_iter()
        .map(|(resource, credentials)| {
            let fields = credentials
                .token_response
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok())
                .unwrap_or_default();
            StoredSignIn {
                resource,
                has_token: fields.get("access_token").is_some(),
                has_refresh_token: fields.get("refresh_token").is_some(),
                scopes: credentials.granted_scopes.clone(),
                kept_in: kept_in.to_owned(),
            }
        })
        .collect()
}

/// Where sign-ins are, as `auth status` says it; `why_off`: why the keychain is not used.
fn location_text(location: &Location, why_off: Option<String>) -> String {
    match location {
        Location::Keychain => "the OS keychain".to_owned(),
        Location::File(path) => match why_off {
            Some(why) => format!("{} ({why})", path.display()),
            None => path.display().to_string(),
        },
        Location::Memory => "this process's memory".to_owned(),
        Location::Nowhere => "nowhere".to_owned(),
    }
}

/// One resource's sign-in as `auth status` shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSignIn {
    pub resource: String,
    pub has_token: bool,
    pub has_refresh_token: bool,
    pub scopes: Vec<String>,
    /// Where the tokens are: "the OS keychain", or the file (and why not the keychain).
    pub kept_in: String,
}

/// Forget `spec`'s tokens and registered clients, in the keychain and the file, and in the
/// shared store when `shared` names one.
pub(crate) async fn forget(
    spec: &crate::config::ServerSpec,
    shared: Option<&crate::store::Store>,
) -> std::io::Result<SignOut> {
    let mut had_any = TokenStore::forget_server(&spec.name).await?;
    if let Some(sign_in) = shared_sign_in(spec, shared) {
        had_any |= sign_in
            .forget()
            .await
            .map_err(|e| std::io::Error::other(auth_error_text(&e)))?;
    }
    Ok(SignOut {
        had_any,
        keychain_unchecked: keychain::Keychain::process().failure(),
    })
}

/// What `auth logout` did.
#[derive(Debug, Clone)]
pub struct SignOut {
    /// Whether the keychain, the file or the shared store held a sign-in.
    pub had_any: bool,
    /// Why the OS keychain could not be asked (it failed or did not answer in time), so a copy
    /// there may remain; `None` when it answered or is not used.
    pub keychain_unchecked: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_per_resource_without_query_or_fragment() {
        let url = Url::parse("https://mcp.example.com/v1/mcp?tenant=a#x").unwrap();
        assert_eq!(resource_key(&url), "https://mcp.example.com/v1/mcp");
    }

    #[test]
    fn the_needs_sign_in_text_names_the_command_that_fixes_it() {
        let text = needs_sign_in_text("linear");
        assert!(text.starts_with(NEEDS_SIGN_IN));
        assert!(text.contains("`anygpt-discovery auth login linear`"));
        // Kept whole when it travels as an auth error.
        assert_eq!(auth_error_text(&AuthError::AuthorizationFailed(text.clone())), text);
        let unopened = sign_in_not_started_text("linear");
        assert!(unopened.starts_with(NEEDS_SIGN_IN));
        assert!(unopened.contains("`anygpt-discovery auth login linear`"));
        assert_eq!(
            auth_error_text(&AuthError::AuthorizationFailed(unopened.clone())),
            unopened
        );
    }

    #[test]
    fn a_client_secret_from_the_config_is_a_secret_of_its_server() {
        let spec = OAuthSpec {
            client_id: Some("client-1".into()),
            client_secret: Some("a-very-private-client-secret".into()),
            ..OAuthSpec::default()
        };
        let url = Url::parse("https://mcp.example.com/mcp").unwrap();
        let _ = Authorizer::new("oauth-secret-test", &url, Some(&spec), Duration::from_secs(1), None).unwrap();
        assert_eq!(
            crate::secrets::scrub("got a-very-private-client-secret back"),
            "got *** back"
        );
    }
}
