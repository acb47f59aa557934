//! The authenticator through an axum router, as the HTTP face mounts it: real HTTP answers
//! (status, `WWW-Authenticate`, body) for tokens signed by keys the tests make, with the
//! issuer's keys in a file or served by a local HTTP listener.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::routing::{get, post};
use axum::{Extension, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self as sig, KeyPair};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::jwks::Timing;
use super::Authenticator;
use crate::caller::Caller;
use crate::config::http_auth::{Audience, HttpAuthSpec, IssuerSpec, JwtAlgorithm};

const RESOURCE: &str = "https://mcp.example.test/mcp";
const METADATA_URL: &str = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp";
const ISSUER: &str = "https://id.example.test/realms/team";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A signing key made by the test, with its public JWK.
enum Signer {
    Ec(sig::EcdsaKeyPair),
    Ed(sig::Ed25519KeyPair),
    Rsa(sig::RsaKeyPair),
}

struct TestKey {
    kid: String,
    signer: Signer,
}

impl TestKey {
    fn es256(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let alg = &sig::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = sig::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = sig::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        Self {
            kid: kid.to_owned(),
            signer: Signer::Ec(pair),
        }
    }

    fn eddsa(kid: &str) -> Self {
        let pkcs8 = sig::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        let pair = sig::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        Self {
            kid: kid.to_owned(),
            signer: Signer::Ed(pair),
        }
    }

    /// `ring` cannot generate RSA keys: this one was made once for these tests, and is used
    /// nowhere else, with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048` and
    /// `openssl pkcs8 -topk8 -nocrypt -outform DER`.
    fn rs256(kid: &str) -> Self {
        let der = include_bytes!("testdata/rsa2048-test-only.pk8");
        Self {
            kid: kid.to_owned(),
            signer: Signer::Rsa(sig::RsaKeyPair::from_pkcs8(der).unwrap()),
        }
    }

    fn alg(&self) -> &'static str {
        match self.signer {
            Signer::Ec(_) => "ES256",
            Signer::Ed(_) => "EdDSA",
            Signer::Rsa(_) => "RS256",
        }
    }

    fn jwk(&self) -> Value {
        match &self.signer {
            Signer::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Signer::Ed(pair) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": b64(pair.public_key().as_ref())})
            }
            Signer::Rsa(pair) => {
                let public = sig::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "n": b64(&public.n), "e": b64(&public.e)})
            }
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &self.signer {
            Signer::Ec(pair) => pair.sign(&rng, message).unwrap().as_ref().to_vec(),
            Signer::Ed(pair) => pair.sign(message).as_ref().to_vec(),
            Signer::Rsa(pair) => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(&sig::RSA_PKCS1_SHA256, &rng, message, &mut out).unwrap();
                out
            }
        }
    }

    /// A token with this key's `kid` and algorithm over `claims`.
    fn token(&self, claims: &Value) -> String {
        self.token_with_header(&json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}), claims)
    }

    fn token_with_header(&self, header: &Value, claims: &Value) -> String {
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        format!("{message}.{}", b64(&self.sign(message.as_bytes())))
    }
}

fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

