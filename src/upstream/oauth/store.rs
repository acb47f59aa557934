//! Where sign-ins are kept. One document per server: the credentials of each resource (the
//! server's URL) it signed in to — so a server whose URL changes signs in again instead of
//! sending its old token to a new place — and the clients it registered dynamically (RFC 7591)
//! at each authorization server (by issuer), so a restart reuses its client instead of
//! registering a new one.
//!
//! The document lives in the OS keychain where one answers (`keychain`: service
//! `anygpt-discovery`, account = the path of the file it stands for), else in that owner-only
//! (0600) file, `<state dir>/oauth/<server>.json`. A file found while the keychain answers is
//! newer than the keychain's copy (files are written only while the keychain fails), so it is
//! merged over it, moved into the keychain and deleted. Without a state directory sign-ins last
//! for this process only.
//!
//! Every token and client secret read or written is registered with `crate::secrets` as a
//! secret of its server first, so no log line, answer, audit line or snapshot can carry it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use super::keychain::Keychain;
use crate::paths;

/// Everything kept for one server.
#[derive(Default, Serialize, Deserialize)]
struct Document {
    /// Resource URL → its credentials.
    #[serde(default)]
    resources: BTreeMap<String, StoredCredentials>,
    /// Authorization server issuer → the client registered there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    clients: BTreeMap<String, RegisteredClient>,
}

impl Document {
    fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.clients.is_empty()
    }

    /// `newer`'s entries over this one's.
    fn overlay(&mut self, newer: Self) {
        self.resources.extend(newer.resources);
        self.clients.extend(newer.clients);
    }

    /// Files written before clients were kept held only the resource map.
    fn parse(bytes: &[u8]) -> serde_json::Result<Self> {
        let value: serde_json::Value = serde_json::from_slice(bytes)?;
        if value.get("resources").is_some() || value.get("clients").is_some() {
            serde_json::from_value(value)
        } else {
            Ok(Self {
                resources: serde_json::from_value(value)?,
                clients: BTreeMap::new(),
            })
        }
    }
}

/// A client registered dynamically: reused while the authorization server accepts it, with
/// the redirect URI it was registered with (its loopback port is asked for again).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegisteredClient {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub redirect_uri: String,
}

/// Where a server's sign-ins are (for `auth status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    Keychain,
    File(PathBuf),
    /// No state directory: this process's memory.
    Memory,
    Nowhere,
}

/// A server's document in the keychain and its file.
#[derive(Clone)]
struct Place {
    file: PathBuf,
    account: String,
}

impl Place {
    fn of(server: &str) -> Option<Self> {
        paths::state_dir().map(|dir| Self::at(dir.join("oauth").join(file_name(server))))
    }

    fn at(file: PathBuf) -> Self {
        Self {
            account: file.display().to_string(),
            file,
        }
    }
}

/// One lock for every store of the process: a document is read, changed and written whole.
static STORE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The credentials of one server and resource.
#[derive(Clone)]
pub(crate) struct TokenStore {
    server: String,
    resource: String,
    place: Option<Place>,
    keychain: &'static Keychain,
    /// The credentials as last read or written: rmcp loads them before every request, and a
    /// keychain read per request would cost a round trip each. Without a place, the only copy.
    cache: Arc<Mutex<Cached>>,
}

/// A store's credentials as this process last saw them.
#[derive(Clone, Default)]
enum Cached {
    #[default]
    Unread,
    Read(Option<Box<StoredCredentials>>),
}

impl TokenStore {
    pub(crate) fn new(server: &str, resource: &str) -> Self {
        Self::with(server, resource, Place::of(server), Keychain::process())
    }

    fn with(server: &str, resource: &str, place: Option<Place>, keychain: &'static Keychain) -> Self {
        Self {
            server: server.to_owned(),
            resource: resource.to_owned(),
            place,
            keychain,
            cache: Arc::default(),
        }
    }

    /// A store kept in `file` and `keychain` (tests elsewhere in `oauth`).
    #[cfg(test)]
    pub(super) fn at_file(server: &str, resource: &str, file: PathBuf, keychain: &'static Keychain) -> Self {
        Self::with(server, resource, Some(Place::at(file)), keychain)
    }

    /// Read the store again on the next load (another process may have signed in).
    pub(crate) fn reread(&self) {
        if self.place.is_some() {
            *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Cached::Unread;
        }
    }

