//! The JSON Schema of a config file, generated from the config types themselves (`schemars`
//! reads their serde attributes and doc comments). It is committed as
//! `schema/discovery.config.schema.json` — published for editors (`"$schema"` in a JSON config)
//! and the source of the TypeScript config types (`scripts/config-types.mjs`) — and a test
//! fails when the types and the committed file differ.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

use super::sources::{SourceKind, SourceSpec};
use super::{DiscoverySection, TransportKind};

/// A config file: the `discovery` section, and the schema editors validate it with.
#[derive(schemars::JsonSchema)]
#[schemars(title = "anygpt-discovery config", deny_unknown_fields)]
#[expect(dead_code, reason = "only its schema is used; files are read as `Document`")]
struct ConfigFile {
    /// The JSON Schema of this file, for editors (ignored by the gateway).
    #[serde(rename = "$schema")]
    schema: Option<String>,
    /// The gateway's section (an `anygpt.config.ts` may hold others beside it).
    discovery: Option<DiscoverySection>,
}

/// The schema of a config file, as committed.
#[must_use]
pub fn json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(ConfigFile)).expect("a schema is plain JSON")
}

/// What each transport cannot do without (load fails otherwise: `config::validate_server`).
const REQUIRED: [(&str, &str); 3] = [("stdio", "command"), ("http", "url"), ("sse", "url")];

/// `connection` as TypeScript and editors should see it: one closed object per transport,
/// told apart by `type`, instead of the flat struct serde reads (every field optional). Built
/// from the flat schema itself, so a field added to `ConnectionSpec` lands in the union: its
/// doc comment's prefix says which transports take it (`stdio: …`, `http/sse: …`; none:
/// every one). The transports and their descriptions come from `TransportKind`'s schema.
pub(super) fn connection_union(schema: &mut Schema) {
    let Some(flat) = schema.as_object_mut() else { return };
    let Some(Value::Object(properties)) = flat.remove("properties") else {
        return;
    };
    flat.remove("type");
    flat.remove("additionalProperties");
    let default_kind = serde_json::to_value(TransportKind::default()).unwrap_or_default();
    let variants: Vec<Value> = transports()
        .into_iter()
        .map(|(kind, about)| variant(&kind, &about, &properties, default_kind.as_str() == Some(kind.as_str())))
        .collect();
    flat.insert("oneOf".into(), Value::Array(variants));
}

/// Every transport's `type` value and description, from `TransportKind`'s schema.
fn transports() -> Vec<(String, String)> {
    let schema = SchemaGenerator::default().into_root_schema_for::<TransportKind>();
    let variants = schema
        .get("oneOf")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    variants
        .iter()
        .filter_map(|v| {
            let kind = v.get("const")?.as_str()?.to_owned();
            let about = v
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Some((kind, about))
        })
        .collect()
}

/// The closed object of one transport: its `type` (optional for the default one) and the
/// fields whose doc prefix names it, the prefix cut.
fn variant(kind: &str, about: &str, properties: &Map<String, Value>, is_default: bool) -> Value {
    let mut fields = Map::new();
    let mut tag = serde_json::json!({ "type": "string", "const": kind });
    if is_default {
        tag["default"] = Value::from(kind);
    }
    fields.insert("type".into(), tag);
    for (name, property) in properties.iter().filter(|(name, _)| name.as_str() != "type") {
        let description = property.get("description").and_then(Value::as_str).unwrap_or_default();
        let (transports, rest) = for_transports(description);
        if transports.is_none_or(|t| t.contains(&kind)) {
            let mut property = property.clone();
            if let Some(map) = property.as_object_mut() {
                map.insert("description".into(), Value::from(capitalized(rest)));
            }
            fields.insert(name.clone(), property);
        }
    }
    let mut required: Vec<&str> = REQUIRED.iter().filter(|(k, _)| *k == kind).map(|(_, f)| *f).collect();
    if !is_default {
        required.insert(0, "type");
    }
    let mut object = serde_json::json!({
        "type": "object",
        "description": about,
        "properties": fields,
        "required": required,
        "additionalProperties": false,
    });
    // A required field is a string, never null.
    for (_, field) in REQUIRED.iter().filter(|(k, _)| *k == kind) {
        if let Some(property) = object["properties"].get_mut(*field) {
            property["type"] = Value::from("string");
        }
    }
    object
}

