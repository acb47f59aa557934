//! Who may reach the team face: the bind policy (loopback unless auth is configured) and the
//! `Host` / `Origin` allow-lists rmcp enforces on `/mcp` (always on).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::HttpSpec;

/// Why `serve --http` does not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("`{listen}` is not an address to listen on: {reason}; write HOST:PORT, e.g. 127.0.0.1:8080")]
    BadAddress { listen: String, reason: String },
    #[error(
        "refusing to serve on {address}: it is reachable from other machines and no authentication is \
         configured, so anyone who reaches it could run every tool of every server. Serve on loopback \
         (127.0.0.1:PORT) behind your own authenticating proxy, or configure `discovery.http.auth` \
         (OAuth 2.1 resource server, or a bearer token) first"
    )]
    NeedsAuth { address: SocketAddr },
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("discovery.http.publicUrl `{url}`: {reason}; write the URL clients use, e.g. https://mcp.example.com/mcp")]
    BadPublicUrl { url: String, reason: String },
    /// `discovery.http.auth` cannot be used (a bad issuer, an unreadable key set, a static
    /// token off loopback): the engine's error names the setting and the fix.
    #[error("{0}")]
    Auth(crate::error::Error),
}

/// The addresses `listen` names, each checked against the bind policy: an address other
/// machines can reach needs auth.
pub async fn resolve(listen: &str, auth_configured: bool) -> Result<Vec<SocketAddr>, BindError> {
    let bad = |reason: String| BindError::BadAddress {
        listen: listen.to_owned(),
        reason,
    };
    if listen.rsplit_once(':').is_none() {
        return Err(bad("no port".into()));
    }
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| bad(e.to_string()))?
        .collect();
    if addresses.is_empty() {
        return Err(bad("the name resolves to no address".into()));
    }
    if !auth_configured {
        if let Some(open) = addresses.iter().find(|a| !a.ip().is_loopback()) {
            return Err(BindError::NeedsAuth { address: *open });
        }
    }
    Ok(addresses)
}

/// `Host` values answered: loopback names on the bound port, `publicUrl`'s authority, and
/// `allowedHosts`.
pub fn allowed_hosts(spec: &HttpSpec, bound: SocketAddr) -> Result<Vec<String>, BindError> {
    let port = bound.port();
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    if let Some(url) = public_url(spec)? {
        if let Some(authority) = url.authority() {
            hosts.push(authority.as_str().to_owned());
        }
    }
    hosts.extend(spec.allowed_hosts.iter().cloned());
    Ok(hosts)
}

/// Browser origins answered: loopback on the bound port, `publicUrl`'s origin, and
/// `allowedOrigins`. Never empty, so rmcp always checks `Origin`.
pub fn allowed_origins(spec: &HttpSpec, bound: SocketAddr) -> Result<Vec<String>, BindError> {
    let port = bound.port();
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    if let Some(url) = public_url(spec)? {
        if let (Some(scheme), Some(authority)) = (url.scheme_str(), url.authority()) {
            let port = url.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
            origins.push(format!("{scheme}://{}:{port}", authority.host()));
        }
    }
    origins.extend(spec.allowed_origins.iter().cloned());
    Ok(origins)
}

/// The `Host` values answered, as [`allowed_hosts`] lists them: the check rmcp applies to
/// `/mcp`, for the routes outside it that must not be read through a rebound name.
#[derive(Debug, Clone)]
pub struct Hosts(Arc<[(String, Option<u16>)]>);

impl Hosts {
    #[must_use]
    pub fn new(allowed: &[String]) -> Self {
        Self(allowed.iter().filter_map(|a| authority(a)).collect())
    }

