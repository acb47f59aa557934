//! Building a `Config`: telling a discovery document from a client's own file, importing
//! sources, and the zero-config default.
//!
//! TS/JS configs are evaluated on the JS side and arrive here as a value through
//! [`Config::from_value`](super::Config::from_value).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::document::read_document_hashed;
use super::locate::{is_anygpt_config, Environment, Located};
use super::sources::{self, SourceKind, SourceSpec};
use super::{humanize, json_kind, validate, Config, DiscoverySection, Scope};
use crate::error::{Error, Result};

pub(super) fn from_file(path: &Path, env: &Environment, scope: Scope) -> Result<Config> {
    from_file_approved(path, env, scope, None)
}

/// [`from_file`] of a project file approved with content hash `approved`: bytes that differ
/// (the file changed since the search checked it) are refused, never parsed into servers.
pub(super) fn from_file_approved(
    path: &Path,
    env: &Environment,
    scope: Scope,
    approved: Option<&str>,
) -> Result<Config> {
    let origin = path.display().to_string();
    let (value, hash) = read_document_hashed(path)?;
    if approved.is_some_and(|approved| approved != hash) {
        return Err(Error::config(
            &origin,
            "(file)",
            format!(
                "changed while it was being read, after its approval was checked: approve it again: `{}`",
                crate::consent::Place::file(path).allow_command()
            ),
        ));
    }
    from_value(value, &origin, env, scope)
}

/// The `origin` of a zero-config config.
pub const ZERO_CONFIG_ORIGIN: &str = "<zero-config>";

/// No config file: every known client's config that exists is a source.
pub(super) fn zero_config(located: &Located, env: &Environment) -> Config {
    let mut config = Config::empty();
    ZERO_CONFIG_ORIGIN.clone_into(&mut config.origin);
    config.notes.push(format!(
        "no config file (looked at {}); importing every MCP client's config found",
        located.looked.join(", ")
    ));
    let all = SourceKind::ALL.map(|kind| SourceSpec { kind, path: None });
    import_sources(&mut config, &all, env, &mut validate::OnPath::default());
    config
}

/// What a document holds, decided by its top level and the file it came from.
enum Shape {
    /// A discovery section (from `{ discovery }` or a bare section).
    Section(Value),
    /// A client's own file passed as the config.
    Client(SourceKind),
    /// An `anygpt.config.*` without a `discovery` section: zero-config.
    NoSection,
}

fn shape(value: Value, origin: &str) -> Result<Shape> {
    let anygpt = !origin.starts_with('<') && is_anygpt_config(Path::new(origin));
    match value {
        Value::Object(mut map) => {
            // An editor's `$schema` may sit beside the section, or beside a bare section's keys.
            map.remove("$schema");
            if let Some(section) = map.remove("discovery") {
                return Ok(Shape::Section(section));
            }
            if anygpt {
                return Ok(Shape::NoSection);
            }
            let value = Value::Object(map);
            Ok(match sources::client_format(&value) {
                Some(kind) => Shape::Client(kind),
                None => Shape::Section(value),
            })
        }
        Value::Null if anygpt => Ok(Shape::NoSection),
        Value::Null => Ok(Shape::Section(Value::Object(serde_json::Map::new()))),
        other => Err(Error::config(
            origin,
            "(root)",
            format!(
                "expected an object with a `discovery` section, found {}",
                json_kind(&other)
            ),
        )),
    }
}

pub(super) fn from_value(value: Value, origin: &str, env: &Environment, scope: Scope) -> Result<Config> {
    let file = (!origin.starts_with('<')).then(|| PathBuf::from(origin));
    let base = file
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| env.cwd.clone(), |dir| env.cwd.join(dir));
    let mut config = Config::empty();
    origin.clone_into(&mut config.origin);
    config.scope = scope;
    config.files.extend(file.clone());
    let (section, sources) = match shape(value, origin)? {
        Shape::Section(value) => {
            let section = parse_section(value, origin)?;
            let sources = parse_sources(&section, origin, &base)?;
            (section, sources)
        }
        Shape::Client(kind) => {
            config.notes.push(format!("{origin}: read as a {} config", kind.name()));
            let path = file.clone().unwrap_or_default();
            (DiscoverySection::default(), vec![SourceSpec { kind, path: Some(path) }])
        }
        Shape::NoSection => {
            config.notes.push(format!(
                "{origin}: no `discovery` section; importing every MCP client's config found"
            ));
            (
                DiscoverySection::default(),
                SourceKind::ALL.map(|kind| SourceSpec { kind, path: None }).to_vec(),
            )
        }
    };
    let mut section = section;
    config.rules = super::validate_section(&section, origin)?;
    super::pin_exchange_issuers(&mut section);
    config.expose = super::compile_expose(&section, origin)?;
    config.confirm = super::compile_confirm(&section);
    if scope == Scope::Project {
        check_project_paths(&section, origin, env)?;
    }
    let mut on_path = validate::OnPath::default();
    let checked = validate::launch_checks(
        &section.servers,
        origin,
        &|i| format!("discovery.servers[{i}].connection"),
        &base,
        &mut on_path,
    );
    config.warnings.extend(checked);
    config.discovery = section;
    import_sources(&mut config, &sources, env, &mut on_path);
    Ok(config)
}

