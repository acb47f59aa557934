//! Fair shares of one gateway between its callers: at most
//! `discovery.http.maxInFlightPerCaller` requests of one authenticated caller are answered at
//! once — an answer that streams (a long tool call, its progress) counts until it ends — so
//! one user's script firing thousands of calls cannot take every downstream slot and thread
//! from the rest of the team. Past it, 429 with `Retry-After` and a text saying which limit.
//! The local user (no auth configured) is one person and is not limited here.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};

use crate::caller::Caller;

/// Requests one caller may have answered at once when the config does not say.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 64;

/// How many requests each caller has in flight.
#[derive(Debug)]
pub struct Shares {
    max: usize,
    counts: Mutex<HashMap<String, usize>>,
}

/// One request's place in its caller's share; dropping it (the answer ended) frees it.
struct Share {
    shares: Arc<Shares>,
    caller: String,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut counts = self.shares.counts();
        if let Some(count) = counts.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.caller);
            }
        }
    }
}

impl Shares {
    pub fn new(max: u32) -> Arc<Self> {
        Arc::new(Self {
            max: usize::try_from(max).unwrap_or(usize::MAX),
            counts: Mutex::default(),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for one more request of `caller`, if its share has one.
    fn take(self: &Arc<Self>, caller: String) -> Option<Share> {
        let mut counts = self.counts();
        let count = counts.entry(caller.clone()).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Share {
            shares: self.clone(),
            caller,
        })
    }
}

/// The layer around `/mcp` (inside authentication, which leaves the request's `Caller`).
pub async fn limit(State(shares): State<Arc<Shares>>, request: Request, next: Next) -> Response {
    let Some(caller) = request
        .extensions()
        .get::<Caller>()
        .filter(|caller| !caller.is_local())
        .map(Caller::identity)
    else {
        return next.run(request).await;
    };
    let Some(share) = shares.take(caller) else {
        tracing::debug!("a caller past its share of requests in flight: 429");
        let mut refusal = (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Too Many Requests: this user already has {} requests in flight \
                 (discovery.http.maxInFlightPerCaller); retry when one has been answered",
                shares.max
            ),
        )
            .into_response();
        refusal
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return refusal;
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(
        parts,
        Body::new(Holding {
            inner: body,
            _share: share,
        }),
    )
}

/// An answer's body that keeps its request's share until it ends.
struct Holding {
    inner: Body,
    _share: Share,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_has_a_share_of_its_own_freed_as_answers_end() {
        let shares = Shares::new(2);
        let first = shares.take("alice".into()).unwrap();
        let _second = shares.take("alice".into()).unwrap();
        assert!(shares.take("alice".into()).is_none(), "alice's share is full");
        assert!(shares.take("bob".into()).is_some(), "bob's is his own");
        drop(first);
        assert!(shares.take("alice".into()).is_some(), "an ended answer frees its place");
    }

    #[test]
    fn counts_of_callers_with_nothing_in_flight_are_forgotten() {
        let shares = Shares::new(4);
        drop(shares.take("carol".into()).unwrap());
        assert!(shares.counts().is_empty());
    }
}
