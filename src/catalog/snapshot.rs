//! On-disk catalog snapshots: each server's tool list, so the gateway can answer at once on
//! the next start without launching anything.
//!
//! One file per server under `<cache>/catalog/`, named by the server and the fingerprint of
//! its launch spec and the gateway version: a changed command, argument, env or version is a
//! different file, so a stale list is never served for a changed server. Files are written
//! atomically; a file that does not parse, or whose header does not match, is ignored with a
//! warning.
//!
//! Beside the tools, a snapshot keeps what the trust checks found in each ([`Checked`],
//! keyed by content hash and the checks' version), so a start served from snapshots does not
//! scan every tool again. Files without them (older, or written by hand) still load; the
//! checks then run, and the gateway may store their findings back ([`SnapshotStore::save`]
//! with the file's own `saved_at_ms`).
//!
//! Beside each tool file, what else the server offered when it was last asked (its prompts,
//! resources and resource templates: [`OfferKind`]), one file a kind, so listing them can
//! answer for a server that is not running without starting it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::model::Tool;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::ServerSpec;
use crate::hash::fnv1a;
use crate::trust::pins::Fingerprint;
use crate::trust::{checks_version, Checked, Flag, Warning};

const FORMAT: u32 = 1;

/// What is stored for one server.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotFile {
    format: u32,
    gateway_version: String,
    server: String,
    fingerprint: String,
    saved_at_ms: u64,
    tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checks: Option<StoredChecks>,
}

/// What the trust checks found, one entry per tool in `tools`' order.
#[derive(Debug, Serialize, Deserialize)]
struct StoredChecks {
    version: String,
    tools: Vec<StoredCheck>,
}

/// One tool's findings. Hashes as plain numbers: read without an allocation each.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCheck {
    /// The content hash of the tool these findings are of.
    hash: u64,
    description: u64,
    schema: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<StoredWarning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cleaned: Option<Tool>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredWarning {
    flag: String,
    field: String,
    detail: String,
}

impl StoredCheck {
    fn new((hash, checked): &(u64, Checked)) -> Self {
        Self {
            hash: *hash,
            description: checked.fingerprint.description,
            schema: checked.fingerprint.schema,
            warnings: checked
                .warnings
                .iter()
                .map(|w| StoredWarning {
                    flag: w.flag.as_str().to_owned(),
                    field: w.field.clone(),
                    detail: w.detail.clone(),
                })
                .collect(),
            cleaned: checked.cleaned.clone(),
        }
    }

