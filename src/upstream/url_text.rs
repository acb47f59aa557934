//! URLs and errors of remote servers as people (and models) get to see them: in errors, logs
//! and server statuses, which `list_mcp_servers` puts in the model's context. Hosted servers
//! often take an API key in the URL or a header, so a shown URL has no credentials and no
//! query values, and secrets are taken out of any text that quotes them. What counts as a
//! secret: a URL's password; a query value or header whose name says credential (`api_key`,
//! `token`, `Authorization`…); and any value shaped like a key (16+ characters mixing letters
//! and digits). Only whole tokens are replaced, so `format=json` never blanks "invalid json".

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};

use reqwest::Url;

/// `url` fit for an error message, a log or the model's context: no user name or password,
/// query values replaced by `***` (hosted servers often take an API key in the query).
pub fn shown(url: &Url) -> String {
    let mut url = without_credentials(url);
    if url.query().is_some() {
        let keys: Vec<String> = url.query_pairs().map(|(key, _)| key.into_owned()).collect();
        url.query_pairs_mut()
            .clear()
            .extend_pairs(keys.iter().map(|key| (key, "***")));
    }
    url.to_string()
}

fn without_credentials(url: &Url) -> Url {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url
}

/// `text` (an error from a library that prints whole URLs, or a server's own message) with
/// every spelling of `url` replaced by [`shown`], its secrets gone wherever they appear (a
/// server may quote the key it refused: "invalid key s3cret"), and rmcp's transport type names
/// left out.
pub fn redact(text: &str, url: &Url) -> String {
    // Park the URL's spellings first so that scrubbing leaves its host and path alone.
    const PARKED: &str = "\u{1}url\u{1}";
    let bare = without_credentials(url);
    let mut text = text.replace(url.as_str(), PARKED).replace(bare.as_str(), PARKED);
    for secret in url_secrets(url) {
        text = replace_token(&text, &secret).into_owned();
    }
    let mut text = text.replace(PARKED, &shown(url));
    // "Transport [rmcp::transport::worker::WorkerTransport<…>] error: " says nothing useful.
    while let Some(start) = text.find("Transport [") {
        let Some(end) = text[start..].find("] error: ") else {
            break;
        };
        text.replace_range(start..start + end + "] error: ".len(), "");
    }
    text
}

/// Shortest value taken for a secret even under a credential's name: shorter ones are not
/// keys, and would blank out parts of words.
const MIN_SECRET_CHARS: usize = 4;
/// Shortest value taken for a key by its shape alone.
const MIN_KEY_SHAPED_CHARS: usize = 16;

/// Whether a query parameter or header name says its value is a credential.
fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "auth",
        "pass",
        "pwd",
        "sig",
        "credential",
        "session",
        "jwt",
        "cookie",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// Whether a value looks like a key whatever its name: long, letters and digits mixed (not
/// a date, a version or a word).
fn shaped_like_a_key(value: &str) -> bool {
    value.chars().count() >= MIN_KEY_SHAPED_CHARS
        && value.chars().any(|c| c.is_ascii_alphabetic())
        && value.chars().any(|c| c.is_ascii_digit())
}

fn is_secret(name: &str, value: &str) -> bool {
    (names_a_secret(name) && value.chars().count() >= MIN_SECRET_CHARS) || shaped_like_a_key(value)
}

/// The password and the secret query values of `url`, as written and as decoded.
fn url_secrets(url: &Url) -> Vec<String> {
    let raw_pairs = url
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
    let decoded_pairs = url
        .query_pairs()
        .map(|(name, value)| (name.into_owned(), value.into_owned()));
    let password = url.password().map(|p| ("password".to_owned(), p.to_owned()));
    longest_first(
        password
            .into_iter()
            .chain(raw_pairs)
            .chain(decoded_pairs)
            .filter(|(name, value)| is_secret(name, value))
            .map(|(_, value)| value),
    )
}

