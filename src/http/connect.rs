//! `/connect/<server>` and `/connect/callback`: the browser's side of a per-user sign-in
//! (`connection.oauth.perUser`; the flow is `upstream::per_user`'s).
//!
//! No bearer token here: a browser follows the link. The link's `state` is the authority — a
//! random value the gateway gave one caller for one server, kept in the store for ten minutes
//! and spent when continued — so any replica answers every route. Opening `/connect/<server>`
//! shows a page naming the gateway user the link is for and asking the person to continue
//! (spending nothing, visiting no authorization server); continuing (a POST from that page in
//! that browser, tied to it by a cookie) spends the state, gives the browser a second cookie
//! and redirects only to the authorization endpoint the server's metadata names;
//! `/connect/callback`, only in the browser holding that second cookie, takes the sign-in its
//! `state` names (spent too), exchanges the code and says so on a small page.
//!
//! Why: a sign-in's account serves the calls of the caller its link was made for. Without the
//! page, any site the person visits could load a link made for someone else (an image, a
//! redirect), and an authorization server that remembers the person would sign them in without
//! a click. Without the second cookie, the link's holder could continue it and send the
//! authorization address on instead. Both stop there; a person who continues a link made for
//! someone else, despite the page naming that user, is not stopped (that needs the browser
//! signed in to the team's identity provider too).
//! Off loopback every step needs an https origin (`discovery.http.publicUrl`): on plain http,
//! anyone on the way could set the cookies that tie a sign-in to its browser.
//! Every query parameter is bounded, a repeated one refused, and every text on a page escaped;
//! of a refusal, a page shows the error code only (its description goes to the log).
//! Pages are never cached or framed, and never sent as a referrer to another origin.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::engine::{Engine, SIGN_IN_TTL};

/// Longest server name in a path.
const MAX_SERVER_BYTES: usize = 256;
/// Longest query string read.
const MAX_QUERY_BYTES: usize = 8 * 1024;
/// Longest value of each parameter read.
const MAX_VALUE_BYTES: usize = 4 * 1024;

/// What the routes share: the engine (specs, store), the origin links are served under, and
/// what that origin allows, read from it once.
#[derive(Clone)]
struct Connect {
    engine: Engine,
    origin: Arc<str>,
    /// What `origin` allows, read once.
    site: Site,
}

/// What the origin links are served under allows.
#[derive(Clone, Copy)]
struct Site {
    /// `https:`: the cookies are `__Host-` and `Secure`.
    https: bool,
    /// Plain http off loopback: every step is refused ([`Connect::insecure`]).
    plain_http_off_loopback: bool,
}

impl Site {
    fn of(origin: &str) -> Self {
        let url = reqwest::Url::parse(origin).ok();
        let https = url.as_ref().is_some_and(|url| url.scheme() == "https");
        Self {
            https,
            plain_http_off_loopback: url.is_some_and(|url| !https && !crate::config::is_loopback_host(&url)),
        }
    }
}

impl Connect {
    /// The page refusing every sign-in step when the origin is plain http off loopback: any
    /// host on the way, or a site on a sibling name, could set the cookies that tie a sign-in
    /// to its browser (`__Host-` cookies need https).
    fn insecure(&self) -> Option<Response> {
        // Logged once per process: every request of a link would say it again.
        static SAID: std::sync::Once = std::sync::Once::new();
        if !self.site.plain_http_off_loopback {
            return None;
        }
        SAID.call_once(|| {
            tracing::warn!(origin = %self.origin, "per-user sign-ins refused: the gateway's address is plain http; set discovery.http.publicUrl to its https address");
        });
        Some(page(
            StatusCode::FORBIDDEN,
            "Signing in through this gateway needs https: set discovery.http.publicUrl to the https \
             address it is reached at (behind a proxy that ends TLS), or serve it on loopback.",
        ))
    }
}

/// The routes, served under `origin` (`scheme://host[:port]`).
pub(super) fn router(engine: &Engine, origin: Arc<str>) -> Router {
    let site = Site::of(&origin);
    Router::new()
        .route("/connect/callback", get(callback))
        .route("/connect/{server}", get(start).post(proceed))
        .with_state(Connect {
            engine: engine.clone(),
            origin,
            site,
        })
}

