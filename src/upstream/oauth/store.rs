//! Where sign-ins are kept: one owner-only (0600) JSON file per server in the state
//! directory (`oauth/<server>.json`), holding the credentials of each resource (the server's
//! URL) that server signed in to — so a server whose URL changes signs in again instead of
//! sending its old token to a new place.
//!
//! No OS keychain is used: the `keyring` crate needs a Secret Service (D-Bus) on Linux, which
//! headless machines, containers and CI do not run, and a keychain prompt would stall a
//! gateway started by an AI client. The file is as private as the audit log beside it.
//!
//! Every token read or written is registered with `crate::secrets` as a secret of its server
//! first, so no log line, answer, audit line or snapshot can carry it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use crate::paths;

/// One file's contents: resource URL → its credentials.
type Resources = BTreeMap<String, StoredCredentials>;

/// The credentials of one server and resource, in that server's file (or, without a state
/// directory, in memory for this process only).
#[derive(Clone)]
pub(crate) struct TokenStore {
    server: String,
    resource: String,
    path: Option<PathBuf>,
    /// Used when there is no state directory, and to serialize this process's writers.
    memory: Arc<Mutex<Option<StoredCredentials>>>,
}

/// One lock for every store of the process: a file is read, changed and written whole.
static FILE_LOCK: Mutex<()> = Mutex::new(());

impl TokenStore {
    pub(crate) fn new(server: &str, resource: &str) -> Self {
        Self {
            server: server.to_owned(),
            resource: resource.to_owned(),
            path: server_file(server),
            memory: Arc::default(),
        }
    }

    /// Every resource `server` holds credentials for (for `auth status`).
    pub(crate) fn resources(server: &str) -> Vec<(String, StoredCredentials)> {
        server_file(server)
            .map(|path| read(&path).into_iter().collect())
            .unwrap_or_default()
    }

    /// Forget every sign-in of `server`; whether there was one.
    pub(crate) fn forget_server(server: &str) -> std::io::Result<bool> {
        let Some(path) = server_file(server) else {
            return Ok(false);
        };
        let _guard = FILE_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn load_now(&self) -> Option<StoredCredentials> {
        let found = match &self.path {
            Some(path) => {
                let _guard = FILE_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
                read(path).remove(&self.resource)
            }
            None => self.memory.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        };
        if let Some(credentials) = &found {
            register_secrets(&self.server, credentials);
        }
        found
    }

    fn update(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        if let Some(credentials) = &credentials {
            register_secrets(&self.server, credentials);
        }
        let Some(path) = &self.path else {
            *self.memory.lock().unwrap_or_else(PoisonError::into_inner) = credentials;
            return Ok(());
        };
        let _guard = FILE_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        let mut resources = read(path);
        match credentials {
            Some(credentials) => {
                resources.insert(self.resource.clone(), credentials);
            }
            None => {
                resources.remove(&self.resource);
            }
        }
        write(path, &resources).map_err(|e| {
            AuthError::CredentialStoreError(format!("cannot write the token store {}: {e}", path.display()))
        })
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.load_now())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(Some(credentials))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(None)
    }
}

/// `<state dir>/oauth/<server>.json`; the name keeps only characters safe in a file name.
fn server_file(server: &str) -> Option<PathBuf> {
    paths::state_dir().map(|dir| dir.join("oauth").join(file_name(server)))
}

/// A server name as a file name: only characters safe everywhere, never a path, and never
/// another server's file (`a.b` and `a_b` differ by the hash of the name).
fn file_name(server: &str) -> String {
    format!("{}.json", paths::server_file_stem(server))
}

/// The file's credentials; an unreadable or damaged file reads as none (the server signs in
/// again), with a warning.
fn read(path: &std::path::Path) -> Resources {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(file = %path.display(), "the token store is damaged ({e}); signing in again");
            Resources::new()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Resources::new(),
        Err(e) => {
            tracing::warn!(file = %path.display(), "cannot read the token store: {e}");
            Resources::new()
        }
    }
}

fn write(path: &std::path::Path, resources: &Resources) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        paths::create_private_dir_all(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(resources).map_err(std::io::Error::other)?;
    paths::write_atomic(path, &bytes, paths::Durability::Durable)
}

/// The access and refresh tokens of `credentials` as secrets of `server`.
fn register_secrets(server: &str, credentials: &StoredCredentials) {
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
    crate::secrets::register(server, values);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert!(file_name("github-prod_2").starts_with("github-prod_2-"));
        assert!(file_name("../etc/passwd x").starts_with("___etc_passwd_x-"));
        assert_ne!(file_name("a.b"), file_name("a_b"));
    }
}
