//! The JSON Schema of a config file, generated from the config types themselves (`schemars`
//! reads their serde attributes and doc comments). It is committed as
//! `schema/discovery.config.schema.json` — published for editors (`"$schema"` in a JSON config)
//! and the source of the TypeScript config types (`scripts/config-types.mjs`) — and a test
//! fails when the types and the committed file differ.

use serde_json::Value;

use super::DiscoverySection;

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

#[cfg(test)]
mod tests {
    use super::*;

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
