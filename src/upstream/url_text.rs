//! URLs and errors of remote servers as people (and models) get to see them: in errors, logs
//! and server statuses, which
//! `list_mcp_servers` puts in the model's context. Hosted servers often take an API key in
//! the URL, so credentials and query values never appear.

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

/// `text` (an error from a library that prints whole URLs) with every spelling of `url`
/// replaced by [`shown`], and rmcp's transport type names left out.
pub fn redact(text: &str, url: &Url) -> String {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    let safe = shown(url);
    let mut text = text.replace(url.as_str(), &safe).replace(bare.as_str(), &safe);
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
}