    /// Back to findings; `None` if anything in it is not as this gateway writes it.
    fn read(self) -> Option<(u64, Checked)> {
        let warnings = self
            .warnings
            .into_iter()
            .map(|w| {
                Some(Warning {
                    flag: Flag::from_name(&w.flag)?,
                    field: w.field,
                    detail: w.detail,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((
            self.hash,
            Checked {
                fingerprint: Fingerprint {
                    description: self.description,
                    schema: self.schema,
                },
                warnings,
                cleaned: self.cleaned,
            },
        ))
    }
}

/// A snapshot read back: the tools, how old they are, and the checks' findings if they were
/// stored by this version of the checks.
#[derive(Debug)]
pub struct Snapshot {
    pub tools: Vec<Tool>,
    pub age: Duration,
    pub saved_at_ms: u64,
    /// One per tool, in order; `None` when missing, of another version, or malformed.
    pub checks: Option<Vec<(u64, Checked)>>,
}

/// The snapshot folder of one gateway.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
}

impl SnapshotStore {
    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The store in the platform cache directory, if there is one.
    #[must_use]
    pub fn in_cache_dir() -> Option<Self> {
        crate::paths::cache_dir().map(|d| Self::new(d.join("catalog")))
    }

    fn path(&self, spec: &ServerSpec) -> PathBuf {
        self.dir.join(format!("{}.json", stem(spec)))
    }

    /// The stored tools of `spec`, or `None` (missing, corrupt or foreign files are ignored).
    #[must_use]
    pub fn load(&self, spec: &ServerSpec) -> Option<Snapshot> {
        let path = self.path(spec);
        let bytes = std::fs::read(&path).ok()?;
        match decode(&bytes, spec) {
            Ok(snapshot) => Some(snapshot),
            Err(reason) => {
                tracing::warn!(server = %spec.name, path = %path.display(), %reason, "ignoring catalog snapshot");
                None
            }
        }
    }

    /// Store `tools` for `spec`, with what the checks found in each (`checks[i]` for
    /// `tools[i]`; left out unless there is one per tool), as listed at `saved_at_ms` (now if
    /// `None`). Failures are logged, never fatal: the snapshot is a cache.
    pub fn save(&self, spec: &ServerSpec, tools: &[Tool], checks: Option<&[(u64, Checked)]>, saved_at_ms: Option<u64>) {
        self.save_encoded(spec, &encode(spec, tools, checks, saved_at_ms.unwrap_or_else(now_ms)));
    }

    /// Store a snapshot made by [`encode`] (or read from the shared store).
    pub fn save_encoded(&self, spec: &ServerSpec, text: &str) {
        let path = self.path(spec);
        if let Err(error) = crate::paths::write_atomic(&path, text.as_bytes(), crate::paths::Durability::Cache) {
            tracing::warn!(server = %spec.name, path = %path.display(), %error, "cannot write catalog snapshot");
        }
    }
}

/// The name a snapshot of `spec` is kept under, here and in the shared store: the server
/// and the fingerprint of its launch spec and the gateway version.
#[must_use]
pub fn stem(spec: &ServerSpec) -> String {
    // The fingerprint covers the name, so two names made alike by `file_safe` still differ.
    format!("{}-{}", crate::paths::file_safe(&spec.name), fingerprint(spec))
}

/// `tools` of `spec` as a snapshot's text (see [`SnapshotStore::save`]).
#[must_use]
pub fn encode(spec: &ServerSpec, tools: &[Tool], checks: Option<&[(u64, Checked)]>, saved_at_ms: u64) -> String {
    let checks = checks.filter(|c| c.len() == tools.len()).map(|checks| StoredChecks {
        version: checks_version(),
        tools: checks.iter().map(StoredCheck::new).collect(),
    });
    let file = SnapshotFile {
        format: FORMAT,
        gateway_version: env!("CARGO_PKG_VERSION").to_owned(),
        server: spec.name.clone(),
        fingerprint: fingerprint(spec),
        saved_at_ms,
        tools: tools.iter().cloned().map(scrubbed).collect(),
        checks,
    };
    serde_json::to_string(&file).expect("a snapshot serializes: tools are JSON already")
}

/// Largest snapshot read back (a file, or a value in the shared store): far above any list a
/// server may give (`upstream::listing::MAX_TOOLS` tools).
const MAX_BYTES: usize = 256 * 1024 * 1024;

/// A snapshot's text read back, if it is of `spec` and this gateway version.
pub fn decode(bytes: &[u8], spec: &ServerSpec) -> Result<Snapshot, Unusable> {
    if bytes.len() > MAX_BYTES {
        return Err(Unusable::TooLarge(bytes.len()));
    }
    let file = parse(bytes, spec)?;
    if file.tools.len() > super::MAX_SERVER_TOOLS {
        return Err(Unusable::TooMany(file.tools.len()));
    }
    Ok(Snapshot {
        checks: file.checks.and_then(|checks| read_checks(checks, file.tools.len())),
        tools: file.tools,
        age: age(file.saved_at_ms, SystemTime::now()),
        saved_at_ms: file.saved_at_ms,
    })
}

/// The lists besides tools a snapshot keeps, one file each.
#[derive(Debug, Clone, Copy)]
pub enum OfferKind {
    Prompts,
    Resources,
    ResourceTemplates,
}

impl OfferKind {
    fn suffix(self) -> &'static str {
        match self {
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::ResourceTemplates => "templates",
        }
    }
}

/// One stored list of a kind, headed like a tool snapshot.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OfferFile<T> {
    format: u32,
    gateway_version: String,
    server: String,
    fingerprint: String,
    saved_at_ms: u64,
    /// The list (as JSON while it is written, scrubbed).
    items: T,
}

impl SnapshotStore {
    fn offer_path(&self, spec: &ServerSpec, kind: OfferKind) -> PathBuf {
        let tools = self.path(spec);
        tools.with_extension(format!("{}.json", kind.suffix()))
    }

