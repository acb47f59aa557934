//! Each client's documented format, read from `tests/fixtures/configs/` into a temporary
//! HOME and project folder laid out as the client keeps them.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{Config, TransportKind};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/configs");

use crate::config::locate::TestMachine as Machine;

/// What these tests do on a [`Machine`].
trait Client {
    fn home(&self) -> PathBuf;
    fn place(&self, name: &str, to: &Path) -> PathBuf;
    fn import(&self, kind: SourceKind) -> Imported;
}

impl Client for Machine {
    fn home(&self) -> PathBuf {
        self.env.home.clone().unwrap()
    }

    /// Copy fixture `name` to `to`, replacing `@PROJECT@` with the project folder.
    fn place(&self, name: &str, to: &Path) -> PathBuf {
        let text = std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap();
        let text = text.replace("@PROJECT@", self.env.cwd.to_str().unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, text).unwrap();
        to.to_path_buf()
    }

    fn import(&self, kind: SourceKind) -> Imported {
        import(&SourceSpec { kind, path: None }, &self.env, Scope::User)
    }
}

fn names(imported: &Imported) -> Vec<&str> {
    imported.servers.iter().map(|(s, _)| s.name.as_str()).collect()
}

fn server<'a>(imported: &'a Imported, name: &str) -> &'a ServerSpec {
    &imported.servers.iter().find(|(s, _)| s.name == name).unwrap().0
}