/// The parameters of `query` (or of a form's body, the same encoding) named in `names`, each at most once and bounded; `Err` says which.
fn params<const N: usize>(query: &str, names: [&str; N]) -> Result<[Option<String>; N], String> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(format!("the address is longer than {MAX_QUERY_BYTES} bytes"));
    }
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    let parsed = reqwest::Url::parse(&format!("http://gateway/?{query}")).map_err(|e| e.to_string())?;
    for (name, value) in parsed.query_pairs() {
        let Some(i) = names.iter().position(|n| *n == name) else {
            continue;
        };
        if found[i].is_some() {
            return Err(format!("`{}` is given twice", names[i]));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!("`{}` is longer than {MAX_VALUE_BYTES} bytes", names[i]));
        }
        found[i] = Some(value.into_owned());
    }
    Ok(found)
}

/// `/connect/<server>?state=…`: a page naming whom the link is for, asking to continue. Nothing
/// is spent and no authorization server is visited: a page elsewhere that loads the link (an
/// image, a frame, a redirect) signs nobody in with the browser's session there.
async fn start(State(connect): State<Connect>, Path(server): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = connect.insecure() {
        return refused;
    }
    let [state] = match params(uri.query().unwrap_or_default(), ["state"]) {
        Ok(found) => found,
        Err(why) => return malformed("link", &why),
    };
    let state = match link_state(&server, state) {
        Ok(state) => state,
        Err((status, text)) => return page(status, text),
    };
    let Some(caller) = connect.engine.sign_in_caller(&server, &state).await else {
        return not_here(&server);
    };
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) => return page(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let cookie = Cookie::link(connect.site.https, &state);
    // The link opened again in this browser (a client that opened it, and the person too):
    // the same value, so the first tab's Continue still counts.
    let confirm = cookie
        .value(&headers)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| crate::hash::random_hex(32));
    // `same-origin`, not `no-referrer`: under the latter a browser sends `Origin: null` with
    // the page's own form, which `proceed` would refuse.
    let mut response = html(
        StatusCode::OK,
        &ask_page(&server, &caller, &state, &confirm),
        "same-origin",
    );
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie.set(&confirm, SIGN_IN_TTL.as_secs()));
    response
}

/// The confirmation page: whom the link is for, what continuing does, a box to tick and a
/// button (two actions in two places: a page that swaps this one in under a double click does
/// not get both). The form posts to this same address (no `action`) with the link's state and
/// this page's `confirm` value, which the browser also holds as a cookie only this origin's
/// pages send.
fn ask_page(server: &str, caller: &str, state: &str, confirm: &str) -> String {
    let (server, caller) = (html_escape(&crate::secrets::scrub(server)), html_escape(caller));
    format!(
        "<!doctype html><meta charset=utf-8><title>anygpt-discovery</title>\
         <p>Sign in to <b>{server}</b> for the gateway user <b>{caller}</b>?</p>\
         <p>Continue only if you are {caller}. The {server} account you sign in with next is used \
         for that user's calls: a link somebody else sent you would give them your account.</p>\
         <form method=post><input type=hidden name=state value=\"{state}\">\
         <input type=hidden name=confirm value=\"{confirm}\">\
         <p><label><input type=checkbox name=me value=yes required> I am {caller}</label></p>\
         <p><button type=submit>Continue</button></p></form>",
        state = html_escape(state),
    )
}