/// `stdio: the program` → (`Some(["stdio"])`, `the program`); no prefix → (`None`, all of it).
fn for_transports(description: &str) -> (Option<Vec<&str>>, &str) {
    if let Some((head, rest)) = description.split_once(": ") {
        let kinds: Vec<&str> = head.split('/').collect();
        if kinds
            .iter()
            .all(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase()))
        {
            return (Some(kinds), rest);
        }
    }
    (None, description)
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// A source's `type`: every client `sources` can import.
impl JsonSchema for SourceKind {
    fn schema_name() -> Cow<'static, str> {
        "SourceKind".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = SourceKind::ALL.iter().map(|k| k.name()).collect();
        json_schema!({
            "description": "A client whose config `sources` can import.",
            "type": "string",
            "enum": names,
        })
    }
}

/// One entry of `sources`: a client's name, or `{ type, path? }`.
impl JsonSchema for SourceSpec {
    fn schema_name() -> Cow<'static, str> {
        "SourceSpec".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let kind = generator.subschema_for::<SourceKind>();
        json_schema!({
            "description": "One entry of `sources`: a client's name, or `{ type, path? }` to read other files than its default ones.",
            "anyOf": [
                kind,
                {
                    "type": "object",
                    "properties": {
                        "type": kind,
                        "path": {
                            "description": "Read this file instead of the client's default ones (relative to the config file; `~/` is your home).",
                            "type": ["string", "null"],
                        },
                    },
                    "required": ["type"],
                    "additionalProperties": false,
                },
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_is_one_closed_object_per_transport() {
        let schema = json_schema();
        let union = schema["$defs"]["ConnectionSpec"]["oneOf"].as_array().unwrap();
        let kinds: Vec<&str> = union
            .iter()
            .map(|v| v["properties"]["type"]["const"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["stdio", "http", "sse"]);
        let fields = |i: usize| -> Vec<&str> {
            union[i]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect()
        };
        assert_eq!(fields(0), ["type", "command", "args", "env", "cwd"]);
        // Only streamable HTTP signs in with OAuth (`check_oauth` refuses it elsewhere).
        assert_eq!(fields(1), ["type", "url", "headers", "oauth"]);
        assert_eq!(fields(2), ["type", "url", "headers"]);
        assert_eq!(union[0]["required"], serde_json::json!(["command"]));
        assert_eq!(union[2]["required"], serde_json::json!(["type", "url"]));
        assert!(union.iter().all(|v| v["additionalProperties"] == false));
    }

    /// `REQUIRED` says what validation demands: a connection without it does not load.
    #[test]
    fn required_fields_are_those_a_load_demands() {
        for (kind, field) in REQUIRED {
            let connection = match field {
                "command" => serde_json::json!({ "type": kind, "url": "http://h" }),
                _ => serde_json::json!({ "type": kind, "command": "node" }),
            };
            let config = serde_json::json!({ "servers": [{ "name": "a", "connection": connection }] });
            let error = crate::config::Config::from_value(config, "<object>")
                .unwrap_err()
                .to_string();
            assert!(error.contains(&format!("needs a `{field}`")), "{kind}: {error}");
        }
    }

    #[test]
    fn sources_name_every_client() {
        let schema = json_schema();
        let names = &schema["$defs"]["SourceKind"]["enum"];
        assert_eq!(names.as_array().unwrap().len(), SourceKind::ALL.len());
        assert_eq!(
            schema["$defs"]["DiscoverySection"]["properties"]["sources"]["items"]["$ref"],
            "#/$defs/SourceSpec"
        );
    }

    /// Where the committed schema lives, from the repository root.
    const SCHEMA_FILE: &str = "schema/discovery.config.schema.json";

    /// `ANYGPT_WRITE_SCHEMA=1 cargo test … config::schema` rewrites the committed file.
    #[test]
    fn committed_schema_matches_the_config_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE);
        let text = format!("{}\n", serde_json::to_string_pretty(&json_schema()).unwrap());
        if std::env::var_os("ANYGPT_WRITE_SCHEMA").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{SCHEMA_FILE} is stale: run `ANYGPT_WRITE_SCHEMA=1 cargo test --target <host> config::schema` \
             and `node scripts/config-types.mjs`"
        );
    }

    #[test]
    fn schema_describes_the_fields_the_readme_uses() {
        let schema = json_schema().to_string();
        for field in [
            "idleTimeoutMs",
            "maxResultBytes",
            "audit",
            "toolRules",
            "startupTimeoutMs",
            "$schema",
        ] {
            assert!(schema.contains(&format!("\"{field}\"")), "{field} missing");
        }
    }
}