/// The paths a project's config may name, held where a cloned repository cannot reach past
/// (DESIGN §6a): the audit log inside the state folder (`audit::resolve_path`), the model
/// folder inside the project. (A `sources[].path` file is a project file of its own, used only
/// once approved: see `sources::import`.)
fn check_project_paths(section: &DiscoverySection, origin: &str, env: &Environment) -> Result<()> {
    if section.audit.enabled {
        let state_dir = crate::paths::state_dir();
        crate::audit::resolve_path(
            section.audit.path.as_deref(),
            false,
            env.home.as_deref(),
            state_dir.as_deref(),
        )
        .map_err(|error| Error::config(origin, "discovery.audit.path", error.to_string()))?;
    }
    if let Some(model) = &section.search.model {
        let path = Path::new(model);
        let escapes = path.is_absolute()
            || model.starts_with('~')
            || path.components().any(|c| matches!(c, std::path::Component::ParentDir));
        if escapes {
            return Err(Error::config(
                origin,
                "discovery.search.model",
                format!(
                    "a project's config may only name a model folder inside the project, not `{model}`: \
                     use a relative path below the config's folder, or set `search.model` in your user config"
                ),
            ));
        }
    }
    Ok(())
}

fn parse_section(value: Value, origin: &str) -> Result<DiscoverySection> {
    #[derive(serde::Deserialize)]
    struct Document {
        discovery: DiscoverySection,
    }
    // Wrapped so that error paths start at `discovery.`.
    let wrapped = Value::Object(std::iter::once(("discovery".to_owned(), value)).collect());
    let document: Document = serde_path_to_error::deserialize(wrapped)
        .map_err(|e| Error::config(origin, e.path().to_string(), humanize::reason(&e.inner().to_string())))?;
    Ok(document.discovery)
}

fn parse_sources(section: &DiscoverySection, origin: &str, base: &Path) -> Result<Vec<SourceSpec>> {
    section
        .sources
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let at = format!("discovery.sources[{i}]");
            let spec = sources::parse_source(value, &at, base)
                .map_err(|(path, reason)| Error::config(origin, path, reason))?;
            if spec.kind == SourceKind::Custom && spec.path.is_none() {
                return Err(Error::config(
                    origin,
                    format!("{at}.path"),
                    "a `custom` source needs a `path` to its servers file",
                ));
            }
            Ok(spec)
        })
        .collect()
}

