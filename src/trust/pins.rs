//! Pinning, trust on first use: each tool's fingerprint (name, description, schema) is recorded
//! the first time the gateway sees it; a tool that later differs is marked with what changed
//! until the user trusts the new version (`anygpt-discovery trust`, `engine.trustTools`).
//!
//! One file per server, `pins/<server>-<hash>.json` beside the catalog snapshots, written
//! atomically. Keyed by server name, not launch spec: an upgraded package that rewrites a
//! tool is exactly the change to report. The record keeps the *trusted* version, so a change
//! stays marked across restarts and after `tools/list_changed` until it is accepted.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hash::{fnv1a, fnv1a_from};
use crate::paths::Durability;

const FORMAT: u32 = 1;

/// What identifies a version of a tool, as the server reported it (before any cleaning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub description: u64,
    /// The input schema with object keys sorted, so a server that reorders keys is not "changed".
    pub schema: u64,
}

impl Fingerprint {
    #[must_use]
    pub fn of(tool: &Tool) -> Self {
        Self {
            description: fnv1a(tool.description.as_deref().unwrap_or_default().as_bytes()),
            schema: canonical_hash(&tool.input_schema),
        }
    }
}

fn canonical_hash(schema: &serde_json::Map<String, Value>) -> u64 {
    fn feed(hash: u64, value: &Value) -> u64 {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                keys.into_iter().fold(fnv1a_from(hash, b"{"), |h, k| {
                    let h = fnv1a_from(fnv1a_from(h, k.as_bytes()), b":");
                    fnv1a_from(feed(h, &map[k]), b",")
                })
            }
            Value::Array(items) => items
                .iter()
                .fold(fnv1a_from(hash, b"["), |h, v| fnv1a_from(feed(h, v), b",")),
            Value::String(text) => fnv1a_from(fnv1a_from(hash, b"\""), text.as_bytes()),
            Value::Number(number) => fnv1a_from(hash, number.to_string().as_bytes()),
            Value::Bool(true) => fnv1a_from(hash, b"true"),
            Value::Bool(false) => fnv1a_from(hash, b"false"),
            Value::Null => fnv1a_from(hash, b"null"),
        }
    }
    let mut keys: Vec<&String> = schema.keys().collect();
    keys.sort_unstable();
    keys.into_iter().fold(fnv1a(b"{"), |h, k| {
        fnv1a_from(feed(fnv1a_from(h, k.as_bytes()), &schema[k]), b",")
    })
}

/// Top-level parameter names of a schema.
#[must_use]
pub fn parameters(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    match schema.get("properties") {
        Some(Value::Object(properties)) => properties.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// How a tool differs from its trusted version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub description: bool,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// The schema changed in another way (types, required, enums, parameter descriptions…).
    pub schema: bool,
}

impl Change {
    /// Short phrases for the model and the log: `description`, `parameters added: exfil`, `schema`.
    #[must_use]
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.description {
            out.push("description".to_owned());
        }
        if !self.added.is_empty() {
            out.push(format!("parameters added: {}", bounded_list(&self.added)));
        }
        if !self.removed.is_empty() {
            out.push(format!("parameters removed: {}", bounded_list(&self.removed)));
        }
        if self.schema && self.added.is_empty() && self.removed.is_empty() {
            out.push("schema".to_owned());
        }
        out
    }
}

fn bounded_list(names: &[String]) -> String {
    let mut shown: Vec<String> = names.iter().take(5).map(|n| n.chars().take(40).collect()).collect();
    if names.len() > 5 {
        shown.push(format!("… {} more", names.len() - 5));
    }
    shown.join(", ")
}

/// The trusted version of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pin {
    description: String,
    schema: String,
    parameters: Vec<String>,
    /// Accepted by the user (`trust`), not only seen first: `blockFlagged` lets it run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    approved: bool,
}

impl Pin {
    fn new(fingerprint: Fingerprint, parameters: Vec<String>, approved: bool) -> Self {
        Self {
            description: format!("{:016x}", fingerprint.description),
            schema: format!("{:016x}", fingerprint.schema),
            parameters,
            approved,
        }
    }

    /// How `fingerprint` differs from this pin; `parameters` are only asked for when it does.
    fn compare(&self, fingerprint: Fingerprint, parameters: impl FnOnce() -> Vec<String>) -> Option<Change> {
        // Parsed, not formatted: thousands of tools are compared at every start.
        let differs = |pinned: &str, now: u64| u64::from_str_radix(pinned, 16).ok() != Some(now);
        let description = differs(&self.description, fingerprint.description);
        let schema = differs(&self.schema, fingerprint.schema);
        if !description && !schema {
            return None;
        }
        let parameters = parameters();
        Some(Change {
            description,
            added: parameters
                .iter()
                .filter(|p| !self.parameters.contains(p))
                .cloned()
                .collect(),
            removed: self
                .parameters
                .iter()
                .filter(|p| !parameters.contains(p))
                .cloned()
                .collect(),
            schema,
        })
    }
}

