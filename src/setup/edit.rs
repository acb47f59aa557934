//! Edits of JSON(C) text that change one object or array and leave every other byte as it
//! was: comments, key order, indentation, line endings. Done on jsonc-parser's concrete
//! syntax tree, which keeps the trivia the clients' files are full of; a byte-order mark is
//! set aside before parsing and put back after.

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::Value;

use crate::error::{Error, Result};

const BOM: char = '\u{feff}';

/// A file's text parsed twice: as a tree to edit and as a value to read.
pub(crate) struct Document {
    bom: bool,
    pub(crate) root: CstRootNode,
    pub(crate) value: Value,
}

impl Document {
    /// Parse `text`; `origin` names the file in errors, which say the line, column and fix.
    ///
    /// # Errors
    /// `CONFIGURATION_ERROR` for a syntax error, an empty file or a top level that is not an object.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self> {
        let bom = text.starts_with(BOM);
        let body = text.strip_prefix(BOM).unwrap_or(text);
        if body.trim().is_empty() {
            return Err(Error::config(
                origin,
                "(file)",
                "the file is empty: write `{}` into it (or delete it), then run the command again; nothing was written",
            ));
        }
        let syntax = |e: jsonc_parser::errors::ParseError| {
            Error::config(
                origin,
                format!("line {} column {}", e.line_display(), e.column_display()),
                format!(
                    "{}: fix the JSON syntax there, then run the command again; nothing was written",
                    e.kind()
                ),
            )
        };
        let options = ParseOptions::default();
        let value = jsonc_parser::parse_to_serde_value::<Value>(body, &options).map_err(syntax)?;
        if !value.is_object() {
            return Err(Error::config(
                origin,
                "(document)",
                "expected a JSON object at the top of the file; nothing was written",
            ));
        }
        let root = CstRootNode::parse(body, &options).map_err(syntax)?;
        Ok(Self { bom, root, value })
    }

    /// The text with the edits made so far.
    pub(crate) fn text(&self) -> String {
        let body = self.root.to_string();
        if self.bom {
            format!("{BOM}{body}")
        } else {
            body
        }
    }

    /// The object at `keys` below the top, if every step is an object.
    #[cfg(test)]
    pub(crate) fn object_at(&self, keys: &[String]) -> Option<CstObject> {
        let mut object = self.root.object_value()?;
        for key in keys {
            object = object.object_value(key)?;
        }
        Some(object)
    }

    /// The object at `keys`, created (with any missing parent) when absent.
    pub(crate) fn object_at_or_create(&self, keys: &[String]) -> Option<CstObject> {
        let mut object = self.root.object_value_or_create()?;
        for key in keys {
            object = object.object_value_or_create(key)?;
        }
        Some(object)
    }

    /// The value at `keys` below the top.
    pub(crate) fn value_at(&self, keys: &[String]) -> Option<&Value> {
        keys.iter().try_fold(&self.value, |value, key| value.get(key))
    }
}

/// Remove the members `names` of `object` (their comma and line with them) and append
/// `add`, leaving the object's other members, and the rest of the file, as they were.
pub(crate) fn replace_members(object: &CstObject, names: &[String], add: Option<(&str, &Value)>) {
    for name in names {
        if let Some(prop) = object.get(name) {
            prop.remove();
        }
    }
    if let Some((name, value)) = add {
        object.append(name, input(value));
    }
}

/// Append `servers` to `discovery.servers` of a gateway config, creating either when absent.
///
/// # Errors
/// `CONFIGURATION_ERROR` when `discovery` is not an object or `servers` not a list.
pub(crate) fn append_servers(document: &Document, servers: &[Value], origin: &str) -> Result<()> {
    let wrong = |path: &str, expected: &str| {
        Error::config(
            origin,
            path,
            format!("expected {expected}; fix it, then run the command again; nothing was written"),
        )
    };
    let discovery = document
        .object_at_or_create(&["discovery".to_owned()])
        .ok_or_else(|| wrong("discovery", "an object"))?;
    let list = discovery
        .array_value_or_create("servers")
        .ok_or_else(|| wrong("discovery.servers", "a list of servers"))?;
    for server in servers {
        list.append(input(server));
    }
    Ok(())
}

/// A JSON value as the tree's input (numbers keep their text).
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CLIENT: &str = "\u{feff}{\r\n  // my servers\r\n  \"theme\": \"dark\", /* keep */\r\n  \"mcpServers\": {\r\n    \"a\": { \"command\": \"x\" },\r\n    \"b\": {\r\n      \"command\": \"y\", // why\r\n    },\r\n    \"c\": { \"command\": \"z\", \"disabled\": true }\r\n  },\r\n  \"after\": [1, 2,],\r\n}\r\n";

    #[test]
    fn members_are_replaced_and_every_other_byte_kept() {
        let document = Document::parse(CLIENT, "c.json").unwrap();
        let servers = document.object_at(&["mcpServers".into()]).unwrap();
        replace_members(
            &servers,
            &["a".into(), "b".into()],
            Some(("gw", &json!({ "command": "npx", "args": ["-y", "g"] }))),
        );
        let text = document.text();
        let head = "\u{feff}{\r\n  // my servers\r\n  \"theme\": \"dark\", /* keep */\r\n  \"mcpServers\": {\r\n";
        assert!(text.starts_with(head), "{text}");
        assert!(text.ends_with("  },\r\n  \"after\": [1, 2,],\r\n}\r\n"), "{text}");
        let value = Document::parse(&text, "c.json").unwrap().value;
        assert_eq!(
            value["mcpServers"],
            json!({ "c": { "command": "z", "disabled": true }, "gw": { "command": "npx", "args": ["-y", "g"] } })
        );
    }

    #[test]
    fn servers_are_appended_to_a_config_with_comments() {
        let text = "{\n  // mine\n  \"discovery\": { \"servers\": [] }\n}\n";
        let document = Document::parse(text, "g.json").unwrap();
        append_servers(
            &document,
            &[json!({ "name": "a", "connection": { "command": "x" } })],
            "g.json",
        )
        .unwrap();
        let out = document.text();
        assert!(out.starts_with("{\n  // mine\n"), "{out}");
        let value = Document::parse(&out, "g.json").unwrap().value;
        assert_eq!(value["discovery"]["servers"][0]["name"], "a");
        let bare = Document::parse("{}", "g.json").unwrap();
        append_servers(&bare, &[json!({ "name": "b" })], "g.json").unwrap();
        let value = Document::parse(&bare.text(), "g.json").unwrap().value;
        assert_eq!(value, json!({ "discovery": { "servers": [{ "name": "b" }] } }));
    }

    fn parse_error(text: &str) -> String {
        match Document::parse(text, "c.json") {
            Ok(_) => panic!("{text} parsed"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_syntax_error_names_line_column_and_fix() {
        let error = parse_error("{\n  \"a\": 1,\n  \"b\": }\n}");
        assert!(error.starts_with("c.json: line 3 column "), "{error}");
        assert!(error.contains("nothing was written"), "{error}");
        let error = parse_error("[1]");
        assert!(error.contains("expected a JSON object"), "{error}");
    }
}