/// Claims of a valid token for the resource.
fn claims() -> Value {
    json!({
        "iss": ISSUER, "sub": "alice", "aud": RESOURCE,
        "iat": now(), "exp": now() + 300,
        "groups": ["dev", "ops"], "scope": "mcp:tools openid",
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

/// A JWK Set written to a temporary file.
struct JwksFile {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

fn jwks_file(document: &Value) -> JwksFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, document.to_string()).unwrap();
    JwksFile { _dir: dir, path }
}

fn issuer_spec(file: &JwksFile) -> IssuerSpec {
    IssuerSpec {
        issuer: ISSUER.to_owned(),
        jwks_uri: None,
        jwks_file: Some(file.path.display().to_string()),
        audience: None,
        algorithms: vec![JwtAlgorithm::RS256, JwtAlgorithm::ES256, JwtAlgorithm::EdDSA],
        groups_claim: "groups".to_owned(),
        required_scopes: vec!["mcp:tools".to_owned()],
    }
}

fn spec_with(issuers: Vec<IssuerSpec>) -> HttpAuthSpec {
    HttpAuthSpec {
        issuers,
        ..HttpAuthSpec::default()
    }
}

async fn authenticator(issuer: IssuerSpec) -> Authenticator {
    Authenticator::from_spec(&spec_with(vec![issuer]), RESOURCE)
        .await
        .unwrap()
}

/// The HTTP face in small: `/mcp` behind the layer answers the caller it was handed and
/// whether an `Authorization` header reached it; the metadata routes outside the layer.
fn app(auth: &Authenticator) -> Router {
    async fn mcp(Extension(caller): Extension<Caller>, headers: HeaderMap) -> String {
        json!({
            "issuer": caller.issuer, "subject": caller.subject, "groups": caller.groups,
            "scopes": caller.scopes, "name": caller.name,
            "sawAuthorization": headers.contains_key(header::AUTHORIZATION),
        })
        .to_string()
    }
    Router::new()
        .route("/mcp", post(mcp))
        .layer(auth.layer())
        .merge(auth.metadata_router())
}

struct Answer {
    status: StatusCode,
    challenge: Option<String>,
    body: Value,
}

async fn call(auth: &Authenticator, token: Option<&str>) -> Answer {
    let mut request = Request::post("/mcp");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    send(auth, request.body(Body::empty()).unwrap()).await
}

async fn send(auth: &Authenticator, request: Request<Body>) -> Answer {
    let response = app(auth).oneshot(request).await.unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        status,
        challenge,
        body,
    }
}

/// A 401 with the metadata pointer, `error="invalid_token"`, whose description says `why`.
fn assert_invalid(answer: &Answer, why: &str) {
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{:?}", answer.body);
    let challenge = answer.challenge.as_deref().expect("a WWW-Authenticate header");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{METADATA_URL}\"")),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");
    assert_eq!(answer.body["error"], "invalid_token");
    let description = answer.body["error_description"].as_str().unwrap();
    assert!(description.contains(why), "`{description}` does not say `{why}`");
}

// ---- no token, bad tokens: 401 with the metadata pointer ----

#[tokio::test]
async fn no_token_is_401_pointing_at_the_metadata_with_the_scope_to_ask_for() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let answer = call(&authenticator(issuer_spec(&file)).await, None).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        answer.challenge.as_deref(),
        Some(format!("Bearer resource_metadata=\"{METADATA_URL}\", scope=\"mcp:tools\"").as_str())
    );
    assert_eq!(answer.body["error"], "unauthorized");
}

#[tokio::test]
async fn a_token_for_another_audience_is_refused() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let token = key.token(&with(claims(), "aud", json!("https://other.example.test/mcp")));
    assert_invalid(&call(&auth, Some(&token)).await, "not issued for this resource");
}

#[tokio::test]
async fn a_token_of_another_issuer_is_refused_even_when_signed_by_a_known_key() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let token = key.token(&with(claims(), "iss", json!("https://evil.example.test")));
    assert_invalid(&call(&auth, Some(&token)).await, "issuer");
    let token = key.token(&without(claims(), "iss"));
    assert_invalid(&call(&auth, Some(&token)).await, "issuer");
}

#[tokio::test]
async fn an_expired_token_is_refused_beyond_the_leeway_only() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let expired = key.token(&with(claims(), "exp", json!(now() - 3600)));
    assert_invalid(&call(&auth, Some(&expired)).await, "expired");
    // 20 s ago is within the default 60 s of clock skew.
    let just = key.token(&with(claims(), "exp", json!(now() - 20)));
    assert_eq!(call(&auth, Some(&just)).await.status, StatusCode::OK);
    let no_exp = key.token(&without(claims(), "exp"));
    assert_invalid(&call(&auth, Some(&no_exp)).await, "required claim");
}

