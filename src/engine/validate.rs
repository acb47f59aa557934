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
    /// A `null` for an optional property whose schema refuses null is taken as the property
    /// left out, and removed from `arguments` (so it is not sent either): models often say
    /// "no value" that way, and SEP-2243 has the client omit such a parameter. A `null` for a
    /// required property, or one the schema allows, is kept and checked as given.
    ///
    /// # Errors
    /// `VALIDATION_ERROR` listing every problem with its JSON pointer.
    pub fn check(&self, entry: &ToolEntry, arguments: &mut Value) -> Result<(), Error> {
        // The content hash covers the tool's name and schema; mixing in the server keeps two
        // servers' identical tools apart.
        let key = crate::hash::fnv1a_from(entry.content_hash, entry.server.as_bytes());
        let Some(validator) = self.cache.get_with(key, || compile(entry)) else {
            return Ok(());
        };
        // The common case costs one pass: nulls are looked at only when something failed.
        if validator.is_valid(&*arguments) {
            return Ok(());
        }
        omit_refused_nulls(&validator, entry, arguments);
        let problems: Vec<String> = validator
            .iter_errors(&*arguments)
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

/// Remove the top-level properties of `arguments` that are `null`, not `required` by the
/// schema, and refused by it right there (an error at their own pointer): the validator
/// itself decides whether a property's schema allows null, `$ref`s and all.
fn omit_refused_nulls(validator: &jsonschema::Validator, entry: &ToolEntry, arguments: &mut Value) {
    let Some(object) = arguments.as_object() else {
        return;
    };
    let required = entry.tool.input_schema.get("required").and_then(Value::as_array);
    let is_required = |key: &str| required.is_some_and(|r| r.iter().any(|name| name.as_str() == Some(key)));
    let candidates: Vec<(String, String)> = object
        .iter()
        .filter(|(key, value)| value.is_null() && !is_required(key))
        .map(|(key, _)| (key.clone(), pointer_to(key)))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let refused: Vec<String> = validator
        .iter_errors(&*arguments)
        .map(|error| error.instance_path().to_string())
        .filter_map(|at| candidates.iter().find(|(_, pointer)| *pointer == at))
        .map(|(key, _)| key.clone())
        .collect();
    if let Some(object) = arguments.as_object_mut() {
        for key in &refused {
            if object.remove(key).is_some() {
                tracing::debug!(tool = %entry.id(), argument = %key, "null for an optional argument that refuses null: left out");
            }
        }
    }
}

/// The JSON pointer of a top-level property (RFC 6901 escapes).
fn pointer_to(key: &str) -> String {
    format!("/{}", key.replace('~', "~0").replace('/', "~1"))
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
        let mut args = json!({ "count": 2, "name": "x" });
        Validators::default().check(&strict(), &mut args).unwrap();
    }

    #[test]
    fn every_problem_is_listed_with_its_path() {
        let mut args = json!({ "count": 0 });
        let Err(Error::Validation { problems }) = Validators::default().check(&strict(), &mut args) else {
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
        assert!(Validators::default().check(&strict(), &mut json!({})).is_err());
        Validators::default()
            .check(&entry(&json!({ "type": "object" })), &mut json!({}))
            .unwrap();
    }

    #[test]
    fn a_broken_schema_skips_validation() {
        let broken = entry(&json!({ "type": "object", "properties": { "x": { "type": "no-such-type" } } }));
        Validators::default().check(&broken, &mut json!({ "x": 1 })).unwrap();
    }

    /// The `http-custom-headers` conformance tool: a required string, an optional boolean.
    fn optional_flag() -> ToolEntry {
        entry(&json!({
            "type": "object",
            "properties": { "region": { "type": "string" }, "verbose": { "type": "boolean" } },
            "required": ["region"]
        }))
    }

    #[test]
    fn a_null_for_an_optional_property_that_refuses_null_is_left_out() {
        let mut args = json!({ "region": "us-west1", "verbose": null });
        Validators::default().check(&optional_flag(), &mut args).unwrap();
        assert_eq!(args, json!({ "region": "us-west1" }));
    }

    #[test]
    fn a_null_for_a_required_property_is_kept_and_refused() {
        let mut args = json!({ "region": null, "verbose": null });
        let Err(Error::Validation { problems }) = Validators::default().check(&optional_flag(), &mut args) else {
            panic!("expected a validation error")
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("`/region`"), "{problems:?}");
        assert_eq!(args, json!({ "region": null }), "the optional null is still left out");
    }

    #[test]
    fn a_null_the_schema_allows_is_kept() {
        for schema in [
            json!({ "type": ["boolean", "null"] }),
            json!({ "anyOf": [{ "type": "boolean" }, { "type": "null" }] }),
            json!({ "description": "anything" }),
        ] {
            let tool = entry(&json!({ "type": "object", "properties": { "verbose": schema } }));
            let mut args = json!({ "verbose": null });
            Validators::default().check(&tool, &mut args).unwrap();
            assert_eq!(args, json!({ "verbose": null }), "{schema}");
        }
    }

    #[test]
    fn whether_null_is_refused_follows_refs() {
        let tool = entry(&json!({
            "type": "object",
            "$defs": { "mode": { "enum": ["fast", "slow"] } },
            "properties": { "mode": { "$ref": "#/$defs/mode" }, "a/b~c": { "type": "integer" } }
        }));
        let mut args = json!({ "mode": null, "a/b~c": null });
        Validators::default().check(&tool, &mut args).unwrap();
        assert_eq!(args, json!({}));
    }

    #[test]
    fn nulls_the_schema_has_no_property_for_and_nested_nulls_are_not_touched() {
        let tool = entry(&json!({
            "type": "object",
            "properties": { "inner": { "type": "object", "properties": { "flag": { "type": "boolean" } } } },
            "additionalProperties": false
        }));
        let mut args = json!({ "inner": { "flag": null }, "stray": null });
        let Err(Error::Validation { problems }) = Validators::default().check(&tool, &mut args) else {
            panic!("expected a validation error")
        };
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(args, json!({ "inner": { "flag": null }, "stray": null }));
    }
}