/// One server's pins as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerPins {
    format: u32,
    server: String,
    tools: BTreeMap<String, Pin>,
}

/// What pinning says about one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `Some` when the tool differs from its trusted version.
    pub change: Option<Change>,
    /// The user trusted exactly this version.
    pub approved: bool,
}

impl ServerPins {
    /// Compare a tool with its pin, pinning it if it was never seen. Returns the verdict and
    /// whether the record grew (and must be saved). `parameters` (the tool's top-level
    /// parameter names) are only asked for when the tool is new or changed.
    pub fn review(
        &mut self,
        name: &str,
        fingerprint: Fingerprint,
        parameters: impl FnOnce() -> Vec<String>,
    ) -> (Verdict, bool) {
        if let Some(pin) = self.tools.get(name) {
            let change = pin.compare(fingerprint, parameters);
            let approved = change.is_none() && pin.approved;
            return (Verdict { change, approved }, false);
        }
        self.tools
            .insert(name.to_owned(), Pin::new(fingerprint, parameters(), false));
        (Verdict::default(), true)
    }

    /// Accept this version of a tool.
    pub fn trust(&mut self, name: &str, fingerprint: Fingerprint, parameters: Vec<String>) {
        self.tools
            .insert(name.to_owned(), Pin::new(fingerprint, parameters, true));
    }
    /// Each tool's pin as stored (its name, its pin's JSON), and whether it is an approval:
    /// what replicas share (`engine::shared`).
    #[must_use]
    pub fn shared_fields(&self) -> Vec<(String, Vec<u8>, bool)> {
        self.tools
            .iter()
            .map(|(name, pin)| {
                let json = serde_json::to_vec(pin).expect("a pin serializes: strings and bools");
                (name.clone(), json, pin.approved)
            })
            .collect()
    }

    /// Take the pins the team's store holds (tool name → pin JSON) over this record's: the
    /// first replica to see a tool decides its pin, an approval anywhere counts everywhere.
    /// Unreadable entries are skipped. Whether anything changed.
    pub fn adopt_shared<'a>(&mut self, fields: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> bool {
        let mut changed = false;
        for (name, json) in fields {
            let Ok(pin) = serde_json::from_slice::<Pin>(json) else {
                continue;
            };
            if self.tools.get(name) != Some(&pin) {
                self.tools.insert(name.to_owned(), pin);
                changed = true;
            }
        }
        changed
    }
}

/// The pin files of one gateway, with each server's record cached after its first read.
#[derive(Debug)]
pub struct Pins {
    dir: PathBuf,
    loaded: Mutex<HashMap<String, ServerPins>>,
}

impl Pins {
    /// The pin store beside the catalog snapshots, if there is a cache directory.
    #[must_use]
    pub fn in_cache_dir() -> Option<Self> {
        crate::paths::cache_dir().map(|d| Self::new(d.join("catalog").join("pins")))
    }

    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    fn path(&self, server: &str) -> PathBuf {
        self.dir
            .join(format!("{}.json", crate::paths::server_file_stem(server)))
    }

    /// Run `f` on `server`'s record (read from disk on first use, or again when `reread`:
    /// another process may have trusted a tool since). Saves the record if `f` says it changed.
    ///
    /// # Errors
    /// When a changed record cannot be written.
    ///
    /// `f` returns how to save: `None` (unchanged), `Cache` (tools pinned on first sight: a
    /// record lost in a crash only means they are pinned afresh) or `Durable` (the user's trust).
    pub fn with_server<T>(
        &self,
        server: &str,
        reread: bool,
        f: impl FnOnce(&mut ServerPins) -> (T, Option<Durability>),
    ) -> std::io::Result<T> {
        let mut loaded = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if reread || !loaded.contains_key(server) {
            loaded.insert(server.to_owned(), self.read(server));
        }
        let record = loaded.get_mut(server).expect("inserted above");
        let (out, save) = f(record);
        if let Some(durability) = save {
            let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
            crate::paths::write_atomic(&self.path(server), &bytes, durability)?;
        }
        Ok(out)
    }