    /// Whether the request's `Host` (or, without one, its URI's authority) is allowed. An
    /// allowed entry without a port allows every port (as rmcp reads it).
    #[must_use]
    pub fn allow(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        let named = match headers.get(header::HOST) {
            Some(value) => value.to_str().ok().and_then(authority),
            None => uri.authority().and_then(|a| authority(a.as_str())),
        };
        named.is_some_and(|(host, port)| {
            self.0
                .iter()
                .any(|(allowed, allowed_port)| *allowed == host && allowed_port.is_none_or(|p| Some(p) == port))
        })
    }
}

/// A `host[:port]` authority, its host lowercased and without IPv6 brackets.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let authority: axum::http::uri::Authority = text.trim().parse().ok()?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), authority.port_u16()))
}

/// What a refused `Host` is told: the settings that allow a name, for the admin whose clients
/// reach the gateway by one it does not know yet.
pub const HOST_REFUSED: &str = "Forbidden: Host header is not allowed; to serve clients that reach the gateway by \
     this name, add it to discovery.http.allowedHosts, or set discovery.http.publicUrl to the URL they use";

/// Middleware: 403 for a request whose `Host` is not allowed — a web page that rebound its
/// name to this address reads nothing through it.
pub async fn check_host(State(hosts): State<Hosts>, request: Request, next: Next) -> Response {
    if hosts.allow(request.uri(), request.headers()) {
        return next.run(request).await;
    }
    tracing::debug!("refused a request whose Host header is not allowed (DNS rebinding?)");
    (StatusCode::FORBIDDEN, HOST_REFUSED).into_response()
}

/// `publicUrl` parsed: an absolute `http(s)` URL.
pub fn public_url(spec: &HttpSpec) -> Result<Option<Uri>, BindError> {
    let Some(text) = spec.public_url.as_deref() else {
        return Ok(None);
    };
    let bad = |reason: &str| BindError::BadPublicUrl {
        url: text.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = text.parse().map_err(|_| bad("not a URL"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(Some(uri)),
        _ => Err(bad("must be an absolute http:// or https:// URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn non_loopback_needs_auth() {
        assert!(matches!(
            resolve("0.0.0.0:0", false).await,
            Err(BindError::NeedsAuth { .. })
        ));
        assert!(resolve("0.0.0.0:0", true).await.is_ok());
        assert!(resolve("127.0.0.1:0", false).await.is_ok());
        assert!(matches!(
            resolve("nowhere", false).await,
            Err(BindError::BadAddress { .. })
        ));
    }

    #[test]
    fn public_url_widens_the_allow_lists() {
        let spec = HttpSpec {
            public_url: Some("https://mcp.example.com/mcp".into()),
            ..HttpSpec::default()
        };
        let bound: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(allowed_hosts(&spec, bound)
            .unwrap()
            .contains(&"mcp.example.com".to_owned()));
        assert!(allowed_origins(&spec, bound)
            .unwrap()
            .contains(&"https://mcp.example.com:443".to_owned()));
        let bad = HttpSpec {
            public_url: Some("mcp.example.com".into()),
            ..HttpSpec::default()
        };
        assert!(allowed_hosts(&bad, bound).is_err());
    }

    #[test]
    fn hosts_are_checked_as_rmcp_checks_them() {
        let spec = HttpSpec {
            allowed_hosts: vec!["mcp.internal".into()],
            ..HttpSpec::default()
        };
        let hosts = Hosts::new(&allowed_hosts(&spec, "127.0.0.1:8080".parse().unwrap()).unwrap());
        let allows = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().unwrap());
            hosts.allow(&Uri::from_static("/metrics"), &headers)
        };
        for good in [
            "127.0.0.1:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "mcp.internal",
            "mcp.internal:443",
        ] {
            assert!(allows(good), "{good}");
        }
        for bad in [
            "evil.example:8080",
            "localhost",
            "localhost:8081",
            "127.0.0.1:8080.",
            "127.1:8080",
            "[::2]:8080",
        ] {
            assert!(!allows(bad), "{bad}");
        }
        assert!(
            !hosts.allow(&Uri::from_static("/metrics"), &HeaderMap::new()),
            "no Host at all"
        );
    }
}