#[test]
fn claude_desktop_real_world_file() {
    let m = Machine::new();
    let file = m.place(
        "claude_desktop_config.json",
        &m.home().join(".config/Claude/claude_desktop_config.json"),
    );
    let imported = m.import(SourceKind::ClaudeDesktop);
    assert_eq!(
        names(&imported),
        ["filesystem", "github", "brave-search", "memory", "linear"]
    );
    let fs = server(&imported, "filesystem");
    assert_eq!(fs.connection.command.as_deref(), Some("npx"));
    assert_eq!(
        fs.connection.args[..2],
        ["-y".to_owned(), "@modelcontextprotocol/server-filesystem".to_owned()]
    );
    assert_eq!(
        server(&imported, "github").connection.env["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_TOKEN}"
    );
    let linear = server(&imported, "linear");
    assert_eq!(linear.connection.kind, TransportKind::Http);
    assert_eq!(linear.connection.url.as_deref(), Some("https://mcp.linear.app/mcp"));
    assert_eq!(imported.files, std::slice::from_ref(&file));
    let skipped: Vec<&String> = imported.notes.iter().filter(|n| n.contains("skipped")).collect();
    assert_eq!(skipped.len(), 2, "{:?}", imported.notes);
    assert!(
        skipped[0].ends_with("`old-sqlite` skipped: disabled in that client"),
        "{}",
        skipped[0]
    );
    assert!(
        skipped[1].ends_with("`gateway` skipped: it launches this gateway itself (a gateway never starts itself)"),
        "{}",
        skipped[1]
    );
    assert_eq!(
        imported.notes.last().unwrap(),
        &format!(
            "claude-desktop: {}: 5 servers (filesystem, github, brave-search, memory, linear)",
            file.display()
        )
    );
}

#[test]
fn a_malformed_client_file_is_a_warning_and_the_others_are_read() {
    let m = Machine::new();
    let broken = m.home().join(".cursor/mcp.json");
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(&broken, "{ \"mcpServers\": ").unwrap();
    m.place("docker-mcp-servers.json", &m.home().join(".docker/mcp-servers.json"));
    let config = Config::load(&crate::config::locate(None, &m.env), &m.env).unwrap();
    assert_eq!(config.servers().len(), 1);
    assert_eq!(
        config.warnings(),
        [format!(
            "cursor: {}: skipped: line 1 column 1: unexpected end of input: fix the JSON syntax there",
            broken.display()
        )]
    );
}

#[test]
fn claude_code_project_then_local_then_user_scope() {
    let m = Machine::new();
    let project = m.place("claude-code.mcp.json", &m.env.cwd.join(".mcp.json"));
    let claude = m.place("claude.json", &m.home().join(".claude.json"));
    // Unapproved, the project's file and this folder's section give nothing; the user's
    // own servers load as ever.
    let imported = m.import(SourceKind::ClaudeCode);
    assert_eq!(names(&imported), ["user-wide"]);
    let section = crate::consent::Place {
        file: claude,
        section: Some(format!("projects.{}", m.env.cwd.display())),
    };
    let skipped: Vec<_> = imported.skipped.iter().map(|s| s.place.clone()).collect();
    assert_eq!(skipped, [crate::consent::Place::file(&project), section.clone()]);
    m.allow(&project);
    crate::consent::Approvals::load(&m.env)
        .record(&section, crate::consent::Decision::Allow)
        .unwrap();
    let imported = m.import(SourceKind::ClaudeCode);
    assert!(imported.skipped.is_empty(), "{:?}", imported.skipped);
    assert_eq!(names(&imported), ["sentry", "project-db", "local-only", "user-wide"]);
    assert_eq!(server(&imported, "sentry").connection.kind, TransportKind::Http);
    assert_eq!(
        server(&imported, "project-db").connection.env["DB_URL"],
        "${DB_URL:-postgres://localhost/dev}"
    );
}

#[test]
fn cursor_project_and_user() {
    let m = Machine::new();
    m.place("cursor.mcp.json", &m.home().join(".cursor/mcp.json"));
    let imported = m.import(SourceKind::Cursor);
    assert_eq!(names(&imported), ["context7", "remote-sse"]);
    assert_eq!(server(&imported, "remote-sse").connection.kind, TransportKind::Sse);
    assert_eq!(
        server(&imported, "context7").connection.headers["CONTEXT7_API_KEY"],
        "${env:CONTEXT7_KEY}"
    );
}

#[test]
fn vscode_servers_inputs_and_workspace_folder() {
    let m = Machine::new();
    m.allow(&m.place("vscode.mcp.json", &m.env.cwd.join(".vscode/mcp.json")));
    m.place(
        "vscode.settings.json",
        &m.home().join(".config/Code/User/settings.json"),
    );
    let imported = m.import(SourceKind::Vscode);
    assert_eq!(names(&imported), ["fetch", "playwright", "user-everything"]);
    let fetch = server(&imported, "fetch");
    assert_eq!(
        fetch.connection.args,
        ["mcp-server-fetch".to_owned(), format!("{}/cache", m.env.cwd.display())]
    );
    assert_eq!(server(&imported, "playwright").connection.kind, TransportKind::Http);
    assert!(
        imported.notes.iter().any(|n| n.ends_with(
            "`perplexity` skipped: `${input:perplexity-key}` is a VS Code prompt the gateway cannot show: put the value in an environment variable and write `${env:NAME}`"
        )),
        "{:?}",
        imported.notes
    );
}

#[test]
fn windsurf_server_url() {
    let m = Machine::new();
    m.place(
        "windsurf.mcp_config.json",
        &m.home().join(".codeium/windsurf/mcp_config.json"),
    );
    let imported = m.import(SourceKind::Windsurf);
    assert_eq!(names(&imported), ["puppeteer", "remote"]);
    assert_eq!(
        server(&imported, "remote").connection.url.as_deref(),
        Some("https://example.com/mcp")
    );
}

#[test]
fn zed_context_servers_both_shapes() {
    let m = Machine::new();
    m.place("zed.settings.json", &m.home().join(".config/zed/settings.json"));
    let imported = m.import(SourceKind::Zed);
    assert_eq!(names(&imported), ["postgres", "old-style", "remote"]);
    let old = server(&imported, "old-style");
    assert_eq!(old.connection.command.as_deref(), Some("/usr/local/bin/old-server"));
    assert_eq!(old.connection.args, ["--stdio"]);
    assert_eq!(old.connection.env["LEVEL"], "debug");
}

#[test]
fn docker_mcp_and_custom_yaml() {
    let m = Machine::new();
    m.place("docker-mcp-servers.json", &m.home().join(".docker/mcp-servers.json"));
    let imported = m.import(SourceKind::DockerMcp);
    assert_eq!(names(&imported), ["MCP_DOCKER"]);
    assert_eq!(
        server(&imported, "MCP_DOCKER").connection.args,
        ["mcp", "gateway", "run"]
    );
    let custom = m.place("custom-servers.yaml", &m.env.cwd.join("mcp-servers.yaml"));
    let imported = import(
        &SourceSpec {
            kind: SourceKind::Custom,
            path: Some(custom),
        },
        &m.env,
        Scope::User,
    );
    assert_eq!(names(&imported), ["weather"]);
    let weather = server(&imported, "weather");
    assert_eq!(weather.description.as_deref(), Some("Forecasts"));
    // Its static tools come along, a missing schema filled in as MCP needs one.
    let tools: Vec<(&str, Option<&str>)> = weather
        .static_tools
        .iter()
        .map(|t| (t.name.as_ref(), t.description.as_deref()))
        .collect();
    assert_eq!(tools, [("forecast", Some("Forecast for a city"))]);
    assert_eq!(
        serde_json::Value::Object((*weather.static_tools[0].input_schema).clone()),
        serde_json::json!({ "type": "object" })
    );
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
}

#[test]
fn bad_static_tools_name_file_path_and_fix_and_the_server_stays() {
    let m = Machine::new();
    let file = m.env.cwd.join("servers.yaml");
    let warning = |tools: &str| {
        let text = format!("servers:\n  w:\n    connection: {{ command: node }}\n    tools: {tools}\n");
        std::fs::write(&file, text).unwrap();
        let imported = import(
            &SourceSpec {
                kind: SourceKind::Custom,
                path: Some(file.clone()),
            },
            &m.env,
            Scope::User,
        );
        assert_eq!(names(&imported), ["w"], "the server is served without them");
        assert!(server(&imported, "w").static_tools.is_empty());
        imported.warnings.join("\n")
    };
    let at = format!("custom: {}: servers.w.tools", file.display());
    let served = "; `w` is served without its static tools";
    assert_eq!(
        warning("[{ description: no name }]"),
        format!("{at}[0].name: missing: every tool needs the name the server calls it by{served}")
    );
    assert_eq!(
        warning("[{ name: a }, { name: b, inputSchema: [] }]"),
        format!("{at}[1].inputSchema: expected an object such as `{{ type: object, properties: {{ … }} }}`{served}")
    );
    assert_eq!(
        warning("[{ name: a, inputschema: {} }]"),
        format!("{at}[0].inputschema: unknown key `inputschema` (did you mean `inputSchema`?); a tool has name, title, description, inputSchema, outputSchema, annotations{served}")
    );
    assert_eq!(
        warning("[{ name: a }, { name: a }]"),
        format!("{at}[1].name: `a` is declared twice; give each tool its own name{served}")
    );
    assert_eq!(
        warning("forecast"),
        format!("{at}: expected a list of tools, each `{{ name, description, inputSchema }}`{served}")
    );
    assert_eq!(
        warning("[{ name: a, description: 3 }]"),
        format!("{at}[0].description: expected a string{served}")
    );
}

#[test]
fn zero_config_imports_every_client_and_reports_shadowing() {
    let m = Machine::new();
    m.place(
        "claude_desktop_config.json",
        &m.home().join(".config/Claude/claude_desktop_config.json"),
    );
    m.place("cursor.mcp.json", &m.home().join(".cursor/mcp.json"));
    m.allow(&m.place("cursor-shadow.mcp.json", &m.env.cwd.join(".cursor/mcp.json")));
    let located = crate::config::locate(None, &m.env);
    let config = Config::load(&located, &m.env).unwrap();
    let served: Vec<&str> = config.servers().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        served,
        [
            "filesystem",
            "github",
            "brave-search",
            "memory",
            "linear",
            "context7",
            "remote-sse"
        ]
    );
    assert_eq!(config.files_read().len(), 3);
    let watched = config.files_to_watch();
    assert_eq!(watched[..3], *config.files_read());
    assert!(watched.contains(&m.home().join(".codeium/windsurf/mcp_config.json")));
    let notes = config.notes().join("\n");
    assert!(
        notes.starts_with("no config file (looked at --config, $ANYGPT_DISCOVERY_CONFIG, ./.anygpt/"),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "windsurf: {}: not found",
            m.home().join(".codeium/windsurf/mcp_config.json").display()
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "cursor: {}: `github` shadowed by an earlier server of the same name (rename one to keep both)",
            m.env.cwd.join(".cursor/mcp.json").display()
        )),
        "{notes}"
    );
}