#[tokio::test]
async fn a_token_verified_before_is_still_refused_once_it_expires() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let spec = HttpAuthSpec {
        leeway_seconds: 0,
        ..spec_with(vec![issuer_spec(&file)])
    };
    let auth = Authenticator::from_spec(&spec, RESOURCE).await.unwrap();
    let token = key.token(&with(claims(), "exp", json!(now() + 1)));
    assert_eq!(call(&auth, Some(&token)).await.status, StatusCode::OK);
    assert_eq!(call(&auth, Some(&token)).await.status, StatusCode::OK, "taken again");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_invalid(&call(&auth, Some(&token)).await, "expired");
}

#[tokio::test]
async fn a_token_not_valid_yet_is_refused() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let token = key.token(&with(claims(), "nbf", json!(now() + 3600)));
    assert_invalid(&call(&auth, Some(&token)).await, "not valid yet");
}

#[tokio::test]
async fn a_token_signed_by_another_key_under_a_known_kid_is_refused() {
    let key = TestKey::es256("k1");
    let impostor = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    assert_invalid(&call(&auth, Some(&impostor.token(&claims()))).await, "signature");
    // A valid token with its claims changed after signing.
    let token = key.token(&claims());
    let parts: Vec<&str> = token.split('.').collect();
    let forged = with(claims(), "sub", json!("admin"));
    let tampered = format!("{}.{}.{}", parts[0], b64(forged.to_string().as_bytes()), parts[2]);
    assert_invalid(&call(&auth, Some(&tampered)).await, "signature");
}

#[tokio::test]
async fn a_token_naming_an_unknown_key_is_refused() {
    let key = TestKey::es256("k1");
    let unknown = TestKey::es256("k2");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    assert_invalid(&call(&auth, Some(&unknown.token(&claims()))).await, "key (`kid`)");
}

#[tokio::test]
async fn an_unsigned_token_is_refused() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    for alg in ["none", "None", "NONE"] {
        let header = json!({"alg": alg, "typ": "JWT", "kid": "k1"});
        let token = format!(
            "{}.{}.",
            b64(header.to_string().as_bytes()),
            b64(claims().to_string().as_bytes())
        );
        assert_invalid(
            &call(&auth, Some(&token)).await,
            "not a JWT signed with a supported algorithm",
        );
    }
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_refused() {
    // The classic confusion: the attacker knows the RSA public key and signs with HMAC under it.
    let key = TestKey::rs256("rsa");
    let mut document = jwks(&[&key]);
    // Even a symmetric key the issuer's set happens to publish is never used.
    document["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kty": "oct", "kid": "shared", "k": b64(b"not so secret")}));
    let file = jwks_file(&document);
    let auth = authenticator(issuer_spec(&file)).await;
    let public = sig::RsaPublicKeyComponents::<Vec<u8>>::from(match &key.signer {
        Signer::Rsa(pair) => pair.public(),
        _ => unreachable!(),
    });
    for (kid, secret) in [
        ("rsa", public.n.clone()),
        ("rsa", key.jwk().to_string().into_bytes()),
        ("shared", b"not so secret".to_vec()),
    ] {
        let header = json!({"alg": "HS256", "typ": "JWT", "kid": kid});
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims().to_string().as_bytes())
        );
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret),
            message.as_bytes(),
        );
        let token = format!("{message}.{}", b64(mac.as_ref()));
        assert_invalid(&call(&auth, Some(&token)).await, "algorithm is not accepted");
    }
}

#[tokio::test]
async fn a_token_without_a_subject_or_with_foreign_critical_headers_is_refused() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    assert_invalid(
        &call(&auth, Some(&key.token(&without(claims(), "sub")))).await,
        "required claim",
    );
    let header = json!({"alg": "ES256", "kid": "k1", "crit": ["exp-policy"], "exp-policy": 1});
    assert_invalid(
        &call(&auth, Some(&key.token_with_header(&header, &claims()))).await,
        "critical header",
    );
}

