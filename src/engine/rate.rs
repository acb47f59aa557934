//! Rate limits (`discovery.rateLimits`): a token bucket per caller and one per downstream
//! server, kept in the store so replicas share them (a Lua script on the store's clock), or in
//! this process without one. A store that does not answer falls back to this replica's own
//! buckets: limits then hold per replica instead of failing every call.

use std::time::Duration;

use super::shared::Shared;
use crate::caller::Caller;
use crate::config::{RateLimitsSpec, RateSpec};
use crate::error::{Error, Result};

/// Take one call from `caller`'s bucket and from `server`'s; refused with when to retry
/// when either is empty.
pub(super) async fn admit(
    shared: &Shared,
    limits: &RateLimitsSpec,
    caller: &Caller,
    server: &str,
    tool: &str,
) -> Result<()> {
    let refused = |limit: String, retry_after: Duration| Error::RateLimited {
        server: server.to_owned(),
        tool: tool.to_owned(),
        limit,
        retry_after,
    };
    if let Some(rate) = &limits.per_caller {
        // Hashed: a key of bounded length whatever the token's subject, and no user id in the store.
        let whose = crate::hash::sha256_hex(caller.identity().as_bytes());
        if let Some(wait) = take(shared, &["rate", "caller", &whose], rate).await {
            return Err(refused(rate.describe(&format!("caller {}", caller.label())), wait));
        }
    }
    if let Some(rate) = &limits.per_server {
        if let Some(wait) = take(shared, &["rate", "server", server], rate).await {
            return Err(refused(rate.describe(&format!("server `{server}`")), wait));
        }
    }
    Ok(())
}

async fn take(shared: &Shared, key: &[&str], rate: &RateSpec) -> Option<Duration> {
    let key = shared.store.key(key);
    match shared.store.take_token(&key, rate.calls_per_second, rate.burst()).await {
        Ok(wait) => wait,
        Err(_) => shared
            .fallback
            .take_token(&key, rate.calls_per_second, rate.burst())
            .await
            .ok()
            .flatten(),
    }
}