#[test]
fn a_client_file_passed_as_the_config() {
    let m = Machine::new();
    let file = m.place("claude_desktop_config.json", &m.env.cwd.join("claude.json"));
    let config = crate::config::load::from_file(&file, &m.env, Scope::User).unwrap();
    assert_eq!(config.servers().len(), 5);
    assert_eq!(config.files_read(), std::slice::from_ref(&file));
    assert_eq!(
        config.notes()[0],
        format!("{}: read as a claude-desktop config", file.display())
    );
    let zed = m.place("zed.settings.json", &m.env.cwd.join("zed.json"));
    assert_eq!(
        crate::config::load::from_file(&zed, &m.env, Scope::User)
            .unwrap()
            .servers()
            .len(),
        3
    );
}

#[test]
fn sources_list_is_honoured_after_own_servers() {
    let m = Machine::new();
    m.place(
        "claude_desktop_config.json",
        &m.home().join(".config/Claude/claude_desktop_config.json"),
    );
    let custom = m.place("custom-servers.yaml", &m.env.cwd.join("mcp-servers.yaml"));
    let config = Config::from_value_in(
        serde_json::json!({ "discovery": {
            "servers": [{ "name": "memory", "connection": { "command": "node" } }],
            "sources": [{ "type": "custom", "path": "./mcp-servers.yaml" }, "claude-desktop"],
        } }),
        m.env.cwd.join("mcp-discovery.config.json").to_str().unwrap(),
        &m.env,
    )
    .unwrap();
    let served: Vec<&str> = config.servers().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        served,
        ["memory", "weather", "filesystem", "github", "brave-search", "linear"]
    );
    assert_eq!(config.files_read()[1], custom);
}

#[test]
fn bad_source_entries_name_path_and_fix() {
    let err = |sources: serde_json::Value| {
        Config::from_value_in(serde_json::json!({ "sources": sources }), "c.json", &Machine::new().env)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(serde_json::json!([{ "type": "claude-dekstop" }])),
        "c.json: discovery.sources[0].type: unknown source type `claude-dekstop` (did you mean `claude-desktop`?); known types: claude-desktop, claude-code, cursor, vscode, windsurf, zed, docker-mcp, custom"
    );
    assert_eq!(
        err(serde_json::json!([{ "type": "cursor", "pth": "x" }])),
        "c.json: discovery.sources[0].pth: unknown key `pth` (did you mean `path`?); a source has `type` and an optional `path`"
    );
    assert_eq!(
        err(serde_json::json!(["zed", { "type": "custom" }])),
        "c.json: discovery.sources[1].path: a `custom` source needs a `path` to its servers file"
    );
}