#[tokio::test]
async fn malformed_authorization_headers_are_refused_without_echoing_them() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let token = key.token(&with(claims(), "exp", json!(now() - 3600)));
    let cases: [(Vec<String>, &str); 4] = [
        (vec![format!("Basic {token}")], "not `Bearer <token>`"),
        (vec!["Bearer".to_owned()], "without a token"),
        (vec![format!("Bearer {}", "a".repeat(17 * 1024))], "larger than 16 KiB"),
        (
            vec![format!("Bearer {token}"), format!("Bearer {token}")],
            "more than one",
        ),
    ];
    for (values, why) in cases {
        let mut request = Request::post("/mcp");
        for value in &values {
            request = request.header(header::AUTHORIZATION, value);
        }
        let answer = send(&auth, request.body(Body::empty()).unwrap()).await;
        assert_invalid(&answer, why);
    }
    // Neither the answer to a bad token nor its challenge holds any part of it.
    let answer = call(&auth, Some(&token)).await;
    let signature = token.rsplit('.').next().unwrap();
    assert!(!answer.body.to_string().contains(signature));
    assert!(!answer.challenge.unwrap().contains(signature));
}

// ---- scope: 403 ----

#[tokio::test]
async fn a_valid_token_without_the_required_scope_is_403_naming_the_scope() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    for scope in [json!("openid profile"), json!(null)] {
        let answer = call(&auth, Some(&key.token(&with(claims(), "scope", scope)))).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        let challenge = answer.challenge.unwrap();
        assert!(
            challenge.starts_with("Bearer error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{METADATA_URL}\"")),
            "{challenge}"
        );
        assert_eq!(answer.body["error"], "insufficient_scope");
    }
    // `scp`, as Entra ID and Okta write it, an array here, counts too.
    let scp = with(without(claims(), "scope"), "scp", json!(["mcp:tools"]));
    assert_eq!(call(&auth, Some(&key.token(&scp))).await.status, StatusCode::OK);
}

// ---- valid tokens: the caller ----

#[tokio::test]
async fn a_valid_token_proves_its_caller_and_never_reaches_the_handler() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let answer = call(&auth, Some(&key.token(&claims()))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body,
        json!({"issuer": ISSUER, "subject": "alice", "groups": ["dev", "ops"],
               "scopes": ["mcp:tools", "openid"], "name": null, "sawAuthorization": false})
    );
}

#[tokio::test]
async fn rs256_and_eddsa_tokens_verify_and_an_audience_list_is_accepted() {
    let rsa = TestKey::rs256("rsa");
    let ed = TestKey::eddsa("ed");
    let file = jwks_file(&jwks(&[&rsa, &ed]));
    let auth = authenticator(issuer_spec(&file)).await;
    let audiences = with(claims(), "aud", json!(["https://other.example.test", RESOURCE]));
    for key in [&rsa, &ed] {
        let answer = call(&auth, Some(&key.token(&audiences))).await;
        assert_eq!(answer.status, StatusCode::OK, "{}: {:?}", key.alg(), answer.body);
        assert_eq!(answer.body["subject"], "alice");
    }
    // Each key verifies only its own algorithm: an RS256 header on the Ed25519 key's id fails.
    let header = json!({"alg": "RS256", "kid": "ed"});
    assert_invalid(
        &call(&auth, Some(&rsa.token_with_header(&header, &claims()))).await,
        "key (`kid`)",
    );
}