    /// Every resource `server` holds credentials for, and where they are (for `auth status`).
    pub(crate) async fn resources(server: &str) -> (Vec<(String, StoredCredentials)>, Location) {
        let Some(place) = Place::of(server) else {
            return (Vec::new(), Location::Memory);
        };
        let _guard = STORE_LOCK.lock().await;
        let (document, location) = load_document(&place, Keychain::process()).await;
        (document.resources.into_iter().collect(), location)
    }

    /// Forget every sign-in and client of `server`, in the keychain and the file; whether there
    /// was one.
    pub(crate) async fn forget_server(server: &str) -> std::io::Result<bool> {
        let Some(place) = Place::of(server) else {
            return Ok(false);
        };
        let _guard = STORE_LOCK.lock().await;
        forget_document(&place, Keychain::process()).await
    }

    /// The client registered at `issuer`, if one was kept.
    pub(crate) async fn registered_client(&self, issuer: &str) -> Option<RegisteredClient> {
        let place = self.place.as_ref()?;
        let _guard = STORE_LOCK.lock().await;
        let (document, _) = load_document(place, self.keychain).await;
        let client = document.clients.get(issuer).cloned();
        if let Some(client) = &client {
            register_client_secret(&self.server, client);
        }
        client
    }

    /// Keep the client registered at `issuer` for the next sign-in.
    pub(crate) async fn remember_client(&self, issuer: &str, client: RegisteredClient) -> Result<(), AuthError> {
        register_client_secret(&self.server, &client);
        self.change(|document| {
            document.clients.insert(issuer.to_owned(), client);
        })
        .await
    }

    /// The authorization server at `issuer` no longer knows `client_id`: forget it, and the
    /// tokens issued to it (they cannot be refreshed any more).
    pub(crate) async fn forget_client(&self, issuer: &str, client_id: &str) -> Result<(), AuthError> {
        self.reread();
        self.change(|document| {
            if document.clients.get(issuer).is_some_and(|c| c.client_id == client_id) {
                document.clients.remove(issuer);
            }
            document.resources.retain(|_, c| c.client_id != client_id);
        })
        .await
    }

    async fn load_now(&self) -> Option<StoredCredentials> {
        if let Cached::Read(cached) = &*self.cache.lock().unwrap_or_else(PoisonError::into_inner) {
            // Each use registers the tokens again: the register forgets tokens nobody uses.
            if let Some(credentials) = cached.as_deref() {
                register_secrets(&self.server, credentials);
            }
            return cached.as_deref().cloned();
        }
        let place = self.place.as_ref()?;
        let _guard = STORE_LOCK.lock().await;
        let (mut document, _) = load_document(place, self.keychain).await;
        let found = document.resources.remove(&self.resource);
        if let Some(credentials) = &found {
            register_secrets(&self.server, credentials);
        }
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Cached::Read(found.clone().map(Box::new));
        found
    }

    async fn update(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        if let Some(credentials) = &credentials {
            register_secrets(&self.server, credentials);
        }
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Cached::Read(credentials.clone().map(Box::new));
        self.change(|document| match credentials {
            Some(credentials) => {
                document.resources.insert(self.resource.clone(), credentials);
            }
            None => {
                document.resources.remove(&self.resource);
            }
        })
        .await
    }

    /// Read the document, `edit` it and write it back, under the process's lock.
    async fn change(&self, edit: impl FnOnce(&mut Document)) -> Result<(), AuthError> {
        let Some(place) = &self.place else { return Ok(()) };
        let _guard = STORE_LOCK.lock().await;
        let (mut document, _) = load_document(place, self.keychain).await;
        edit(&mut document);
        save_document(place, self.keychain, &document)
            .await
            .map(|_| ())
            .map_err(|e| {
                AuthError::CredentialStoreError(format!("cannot write the token store {}: {e}", place.file.display()))
            })
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.load_now().await)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(Some(credentials)).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(None).await
    }
}

/// The server's document and where it is; a file found while the keychain answers is merged
/// into the keychain and deleted.
async fn load_document(place: &Place, keychain: &Keychain) -> (Document, Location) {
    let kept = keychain.get(&place.account, &place.file).await;
    let filed = read_file(&place.file);
    match (kept, filed) {
        (None, Some(filed)) => (filed, Location::File(place.file.clone())),
        (None, None) => (Document::default(), Location::Nowhere),
        (Some(kept), None) => match kept {
            Some(text) => (parse_kept(&text, place), Location::Keychain),
            None => (Document::default(), Location::Nowhere),
        },
        (Some(kept), Some(filed)) => {
            let mut document = kept.map(|text| parse_kept(&text, place)).unwrap_or_default();
            document.overlay(filed);
            let location = save_document(place, keychain, &document).await.unwrap_or_else(|e| {
                tracing::warn!(file = %place.file.display(), "cannot write the token store: {e}");
                Location::File(place.file.clone())
            });
            if location == Location::Keychain {
                tracing::info!(file = %place.file.display(), "sign-ins moved from the file into the OS keychain");
            }
            (document, location)
        }
    }
}

