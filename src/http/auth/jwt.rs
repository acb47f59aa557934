//! Access tokens as signed JWTs: which issuer, which key, which claims, and the caller they
//! prove.
//!
//! Order matters: the token's claims are trusted only after its signature verified with a key
//! of the issuer it names, so nothing is learnt from a forged token but "invalid". Keys come
//! only from the issuer's configured set — a token's own `jku`, `jwk`, `x5u` or `x5c` headers
//! are never followed.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::denied::Problem;
use super::jwks::{KeyMiss, KeySet};
use crate::caller::Caller;

/// The longest `sub` or scope kept; longer is not an identity a rule can name.
const MAX_CLAIM_CHARS: usize = 256;
/// The most scopes kept from one token.
const MAX_CLAIM_ITEMS: usize = 256;

/// One trusted issuer, compiled from its `IssuerSpec`.
pub(super) struct Issuer {
    /// The issuer identifier, compared exactly with `iss`.
    pub id: String,
    pub keys: std::sync::Arc<KeySet>,
    pub audience: Vec<String>,
    pub algorithms: Vec<Algorithm>,
    pub groups_claim: String,
    pub required_scopes: Vec<String>,
}

/// A token that verified: its caller, and until when (`exp`) it may be taken again unchecked.
#[derive(Debug, Clone)]
pub(super) struct Verified {
    pub caller: Caller,
    pub expires_at: Option<u64>,
}

/// Check `token` against the issuer it names among `issuers`, and build its caller.
pub(super) async fn verify(issuers: &[Issuer], token: &str, leeway: u64) -> Result<Verified, Problem> {
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| Problem::InvalidToken("the token is not a JWT signed with a supported algorithm"))?;
    if header.crit.is_some() {
        return Err(Problem::InvalidToken(
            "the token has critical header parameters, none of which is supported",
        ));
    }
    // Only to choose the issuer's keys: nothing else of it is used before the signature holds.
    let named = jsonwebtoken::dangerous::insecure_decode_claims::<NamedIssuer>(token)
        .map_err(|_| Problem::InvalidToken("the token's claims are not a JSON object"))?;
    let issuer = issuers
        .iter()
        .find(|i| named.iss.as_deref() == Some(i.id.as_str()))
        .ok_or(Problem::InvalidToken(
            "the token's issuer (`iss`) is not one this gateway trusts",
        ))?;
    if !issuer.algorithms.contains(&header.alg) {
        return Err(Problem::InvalidToken(
            "the token's algorithm is not accepted for its issuer",
        ));
    }
    let key = issuer
        .keys
        .find(header.kid.as_deref(), header.alg)
        .await
        .map_err(|miss| match miss {
            KeyMiss::UnknownKey => Problem::InvalidToken("the token names a key (`kid`) its issuer does not publish"),
            KeyMiss::Ambiguous => Problem::InvalidToken(
                "the token names no key (`kid`) and its issuer has no single key for its algorithm",
            ),
            KeyMiss::Unavailable => {
                Problem::InvalidToken("the issuer's keys cannot be read at the moment; try again shortly")
            }
        })?;
    let mut validation = Validation::new(header.alg);
    validation.leeway = leeway;
    validation.validate_nbf = true;
    validation.set_issuer(&[&issuer.id]);
    validation.set_audience(&issuer.audience);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = jsonwebtoken::decode::<Map<String, Value>>(token, key.decoding(), &validation)
        .map_err(|e| Problem::InvalidToken(rejection(e.kind())))?
        .claims;
    let caller = caller_of(issuer, &claims)?;
    let missing: Vec<&str> = issuer
        .required_scopes
        .iter()
        .filter(|s| !caller.scopes.contains(s))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(Problem::InsufficientScope(issuer.required_scopes.join(" ")));
    }
    let expires_at = claims.get("exp").and_then(Value::as_u64);
    Ok(Verified {
        caller: Caller {
            presented: Some(crate::caller::Presented::new(token, expires_at)),
            ..caller
        },
        expires_at,
    })
}

#[derive(serde::Deserialize)]
struct NamedIssuer {
    iss: Option<String>,
}

/// The fixed text for a token `jsonwebtoken` refused.
fn rejection(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)",
        ErrorKind::InvalidAudience => "the token was not issued for this resource (`aud`)",
        ErrorKind::InvalidIssuer => "the token's issuer (`iss`) is not one this gateway trusts",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (`exp`, `iss`, `aud` or `sub`)",
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat | ErrorKind::UnsupportedAlgorithm => {
            "the token's algorithm does not fit its key"
        }
        _ => "the token is malformed",
    }
}

fn caller_of(issuer: &Issuer, claims: &Map<String, Value>) -> Result<Caller, Problem> {
    let subject = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.chars().count() <= MAX_CLAIM_CHARS)
        .ok_or(Problem::InvalidToken(
            "the token's subject (`sub`) is not a string of at most 256 characters",
        ))?;
    // A group name may hold spaces ("Team Admins"): a string claim is one group. Every group
    // is kept, however many or long (the token's 16 KiB bound them): dropping one could drop
    // the very group a rule excludes (`groups: ["!contractors", "*"]`) and let its member in.
    let groups = claim_path(claims, &issuer.groups_claim).map_or_else(Vec::new, |v| strings(v, false));
    // RFC 9068 writes scopes in `scope`; Entra ID and Okta in `scp`. A string holds them
    // space-separated, an array one each. Bounded: a scope dropped only refuses more.
    let scopes = claims
        .get("scope")
        .or_else(|| claims.get("scp"))
        .map_or_else(Vec::new, |v| bounded(strings(v, true)));
    // What a person recognises them by; the first of the usual claims that is a short string.
    let name = ["preferred_username", "email", "name"]
        .iter()
        .filter_map(|claim| claims.get(*claim).and_then(Value::as_str))
        .find(|s| !s.trim().is_empty() && s.chars().count() <= MAX_CLAIM_CHARS)
        .map(|s| s.trim().to_owned());
    Ok(Caller {
        issuer: Some(issuer.id.clone()),
        subject: Some(subject.to_owned()),
        groups,
        scopes,
        presented: None,
        name,
    })
}

/// A claim by its exact name (namespaced claims like `https://example.com/roles` hold dots),
/// else by a dotted path into nested objects (`realm_access.roles`).
fn claim_path<'c>(claims: &'c Map<String, Value>, name: &str) -> Option<&'c Value> {
    if let Some(value) = claims.get(name) {
        return Some(value);
    }
    let mut parts = name.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// A claim's strings: a string (space-separated items when `split`), or an array of strings
/// (other items skipped); empty ones skipped.
fn strings(value: &Value, split: bool) -> Vec<String> {
    let items: Vec<&str> = match value {
        Value::String(text) if split => text.split_whitespace().collect(),
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    items.into_iter().filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// `items` bounded in count and length.
fn bounded(items: Vec<String>) -> Vec<String> {
    items
        .into_iter()
        .filter(|s| s.chars().count() <= MAX_CLAIM_CHARS)
        .take(MAX_CLAIM_ITEMS)
        .collect()
}
