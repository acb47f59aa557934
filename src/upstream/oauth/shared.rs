//! Where a shared-credential server's sign-in is kept (one sign-in for the whole gateway, not
//! `perUser`): on this machine (`store`: the OS keychain or an owner-only file), or — when
//! `discovery.store` names a store replicas share — sealed in that store, so every replica uses
//! the one sign-in instead of each asking a person for its own.
//!
//! In the shared store, one server's tokens for one resource (its URL) are kept under
//! `<prefix>:signin:<server>:<digest of (server, resource)>`, and the client it registered
//! dynamically at an authorization server under `<prefix>:signin:<server>:client:<digest of
//! (server, issuer)>`; both sealed with the store key (bound to their key name). Nothing there
//! names a caller: it is the server's sign-in.
//!
//! A refresh there takes the store's refresh lock and reads the tokens again once it holds it
//! (`per_user::due`, the same step per-user tokens use), so replicas never spend one refresh
//! token twice and refresh once together. The last tokens read are kept in memory: a store that
//! stops answering leaves the server using them until they expire.
//!
//! A sign-in this machine kept before the store was configured is moved into the store the
//! first time the store has none for that server and resource (then deleted here, so one copy
//! of a rotating refresh token remains).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use super::lock::Held;
use super::per_user::{self, Due, StoreCredentials};
use super::store::{register_secrets, RegisteredClient, TokenStore};
use crate::hash::sha256_hex;
use crate::store::Store;

/// The place of one server's sign-in (and registered clients) for one resource.
#[derive(Clone)]
pub(crate) enum Keeper {
    /// This machine's keychain or file (no shared store).
    Local(TokenStore),
    /// The store replicas share.
    Shared(SharedSignIn),
}

impl Keeper {
    /// The keeper for `server`'s sign-in to `resource`: the shared store when one is given
    /// (and can seal), else this machine.
    pub(crate) fn new(server: &str, resource: &str, shared: Option<&Store>) -> Self {
        let local = TokenStore::new(server, resource);
        match shared {
            Some(store) if store.can_seal() => Self::Shared(SharedSignIn::new(store, server, resource, Some(local))),
            Some(_) => {
                warn_once_unsealed(server);
                Self::Local(local)
            }
            None => Self::Local(local),
        }
    }

    pub(crate) fn shared(&self) -> Option<&SharedSignIn> {
        match self {
            Self::Shared(shared) => Some(shared),
            Self::Local(_) => None,
        }
    }

    /// Read again on the next load (another process may have signed in).
    pub(crate) fn reread(&self) {
        if let Self::Local(local) = self {
            local.reread();
        }
    }

    pub(crate) async fn registered_client(&self, issuer: &str) -> Option<RegisteredClient> {
        match self {
            Self::Local(local) => local.registered_client(issuer).await,
            Self::Shared(shared) => shared.registered_client(issuer).await,
        }
    }

    pub(crate) async fn remember_client(&self, issuer: &str, client: RegisteredClient) -> Result<(), AuthError> {
        match self {
            Self::Local(local) => local.remember_client(issuer, client).await,
            Self::Shared(shared) => shared.remember_client(issuer, client).await,
        }
    }