/// Write `document` to the keychain, else to the file; an empty one is deleted from both.
async fn save_document(place: &Place, keychain: &Keychain, document: &Document) -> std::io::Result<Location> {
    if document.is_empty() {
        forget_document(place, keychain).await?;
        return Ok(Location::Nowhere);
    }
    let text = serde_json::to_string(document).map_err(std::io::Error::other)?;
    if keychain.set(&place.account, text, &place.file).await {
        // The file's content is in the keychain now (or was older).
        remove_file(&place.file)?;
        return Ok(Location::Keychain);
    }
    write_file(&place.file, document)?;
    // A keychain still in use refused this item as too long: its copy is older than the file.
    if keychain.is_on() {
        keychain.delete(&place.account, &place.file).await;
    }
    Ok(Location::File(place.file.clone()))
}

/// Delete the document from the keychain and the file; whether either held one.
async fn forget_document(place: &Place, keychain: &Keychain) -> std::io::Result<bool> {
    let in_keychain = keychain.delete(&place.account, &place.file).await.unwrap_or(false);
    let in_file = remove_file(&place.file)?;
    Ok(in_keychain || in_file)
}

/// `<state dir>/oauth/<stem>.json`; the name keeps only characters safe in a file name.
fn file_name(server: &str) -> String {
    format!("{}.json", paths::server_file_stem(server))
}

/// The keychain's copy; a damaged one reads as none (the server signs in again), with a
/// warning.
fn parse_kept(text: &str, place: &Place) -> Document {
    Document::parse(text.as_bytes()).unwrap_or_else(|e| {
        tracing::warn!(account = %place.account, "the keychain's token store is damaged ({e}); signing in again");
        Document::default()
    })
}