/// `POST /connect/<server>` from the confirmation page: take the link's state and send the
/// browser to the authorization endpoint the server's metadata names. Only from the page this
/// browser was shown: the `confirm` value must be the one its cookie holds (a cookie sent only
/// with this origin's own requests), and a browser's `Origin`/`Sec-Fetch-Site`, when it sends
/// them, must say this origin.
async fn proceed(
    State(connect): State<Connect>,
    Path(server): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = connect.insecure() {
        return refused;
    }
    if body.len() > MAX_QUERY_BYTES {
        return page(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("This sign-in form is longer than {MAX_QUERY_BYTES} bytes."),
        );
    }
    let form = String::from_utf8_lossy(&body);
    let [state, confirm, me] = match params(&form, ["state", "confirm", "me"]) {
        Ok(found) => found,
        Err(why) => return malformed("form", &why),
    };
    let state = match link_state(&server, state) {
        Ok(state) => state,
        Err((status, text)) => return page(status, text),
    };
    if me.as_deref() != Some("yes") {
        return page(
            StatusCode::BAD_REQUEST,
            "Tick \"I am …\" to continue, if that is you: the sign-in is for the user the page names.",
        );
    }
    if let Some(why) = other_site(&headers, &connect.origin) {
        tracing::info!(%server, "a sign-in was continued from another site: {why}");
        return page(StatusCode::FORBIDDEN, FROM_ELSEWHERE);
    }
    let cookie = Cookie::link(connect.site.https, &state);
    if !cookie.holds(&headers, confirm.as_deref().unwrap_or_default()) {
        tracing::info!(%server, "a sign-in was continued without the page this browser was shown");
        return page(StatusCode::FORBIDDEN, FROM_ELSEWHERE);
    }
    // What ties the callback to this browser: the authorization address may be sent on to
    // somebody else, who would otherwise sign in for this link's caller.
    let browser = crate::hash::random_hex(32);
    let redirect_uri = format!("{}/connect/callback", connect.origin);
    let digest = crate::hash::sha256_hex(browser.as_bytes());
    let Some(address) = connect
        .engine
        .sign_in_address(&server, &state, &redirect_uri, &digest)
        .await
    else {
        return not_here(&server);
    };
    let authorization = match address {
        Ok(authorization) => authorization,
        Err(error) => {
            tracing::info!(%server, "a sign-in link was refused: {error}");
            return page(StatusCode::BAD_REQUEST, &error.to_string());
        }
    };
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, authorization.address),
            (header::CACHE_CONTROL, "no-store".to_owned()),
            (header::REFERRER_POLICY, "no-referrer".to_owned()),
        ],
    )
        .into_response();
    let cookies = response.headers_mut();
    cookies.append(header::SET_COOKIE, cookie.set("", 0));
    cookies.append(
        header::SET_COOKIE,
        // Named by the authorization request's state, which the callback brings back.
        Cookie::sign_in(connect.site.https, &authorization.state).set(&browser, SIGN_IN_TTL.as_secs()),
    );
    response
}

/// What a callback in a browser that did not continue the sign-in is told.
const OTHER_BROWSER: &str = "This sign-in was started in another browser, so it is not finished here. \
     If it is yours, open the sign-in link your client showed you in this browser.";

/// What a continuation not made from the gateway's own page in this browser is told.
const FROM_ELSEWHERE: &str = "This sign-in was not continued from the page the gateway showed in this browser. \
     Open the sign-in link yourself and press Continue there.";

/// The link's `state`, if `server` and it are well formed; else what the page says why.
fn link_state(server: &str, state: Option<String>) -> Result<String, (StatusCode, &'static str)> {
    if server.len() > MAX_SERVER_BYTES {
        return Err((StatusCode::NOT_FOUND, "No such sign-in."));
    }
    state.filter(|s| !s.is_empty()).ok_or((
        StatusCode::BAD_REQUEST,
        "This sign-in link has no state: use the whole link your client showed.",
    ))
}

/// The page for a sign-in `what` (link, form) whose parameters are malformed.
fn malformed(what: &str, why: &str) -> Response {
    page(
        StatusCode::BAD_REQUEST,
        &format!("This sign-in {what} is malformed: {why}."),
    )
}

fn not_here(server: &str) -> Response {
    page(
        StatusCode::NOT_FOUND,
        &format!("{server} is not a server you sign in to here."),
    )
}

/// The header (name and value, for the log) by which a browser says the request came from
/// another site: `Origin` (sent with every POST by current browsers) other than `origin`, or
/// `Sec-Fetch-Site` other than `same-origin`. `None` for a request with neither: not a
/// browser's cross-site form, and the cookie check still holds.
fn other_site(headers: &HeaderMap, origin: &str) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return Some(format!("Sec-Fetch-Site: {}", String::from_utf8_lossy(site.as_bytes())));
        }
    }
    let sent = headers.get(header::ORIGIN)?.to_str().unwrap_or_default();
    let same = match (reqwest::Url::parse(sent), reqwest::Url::parse(origin)) {
        (Ok(sent), Ok(ours)) => sent.origin() == ours.origin(),
        _ => false,
    };
    (!same).then(|| format!("Origin: {}", crate::text::cut_chars(sent, 200)))
}