#[tokio::test]
async fn groups_come_from_the_configured_claim_a_string_an_array_or_a_nested_path() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let cases = [
        ("roles", json!({"roles": "Team Admins"}), json!(["Team Admins"])),
        ("roles", json!({"roles": ["a", "b", 7]}), json!(["a", "b"])),
        (
            "realm_access.roles",
            json!({"realm_access": {"roles": ["dev"]}}),
            json!(["dev"]),
        ),
        (
            "https://example.test/roles",
            json!({"https://example.test/roles": ["x"]}),
            json!(["x"]),
        ),
        ("roles", json!({}), json!([])),
    ];
    // Every group, however many or long: a rule `groups: ["!contractors", "*"]` must still see
    // `contractors` at the end of a long list (once the first 256 were kept, and it was not).
    let mut many: Vec<String> = (0..300).map(|i| format!("team-{i}")).collect();
    many.push("x".repeat(300));
    many.push("contractors".to_owned());
    let cases = cases
        .into_iter()
        .chain([("groups", json!({ "groups": many }), json!(many))]);
    for (claim, extra, groups) in cases {
        let auth = authenticator(IssuerSpec {
            groups_claim: claim.to_owned(),
            ..issuer_spec(&file)
        })
        .await;
        let mut token_claims = claims();
        for (name, value) in extra.as_object().unwrap() {
            token_claims[name] = value.clone();
        }
        let answer = call(&auth, Some(&key.token(&token_claims))).await;
        assert_eq!(answer.body["groups"], groups, "groupsClaim {claim}");
    }
}

#[tokio::test]
async fn a_readable_name_is_the_first_usual_claim_given() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    let name_of = |claims: Value| {
        let auth = &auth;
        let token = key.token(&claims);
        async move { call(auth, Some(&token)).await.body["name"].clone() }
    };
    assert_eq!(name_of(claims()).await, Value::Null, "none given: none shown");
    let both = with(
        with(claims(), "email", json!("alice@example.com")),
        "name",
        json!("Alice"),
    );
    assert_eq!(name_of(both.clone()).await, json!("alice@example.com"));
    assert_eq!(
        name_of(with(both, "preferred_username", json!(" alice "))).await,
        json!("alice")
    );
    let blank = with(with(claims(), "preferred_username", json!("")), "name", json!("Alice"));
    assert_eq!(name_of(blank).await, json!("Alice"));
    assert_eq!(name_of(with(claims(), "email", json!(42))).await, Value::Null);
}

#[tokio::test]
async fn a_configured_audience_replaces_the_resource_url() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(IssuerSpec {
        audience: Some(Audience::One("api://gateway".to_owned())),
        ..issuer_spec(&file)
    })
    .await;
    let entra = with(claims(), "aud", json!("api://gateway"));
    assert_eq!(call(&auth, Some(&key.token(&entra))).await.status, StatusCode::OK);
    assert_invalid(
        &call(&auth, Some(&key.token(&claims()))).await,
        "not issued for this resource",
    );
}

#[tokio::test]
async fn tokens_of_two_issuers_are_each_checked_against_their_own_keys() {
    let team = TestKey::es256("team");
    let partner = TestKey::eddsa("partner");
    let team_file = jwks_file(&jwks(&[&team]));
    let partner_file = jwks_file(&jwks(&[&partner]));
    let partner_issuer = "https://partner.example.test";
    let spec = spec_with(vec![
        issuer_spec(&team_file),
        IssuerSpec {
            issuer: partner_issuer.to_owned(),
            required_scopes: Vec::new(),
            ..issuer_spec(&partner_file)
        },
    ]);
    let auth = Authenticator::from_spec(&spec, RESOURCE).await.unwrap();
    let answer = call(
        &auth,
        Some(&partner.token(&with(claims(), "iss", json!(partner_issuer)))),
    )
    .await;
    assert_eq!(answer.body["issuer"], partner_issuer);
    // The partner's key cannot sign for the team's issuer.
    let header = json!({"alg": "EdDSA", "kid": "team"});
    assert_invalid(
        &call(&auth, Some(&partner.token_with_header(&header, &claims()))).await,
        "key (`kid`)",
    );
}

// ---- keys served over HTTP: fetched, refreshed on a new key, never hammered ----