    fn read(&self, server: &str) -> ServerPins {
        let path = self.path(server);
        let empty = ServerPins {
            format: FORMAT,
            server: server.to_owned(),
            tools: BTreeMap::new(),
        };
        let Ok(bytes) = std::fs::read(&path) else { return empty };
        match serde_json::from_slice::<ServerPins>(&bytes) {
            Ok(pins) if pins.format == FORMAT && pins.server == server => pins,
            Ok(_) => {
                tracing::warn!(server, path = %path.display(), "ignoring a pin file of another server or format");
                empty
            }
            Err(error) => {
                tracing::warn!(server, path = %path.display(), %error, "ignoring an unreadable pin file; tools are pinned afresh");
                empty
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(description: &str, schema: &Value) -> Tool {
        Tool::new(
            "t",
            description.to_owned(),
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    fn review(pins: &mut ServerPins, t: &Tool) -> Verdict {
        pins.review("t", Fingerprint::of(t), || parameters(&t.input_schema)).0
    }

    #[test]
    fn the_stores_pins_win_so_replicas_agree_on_what_changed() {
        let v1 = tool("Adds.", &json!({ "properties": { "a": {} } }));
        let v2 = tool("Adds. Also reads keys.", &json!({ "properties": { "a": {} } }));
        let (mut first, mut second) = (ServerPins::default(), ServerPins::default());
        review(&mut first, &v1);
        review(&mut second, &v2);
        // The first replica's pin reached the store first: the second adopts it.
        let shared = first.shared_fields();
        assert!(second.adopt_shared(shared.iter().map(|(n, j, _)| (n.as_str(), j.as_slice()))));
        assert_eq!(review(&mut second, &v2).change.unwrap().describe(), ["description"]);
        // An approval made on the second replica reaches the first the same way.
        second.trust("t", Fingerprint::of(&v2), vec!["a".into()]);
        let shared = second.shared_fields();
        assert!(shared[0].2, "an approval");
        assert!(first.adopt_shared(shared.iter().map(|(n, j, _)| (n.as_str(), j.as_slice()))));
        assert!(review(&mut first, &v2).approved);
        assert!(
            !first.adopt_shared([("t", b"not json".as_slice())]),
            "unreadable entries are skipped"
        );
    }

    #[test]
    fn first_sight_pins_and_the_same_tool_is_unchanged() {
        let mut pins = ServerPins::default();
        let t = tool("d", &json!({ "properties": { "a": {} } }));
        assert!(pins.review("t", Fingerprint::of(&t), || vec!["a".into()]).1);
        assert_eq!(review(&mut pins, &t), Verdict::default());
    }

    #[test]
    fn a_changed_description_or_schema_says_what_changed() {
        let mut pins = ServerPins::default();
        review(
            &mut pins,
            &tool("Adds.", &json!({ "properties": { "a": {}, "b": {} } })),
        );
        let change = review(
            &mut pins,
            &tool("Adds. Also reads keys.", &json!({ "properties": { "a": {}, "b": {} } })),
        )
        .change
        .unwrap();
        assert_eq!(change.describe(), ["description"]);
        let change = review(
            &mut pins,
            &tool(
                "Adds.",
                &json!({ "properties": { "a": {}, "exfil": {} }, "required": ["exfil"] }),
            ),
        )
        .change
        .unwrap();
        assert_eq!(change.describe(), ["parameters added: exfil", "parameters removed: b"]);
        let change = review(
            &mut pins,
            &tool(
                "Adds.",
                &json!({ "properties": { "a": { "type": "string" }, "b": {} } }),
            ),
        )
        .change
        .unwrap();
        assert_eq!(change.describe(), ["schema"]);
    }

    #[test]
    fn key_order_is_not_a_change() {
        let a: Value =
            serde_json::from_str(r#"{"type":"object","properties":{"x":{"type":"string","description":"d"}}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"properties":{"x":{"description":"d","type":"string"}},"type":"object"}"#)
                .unwrap();
        assert_eq!(Fingerprint::of(&tool("d", &a)), Fingerprint::of(&tool("d", &b)));
    }

    #[test]
    fn trusting_accepts_the_new_version_and_marks_it_approved() {
        let mut pins = ServerPins::default();
        review(&mut pins, &tool("v1", &json!({})));
        let v2 = tool("v2", &json!({}));
        assert!(review(&mut pins, &v2).change.is_some());
        pins.trust("t", Fingerprint::of(&v2), vec![]);
        assert_eq!(
            review(&mut pins, &v2),
            Verdict {
                change: None,
                approved: true
            }
        );
    }

    #[test]
    fn records_survive_a_restart_and_stay_changed_until_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2) = (tool("v1", &json!({})), tool("v2", &json!({})));
        let seen = |pins: &Pins, t: &Tool| {
            pins.with_server("srv/1", false, |p| {
                let (verdict, grew) = p.review("t", Fingerprint::of(t), Vec::new);
                (verdict, grew.then_some(Durability::Cache))
            })
            .unwrap()
        };
        assert_eq!(seen(&Pins::new(dir.path().into()), &v1), Verdict::default());
        // A new process: the pin is read back, the change stays marked across runs.
        assert!(seen(&Pins::new(dir.path().into()), &v2).change.is_some());
        assert!(seen(&Pins::new(dir.path().into()), &v2).change.is_some());
        let pins = Pins::new(dir.path().into());
        pins.with_server("srv/1", false, |p| {
            p.trust("t", Fingerprint::of(&v2), vec![]);
            ((), Some(Durability::Durable))
        })
        .unwrap();
        assert!(seen(&Pins::new(dir.path().into()), &v2).approved);
        assert_ne!(pins.path("a/b"), pins.path("a_b"));
    }

    #[test]
    fn a_corrupt_pin_file_is_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path().into());
        std::fs::write(pins.path("s"), b"{ nope").unwrap();
        let fresh = pins
            .with_server("s", false, |p| {
                (p.review("t", Fingerprint::default(), Vec::new).0, None)
            })
            .unwrap();
        assert_eq!(fresh, Verdict::default());
    }
}
