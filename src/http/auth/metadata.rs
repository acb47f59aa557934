//! OAuth 2.0 Protected Resource Metadata (RFC 9728): how a client learns, from the gateway
//! itself, which authorization servers issue tokens for it and which scopes to ask for.
//!
//! Served at `/.well-known/oauth-protected-resource` and at the form with the resource's
//! path appended (`/.well-known/oauth-protected-resource/mcp`), which is the one the
//! `resource_metadata` of every 401 points to. The document is public: it is built once, and
//! any origin may read it (browser-based clients fetch it cross-origin).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;

/// The well-known path prefix (RFC 9728 §3).
pub(super) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The document and where it is served.
#[derive(Debug, Clone)]
pub(super) struct Metadata {
    document: Bytes,
    /// The root form and the path-suffixed form (one path when the resource is the root).
    paths: Vec<String>,
}

impl Metadata {
    /// The metadata of `resource` (its path is `resource_path`, `/mcp`).
    pub(super) fn new(
        resource: &str,
        resource_path: &str,
        authorization_servers: &[String],
        scopes: &[String],
    ) -> Self {
        let mut document = serde_json::json!({
            "resource": resource,
            "bearer_methods_supported": ["header"],
        });
        if !authorization_servers.is_empty() {
            document["authorization_servers"] = serde_json::json!(authorization_servers);
        }
        if !scopes.is_empty() {
            document["scopes_supported"] = serde_json::json!(scopes);
        }
        let mut paths = vec![WELL_KNOWN.to_owned()];
        let suffix = resource_path.trim_end_matches('/');
        if !suffix.is_empty() {
            paths.push(format!("{WELL_KNOWN}{suffix}"));
        }
        Self {
            document: Bytes::from(document.to_string()),
            paths,
        }
    }

    pub(super) fn router(&self) -> Router {
        let mut router = Router::new();
        for path in &self.paths {
            let document = self.document.clone();
            router = router.route(path, get(move || serve(document.clone())));
        }
        router
    }
}

#[expect(clippy::unused_async, reason = "an axum handler is an async fn")]
async fn serve(document: Bytes) -> Response {
    let mut response = document.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}
