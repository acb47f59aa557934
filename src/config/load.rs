//! Reading config files: JSON and YAML natively; the search order for when none is named.
//!
//! TS/JS configs are evaluated on the JS side and arrive as an object through
//! [`Config::from_value`](super::Config::from_value).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Config;
use crate::error::{Error, Result};

/// Names a config file, like `--config`.
pub const CONFIG_ENV: &str = "ANYGPT_DISCOVERY_CONFIG";

const NATIVE_EXTENSIONS: [&str; 3] = ["json", "yaml", "yml"];

pub(super) fn from_file(path: &Path) -> Result<Config> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::config(&origin, "(file)", format!("cannot read file: {e}")))?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let value: Value = match extension.as_str() {
        "json" => serde_json::from_str(&text).map_err(|e| {
            Error::config(
                &origin,
                format!("line {} column {}", e.line(), e.column()),
                e.to_string(),
            )
        })?,
        "yaml" | "yml" => serde_norway::from_str(&text).map_err(|e| {
            let at = e.location().map_or_else(
                || "(document)".to_owned(),
                |l| format!("line {} column {}", l.line(), l.column()),
            );
            Error::config(&origin, at, e.to_string())
        })?,
        other => {
            return Err(Error::config(
                &origin,
                "(file)",
                format!(
                    "cannot read `.{other}` config natively (JSON and YAML are read here; \
                     TS/JS configs are loaded by the `anygpt-discovery` npm bin)"
                ),
            ))
        }
    };
    Config::from_value(value, &origin)
}

/// The first existing file of the search order for natively readable formats:
/// `./.anygpt/mcp-discovery.config.{json,yaml,yml}`, then the same under the home directory.
#[must_use]
pub fn default_config_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"));
    let roots = std::iter::once(PathBuf::from(".")).chain(home.map(PathBuf::from));
    roots
        .flat_map(|root| {
            NATIVE_EXTENSIONS
                .iter()
                .map(move |ext| root.join(".anygpt").join(format!("mcp-discovery.config.{ext}")))
        })
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        (dir, path)
    }

    #[test]
    fn reads_yaml() {
        let (_dir, path) = write(
            "c.yaml",
            "discovery:\n  servers:\n    - name: a\n      connection: { command: node }\n  toolRules:\n    - pattern: '*x*'\n      enabled: false\n",
        );
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.servers()[0].name, "a");
        assert!(!config.rules().decide("a", "x").enabled);
    }

    #[test]
    fn json_syntax_error_names_file_and_line() {
        let (_dir, path) = write("c.json", "{\n  \"discovery\": {,}\n}");
        let err = Config::from_file(&path).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("c.json: line 2"), "{text}");
    }

    #[test]
    fn yaml_path_errors_name_the_path() {
        let (_dir, path) = write("c.yml", "discovery:\n  toolRules:\n    - pattern: ['/(/']\n");
        let text = Config::from_file(&path).unwrap_err().to_string();
        assert!(text.contains("discovery.toolRules[0].pattern[0]"), "{text}");
    }

    #[test]
    fn missing_file_and_foreign_extension_are_clear() {
        let err = Config::from_file(Path::new("/nonexistent/c.json")).unwrap_err();
        assert!(err.to_string().contains("cannot read file"));
        let (_dir, path) = write("c.ts", "export default {}");
        assert!(Config::from_file(&path).unwrap_err().to_string().contains("TS/JS"));
    }
}
