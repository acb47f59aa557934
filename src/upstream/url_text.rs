//! URLs and errors of remote servers as people (and models) get to see them: in errors, logs
//! and server statuses, which
//! `list_mcp_servers` puts in the model's context. Hosted servers often take an API key in
//! the URL, so credentials and query values never appear.

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};

use reqwest::Url;

/// `url` fit for an error message, a log or the model's context: no user name or password,
/// query values replaced by `***` (hosted servers often take an API key in the query).
pub fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    if url.query().is_some() {
        let keys: Vec<String> = url.query_pairs().map(|(key, _)| key.into_owned()).collect();
        url.query_pairs_mut()
            .clear()
            .extend_pairs(keys.iter().map(|key| (key, "***")));
    }
    url.to_string()
}

/// `text` (an error from a library that prints whole URLs, or a server's own message) with
/// every spelling of `url` replaced by [`shown`], its secrets gone wherever they appear (a
/// server may quote the key it refused: "invalid key s3cret"), and rmcp's transport type names
/// left out.
pub fn redact(text: &str, url: &Url) -> String {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    let safe = shown(url);
    let mut text = text.replace(url.as_str(), &safe).replace(bare.as_str(), &safe);
    for secret in secrets(url) {
        text = text.replace(&secret, "***");
    }
    // "Transport [rmcp::transport::worker::WorkerTransport<…>] error: " says nothing useful.
    while let Some(start) = text.find("Transport [") {
        let Some(end) = text[start..].find("] error: ") else {
            break;
        };
        text.replace_range(start..start + end + "] error: ".len(), "");
    }
    text
}

/// Shortest value treated as a secret: shorter ones (`v=1`, `format=json`) would blank out
/// ordinary words of the message, and are not keys.
const MIN_SECRET_CHARS: usize = 4;

/// The password and every query value of `url`, as written and as decoded, longest first so
/// a value is never half-replaced through a shorter one it contains.
fn secrets(url: &Url) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let raw_values = url
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.split_once('='));
    for candidate in url
        .password()
        .map(str::to_owned)
        .into_iter()
        .chain(raw_values.map(|(_, value)| value.to_owned()))
        .chain(url.query_pairs().map(|(_, value)| value.into_owned()))
    {
        if candidate.chars().count() >= MIN_SECRET_CHARS && !out.contains(&candidate) {
            out.push(candidate);
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// Shortest header value treated as a secret.
const MIN_HEADER_SECRET_CHARS: usize = 8;

/// Secrets of every remote server opened in this process, longest first: libraries log
/// errors (rmcp: `worker quit with fatal: … /mcp?api_key=…`) where no URL is at hand to
/// redact against, so the log writer scrubs these.
static KNOWN_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember `url`'s secrets (password, query values) and `header_values` for [`scrub_known`].
pub fn remember_secrets<'a>(url: &Url, header_values: impl Iterator<Item = &'a str>) {
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    // Header values are secrets only when long enough to be keys: `X-Debug: true` is not.
    let headers = header_values
        .flat_map(|value| [value, value.strip_prefix("Bearer ").unwrap_or_default()])
        .filter(|value| value.chars().count() >= MIN_HEADER_SECRET_CHARS);
    for secret in secrets(url).into_iter().chain(headers.map(str::to_owned)) {
        if secret.chars().count() >= MIN_SECRET_CHARS && !known.contains(&secret) {
            known.push(secret);
        }
    }
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every remembered secret replaced by `***`.
pub fn scrub_known(text: &str) -> Cow<'_, str> {
    let known = KNOWN_SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    let mut text = Cow::Borrowed(text);
    for secret in known.iter() {
        if text.contains(secret.as_str()) {
            text = Cow::Owned(text.replace(secret.as_str(), "***"));
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
        remember_secrets(
            &url("https://h/mcp?key=remembered-1&v=1"),
            ["Bearer tok-remembered"].into_iter(),
        );
        let text = scrub_known("fatal: /mcp?key=remembered-1 with Bearer tok-remembered, v=1");
        assert_eq!(text, "fatal: /mcp?key=*** with ***, v=1");
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
        // Short values are not keys and would blank out ordinary words.
        assert!(text.ends_with("v=1"), "{text}");
    }
}