/// A local issuer's JWK Set endpoint that counts its reads.
struct JwksServer {
    url: String,
    document: Arc<Mutex<Value>>,
    reads: Arc<AtomicUsize>,
}

async fn jwks_server(document: Value) -> JwksServer {
    let document = Arc::new(Mutex::new(document));
    let reads = Arc::new(AtomicUsize::new(0));
    let (served, counted) = (Arc::clone(&document), Arc::clone(&reads));
    let router = Router::new().route(
        "/certs",
        get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let body = served.lock().unwrap().to_string();
            async move { body }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    JwksServer {
        url: format!("http://{addr}/certs"),
        document,
        reads,
    }
}

fn url_issuer(server: &JwksServer) -> IssuerSpec {
    IssuerSpec {
        jwks_uri: Some(server.url.clone()),
        jwks_file: None,
        ..issuer_spec(&jwks_file(&json!({"keys": []})))
    }
}

#[tokio::test]
async fn keys_from_a_url_verify_and_a_flood_of_unknown_kids_reads_the_set_once() {
    let key = TestKey::es256("k1");
    let server = jwks_server(jwks(&[&key])).await;
    let auth = authenticator(url_issuer(&server)).await;
    assert_eq!(server.reads.load(Ordering::SeqCst), 1, "read at start");
    assert_eq!(call(&auth, Some(&key.token(&claims()))).await.status, StatusCode::OK);
    let calls = (0..50).map(|i| {
        let auth = auth.clone();
        let token = TestKey::es256(&format!("random-{i}")).token(&claims());
        async move { call(&auth, Some(&token)).await.status }
    });
    for status in futures::future::join_all(calls).await {
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // Read at start, so the 30 s limit holds every refresh back.
    assert_eq!(server.reads.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_key_published_after_start_is_fetched_when_a_token_names_it() {
    let old = TestKey::es256("old");
    let new = TestKey::eddsa("new");
    let server = jwks_server(jwks(&[&old])).await;
    let timing = Timing {
        min_refresh: Duration::ZERO,
        ..Timing::default()
    };
    let auth = Authenticator::build(&spec_with(vec![url_issuer(&server)]), RESOURCE, timing)
        .await
        .unwrap();
    assert_invalid(&call(&auth, Some(&new.token(&claims()))).await, "key (`kid`)");
    *server.document.lock().unwrap() = jwks(&[&old, &new]);
    assert_eq!(call(&auth, Some(&new.token(&claims()))).await.status, StatusCode::OK);
    let reads = server.reads.load(Ordering::SeqCst);
    // A known key needs no read.
    assert_eq!(call(&auth, Some(&old.token(&claims()))).await.status, StatusCode::OK);
    assert_eq!(server.reads.load(Ordering::SeqCst), reads);
}

#[tokio::test]
async fn an_issuer_down_at_start_is_read_again_when_a_token_arrives() {
    let key = TestKey::es256("k1");
    let server = jwks_server(json!("not a key set")).await;
    let timing = Timing {
        min_refresh: Duration::ZERO,
        ..Timing::default()
    };
    let auth = Authenticator::build(&spec_with(vec![url_issuer(&server)]), RESOURCE, timing)
        .await
        .expect("a key set that cannot be read at start is a warning");
    *server.document.lock().unwrap() = jwks(&[&key]);
    assert_eq!(call(&auth, Some(&key.token(&claims()))).await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_issuer_never_reached_is_named_as_the_reason() {
    let key = TestKey::es256("k1");
    let server = jwks_server(json!("not a key set")).await;
    let auth = authenticator(url_issuer(&server)).await;
    assert_invalid(
        &call(&auth, Some(&key.token(&claims()))).await,
        "keys cannot be read at the moment",
    );
}

#[tokio::test]
async fn an_old_set_is_read_again_in_the_background_while_its_keys_still_verify() {
    let key = TestKey::es256("k1");
    let server = jwks_server(jwks(&[&key])).await;
    let timing = Timing {
        min_refresh: Duration::ZERO,
        max_age: Duration::ZERO,
    };
    let auth = Authenticator::build(&spec_with(vec![url_issuer(&server)]), RESOURCE, timing)
        .await
        .unwrap();
    assert_eq!(call(&auth, Some(&key.token(&claims()))).await.status, StatusCode::OK);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.reads.load(Ordering::SeqCst) < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the old set was not read again");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- metadata (RFC 9728) ----

#[tokio::test]
async fn protected_resource_metadata_is_served_at_both_well_known_paths() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = authenticator(issuer_spec(&file)).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = app(&auth).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let document: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            document,
            json!({
                "resource": RESOURCE,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["mcp:tools"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
}

// ---- the static bearer token ----

fn static_spec(var: &str) -> HttpAuthSpec {
    HttpAuthSpec {
        token: Some(format!("${{{var}}}")),
        ..HttpAuthSpec::default()
    }
}

#[tokio::test]
async fn the_static_token_admits_its_one_user_on_loopback_only() {
    let token = "s3cr3t-static-token-0123456789abcdef";
    std::env::set_var("ANYGPT_TEST_HTTP_AUTH_TOKEN", token);
    let auth = Authenticator::from_spec(&static_spec("ANYGPT_TEST_HTTP_AUTH_TOKEN"), "http://127.0.0.1:8080/mcp")
        .await
        .unwrap();
    let answer = call(&auth, Some(token)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["subject"], super::STATIC_SUBJECT);
    assert_eq!(answer.body["issuer"], Value::Null);
    assert_eq!(answer.body["sawAuthorization"], false);
    let wrong = call(&auth, Some("s3cr3t-static-token-0123456789abcdeX")).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.challenge.unwrap().contains("error=\"invalid_token\""));
    assert_eq!(call(&auth, None).await.status, StatusCode::UNAUTHORIZED);
    // Registered as a secret: scrubbed from any text that would carry it.
    assert!(!crate::secrets::scrub(&format!("token={token}")).contains(token));
    assert!(auth.check_bind("127.0.0.1:8080".parse().unwrap()).is_ok());
    let err = auth.check_bind("0.0.0.0:8080".parse().unwrap()).unwrap_err();
    assert!(
        err.to_string().contains("bind 127.0.0.1, or configure `issuers`"),
        "{err}"
    );
}

#[tokio::test]
async fn the_static_token_metadata_names_no_authorization_server() {
    std::env::set_var("ANYGPT_TEST_HTTP_AUTH_META", "m3ta-static-token-0123456789abcdef");
    let auth = Authenticator::from_spec(&static_spec("ANYGPT_TEST_HTTP_AUTH_META"), "http://127.0.0.1:8080/mcp")
        .await
        .unwrap();
    assert_eq!(
        call(&auth, None).await.challenge.as_deref(),
        Some("Bearer resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\"")
    );
    let request = Request::get("/.well-known/oauth-protected-resource/mcp")
        .body(Body::empty())
        .unwrap();
    let response = app(&auth).oneshot(request).await.unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
    let document: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        document,
        json!({"resource": "http://127.0.0.1:8080/mcp", "bearer_methods_supported": ["header"]})
    );
}

#[tokio::test]
async fn a_static_token_written_in_the_file_or_too_short_is_refused() {
    let literal = HttpAuthSpec {
        token: Some("s3cr3t-static-token-0123456789abcdef".to_owned()),
        ..HttpAuthSpec::default()
    };
    let err = Authenticator::from_spec(&literal, RESOURCE).await.unwrap_err();
    assert!(err.to_string().contains("must be a reference"), "{err}");
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    std::env::set_var("ANYGPT_TEST_HTTP_AUTH_SHORT", "short");
    let err = Authenticator::from_spec(&static_spec("ANYGPT_TEST_HTTP_AUTH_SHORT"), RESOURCE)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("openssl rand -hex 32"), "{err}");
    let err = Authenticator::from_spec(&static_spec("ANYGPT_TEST_HTTP_AUTH_UNSET"), RESOURCE)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ANYGPT_TEST_HTTP_AUTH_UNSET"), "{err}");
}

// ---- settings checked at start ----

#[tokio::test]
async fn bad_settings_name_the_setting_and_the_fix() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let missing = jwks_file(&json!({}));
    std::fs::remove_file(&missing.path).unwrap();
    let cases: Vec<(HttpAuthSpec, &str)> = vec![
        (HttpAuthSpec::default(), "add `issuers`"),
        (
            HttpAuthSpec {
                token: Some("${X}".to_owned()),
                ..spec_with(vec![issuer_spec(&file)])
            },
            "not both",
        ),
        (
            spec_with(vec![IssuerSpec {
                jwks_uri: Some("http://id.example.test/certs".to_owned()),
                jwks_file: None,
                ..issuer_spec(&file)
            }]),
            "issuers[0].jwksUri: `http://id.example.test/certs` must be https",
        ),
        (
            spec_with(vec![IssuerSpec {
                jwks_uri: Some("https://id.example.test/certs".to_owned()),
                ..issuer_spec(&file)
            }]),
            "not both",
        ),
        (
            spec_with(vec![IssuerSpec {
                jwks_file: None,
                ..issuer_spec(&file)
            }]),
            "issuers[0].jwksUri: is missing",
        ),
        (
            spec_with(vec![issuer_spec(&missing)]),
            "issuers[0].jwksFile: cannot read the JWK Set",
        ),
        (
            spec_with(vec![IssuerSpec {
                jwks_file: Some("keys/jwks.json".to_owned()),
                ..issuer_spec(&file)
            }]),
            "not an absolute path",
        ),
        (
            spec_with(vec![issuer_spec(&file), issuer_spec(&file)]),
            "issuers[1].issuer: `https://id.example.test/realms/team` is listed twice",
        ),
        (
            spec_with(vec![IssuerSpec {
                required_scopes: vec!["two words".to_owned()],
                ..issuer_spec(&file)
            }]),
            "issuers[0].requiredScopes[0]",
        ),
        (
            HttpAuthSpec {
                leeway_seconds: 3600,
                ..spec_with(vec![issuer_spec(&file)])
            },
            "leewaySeconds",
        ),
    ];
    for (spec, expected) in cases {
        let err = Authenticator::from_spec(&spec, RESOURCE).await.unwrap_err();
        assert_eq!(err.code(), crate::ErrorCode::ConfigurationError);
        let text = err.to_string();
        assert!(text.starts_with("discovery.http.auth: "), "{text}");
        assert!(text.contains(expected), "`{text}` does not contain `{expected}`");
    }
    let spec = spec_with(vec![issuer_spec(&file)]);
    for (resource, expected) in [
        ("https://mcp.example.test/mcp#frag", "has a query or fragment"),
        ("mcp.example.test/mcp", "is not an absolute URL"),
        ("ftp://mcp.example.test/mcp", "is not an http(s) URL"),
    ] {
        let err = Authenticator::from_spec(&spec, resource).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("discovery.http: publicUrl: `{resource}` {expected}")),
            "{text}"
        );
    }
}

#[tokio::test]
async fn the_metadata_follows_the_resource_path() {
    let key = TestKey::es256("k1");
    let file = jwks_file(&jwks(&[&key]));
    let auth = Authenticator::from_spec(&spec_with(vec![issuer_spec(&file)]), "http://127.0.0.1:8080/team/mcp")
        .await
        .unwrap();
    assert_eq!(auth.resource(), "http://127.0.0.1:8080/team/mcp");
    let challenge = call(&auth, None).await.challenge.unwrap();
    assert!(
        challenge.contains("resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/team/mcp\""),
        "{challenge}"
    );
    let request = Request::get("/.well-known/oauth-protected-resource/team/mcp")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app(&auth).oneshot(request).await.unwrap().status(), StatusCode::OK);
}