/// The file's document, `None` without a file; an unreadable or damaged file reads as empty
/// (the server signs in again), with a warning.
fn read_file(path: &Path) -> Option<Document> {
    match std::fs::read(path) {
        Ok(bytes) => Some(Document::parse(&bytes).unwrap_or_else(|e| {
            tracing::warn!(file = %path.display(), "the token store is damaged ({e}); signing in again");
            Document::default()
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(file = %path.display(), "cannot read the token store: {e}");
            None
        }
    }
}

fn write_file(path: &Path, document: &Document) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        paths::create_private_dir_all(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(document).map_err(std::io::Error::other)?;
    paths::write_atomic(path, &bytes, paths::Durability::Durable)
}

/// Unlinking is atomic: a reader sees the whole file or none.
fn remove_file(path: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The access and refresh tokens of `credentials` as secrets of `server` (tokens, which the
/// register forgets once out of use: every read registers them again).
pub(super) fn register_secrets(server: &str, credentials: &StoredCredentials) {
    let Some(tokens) = &credentials.token_response else {
        return;
    };
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(tokens) else {
        return;
    };
    let values = ["access_token", "refresh_token", "id_token"]
        .iter()
        .filter_map(|name| fields.get(*name).and_then(serde_json::Value::as_str))
        .map(str::to_owned);
    crate::secrets::register_tokens(server, values);
}

fn register_client_secret(server: &str, client: &RegisteredClient) {
    if let Some(secret) = &client.client_secret {
        crate::secrets::register(server, [secret.clone()]);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::super::keychain::{self, tests::FakeVault};
    use super::*;

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert!(file_name("github-prod_2").starts_with("github-prod_2-"));
        assert!(file_name("../etc/passwd x").starts_with("___etc_passwd_x-"));
        assert_ne!(file_name("a.b"), file_name("a_b"));
    }

    fn credentials(client_id: &str) -> StoredCredentials {
        StoredCredentials::new(client_id.to_owned(), None, vec!["read".into()], Some(1))
    }

    /// A store for server `s` and resource `r` in a fresh directory, with a fake keychain.
    fn store(timeout: Duration) -> (TokenStore, Arc<FakeVault>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let vault = Arc::new(FakeVault::default());
        let keychain: &'static Keychain = Box::leak(Box::new(Keychain::new(vault.clone(), timeout, true)));
        let place = Place::at(dir.path().join("oauth").join("s.json"));
        (TokenStore::with("s", "r", Some(place), keychain), vault, dir)
    }

    fn kept(vault: &FakeVault, store: &TokenStore) -> Option<Document> {
        let place = store.place.as_ref().unwrap();
        vault
            .item(&place.account)
            .map(|text| Document::parse(text.as_bytes()).unwrap())
    }

    #[tokio::test]
    async fn credentials_go_to_the_keychain_and_no_file_is_written() {
        let (store, vault, _dir) = store(keychain::TIMEOUT);
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(kept(&vault, &store).unwrap().resources["r"].client_id, "c1");
        assert!(!store.place.as_ref().unwrap().file.exists());
        store.reread();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
    }

    #[tokio::test]
    async fn a_file_found_while_the_keychain_answers_is_moved_into_it() {
        let (store, vault, _dir) = store(keychain::TIMEOUT);
        let file = store.place.as_ref().unwrap().file.clone();
        // An older copy in the keychain, a newer one in the file (written while it failed).
        store.save(credentials("old")).await.unwrap();
        let mut newer = Document::default();
        newer.resources.insert("r".into(), credentials("new"));
        write_file(&file, &newer).unwrap();
        store.reread();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "new");
        assert!(!file.exists(), "the file is deleted once the keychain holds it");
        assert_eq!(kept(&vault, &store).unwrap().resources["r"].client_id, "new");
    }

    #[tokio::test]
    async fn a_failing_keychain_leaves_tokens_in_the_owner_only_file() {
        let (store, vault, _dir) = store(keychain::TIMEOUT);
        vault.fail.store(true, Ordering::Relaxed);
        store.save(credentials("c1")).await.unwrap();
        let file = &store.place.as_ref().unwrap().file;
        assert!(file.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(file).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(vault.items.lock().unwrap().is_empty());
        store.reread();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
    }

    #[tokio::test]
    async fn a_hung_keychain_costs_one_timeout_then_the_file_is_used() {
        let (store, vault, _dir) = store(Duration::from_millis(200));
        vault.hang.store(true, Ordering::Relaxed);
        let started = std::time::Instant::now();
        store.save(credentials("c1")).await.unwrap();
        store.reread();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(store.place.as_ref().unwrap().file.exists());
    }

    #[tokio::test]
    async fn registered_clients_are_kept_by_issuer_and_forgotten_with_their_tokens() {
        let (store, vault, _dir) = store(keychain::TIMEOUT);
        let client = RegisteredClient {
            client_id: "c1".into(),
            client_secret: Some("registered-client-secret-1234".into()),
            redirect_uri: "http://127.0.0.1:4321/callback".into(),
        };
        store
            .remember_client("https://as.example", client.clone())
            .await
            .unwrap();
        store.save(credentials("c1")).await.unwrap();
        assert!(store.registered_client("https://other.example").await.is_none());
        assert!(store.registered_client("https://as.example").await.unwrap() == client);
        assert_eq!(crate::secrets::scrub("sent registered-client-secret-1234"), "sent ***");
        store.forget_client("https://as.example", "c1").await.unwrap();
        assert!(store.registered_client("https://as.example").await.is_none());
        assert!(store.load().await.unwrap().is_none());
        assert!(kept(&vault, &store).is_none(), "an empty document is deleted");
    }

    #[tokio::test]
    async fn forgetting_a_server_clears_the_keychain_and_the_file() {
        let (store, vault, _dir) = store(keychain::TIMEOUT);
        let place = store.place.clone().unwrap();
        store.save(credentials("c1")).await.unwrap();
        let mut filed = Document::default();
        filed.resources.insert("r2".into(), credentials("c2"));
        write_file(&place.file, &filed).unwrap();
        assert!(forget_document(&place, store.keychain).await.unwrap());
        assert!(!place.file.exists());
        assert!(kept(&vault, &store).is_none());
        assert!(!forget_document(&place, store.keychain).await.unwrap());
    }

    #[test]
    fn files_from_before_clients_were_kept_still_read() {
        let legacy = br#"{"https://x/mcp": {"client_id": "c", "token_response": null}}"#;
        assert_eq!(
            Document::parse(legacy).unwrap().resources["https://x/mcp"].client_id,
            "c"
        );
    }
}