/// Import each source after the config's own servers; an imported server that fails the
/// checks of our own servers is skipped with the reason, never failing the whole config.
fn import_sources(config: &mut Config, specs: &[SourceSpec], env: &Environment, on_path: &mut validate::OnPath) {
    for spec in specs {
        let imported = sources::import(spec, env, config.scope);
        config.looked.extend(imported.looked);
        config.add_skipped(imported.skipped);
        config.approved.extend(imported.approved);
        config.warnings.extend(imported.warnings);
        for file in imported.files {
            if !config.files.contains(&file) {
                config.files.push(file);
            }
        }
        config.notes.extend(imported.notes);
        let mut accepted = Vec::new();
        for (server, from) in imported.servers {
            let at = format!("{from}: `{}`", server.name);
            if let Err((path, reason)) = super::validate_server(&server, "entry") {
                config.warnings.push(format!("{at} skipped: {path}: {reason}"));
                continue;
            }
            let checked = validate::launch_checks(
                std::slice::from_ref(&server),
                &at,
                &|_| "connection".to_owned(),
                &env.cwd,
                on_path,
            );
            config.warnings.extend(checked);
            accepted.push((server, from));
        }
        sources::merge(&mut config.discovery.servers, accepted, &mut config.notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
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
        assert_eq!(config.files_read(), [path]);
    }

    #[test]
    fn json_with_comments_and_trailing_commas() {
        for name in ["c.json", "c.jsonc"] {
            let (_dir, path) = write(
                name,
                "// mine\n{ \"discovery\": { /* inline */ \"servers\": [ { \"name\": \"a\", \"connection\": { \"command\": \"node\", }, }, ], }, }\n",
            );
            assert_eq!(Config::from_file(&path).unwrap().servers()[0].name, "a");
        }
    }

    #[test]
    fn json_syntax_error_names_file_and_line_once() {
        let (_dir, path) = write("c.json", "{\n  \"discovery\": {\"a\" 1}\n}");
        let text = Config::from_file(&path).unwrap_err().to_string();
        assert_eq!(
            text,
            format!(
                "{}: line 2 column 21: Expected colon after the string or word in object property: fix the JSON syntax there",
                path.display()
            )
        );
    }

    #[test]
    fn yaml_syntax_error_names_the_position_once() {
        let (_dir, path) = write("c.yaml", "discovery:\n  servers: [\n");
        let text = Config::from_file(&path).unwrap_err().to_string();
        assert_eq!(text.matches("line ").count(), 1, "{text}");
        assert!(text.ends_with("fix the YAML syntax there"), "{text}");
    }

    #[test]
    fn yaml_path_errors_name_the_path() {
        let (_dir, path) = write("c.yml", "discovery:\n  toolRules:\n    - pattern: ['/(/']\n");
        let text = Config::from_file(&path).unwrap_err().to_string();
        assert!(text.contains("discovery.toolRules[0].pattern[0]"), "{text}");
    }

    #[test]
    fn an_approved_file_is_read_only_as_approved() {
        let (_dir, path) = write("c.json", r#"{ "discovery": { "servers": [] } }"#);
        let env = Environment::current();
        let hash = crate::consent::sha256_hex(&std::fs::read(&path).unwrap());
        assert!(from_file_approved(&path, &env, Scope::Project, Some(&hash)).is_ok());
        let text = from_file_approved(&path, &env, Scope::Project, Some("0123"))
            .unwrap_err()
            .to_string();
        assert!(text.contains("changed while it was being read"), "{text}");
        assert!(text.contains("anygpt-discovery allow"), "{text}");
    }

    #[test]
    fn missing_file_and_js_file_are_clear() {
        let err = Config::from_file(Path::new("/nonexistent/c.json")).unwrap_err();
        assert!(err.to_string().contains("cannot read file"));
        let (_dir, path) = write("c.ts", "export default {}");
        assert!(Config::from_file(&path)
            .unwrap_err()
            .to_string()
            .contains("TS/JS configs are evaluated by the npm package"));
    }

    #[test]
    fn a_project_config_keeps_its_paths_in_the_state_folder_and_the_project() {
        let env = Environment {
            cwd: PathBuf::from("/p"),
            home: Some(PathBuf::from("/home/u")),
            ..Environment::default()
        };
        let load =
            |section: Value, scope| from_value(serde_json::json!({ "discovery": section }), "/p/c.json", &env, scope);
        for (section, field) in [
            (
                serde_json::json!({ "audit": { "path": "~/.bashrc" } }),
                "discovery.audit.path",
            ),
            (
                serde_json::json!({ "audit": { "path": "../../.bashrc" } }),
                "discovery.audit.path",
            ),
            (
                serde_json::json!({ "search": { "model": "/opt/model" } }),
                "discovery.search.model",
            ),
            (
                serde_json::json!({ "search": { "model": "../elsewhere" } }),
                "discovery.search.model",
            ),
        ] {
            let error = load(section.clone(), Scope::Project).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("/p/c.json: {field}: a project's config may only")),
                "{error}"
            );
            assert!(
                load(section, Scope::User).is_ok(),
                "the user's own config names any path"
            );
        }
        // Turned off, the audit path names nothing; inside the project, a model folder is fine.
        assert!(load(
            serde_json::json!({ "audit": { "enabled": false, "path": "/etc/x" } }),
            Scope::Project
        )
        .is_ok());
        assert!(load(
            serde_json::json!({ "search": { "model": "models/mini" } }),
            Scope::Project
        )
        .is_ok());
    }
}