    /// The stored list of `kind` for `spec`, or `None` (missing, corrupt or foreign).
    #[must_use]
    pub fn load_offers<T: DeserializeOwned>(&self, spec: &ServerSpec, kind: OfferKind) -> Option<Vec<T>> {
        let path = self.offer_path(spec, kind);
        let bytes = std::fs::read(&path).ok()?;
        let file: OfferFile<Vec<T>> = match serde_json::from_slice(&bytes) {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(server = %spec.name, path = %path.display(), %error, "ignoring stored list");
                return None;
            }
        };
        let current = file.format == FORMAT
            && file.gateway_version == env!("CARGO_PKG_VERSION")
            && file.server == spec.name
            && file.fingerprint == fingerprint(spec);
        current.then_some(file.items)
    }

    /// Store the list of `kind` `spec`'s server gave, scrubbed of registered secrets.
    /// Failures are logged, never fatal.
    pub fn save_offers<T: Serialize>(&self, spec: &ServerSpec, kind: OfferKind, items: &[T]) {
        let mut items = match serde_json::to_value(items) {
            Ok(items) => items,
            Err(error) => {
                tracing::warn!(server = %spec.name, %error, "cannot store the list");
                return;
            }
        };
        crate::secrets::scrub_json(&mut items);
        let file = OfferFile {
            format: FORMAT,
            gateway_version: env!("CARGO_PKG_VERSION").to_owned(),
            server: spec.name.clone(),
            fingerprint: fingerprint(spec),
            saved_at_ms: now_ms(),
            items,
        };
        let path = self.offer_path(spec, kind);
        let written = serde_json::to_string(&file)
            .map_err(std::io::Error::other)
            .and_then(|text| crate::paths::write_atomic(&path, text.as_bytes(), crate::paths::Durability::Cache));
        if let Err(error) = written {
            tracing::warn!(server = %spec.name, path = %path.display(), %error, "cannot write the stored list");
        }
    }
}

/// A tool as stored: tools arrive scrubbed, and this catches a secret registered since
/// (another server's). Only the texts that may quote one: the file is the gateway's own
/// record, so the server's name and the tools' names stay as they are, or the snapshot
/// would no longer match its server and be thrown away at every start.
fn scrubbed(mut tool: Tool) -> Tool {
    if crate::secrets::any_registered() {
        crate::secrets::scrub_tool(&mut tool);
    }
    tool
}

/// Stored findings, if they are of this version of the checks and one per tool.
fn read_checks(checks: StoredChecks, tools: usize) -> Option<Vec<(u64, Checked)>> {
    if checks.version != checks_version() || checks.tools.len() != tools {
        return None;
    }
    checks.tools.into_iter().map(StoredCheck::read).collect()
}

/// Why a snapshot is not used.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("unreadable: {0}")]
    Unreadable(#[from] serde_json::Error),
    #[error("written by another version ({version} format {format})")]
    OtherVersion { version: String, format: u32 },
    #[error("belongs to another server or launch spec")]
    OtherServer,
    #[error("{0} bytes: more than any server's list can be")]
    TooLarge(usize),
    #[error("{0} tools: more than a server's list may hold")]
    TooMany(usize),
}

fn parse(bytes: &[u8], spec: &ServerSpec) -> Result<SnapshotFile, Unusable> {
    let file: SnapshotFile = serde_json::from_slice(bytes)?;
    if file.format != FORMAT || file.gateway_version != env!("CARGO_PKG_VERSION") {
        return Err(Unusable::OtherVersion {
            version: file.gateway_version,
            format: file.format,
        });
    }
    if file.server != spec.name || file.fingerprint != fingerprint(spec) {
        return Err(Unusable::OtherServer);
    }
    Ok(file)
}

/// How old a snapshot saved at `saved_at_ms` is at `now`. One from the future (a clock set
/// back, a file copied from another machine, or forged to be served forever) is as old as can
/// be: stale, never fresh.
fn age(saved_at_ms: u64, now: SystemTime) -> Duration {
    now.duration_since(UNIX_EPOCH + Duration::from_millis(saved_at_ms))
        .unwrap_or(Duration::MAX)
}

