//! Reading one config or client file into a JSON value: JSON with comments and trailing
//! commas, or YAML, by extension; syntax errors named with their line and column.

use std::path::Path;

use serde_json::Value;

use super::locate::{extension, is_js_config};
use crate::error::{Error, Result};

/// Read a config or client file into a value, by extension (`.json`/`.jsonc` allow comments
/// and trailing commas, as the clients' own files do).
///
/// # Errors
/// An unreadable file, a syntax error (with its line and column), or a TS/JS file.
pub(crate) fn read_document(path: &Path) -> Result<Value> {
    read_document_hashed(path).map(|(value, _)| value)
}

/// [`read_document`], with the SHA-256 of the very bytes parsed: a project file is used only
/// when they are the bytes approved, even if it changed between the approval check and now.
///
/// # Errors
/// As [`read_document`].
pub(crate) fn read_document_hashed(path: &Path) -> Result<(Value, String)> {
    let origin = path.display().to_string();
    if is_js_config(path) {
        return Err(Error::config(
            &origin,
            "(file)",
            "TS/JS configs are evaluated by the npm package (`npx @anygpt/discovery` or the Node API); \
             the native binary reads JSON and YAML",
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::config(&origin, "(file)", format!("cannot read file: {e}")))?;
    let hash = crate::consent::sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::config(
            &origin,
            "(file)",
            "cannot read file: stream did not contain valid UTF-8",
        )
    })?;
    Ok((parse_text(&text, extension(path).as_deref(), &origin)?, hash))
}

/// Parse a file's text by its extension.
fn parse_text(text: &str, extension: Option<&str>, origin: &str) -> Result<Value> {
    // Notepad and other Windows tools save UTF-8 with a byte-order mark; the clients read it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        // Not "no servers": an emptied file is more often a save caught half-way, and a running
        // gateway must keep serving the old config rather than stop every server.
        return Err(Error::config(
            origin,
            "(file)",
            "the file is empty: write a config into it; for no servers, `{\"discovery\": {\"servers\": []}}`",
        ));
    }
    match extension {
        Some("yaml" | "yml") => parse_yaml(text, origin),
        // Everything else is JSON: the clients' files all are, whatever they are called.
        _ => parse_jsonc(text, origin),
    }
}

fn parse_jsonc(text: &str, origin: &str) -> Result<Value> {
    let options = jsonc_parser::ParseOptions::default();
    jsonc_parser::parse_to_serde_value::<Value>(text, &options).map_err(|e| {
        Error::config(
            origin,
            format!("line {} column {}", e.line_display(), e.column_display()),
            format!("{}: fix the JSON syntax there", e.kind()),
        )
    })
}

fn parse_yaml(text: &str, origin: &str) -> Result<Value> {
    serde_norway::from_str::<Value>(text).map_err(|e| {
        let at = e.location().map_or_else(
            || "(document)".to_owned(),
            |l| format!("line {} column {}", l.line(), l.column()),
        );
        // The message repeats the position the path already gives.
        let message = e.to_string();
        let message = message
            .rfind(" at line ")
            .map_or(message.as_str(), |i| &message[..i])
            .to_owned();
        Error::config(origin, at, format!("{message}: fix the YAML syntax there"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_read_past_in_json_and_yaml() {
        let json = parse_text("\u{feff}{\"discovery\": {\"servers\": []}}", Some("json"), "c.json").unwrap();
        assert!(json["discovery"]["servers"].is_array());
        let yaml = parse_text("\u{feff}discovery:\n  servers: []\n", Some("yaml"), "c.yaml").unwrap();
        assert!(yaml["discovery"]["servers"].is_array());
    }

    #[test]
    fn an_empty_file_is_an_error_not_a_config_without_servers() {
        for (text, extension) in [
            ("", Some("json")),
            (" \n\t", Some("jsonc")),
            ("\u{feff}\n", Some("yaml")),
        ] {
            let error = parse_text(text, extension, "c").unwrap_err().to_string();
            assert!(error.contains("the file is empty"), "{text:?}: {error}");
        }
    }
}
