//! `discovery.http.auth`: who may use the HTTP face, as written in the config.
//!
//! Two modes, exactly one of them configured: OAuth 2.1 access tokens (JWTs) from one or more
//! issuers the team already runs (Keycloak, Entra ID, Auth0, …), or one static bearer token for
//! a single user on loopback. This module only describes the settings; `http::auth` checks them
//! and enforces them on every request.

use serde::{Deserialize, Serialize};

/// Default clock skew tolerated on `exp` and `nbf`, in seconds.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 60;

/// Who may use the HTTP face (`serve --http`). Configure `issuers` (team mode) or `token`
/// (one user on loopback), not both. Tokens must be issued for the gateway's canonical URL
/// (`discovery.http.publicUrl`, else `http://HOST:PORT/mcp` of the bind address) unless an
/// issuer sets `audience`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct HttpAuthSpec {
    /// OAuth authorization servers whose access tokens (signed JWTs) are accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issuers: Vec<IssuerSpec>,
    /// A static bearer token for a single user on a loopback address. Must be a reference,
    /// `${secret:NAME}` (stored with `anygpt-discovery secret set NAME`) or `${ENV_VAR}`, never
    /// the token itself, and at least 32 characters once expanded. Requests made with it act as
    /// the caller with subject `static`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Clock skew tolerated on a token's `exp` and `nbf`, in seconds (at most 600).
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    /// Scopes listed in the protected resource metadata (`scopes_supported`). Default: the
    /// issuers' `requiredScopes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
}

impl Default for HttpAuthSpec {
    fn default() -> Self {
        Self {
            issuers: Vec::new(),
            token: None,
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            scopes_supported: Vec::new(),
        }
    }
}

/// One OAuth authorization server whose access tokens are accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
pub struct IssuerSpec {
    /// The issuer identifier, compared exactly with a token's `iss`, e.g.
    /// `https://id.example.com/realms/team` (Keycloak) or
    /// `https://login.microsoftonline.com/TENANT/v2.0` (Entra ID).
    pub issuer: String,
    /// Where the issuer publishes its signing keys (a JWK Set): https, or http on loopback.
    /// Fetched at start, then again when a token names a key not seen yet (at most every
    /// 30 s) and every 15 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// A JWK Set file instead of `jwksUri` (offline or pinned keys). Read at start, and again
    /// when a token names a key not seen yet (at most every 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<String>,
    /// The `aud` values accepted instead of the gateway's canonical URL, for issuers that
    /// cannot put the URL in `aud` (Entra ID uses the application ID URI, e.g. `api://GUID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Audience>,
    /// Signature algorithms accepted. `HS*` (shared secrets) and `none` are never accepted.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<JwtAlgorithm>,
    /// The claim holding the caller's groups or roles: a name (`groups`, `roles`,
    /// `https://example.com/roles`) or a dotted path into nested objects
    /// (`realm_access.roles` for Keycloak realm roles). A string or an array of strings.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Scopes every token of this issuer must grant (`scope` or `scp`); a token without them
    /// is answered 403 `insufficient_scope`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
}

/// One accepted audience or several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[derive(schemars::JsonSchema)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    /// The accepted values, in order.
    #[must_use]
    pub fn values(&self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one.clone()],
            Self::Many(many) => many.clone(),
        }
    }
}

/// A signature algorithm of an access token. Only asymmetric ones: the gateway holds public
/// keys, and a shared secret (`HS*`) verified with a public key is a classic forgery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum JwtAlgorithm {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    EdDSA,
}

fn default_leeway() -> u64 {
    DEFAULT_LEEWAY_SECONDS
}

fn default_algorithms() -> Vec<JwtAlgorithm> {
    vec![JwtAlgorithm::RS256, JwtAlgorithm::ES256, JwtAlgorithm::EdDSA]
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_gets_the_documented_defaults() {
        let spec: HttpAuthSpec = serde_json::from_value(serde_json::json!({
            "issuers": [{ "issuer": "https://id.example", "jwksUri": "https://id.example/keys" }]
        }))
        .unwrap();
        assert_eq!(spec.leeway_seconds, 60);
        let issuer = &spec.issuers[0];
        assert_eq!(issuer.groups_claim, "groups");
        assert_eq!(
            issuer.algorithms,
            [JwtAlgorithm::RS256, JwtAlgorithm::ES256, JwtAlgorithm::EdDSA]
        );
        assert!(issuer.audience.is_none());
    }

    #[test]
    fn shared_secret_algorithms_and_none_are_refused_when_read() {
        for alg in ["HS256", "none"] {
            let err = serde_json::from_value::<HttpAuthSpec>(serde_json::json!({
                "issuers": [{ "issuer": "https://id.example", "jwksUri": "https://id.example/k", "algorithms": [alg] }]
            }))
            .unwrap_err();
            assert!(err.to_string().contains(alg), "{err}");
        }
    }

    #[test]
    fn audience_is_one_string_or_several() {
        let one: Audience = serde_json::from_value(serde_json::json!("api://x")).unwrap();
        let many: Audience = serde_json::from_value(serde_json::json!(["a", "b"])).unwrap();
        assert_eq!(one.values(), ["api://x"]);
        assert_eq!(many.values(), ["a", "b"]);
    }
}