/// Distinct values, longest first, so that a value is never half-replaced through a shorter
/// one it contains.
fn longest_first(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in values {
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// `text` with each whole-token occurrence of `secret` replaced by `***`: the characters
/// around it must not continue a token (`json` in "jsonl" stays). A dot ends a token, so a
/// key at the end of a sentence still goes.
fn replace_token<'t>(text: &'t str, secret: &str) -> Cow<'t, str> {
    let continues = |c: char| c.is_alphanumeric() || "-_~%+".contains(c);
    let mut out = String::new();
    let mut last = 0;
    for (at, _) in text.match_indices(secret) {
        let end = at + secret.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if at < last || before.is_some_and(continues) || after.is_some_and(continues) {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str("***");
        last = end;
    }
    if last == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// Secrets of every remote server opened in this process, longest first: libraries log
/// errors (rmcp: `worker quit with fatal: … /mcp?api_key=…`) where no URL is at hand to
/// redact against, so the log writer scrubs these.
static KNOWN_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember the secrets of `url` and of `headers` (name, value) for [`scrub_known`].
pub fn remember_secrets<'a>(url: &Url, headers: impl Iterator<Item = (&'a str, &'a str)>) {
    // `Authorization` counts by name ("auth"); its scheme word is not part of the secret.
    let header_secrets = headers
        .map(|(name, value)| (name, strip_scheme(value)))
        .filter(|(name, token)| is_secret(name, token))
        .map(|(_, token)| token.to_owned());
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    let merged = longest_first(known.drain(..).chain(url_secrets(url)).chain(header_secrets));
    *known = merged;
}

/// `Bearer abc` → `abc` (any case), so the token alone is found in a text.
fn strip_scheme(value: &str) -> &str {
    for scheme in ["bearer ", "basic ", "token "] {
        if value.len() > scheme.len() && value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return value[scheme.len()..].trim_start();
        }
    }
    value
}

/// `text` with every remembered secret replaced by `***` (whole tokens only).
pub fn scrub_known(text: &str) -> Cow<'_, str> {
    let known = KNOWN_SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    let mut text = Cow::Borrowed(text);
    for secret in known.iter() {
        if let Cow::Owned(scrubbed) = replace_token(&text, secret) {
            text = Cow::Owned(scrubbed);
        }
    }
    text
}

/// An error and its causes: reqwest's own text ("error sending request") leaves out the
/// part a person can act on ("connection refused").
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text = format!("{text}: {inner_text}");
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn shown_urls_carry_no_secrets() {
        let text = shown(&url("https://user:pw@api.example.com/sse?api_key=s3cret&session=abc"));
        assert_eq!(text, "https://api.example.com/sse?api_key=***&session=***");
        assert_eq!(shown(&url("http://h:3001/sse")), "http://h:3001/sse");
    }

    #[test]
    fn library_errors_are_redacted_and_tidied() {
        let secret = url("http://user:pw@127.0.0.1:9/mcp?api_key=s3cret");
        let error =
            "handshake failed: Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: \
                     Client error: error sending request for url (http://127.0.0.1:9/mcp?api_key=s3cret)";
        let text = redact(error, &secret);
        assert!(!text.contains("s3cret") && !text.contains("rmcp::"), "{text}");
        assert!(text.contains("http://127.0.0.1:9/mcp?api_key=***"), "{text}");
    }

    #[test]
    fn remembered_secrets_are_scrubbed_from_any_text() {
        let headers = [
            ("Authorization", "bearer tok-remembered"),
            ("X-Debug", "true"),
            ("X-Client", "anygpt-test"),
        ];
        remember_secrets(&url("https://h/mcp?key=remembered-1&v=1"), headers.into_iter());
        let text = scrub_known("fatal: /mcp?key=remembered-1 with Bearer tok-remembered, v=1, true, anygpt-test");
        assert_eq!(text, "fatal: /mcp?key=*** with Bearer ***, v=1, true, anygpt-test");
        assert!(matches!(scrub_known("nothing secret here"), Cow::Borrowed(_)));
    }

    #[test]
    fn secrets_are_gone_wherever_a_server_quotes_them() {
        let secret = url("https://user:hunter22@h/mcp?api_key=s3cr%2Bt&v=1");
        let text = redact(
            "HTTP 403: invalid key s3cr+t (raw s3cr%2Bt) for /mcp?api_key=s3cr%2Bt&v=1, password hunter22, v=1",
            &secret,
        );
        for leaked in ["s3cr+t", "s3cr%2Bt", "hunter22"] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert!(text.ends_with("v=1"), "{text}");
    }

    #[test]
    fn ordinary_query_values_leave_the_message_alone() {
        // Not credentials by name or shape: the message and the shown URL keep their words.
        let plain = url("http://127.0.0.1:9/remote/mcp?transport=http&format=json&tenant=remote&since=2026-01-01");
        let text = redact("GET http://127.0.0.1:9/remote/mcp?transport=http&format=json&tenant=remote&since=2026-01-01: invalid json from remote", &plain);
        assert!(text.starts_with("GET http://127.0.0.1:9/remote/mcp?"), "{text}");
        assert!(text.ends_with("invalid json from remote"), "{text}");
        // A value shaped like a key goes whatever its name.
        let keyed = url("https://h/mcp?x=a1b2c3d4e5f6g7h8i9");
        assert_eq!(redact("refused a1b2c3d4e5f6g7h8i9.", &keyed), "refused ***.");
    }

    #[test]
    fn only_whole_tokens_are_replaced() {
        assert_eq!(replace_token("json jsonl (json)", "json"), "*** jsonl (***)");
        assert!(matches!(replace_token("nothing", "json"), Cow::Borrowed(_)));
    }
}
