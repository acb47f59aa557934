//! Argument validation against a tool's `inputSchema`, before the call leaves the gateway.
//!
//! Validators are compiled once per tool version (keyed by its content hash) and kept in a
//! `moka` cache. A schema that does not compile (servers publish odd ones) disables validation
//! for that tool with a warning: the server still checks its own input.

use std::sync::Arc;

use serde_json::Value;

use crate::catalog::ToolEntry;
use crate::error::Error;

/// Most problems listed in one `VALIDATION_ERROR`.
const MAX_PROBLEMS: usize = 20;

/// Compiled validators by a hash of (server, tool, content hash): a `u64` key keeps the hot
/// path free of allocations.
#[derive(Clone)]
pub struct Validators {
    cache: moka::sync::Cache<u64, Option<Arc<jsonschema::Validator>>>,
}

impl std::fmt::Debug for Validators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validators")
            .field("entries", &self.cache.entry_count())
            .finish()
    }
}

impl Default for Validators {
    fn default() -> Self {
        Self {
            cache: moka::sync::Cache::new(4096),
        }
    }
}

impl Validators {
    /// Check `arguments` (an object; absent arguments are `{}`) against `entry`'s input schema.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` listing every problem with its JSON pointer.
    pub fn check(&self, entry: &ToolEntry, arguments: &Value) -> Result<(), Error> {
        // The content hash covers the tool's name and schema; mixing in the server keeps two
        // servers' identical tools apart.
        let key = crate::hash::fnv1a_from(entry.content_hash, entry.server.as_bytes());
        let Some(validator) = self.cache.get_with(key, || compile(entry)) else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(arguments)
            .take(MAX_PROBLEMS)
            .map(|error| {
                let at = error.instance_path().to_string();
                format!("`{}`: {error}", if at.is_empty() { "/" } else { &at })
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Validation { problems })
        }
    }
}

fn compile(entry: &ToolEntry) -> Option<Arc<jsonschema::Validator>> {
    let schema = Value::Object((*entry.tool.input_schema).clone());
    match jsonschema::validator_for(&schema) {
        Ok(validator) => Some(Arc::new(validator)),
        Err(error) => {
            tracing::warn!(tool = %entry.id(), %error, "input schema does not compile; arguments go unchecked");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::rules::RuleSet;
    use rmcp::model::Tool;
    use serde_json::json;

    fn entry(schema: &Value) -> ToolEntry {
        let mut catalog = Catalog::default();
        let tool = Tool::new("t", "d", Arc::new(schema.as_object().unwrap().clone()));
        catalog.set_server_tools("s", vec![tool], &RuleSet::default());
        catalog.tool("s", "t").unwrap().clone()
    }

    fn strict() -> ToolEntry {
        entry(&json!({
            "type": "object",
            "properties": { "count": { "type": "integer", "minimum": 1 }, "name": { "type": "string" } },
            "required": ["count", "name"]
        }))
    }

    #[test]
    fn valid_arguments_pass() {
        let args = json!({ "count": 2, "name": "x" });
        Validators::default().check(&strict(), &args).unwrap();
    }

    #[test]
    fn every_problem_is_listed_with_its_path() {
        let args = json!({ "count": 0 });
        let Err(Error::Validation { problems }) = Validators::default().check(&strict(), &args) else {
            panic!("expected a validation error")
        };
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("`/count`") && p.contains("minimum")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("`/`") && p.contains("name")),
            "{problems:?}"
        );
    }

    #[test]
    fn empty_arguments_are_checked_too() {
        let empty = json!({});
        assert!(Validators::default().check(&strict(), &empty).is_err());
        Validators::default()
            .check(&entry(&json!({ "type": "object" })), &empty)
            .unwrap();
    }

    #[test]
    fn a_broken_schema_skips_validation() {
        let broken = entry(&json!({ "type": "object", "properties": { "x": { "type": "no-such-type" } } }));
        Validators::default().check(&broken, &json!({ "x": 1 })).unwrap();
    }
}
