//! The official MCP Registry (and any registry speaking its API): `GET /v0/servers` and the
//! `server.json` documents it lists, turned into servers of ours.
//!
//! Only the CLI's `add` and `registry search` use it, at the user's request: the gateway
//! itself never contacts a registry. The base URL is `--registry`, else
//! `ANYGPT_DISCOVERY_REGISTRY`, else the config's `discovery.registry`, else the official one. What a registry answers is
//! untrusted text: bounded, checked for shape, and shown through the CLI's terminal-safe output.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{ConnectionSpec, ServerSpec, TransportKind};
use crate::error::{Error, Result};

/// The official registry.
pub const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";
/// Overrides the registry's base URL.
pub const REGISTRY_ENV: &str = "ANYGPT_DISCOVERY_REGISTRY";
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most a registry answer may weigh.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One `server.json` as this client reads it (camelCase, as the registry's schema has it;
/// unknown fields ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerJson {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub packages: Vec<Package>,
    #[serde(default)]
    pub remotes: Vec<Remote>,
}

// The field names are the schema's (`packageArguments`).
#[allow(clippy::struct_field_names)]
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    pub registry_type: String,
    pub identifier: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub runtime_hint: Option<String>,
    #[serde(default)]
    pub transport: Option<Transport>,
    #[serde(default)]
    pub environment_variables: Vec<Input>,
    #[serde(default)]
    pub package_arguments: Vec<Argument>,
    #[serde(default)]
    pub runtime_arguments: Vec<Argument>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Transport {
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remote {
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
    #[serde(default)]
    pub headers: Vec<Input>,
}

/// An environment variable or a header the server takes.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default)]
    pub default: Option<String>,
    /// A fixed value (headers may carry one).
    #[serde(default)]
    pub value: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub default: Option<String>,
}

/// One entry of `/v0/servers`: `{ server, _meta }`.
#[derive(Debug, Deserialize)]
struct Listed {
    server: ServerJson,
}

#[derive(Debug, Deserialize)]
struct ServerList {
    servers: Vec<Listed>,
}