#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A stable fingerprint of a server's launch spec and the gateway version (FNV-1a, hex).
/// `std`'s hasher is not stable across Rust releases, so it cannot key files on disk.
#[must_use]
pub fn fingerprint(spec: &ServerSpec) -> String {
    let launch = serde_json::to_string(&(&spec.name, &spec.connection, env!("CARGO_PKG_VERSION")))
        .expect("a server spec serializes: plain strings and maps");
    format!("{:016x}", fnv1a(launch.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(command: &str) -> ServerSpec {
        serde_json::from_value(json!({ "name": "srv/1", "connection": { "command": command, "args": ["a"] } })).unwrap()
    }

    fn tool(name: &str) -> Tool {
        Tool::new(name.to_owned(), "d", std::sync::Arc::new(serde_json::Map::new()))
    }

    #[test]
    fn round_trips_a_list_of_prompts_beside_the_tools_of_the_same_launch_spec_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path().to_path_buf());
        let prompt = rmcp::model::Prompt::new("greet", Some("Say hello"), None);
        store.save(&spec("node"), &[tool("a")], None, None);
        store.save_offers(&spec("node"), OfferKind::Prompts, std::slice::from_ref(&prompt));
        let loaded: Vec<rmcp::model::Prompt> = store.load_offers(&spec("node"), OfferKind::Prompts).unwrap();
        assert_eq!(loaded, [prompt]);
        assert_eq!(store.load(&spec("node")).unwrap().tools.len(), 1);
        assert!(store
            .load_offers::<rmcp::model::Prompt>(&spec("deno"), OfferKind::Prompts)
            .is_none());
        assert!(store
            .load_offers::<rmcp::model::Prompt>(&spec("node"), OfferKind::Resources)
            .is_none());
    }

    #[test]
    fn round_trips_tools() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path().to_path_buf());
        store.save(&spec("node"), &[tool("a"), tool("b")], None, None);
        let loaded = store.load(&spec("node")).unwrap();
        assert_eq!(
            loaded.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(loaded.age < Duration::from_secs(60));
    }

    #[test]
    fn a_changed_launch_spec_does_not_see_the_old_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path().to_path_buf());
        store.save(&spec("node"), &[tool("a")], None, None);
        assert!(store.load(&spec("python")).is_none());
        assert_ne!(fingerprint(&spec("node")), fingerprint(&spec("python")));
    }

    #[test]
    fn corrupt_and_foreign_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path().to_path_buf());
        let path = store.path(&spec("node"));
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(store.load(&spec("node")).is_none());
        let foreign = json!({ "format": 1, "gatewayVersion": "0.0.0-other", "server": "srv/1",
            "fingerprint": fingerprint(&spec("node")), "savedAtMs": 0, "tools": [] });
        std::fs::write(&path, foreign.to_string()).unwrap();
        assert!(store.load(&spec("node")).is_none());
    }

    #[test]
    fn the_checks_findings_round_trip_and_are_dropped_when_of_another_version_or_count() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path().to_path_buf());
        let tools = [tool("a"), tool("b")];
        let flagged = Checked {
            fingerprint: Fingerprint {
                description: 1,
                schema: u64::MAX,
            },
            warnings: vec![Warning::new(Flag::Instruction, "description", "quoted")],
            cleaned: Some(tool("b")),
        };
        let clean = Checked {
            fingerprint: Fingerprint::default(),
            warnings: vec![],
            cleaned: None,
        };
        let checks = vec![(7, clean), (u64::MAX, flagged)];
        store.save(&spec("node"), &tools, Some(&checks), Some(1_000));
        let loaded = store.load(&spec("node")).unwrap();
        assert_eq!(loaded.checks.as_deref(), Some(&checks[..]));
        assert_eq!(loaded.saved_at_ms, 1_000, "kept as given");
        // One finding per tool or none at all.
        store.save(&spec("node"), &tools, Some(&checks[..1]), None);
        assert!(store.load(&spec("node")).unwrap().checks.is_none());
        // Findings of other rules are not reused.
        store.save(&spec("node"), &tools, Some(&checks), None);
        let path = store.path(&spec("node"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace(&checks_version(), "0-other")).unwrap();
        let loaded = store.load(&spec("node")).unwrap();
        assert!(loaded.checks.is_none());
        assert_eq!(loaded.tools.len(), 2, "the tools still load");
    }

    #[test]
    fn a_snapshot_from_the_future_is_stale() {
        let now = SystemTime::now();
        let now_ms = u64::try_from(now.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
        let past = age(now_ms - 1_000, now);
        assert!(
            past >= Duration::from_secs(1) && past < Duration::from_secs(2),
            "{past:?}"
        );
        assert_eq!(age(now_ms + 60_000, now), Duration::MAX);
    }
}