    pub(crate) async fn forget_client(&self, issuer: &str, client_id: &str) -> Result<(), AuthError> {
        match self {
            Self::Local(local) => local.forget_client(issuer, client_id).await,
            Self::Shared(shared) => shared.forget_client(issuer, client_id).await,
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for Keeper {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match self {
            Self::Local(local) => local.load().await,
            Self::Shared(shared) => shared.load().await,
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        match self {
            Self::Local(local) => local.save(credentials).await,
            Self::Shared(shared) => shared.save(credentials).await,
        }
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match self {
            Self::Local(local) => local.clear().await,
            Self::Shared(shared) => shared.credentials.clear().await,
        }
    }
}

/// Say once per server (a keeper is made per connect attempt) that its sign-in is not shared.
fn warn_once_unsealed(server: &str) {
    static WARNED: Mutex<Option<std::collections::HashSet<String>>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(PoisonError::into_inner);
    if warned.get_or_insert_with(Default::default).insert(server.to_owned()) {
        tracing::warn!(%server, "discovery.store.key is not set: this server's sign-in stays on this machine (each replica signs in on its own)");
    }
}

/// One server's sign-in to one resource in the shared store.
#[derive(Clone)]
pub(crate) struct SharedSignIn {
    store: Store,
    server: String,
    resource: String,
    /// The sealed tokens, taking no refresh lock of their own: whoever refreshes holds it
    /// ([`SharedSignIn::due`]).
    credentials: StoreCredentials,
    /// The tokens as last read or written, used while the store does not answer.
    last: Arc<Mutex<Option<StoredCredentials>>>,
    /// This machine's sign-in, moved into the store once ([`SharedSignIn::migrate`]).
    local: Option<TokenStore>,
    migrated: Arc<AtomicBool>,
}

impl SharedSignIn {
    pub(crate) fn new(store: &Store, server: &str, resource: &str, local: Option<TokenStore>) -> Self {
        Self {
            store: store.clone(),
            server: server.to_owned(),
            resource: resource.to_owned(),
            credentials: StoreCredentials::at(store, credentials_key(store, server, resource), server).locked(),
            last: Arc::default(),
            local,
            migrated: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The resource (the server's URL) this sign-in is for.
    pub(crate) fn resource(&self) -> &str {
        &self.resource
    }

    /// The token to send now, or the refresh lock held for one that is due (see
    /// `per_user::due`); `rejected`: a token the server refused.
    pub(crate) async fn due(&self, rejected: Option<&str>) -> Result<Due, AuthError> {
        self.migrate().await;
        // `due` takes the lock through the credentials' own handle, not through rmcp.
        match per_user::due(&self.credentials, rejected).await {
            Err(AuthError::CredentialStoreError(reason)) => self
                .remembered(rejected)
                .ok_or_else(|| AuthError::CredentialStoreError(reason)),
            outcome => outcome,
        }
    }

    /// The stored access token, when fresh and other than `sent`.
    pub(crate) async fn fresh_other_than(&self, sent: Option<&str>) -> Option<String> {
        let stored = self.load().await.ok()??;
        per_user::fresh_token(stored.token_response.as_ref()?, stored.token_received_at)
            .filter(|token| Some(token.as_str()) != sent)
    }

    /// Hold the refresh lock, then read the store: a fresh token other than `sent` when another
    /// replica got one meanwhile. What a grant that needs no person (client credentials) runs
    /// under, so replicas share its token instead of each asking for one.
    pub(crate) async fn exclusive(&self, sent: Option<&str>) -> Result<(Held, Option<String>), AuthError> {
        self.migrate().await;
        let held = Held::take(&self.credentials).await?;
        let fresh = self.credentials.load().await?.and_then(|stored| {
            per_user::fresh_token(stored.token_response.as_ref()?, stored.token_received_at)
                .filter(|token| Some(token.as_str()) != sent)
        });
        Ok((held, fresh))
    }

    /// The token last read, while still fresh, when the store does not answer.
    fn remembered(&self, rejected: Option<&str>) -> Option<Due> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner).clone()?;
        let token = per_user::fresh_token(last.token_response.as_ref()?, last.token_received_at)?;
        (Some(token.as_str()) != rejected).then(|| {
            tracing::warn!(server = %self.server, "the store does not answer: using the token read last");
            Due::Fresh(token)
        })
    }

    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.migrate().await;
        match self.credentials.load().await {
            Ok(found) => {
                self.last
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone_from(&found);
                Ok(found)
            }
            Err(error) => match self.last.lock().unwrap_or_else(PoisonError::into_inner).clone() {
                Some(last) => Ok(Some(last)),
                None => Err(error),
            },
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        register_secrets(&self.server, &credentials);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(credentials.clone());
        self.credentials.save(credentials).await
    }

    async fn registered_client(&self, issuer: &str) -> Option<RegisteredClient> {
        let bytes = self
            .store
            .get_sealed(&client_key(&self.store, &self.server, issuer))
            .await
            .ok()??;
        let client: RegisteredClient = serde_json::from_slice(&bytes).ok()?;
        if let Some(secret) = &client.client_secret {
            crate::secrets::register(&self.server, [secret.clone()]);
        }
        Some(client)
    }

    async fn remember_client(&self, issuer: &str, client: RegisteredClient) -> Result<(), AuthError> {
        if let Some(secret) = &client.client_secret {
            crate::secrets::register(&self.server, [secret.clone()]);
        }
        let bytes = serde_json::to_vec(&client).map_err(|e| AuthError::InternalError(e.to_string()))?;
        self.store
            .set_sealed(&client_key(&self.store, &self.server, issuer), &bytes, None)
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    /// The authorization server no longer knows `client_id`: forget it, and the tokens issued
    /// to it.
    async fn forget_client(&self, issuer: &str, client_id: &str) -> Result<(), AuthError> {
        if self
            .registered_client(issuer)
            .await
            .is_some_and(|c| c.client_id == client_id)
        {
            let key = client_key(&self.store, &self.server, issuer);
            self.store
                .delete(&key)
                .await
                .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        }
        if self.credentials.load().await?.is_some_and(|c| c.client_id == client_id) {
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = None;
            self.credentials.clear().await?;
        }
        Ok(())
    }

    /// Forget this sign-in and the client its tokens were issued to; whether there was one.
    pub(crate) async fn forget(&self) -> Result<bool, AuthError> {
        let Some(stored) = self.credentials.load().await? else {
            return Ok(false);
        };
        if let Some(issuer) = &stored.issuer {
            self.forget_client(issuer, &stored.client_id).await?;
        }
        self.credentials.clear().await?;
        Ok(true)
    }

    /// The tokens the store holds, without moving this machine's in (for `auth status`).
    pub(crate) async fn peek(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.credentials.load().await
    }

    /// Move this machine's sign-in for the resource (and the client it was issued to) into the
    /// store, once per process, when the store has none: the first replica configured with a
    /// store keeps the sign-in a person made before. The local copy is deleted once the store
    /// holds it, so a rotating refresh token is not left behind to go stale.
    async fn migrate(&self) {
        let Some(local) = &self.local else { return };
        if self.migrated.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(None) = self.credentials.load().await else {
            return;
        };
        let Ok(Some(kept)) = local.load().await else { return };
        if kept.token_response.is_none() {
            return;
        }
        let client = match &kept.issuer {
            Some(issuer) => local
                .registered_client(issuer)
                .await
                .filter(|c| c.client_id == kept.client_id)
                .map(|c| (issuer.clone(), c)),
            None => None,
        };
        if let Some((issuer, client)) = client {
            if let Err(error) = self.remember_client(&issuer, client).await {
                tracing::warn!(server = %self.server, "this machine's sign-in stays here: {}", super::auth_error_text(&error));
                return;
            }
        }
        if let Err(error) = self.save(kept).await {
            tracing::warn!(server = %self.server, "this machine's sign-in stays here: {}", super::auth_error_text(&error));
            return;
        }
        if let Err(error) = local.clear().await {
            tracing::warn!(server = %self.server, "the sign-in is in the shared store, but its copy here is not deleted: {}", super::auth_error_text(&error));
        }
        tracing::info!(server = %self.server, "this machine's sign-in moved into the shared store: every replica uses it");
    }
}

/// Where `server`'s tokens for `resource` are kept: its name (readable by an operator) and a
/// digest of the pair (JSON, so no split of the characters reads as another pair).
fn credentials_key(store: &Store, server: &str, resource: &str) -> String {
    let whole = serde_json::json!([server, resource]).to_string();
    store.key(&["signin", server, &sha256_hex(whole.as_bytes())])
}

/// Where the client `server` registered at `issuer` is kept.
fn client_key(store: &Store, server: &str, issuer: &str) -> String {
    let whole = serde_json::json!([server, issuer]).to_string();
    store.key(&["signin", server, "client", &sha256_hex(whole.as_bytes())])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::transport::auth::OAuthTokenResponse;

    use super::super::keychain::{tests::FakeVault, Keychain, TIMEOUT};
    use super::*;
    use crate::store::tests::RedisServer;

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const RESOURCE: &str = "https://mcp.example.com/mcp";

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// Tokens received at `received` that last `lifetime` seconds.
    fn credentials(access: &str, refresh: &str, lifetime: u64, received: u64) -> StoredCredentials {
        let response: OAuthTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": access, "refresh_token": refresh, "token_type": "Bearer", "expires_in": lifetime
        }))
        .unwrap();
        let mut stored = StoredCredentials::new("client-1".into(), Some(response), vec!["read".into()], Some(received));
        stored.issuer = Some("https://as.example".into());
        stored
    }

    fn replica(store: &Store, server: &str) -> SharedSignIn {
        SharedSignIn::new(store, server, RESOURCE, None)
    }

    fn access(stored: &StoredCredentials) -> String {
        serde_json::to_value(stored.token_response.as_ref().unwrap()).unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn replicas_read_one_sealed_sign_in_kept_by_server_and_resource() {
        let redis = RedisServer::start();
        let store = redis.store(Some(KEY));
        let (a, b) = (replica(&store, "linear"), replica(&store, "linear"));
        a.save(credentials(
            "shared-access-token-0123456789",
            "shared-refresh-0123456789",
            3600,
            now(),
        ))
        .await
        .unwrap();
        assert!(matches!(b.due(None).await.unwrap(), Due::Fresh(t) if t == "shared-access-token-0123456789"));
        // Another server, or another URL of the same server, has no sign-in.
        assert!(matches!(replica(&store, "jira").due(None).await.unwrap(), Due::Missing));
        let moved = SharedSignIn::new(&store, "linear", "https://mcp.example.com/v2/mcp", None);
        assert!(matches!(moved.due(None).await.unwrap(), Due::Missing));
        // Sealed: the raw value names no token, and the key names the server but no caller.
        let key = credentials_key(&store, "linear", RESOURCE);
        assert!(key.contains(":signin:linear:"), "{key}");
        let raw = store.get(&key).await.unwrap().unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("shared-access-token"));
        assert_eq!(crate::secrets::scrub("got shared-refresh-0123456789"), "got ***");
    }

    #[tokio::test]
    async fn a_due_token_is_refreshed_by_one_replica_and_the_other_reads_its_result() {
        let redis = RedisServer::start();
        let store = redis.store(Some(KEY));
        let (a, b) = (replica(&store, "gh"), replica(&store, "gh"));
        a.save(credentials(
            "old-access-token-0123456789",
            "refresh-one-0123456789",
            3600,
            now() - 7200,
        ))
        .await
        .unwrap();
        let Due::Refresh {
            stored,
            credentials: locked,
            held,
        } = a.due(None).await.unwrap()
        else {
            panic!("an expired token is due");
        };
        assert_eq!(access(&stored), "old-access-token-0123456789");
        // B waits for A's lock, then reads what A saved: it does not refresh too.
        let waiting = tokio::spawn(async move { b.due(None).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "B waits while A refreshes");
        locked
            .save(credentials(
                "new-access-token-0123456789",
                "refresh-two-0123456789",
                3600,
                now(),
            ))
            .await
            .unwrap();
        drop(held);
        let seen = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(matches!(seen, Due::Fresh(t) if t == "new-access-token-0123456789"));
    }

    #[tokio::test]
    async fn a_grant_without_a_person_runs_on_one_replica_and_the_others_take_its_token() {
        let redis = RedisServer::start();
        let store = redis.store(Some(KEY));
        let (a, b) = (replica(&store, "cc"), replica(&store, "cc"));
        let (held, found) = a.exclusive(None).await.unwrap();
        assert_eq!(found, None, "nobody got a token yet: A asks for one");
        let waiting = tokio::spawn(async move { b.exclusive(None).await.map(|(_, found)| found) });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "B waits while A's grant runs");
        a.save(credentials(
            "granted-access-token-0123456789",
            "unused-refresh-0123456789",
            3600,
            now(),
        ))
        .await
        .unwrap();
        drop(held);
        let found = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            found.as_deref(),
            Some("granted-access-token-0123456789"),
            "B uses A's token"
        );
        // A token the server refused is not taken for another replica's.
        let (_, refused) = a.exclusive(Some("granted-access-token-0123456789")).await.unwrap();
        assert_eq!(refused, None);
    }

    #[tokio::test]
    async fn a_refused_token_is_due_unless_another_replica_replaced_it() {
        let store = Store::memory();
        let a = replica(&store, "gh");
        a.save(credentials(
            "refused-access-token-0123",
            "refresh-0123456789",
            3600,
            now(),
        ))
        .await
        .unwrap();
        assert!(matches!(
            a.due(Some("refused-access-token-0123")).await.unwrap(),
            Due::Refresh { .. }
        ));
        // A token another replica stored meanwhile is used as it is.
        assert!(matches!(
            a.due(Some("a-token-sent-before-0123")).await.unwrap(),
            Due::Fresh(t) if t == "refused-access-token-0123"
        ));
        assert_eq!(a.fresh_other_than(Some("refused-access-token-0123")).await, None);
    }

    #[tokio::test]
    async fn a_store_that_stops_answering_leaves_the_last_token_in_use() {
        let redis = RedisServer::start();
        let store = redis.store(Some(KEY));
        let a = replica(&store, "gh");
        a.save(credentials(
            "kept-access-token-0123456789",
            "refresh-0123456789",
            3600,
            now(),
        ))
        .await
        .unwrap();
        assert!(matches!(a.due(None).await.unwrap(), Due::Fresh(_)));
        drop(redis);
        assert!(matches!(a.due(None).await.unwrap(), Due::Fresh(t) if t == "kept-access-token-0123456789"));
        // Not the one the server refused, though.
        assert!(a.due(Some("kept-access-token-0123456789")).await.is_err());
    }

    #[tokio::test]
    async fn registered_clients_are_shared_and_forgotten_with_their_tokens() {
        let store = Store::memory();
        let (a, b) = (replica(&store, "gh"), replica(&store, "gh"));
        let client = RegisteredClient {
            client_id: "client-1".into(),
            client_secret: Some("shared-client-secret-0123456789".into()),
            redirect_uri: "http://127.0.0.1:4321/callback".into(),
        };
        a.remember_client("https://as.example", client.clone()).await.unwrap();
        assert!(b.registered_client("https://as.example").await == Some(client));
        assert!(b.registered_client("https://other.example").await.is_none());
        a.save(credentials(
            "access-token-0123456789",
            "refresh-0123456789",
            3600,
            now(),
        ))
        .await
        .unwrap();
        assert!(b.forget().await.unwrap());
        assert!(a.registered_client("https://as.example").await.is_none());
        assert!(matches!(a.due(None).await.unwrap(), Due::Missing));
        assert!(!b.forget().await.unwrap());
    }

    #[tokio::test]
    async fn this_machines_sign_in_moves_into_the_store_once() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Arc::new(FakeVault::default());
        let keychain: &'static Keychain = Box::leak(Box::new(Keychain::new(vault, TIMEOUT, true)));
        let local = TokenStore::at_file("gh", RESOURCE, dir.path().join("gh.json"), keychain);
        local
            .save(credentials(
                "local-access-token-0123456789",
                "local-refresh-0123456789",
                3600,
                now(),
            ))
            .await
            .unwrap();
        let client = RegisteredClient {
            client_id: "client-1".into(),
            client_secret: None,
            redirect_uri: "http://127.0.0.1:4321/callback".into(),
        };
        local
            .remember_client("https://as.example", client.clone())
            .await
            .unwrap();
        let store = Store::memory();
        let shared = SharedSignIn::new(&store, "gh", RESOURCE, Some(local.clone()));
        assert!(matches!(shared.due(None).await.unwrap(), Due::Fresh(t) if t == "local-access-token-0123456789"));
        // Every replica now reads it from the store; this machine's copy is gone.
        assert!(matches!(replica(&store, "gh").due(None).await.unwrap(), Due::Fresh(_)));
        assert!(replica(&store, "gh").registered_client("https://as.example").await == Some(client));
        local.reread();
        assert!(local.load().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn without_a_store_key_a_shared_store_leaves_the_sign_in_on_this_machine() {
        let redis = RedisServer::start();
        assert!(matches!(
            Keeper::new("gh", RESOURCE, Some(&redis.store(None))),
            Keeper::Local(_)
        ));
        assert!(matches!(
            Keeper::new("gh", RESOURCE, Some(&redis.store(Some(KEY)))),
            Keeper::Shared(_)
        ));
        assert!(matches!(Keeper::new("gh", RESOURCE, None), Keeper::Local(_)));
    }
}
