//! URLs and errors of remote servers as people (and models) get to see them: in errors, logs
//! and server statuses, which `list_mcp_servers` puts in the model's context. Hosted servers
//! often take an API key in the URL or a header, so a shown URL has no credentials and no
//! query values, and secrets are taken out of any text that quotes them. What counts as a
//! secret, and the scrubbing itself, is `crate::secrets`' (one rule for every transport);
//! this module adds what only URLs need.

use reqwest::Url;

use crate::secrets;

/// `url` fit for an error message, a log or the model's context: no user name or password,
/// query values and random path segments replaced by `***` (hosted servers often take an API
/// key in the query, or in the path: `/mcp/sk-ak-…/sse`).
pub fn shown(url: &Url) -> String {
    let mut url = without_credentials(url);
    let path: Option<Vec<String>> = url.path_segments().map(|segments| {
        segments
            .map(|segment| {
                if secrets::is_secret_path_segment(segment) {
                    secrets::MASK.to_owned()
                } else {
                    segment.to_owned()
                }
            })
            .collect()
    });
    if let Some(path) = path {
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.clear().extend(path);
        }
    }
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
    for secret in secrets::url_secrets(url) {
        text = secrets::replace_token(&text, &secret).into_owned();
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
        let header_secrets = headers
            .into_iter()
            .flat_map(|(name, value)| secrets::setting_secrets(name, value));
        secrets::register_remote(
            "url-text-test",
            &url("https://h/mcp?key=remembered-1&v=1"),
            header_secrets,
        );
        let text = secrets::scrub("fatal: /mcp?key=remembered-1 with Bearer tok-remembered, v=1, true, anygpt-test");
        assert_eq!(text, "fatal: /mcp?key=*** with Bearer ***, v=1, true, anygpt-test");
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
}
