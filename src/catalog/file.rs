//! Offline catalogs: a JSON Lines file of tools (DESIGN §9), read without any server.
//!
//! One tool a line: `{"server":"…","name":"…","description":"…","inputSchema":{…}}`.
//! Other fields are ignored; blank lines are skipped; a repeated `server:name` keeps the
//! first line (catalog files are de-duplicated on that key). Servers keep the order their
//! tools appear in. Used by `search --catalog` and the search evaluation.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Catalog;
use crate::error::{Error, Result};
use crate::rules::RuleSet;

#[derive(Debug, Deserialize)]
struct Line {
    server: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "inputSchema")]
    input_schema: Option<Map<String, Value>>,
}

/// Read a catalog file. Errors (`CONFIGURATION_ERROR`) name the file and the line.
pub fn load(path: &Path) -> Result<Catalog> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::config(&origin, "(file)", format!("cannot read file: {e}")))?;
    parse(&text, &origin)
}

/// Parse catalog text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Catalog> {
    let mut servers: BTreeMap<String, Vec<Tool>> = BTreeMap::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("line {}", number + 1);
        let tool: Line = serde_json::from_str(line).map_err(|e| Error::config(origin, at(), e.to_string()))?;
        if tool.server.is_empty() || tool.name.is_empty() {
            return Err(Error::config(origin, at(), "`server` and `name` must not be empty"));
        }
        if !seen.insert((tool.server.clone(), tool.name.clone())) {
            continue;
        }
        let schema = tool.input_schema.unwrap_or_default();
        let mut entry = Tool::new(tool.name, tool.description.unwrap_or_default(), Arc::new(schema));
        if entry.description.as_deref() == Some("") {
            entry.description = None;
        }
        servers.entry(tool.server).or_default().push(entry);
    }
    let mut catalog = Catalog::default();
    let rules = RuleSet::default();
    for (server, tools) in servers {
        catalog.set_server_tools(&server, tools, &rules);
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_servers_and_tools() {
        let text = concat!(
            r#"{"server":"geo","name":"geocode","description":"Address to coordinates","inputSchema":{"type":"object"}}"#,
            "\n\n",
            r#"{"server":"fs","name":"read_file","description":"Read a file","extra":1}"#,
            "\n",
            r#"{"server":"geo","name":"reverse_geocode"}"#,
            "\n",
            r#"{"server":"geo","name":"geocode","description":"a duplicate, ignored"}"#,
        );
        let catalog = parse(text, "t.jsonl").unwrap();
        let geo: Vec<&str> = catalog
            .server_tools("geo")
            .unwrap()
            .iter()
            .map(crate::catalog::ToolEntry::name)
            .collect();
        assert_eq!(geo, ["geocode", "reverse_geocode"]);
        assert_eq!(
            catalog.tool("geo", "geocode").unwrap().description(),
            "Address to coordinates"
        );
        assert_eq!(catalog.tool("fs", "read_file").unwrap().summary, "Read a file");
        assert_eq!(catalog.tools().count(), 3);
    }

    #[test]
    fn a_bad_line_names_file_and_line() {
        let text = "{\"server\":\"a\",\"name\":\"b\"}\n{\"server\":\"a\"}\n";
        let message = parse(text, "cat.jsonl").unwrap_err().to_string();
        assert!(
            message.starts_with("cat.jsonl: line 2: missing field `name`"),
            "{message}"
        );
        let message = parse("not json", "cat.jsonl").unwrap_err().to_string();
        assert!(message.starts_with("cat.jsonl: line 1: "), "{message}");
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let message = load(Path::new("/nonexistent/catalog.jsonl")).unwrap_err().to_string();
        assert!(
            message.starts_with("/nonexistent/catalog.jsonl: (file): cannot read file"),
            "{message}"
        );
    }
}
