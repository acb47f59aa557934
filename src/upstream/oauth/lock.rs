//! The store lock one replica holds while it gets a caller's token — a refresh (`per_user`),
//! an exchange (`exchange`) — so replicas never spend one refresh token twice nor exchange one
//! token twice; and the clock token lifetimes are read against.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::AuthError;

use crate::store::{Lock, Store, StoreError};

/// How long a lock is held at most (a replica that dies frees it then).
const LOCK_TTL: Duration = Duration::from_secs(30);
/// How long one waits for another replica's hold of the same lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The store lock `name`, waiting up to [`LOCK_WAIT`] for another replica holding it.
pub(super) async fn acquire(store: &Store, name: &str) -> Result<Lock, AuthError> {
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        match store.lock(name, LOCK_TTL).await {
            Ok(Some(lock)) => return Ok(lock),
            Ok(None) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(None) => {
                return Err(AuthError::CredentialStoreError(format!(
                    "another replica has been getting this token for over {} s",
                    LOCK_WAIT.as_secs()
                )))
            }
            Err(error) => return Err(store_failed(&error)),
        }
    }
}

/// A store failure as rmcp's credential stores report one.
pub(super) fn store_failed(error: &StoreError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

/// A lock held until dropped (released in the background: a guard drops in sync code).
pub(super) struct Held(pub(super) Option<Lock>);

impl Drop for Held {
    fn drop(&mut self) {
        if let (Some(lock), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                if let Err(error) = lock.release().await {
                    tracing::debug!(%error, "a token lock is left to expire");
                }
            });
        }
    }
}

/// Seconds since the epoch.
pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