/// A cookie that ties one browser's steps of one sign-in together, named after the state it is
/// for (two sign-ins in two tabs do not undo each other). `__Host-` on https: no other origin,
/// not even a subdomain, can set it.
struct Cookie {
    name: String,
    attributes: String,
}

impl Cookie {
    /// The link page's: its form counts only with it. `SameSite=Strict`: no other site's page
    /// makes the browser send it.
    fn link(https: bool, state: &str) -> Self {
        Self::new(https, "connect", state, "Strict")
    }

    /// The continued sign-in's: its callback counts only with it. `SameSite=Lax`: the callback
    /// is the authorization server's redirect, a navigation from its site.
    fn sign_in(https: bool, request_state: &str) -> Self {
        Self::new(https, "signin", request_state, "Lax")
    }

    fn new(https: bool, kind: &str, state: &str, same_site: &str) -> Self {
        let id = &crate::hash::sha256_hex(state.as_bytes())[..16];
        if https {
            Self {
                name: format!("__Host-anygpt-{kind}-{id}"),
                attributes: format!("Path=/; Secure; HttpOnly; SameSite={same_site}"),
            }
        } else {
            Self {
                name: format!("anygpt-{kind}-{id}"),
                attributes: format!("Path=/connect; HttpOnly; SameSite={same_site}"),
            }
        }
    }

    /// The `Set-Cookie` value holding `value` for `max_age` seconds (0: remove it).
    fn set(&self, value: &str, max_age: u64) -> HeaderValue {
        HeaderValue::from_str(&format!(
            "{}={value}; Max-Age={max_age}; {}",
            self.name, self.attributes
        ))
        .expect("a cookie of hex digits and fixed words is a header value")
    }

    /// Whether the request's cookies hold this cookie with `value` (not empty).
    fn holds(&self, headers: &HeaderMap, value: &str) -> bool {
        !value.is_empty() && self.holds_digest(headers, &crate::hash::sha256_hex(value.as_bytes()))
    }

    /// Whether the request's cookies hold this cookie with a value whose SHA-256 (hex) is
    /// `digest`. Compared as digests, so the time taken says nothing of the value.
    fn holds_digest(&self, headers: &HeaderMap, digest: &str) -> bool {
        self.values(headers)
            .any(|sent| !sent.is_empty() && crate::hash::sha256_hex(sent) == digest)
    }

    /// The value this browser holds, if one (the first).
    fn value(&self, headers: &HeaderMap) -> Option<String> {
        self.values(headers)
            .next()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// Every value the request's cookies give this cookie. Read as bytes: another cookie of
    /// the browser's with a non-ASCII value (one a sibling site may set) must not hide ours.
    fn values<'h>(&'h self, headers: &'h HeaderMap) -> impl Iterator<Item = &'h [u8]> + 'h {
        headers
            .get_all(header::COOKIE)
            .iter()
            .flat_map(|h| h.as_bytes().split(|&b| b == b';'))
            .filter_map(|pair| {
                let at = pair.iter().position(|&b| b == b'=')?;
                let (name, value) = (pair[..at].trim_ascii(), &pair[at + 1..]);
                (name == self.name.as_bytes()).then_some(value.trim_ascii())
            })
    }
}