/// The registry's base URL: `flag`, else the environment, else `configured` (the config's
/// `discovery.registry`), else the official registry.
#[must_use]
pub fn base_url(flag: Option<&str>, configured: Option<String>) -> String {
    flag.map(str::to_owned)
        .or_else(|| std::env::var(REGISTRY_ENV).ok().filter(|v| !v.trim().is_empty()))
        .or(configured)
        .unwrap_or_else(|| DEFAULT_REGISTRY.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// The latest version of every server whose name contains `query` (the registry's `search`).
///
/// # Errors
/// `CONFIGURATION_ERROR` naming the registry when it cannot be reached, does not answer in
/// time, or answers anything but a server list.
pub async fn search(base: &str, query: &str) -> Result<Vec<ServerJson>> {
    let mut url = reqwest::Url::parse(&format!("{base}/v0/servers")).map_err(|e| {
        Error::validation(format!(
            "--registry `{base}` is not a URL ({e}): give one such as {DEFAULT_REGISTRY}"
        ))
    })?;
    url.query_pairs_mut()
        .append_pair("search", query)
        .append_pair("version", "latest")
        .append_pair("limit", "30");
    let body = fetch(base, url).await?;
    let list: ServerList = serde_json::from_slice(&body).map_err(|e| {
        registry_error(
            base,
            format!(
                "answered something that is not a server list ({e}): {}",
                crate::upstream::scrub_known(&String::from_utf8_lossy(&body[..body.len().min(120)]))
            ),
        )
    })?;
    Ok(list.servers.into_iter().map(|l| l.server).collect())
}

/// The server named exactly `name`.
///
/// # Errors
/// As [`search`], and `SERVER_NOT_FOUND` (with the closest names) when there is none.
pub async fn find(base: &str, name: &str) -> Result<ServerJson> {
    let found = search(base, name).await?;
    let names: Vec<String> = found.iter().map(|s| s.name.clone()).collect();
    found.into_iter().find(|s| s.name == name).ok_or(Error::ServerNotFound {
        server: name.to_owned(),
        suggestions: names.into_iter().take(5).collect(),
    })
}

async fn fetch(base: &str, url: reqwest::Url) -> Result<Vec<u8>> {
    crate::upstream::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| registry_error(base, format!("cannot build an HTTP client: {e}")))?;
    let response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| {
            let why = if e.is_timeout() {
                format!("did not answer within {} s", TIMEOUT.as_secs())
            } else {
                format!("cannot be reached: {e}")
            };
            registry_error(base, why)
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(registry_error(base, format!("answered HTTP {status}")));
    }
    let body = response.bytes().await.map_err(|e| {
        let why = if e.is_timeout() {
            format!("did not finish its answer within {} s", TIMEOUT.as_secs())
        } else {
            format!("broke off its answer: {e}")
        };
        registry_error(base, why)
    })?;
    if body.len() > MAX_BODY {
        return Err(registry_error(base, format!("answered more than {MAX_BODY} bytes")));
    }
    Ok(body.to_vec())
}

fn registry_error(base: &str, why: impl std::fmt::Display) -> Error {
    Error::config(
        format!("registry {base}"),
        "/v0/servers",
        format!("the registry {why}; nothing was written (--registry or {REGISTRY_ENV} picks another)"),
    )
}

/// How a server would run, for people: `npx -y pkg@1.0`, `uvx pkg==1.0`, `remote https://…`.
#[must_use]
pub fn how_it_runs(server: &ServerJson) -> String {
    match choose(server) {
        Some(Choice::Package(p)) => {
            let (command, args) = package_launch(p);
            std::iter::once(command).chain(args).collect::<Vec<_>>().join(" ")
        }
        Some(Choice::Remote(r)) => format!("remote {} ({})", r.url, r.kind),
        None => "no package or remote this gateway can run".to_owned(),
    }
}

/// What of a server.json the gateway runs.
pub enum Choice<'a> {
    Package(&'a Package),
    Remote(&'a Remote),
}

/// The first npm, `PyPI` or OCI package over stdio, else the first streamable-http or SSE remote.
#[must_use]
pub fn choose(server: &ServerJson) -> Option<Choice<'_>> {
    let runnable = |p: &&Package| {
        matches!(p.registry_type.as_str(), "npm" | "pypi" | "oci")
            && p.transport.as_ref().is_none_or(|t| t.kind == "stdio")
    };
    if let Some(package) = server.packages.iter().find(runnable) {
        return Some(Choice::Package(package));
    }
    server
        .remotes
        .iter()
        .find(|r| matches!(r.kind.as_str(), "streamable-http" | "http" | "sse"))
        .map(Choice::Remote)
}

/// The command and arguments that start `package`.
#[must_use]
pub fn package_launch(package: &Package) -> (String, Vec<String>) {
    let versioned = |sep: &str| match &package.version {
        Some(v) if !v.is_empty() => format!("{}{sep}{v}", package.identifier),
        _ => package.identifier.clone(),
    };
    let mut args = Vec::new();
    let command = match package.registry_type.as_str() {
        "npm" => {
            args.push("-y".to_owned());
            args.push(versioned("@"));
            package.runtime_hint.clone().unwrap_or_else(|| "npx".to_owned())
        }
        "pypi" => {
            args.push(versioned("=="));
            package.runtime_hint.clone().unwrap_or_else(|| "uvx".to_owned())
        }
        _ => {
            args.extend(["run", "-i", "--rm"].map(str::to_owned));
            args.extend(arguments(&package.runtime_arguments));
            for var in &package.environment_variables {
                args.extend(["-e".to_owned(), var.name.clone()]);
            }
            args.push(package.identifier.clone());
            "docker".to_owned()
        }
    };
    args.extend(arguments(&package.package_arguments));
    (command, args)
}

/// Fixed and default argument values, in order (a required one without either is left out).
fn arguments(list: &[Argument]) -> Vec<String> {
    let mut out = Vec::new();
    for argument in list {
        let value = argument.value.clone().or_else(|| argument.default.clone());
        match (argument.kind.as_deref(), &argument.name) {
            (Some("named"), Some(name)) => {
                out.push(name.clone());
                out.extend(value);
            }
            _ => out.extend(value),
        }
    }
    out
}

/// The inputs (variables or headers) a server needs values for.
#[must_use]
pub fn inputs(server: &ServerJson) -> Vec<Input> {
    match choose(server) {
        Some(Choice::Package(p)) => p.environment_variables.clone(),
        Some(Choice::Remote(r)) => r.headers.clone(),
        None => Vec::new(),
    }
}

/// Our server for `server`, named `name`, each input set to `values[input]` (already a
/// `${secret:…}` reference for a secret one). Inputs without a value are left out.
///
/// # Errors
/// `VALIDATION_ERROR` when the server has nothing this gateway can run.
pub fn to_spec(server: &ServerJson, name: &str, values: &BTreeMap<String, String>) -> Result<ServerSpec> {
    let mut connection = ConnectionSpec {
        kind: TransportKind::Stdio,
        command: None,
        args: Vec::new(),
        env: BTreeMap::new(),
        cwd: None,
        url: None,
        headers: BTreeMap::new(),
        oauth: None,
    };
    match choose(server) {
        Some(Choice::Package(package)) => {
            let (command, args) = package_launch(package);
            connection.command = Some(command);
            connection.args = args;
            connection.env = values.clone();
        }
        Some(Choice::Remote(remote)) => {
            connection.kind = if remote.kind == "sse" {
                TransportKind::Sse
            } else {
                TransportKind::Http
            };
            connection.url = Some(remote.url.clone());
            connection.headers = values.clone();
            for header in &remote.headers {
                if let Some(fixed) = &header.value {
                    connection
                        .headers
                        .entry(header.name.clone())
                        .or_insert_with(|| fixed.clone());
                }
            }
        }
        None => {
            return Err(Error::validation(format!(
                "`{}` offers no npm, PyPI or OCI package over stdio and no HTTP or SSE remote: it cannot be added",
                server.name
            )))
        }
    }
    Ok(ServerSpec {
        name: name.to_owned(),
        description: server.description.clone().map(|d| d.chars().take(300).collect()),
        connection,
        timeout_ms: None,
        startup_timeout_ms: None,
        idle_timeout_ms: None,
        static_tools: Vec::new(),
    })
}

/// A `server.json` for a reference that is not a registry name: `npm:<pkg>`, `pypi:<pkg>` or an
/// `https://` URL of a remote server. `None` for a registry name.
#[must_use]
pub fn direct(reference: &str) -> Option<ServerJson> {
    let package = |registry_type: &str, spec: &str| {
        let (identifier, version) = match (registry_type, spec.rsplit_once('@')) {
            ("npm", Some((id, v))) if !id.is_empty() => (id.to_owned(), Some(v.to_owned())),
            ("pypi", _) => match spec.split_once("==") {
                Some((id, v)) => (id.to_owned(), Some(v.to_owned())),
                None => (spec.to_owned(), None),
            },
            _ => (spec.to_owned(), None),
        };
        ServerJson {
            name: identifier.clone(),
            description: None,
            version: version.clone(),
            packages: vec![Package {
                registry_type: registry_type.to_owned(),
                identifier,
                version,
                runtime_hint: None,
                transport: None,
                environment_variables: Vec::new(),
                package_arguments: Vec::new(),
                runtime_arguments: Vec::new(),
            }],
            remotes: Vec::new(),
        }
    };
    if let Some(spec) = reference.strip_prefix("npm:") {
        return Some(package("npm", spec));
    }
    if let Some(spec) = reference.strip_prefix("pypi:") {
        return Some(package("pypi", spec));
    }
    if reference.starts_with("https://") || reference.starts_with("http://") {
        return Some(ServerJson {
            name: reference.to_owned(),
            description: None,
            version: None,
            packages: Vec::new(),
            remotes: vec![Remote {
                kind: "streamable-http".to_owned(),
                url: reference.to_owned(),
                headers: Vec::new(),
            }],
        });
    }
    None
}

/// The name a server gets in our config: the last part of its registry name (or package),
/// made addressable.
#[must_use]
pub fn default_name(server: &ServerJson) -> String {
    let base = match choose(server) {
        Some(Choice::Remote(r)) if server.name == r.url => reqwest::Url::parse(&r.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "remote".to_owned()),
        _ => server.name.rsplit('/').next().unwrap_or(&server.name).to_owned(),
    };
    base.chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `server.json` fields the CLI shows for a match.
#[derive(Debug, Serialize)]
pub struct Match {
    pub name: String,
    pub description: Option<String>,
    pub version: Option<String>,
    pub runs: String,
}

impl From<&ServerJson> for Match {
    fn from(server: &ServerJson) -> Self {
        Self {
            name: server.name.clone(),
            description: server.description.as_ref().map(|d| d.chars().take(200).collect()),
            version: server.version.clone(),
            runs: how_it_runs(server),
        }
    }
}

/// The value of `serde_json` for a spec, as written into a config.
#[must_use]
pub fn spec_value(spec: &ServerSpec) -> Value {
    serde_json::to_value(spec).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server(value: Value) -> ServerJson {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn packages_and_remotes_become_launch_specs() {
        let npm = server(
            json!({ "name": "io.x/brave", "packages": [{ "registryType": "npm", "identifier": "@m/brave", "version": "1.0.2", "transport": { "type": "stdio" } }] }),
        );
        assert_eq!(how_it_runs(&npm), "npx -y @m/brave@1.0.2");
        assert_eq!(default_name(&npm), "brave");
        let pypi = server(
            json!({ "name": "io.x/weather", "packages": [{ "registryType": "pypi", "identifier": "weather-mcp-server", "version": "0.5.0", "runtimeHint": "uvx" }] }),
        );
        assert_eq!(how_it_runs(&pypi), "uvx weather-mcp-server==0.5.0");
        let oci = server(
            json!({ "name": "io.x/db", "packages": [{ "registryType": "oci", "identifier": "docker.io/x/db:3", "runtimeArguments": [{ "type": "named", "name": "--network", "value": "host" }], "packageArguments": [{ "type": "named", "name": "--host", "default": "localhost" }], "environmentVariables": [{ "name": "DB_PASSWORD", "isSecret": true }] }] }),
        );
        assert_eq!(
            how_it_runs(&oci),
            "docker run -i --rm --network host -e DB_PASSWORD docker.io/x/db:3 --host localhost"
        );
        let remote = server(
            json!({ "name": "io.x/a", "remotes": [{ "type": "streamable-http", "url": "https://a.example/mcp", "headers": [{ "name": "X-API-Key", "isSecret": true, "isRequired": true }] }] }),
        );
        let values = BTreeMap::from([("X-API-Key".to_owned(), "${secret:A_X_API_KEY}".to_owned())]);
        let spec = to_spec(&remote, "a", &values).unwrap();
        assert_eq!(spec.connection.kind, TransportKind::Http);
        assert_eq!(spec.connection.headers["X-API-Key"], "${secret:A_X_API_KEY}");
        let nothing = server(json!({ "name": "io.x/n", "packages": [{ "registryType": "mcpb", "identifier": "x" }] }));
        assert!(to_spec(&nothing, "n", &BTreeMap::new()).is_err());
    }

    #[test]
    fn direct_references() {
        assert_eq!(
            how_it_runs(&direct("npm:@scope/pkg@2.1.0").unwrap()),
            "npx -y @scope/pkg@2.1.0"
        );
        assert_eq!(how_it_runs(&direct("npm:pkg").unwrap()), "npx -y pkg");
        assert_eq!(how_it_runs(&direct("pypi:mcp-x==1.0").unwrap()), "uvx mcp-x==1.0");
        let remote = direct("https://mcp.example.com/mcp").unwrap();
        assert_eq!(default_name(&remote), "mcp.example.com");
        assert!(direct("io.github.x/y").is_none());
    }
}