/// `/connect/callback?code=…&state=…[&iss=…]` (or `error=…`): finish the sign-in.
async fn callback(State(connect): State<Connect>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = connect.insecure() {
        return refused;
    }
    let [code, state, issuer, error, description] = match params(
        uri.query().unwrap_or_default(),
        ["code", "state", "iss", "error", "error_description"],
    ) {
        Ok(found) => found,
        Err(why) => return malformed("answer", &why),
    };
    let Some(state) = state.filter(|s| !s.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "This sign-in answer has no state.");
    };
    // Read, checked against this browser, then spent whatever the answer (a state works
    // once): a request from another browser leaves the sign-in to the one that started it.
    let pending = match connect.engine.pending_sign_in(&state).await {
        Ok(flow) => flow,
        Err(error) => return page(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let cookie = Cookie::sign_in(connect.site.https, &state);
    if !cookie.holds_digest(&headers, pending.browser()) {
        tracing::info!(server = %pending.server(), "a sign-in came back to a browser that did not start it");
        return page(StatusCode::FORBIDDEN, OTHER_BROWSER);
    }
    let flow = match connect.engine.sign_in_flow(&state).await {
        Ok(flow) => flow,
        Err(error) => return page(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let server = flow.server().to_owned();
    if let Some(error) = error {
        // The description is the log's, not the page's: whoever holds a flow's state (their
        // own) can write one, and the page is the gateway's, which a person trusts.
        let description = crate::secrets::scrub(description.as_deref().unwrap_or_default()).into_owned();
        tracing::info!(%server, %error, %description, "the authorization server refused a sign-in");
        return page(
            StatusCode::OK,
            &format!(
                "Signing in to {server} was refused ({}). Call the tool again for a new link.",
                oauth_error_code(&error).unwrap_or("an error the authorization server named")
            ),
        );
    }
    let Some(code) = code.filter(|c| !c.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "This sign-in answer has no code.");
    };
    let Some(finished) = connect
        .engine
        .finish_sign_in(&flow, &code, &state, issuer.as_deref())
        .await
    else {
        return page(
            StatusCode::NOT_FOUND,
            &format!("{server} is no longer a server you sign in to here."),
        );
    };
    match finished {
        Ok(()) => page(
            StatusCode::OK,
            &format!("Signed in to {server}. Go back to your client: the call runs now (or call the tool again)."),
        ),
        Err(error) => {
            tracing::warn!(%server, "a per-user sign-in failed: {error}");
            page(StatusCode::BAD_GATEWAY, &error.to_string())
        }
    }
}

/// `error` if it reads as an OAuth error code (the registered ones, RFC 6749 §4.1.2.1, are
/// short words of letters and `_`): a page shows nothing else an answer carries.
fn oauth_error_code(error: &str) -> Option<&str> {
    (!error.is_empty()
        && error.len() <= 64
        && error
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
    .then_some(error)
}

/// A small page saying `text` (escaped; scrubbed of registered secrets).
fn page(status: StatusCode, text: &str) -> Response {
    let text = crate::secrets::scrub(text);
    html(
        status,
        &format!(
            "<!doctype html><meta charset=utf-8><title>anygpt-discovery</title><p>{}</p>",
            html_escape(&text)
        ),
        "no-referrer",
    )
}

/// `body` as a page never cached or framed (no clickjacking the confirmation's button), running
/// no script, with the referrer policy `referrer`.
fn html(status: StatusCode, body: &str, referrer: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, referrer),
        ],
        body.to_owned(),
    )
        .into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_bounded_and_given_once() {
        let [code, state] = params("code=a&state=b&other=x", ["code", "state"]).unwrap();
        assert_eq!((code.as_deref(), state.as_deref()), (Some("a"), Some("b")));
        assert_eq!(
            params("state=a&state=b", ["state"]).unwrap_err(),
            "`state` is given twice"
        );
        let long = format!("state={}", "a".repeat(MAX_VALUE_BYTES + 1));
        assert!(params(&long, ["state"]).unwrap_err().contains("longer than"));
    }

    #[test]
    fn only_an_error_code_of_an_authorization_answer_reaches_its_page() {
        assert_eq!(oauth_error_code("access_denied"), Some("access_denied"));
        assert_eq!(
            oauth_error_code("Your session expired: sign in at https://evil.example"),
            None
        );
        assert_eq!(oauth_error_code(&"a".repeat(65)), None);
        assert_eq!(oauth_error_code(""), None);
    }

    #[test]
    fn a_continuation_counts_only_with_this_links_cookie_and_value() {
        let cookie = Cookie::link(false, "state-a");
        let set = cookie.set("c0ffee", SIGN_IN_TTL.as_secs());
        let set = set.to_str().unwrap();
        assert!(
            set.starts_with("anygpt-connect-") && set.contains("HttpOnly; SameSite=Strict"),
            "{set}"
        );
        let name = set.split('=').next().unwrap();
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::COOKIE, format!("other=1; {name}={value}").parse().unwrap());
            headers
        };
        assert!(cookie.holds(&with("c0ffee"), "c0ffee"));
        assert!(!cookie.holds(&with("c0ffee"), "c0ffef"), "another value");
        assert!(!cookie.holds(&with(""), ""), "an empty value never counts");
        assert!(
            !cookie.holds(&HeaderMap::new(), "c0ffee"),
            "no cookie: a page elsewhere posted the form"
        );
        let other = Cookie::link(false, "state-b");
        assert!(!other.holds(&with("c0ffee"), "c0ffee"), "another link's cookie");
        let https = Cookie::link(true, "state-a");
        let set = https.set("", 0);
        let set = set.to_str().unwrap();
        assert!(
            set.starts_with("__Host-anygpt-connect-") && set.contains("Path=/; Secure"),
            "{set}"
        );
        assert!(set.contains("Max-Age=0"));
    }

    #[test]
    fn a_browser_saying_another_site_is_refused() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let ours = "https://mcp.example.com:443";
        assert_eq!(
            other_site(&headers(&[]), ours),
            None,
            "not a browser: the cookie decides"
        );
        assert_eq!(
            other_site(
                &headers(&[("origin", "https://mcp.example.com"), ("sec-fetch-site", "same-origin")]),
                ours
            ),
            None
        );
        let evil = other_site(&headers(&[("origin", "https://evil.example")]), ours);
        assert_eq!(evil.as_deref(), Some("Origin: https://evil.example"));
        assert!(other_site(&headers(&[("origin", "null")]), ours).is_some());
        assert!(other_site(&headers(&[("origin", "http://mcp.example.com")]), ours).is_some());
        assert!(other_site(&headers(&[("sec-fetch-site", "cross-site")]), ours).is_some());
        assert!(other_site(&headers(&[("sec-fetch-site", "same-site")]), ours).is_some());
    }

    #[test]
    fn sign_ins_need_https_off_loopback() {
        assert!(!Site::of("https://mcp.example.com").plain_http_off_loopback);
        assert!(!Site::of("http://127.0.0.1:8080").plain_http_off_loopback);
        assert!(!Site::of("http://[::1]:8080").plain_http_off_loopback);
        assert!(!Site::of("http://localhost:8080").plain_http_off_loopback);
        assert!(Site::of("http://10.0.0.5:8080").plain_http_off_loopback);
        assert!(Site::of("http://mcp.internal").plain_http_off_loopback);
    }

    #[test]
    fn another_cookie_of_any_bytes_hides_nothing_and_the_first_value_is_reused() {
        let cookie = Cookie::link(false, "state-a");
        let mut headers = HeaderMap::new();
        let line = format!("sibling=caf\u{e9}; {}=c0ffee; x", cookie.name);
        headers.insert(header::COOKIE, HeaderValue::from_bytes(line.as_bytes()).unwrap());
        assert!(cookie.holds(&headers, "c0ffee"));
        assert_eq!(cookie.value(&headers).as_deref(), Some("c0ffee"));
        assert_eq!(Cookie::link(false, "state-b").value(&headers), None);
    }

    #[test]
    fn the_confirmation_names_the_caller_escaped_and_posts_to_itself() {
        let text = ask_page("gh<x>", "https://id.example#\"alice\"", "ab\"cd", "c0ffee");
        assert!(
            text.contains("for the gateway user <b>https://id.example#&quot;alice&quot;</b>"),
            "{text}"
        );
        assert!(text.contains("<b>gh&lt;x&gt;</b>"));
        assert!(text.contains("<form method=post>"), "no action: the same address");
        assert!(text.contains("name=state value=\"ab&quot;cd\""));
        assert!(text.contains("name=confirm value=\"c0ffee\""));
        assert!(
            text.contains("<input type=checkbox name=me value=yes required> I am https://id.example#&quot;alice&quot;")
        );
    }

    #[test]
    fn page_text_is_escaped() {
        assert_eq!(html_escape("<script>\"x\"&'"), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
    }
}
