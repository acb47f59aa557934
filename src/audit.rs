//! The audit log: one JSON line per `execute_tool`, appended to a file in the platform state
//! directory and rotated by size.
//!
//! By default a line holds the argument *keys* only: values can carry secrets, so they are
//! written only when `audit.includeArguments` is set, and even then registered secrets are
//! scrubbed (`crate::secrets`). Writing never fails a call: an audit problem is logged once and
//! the call goes on.
//!
//! Several gateways (one per editor window) share the default file. Each append and each
//! rotation runs under an advisory lock on a sibling `<file>.lock`, which is never renamed, and
//! the writer checks under the lock that its open file is still the one at the path (another
//! gateway may have rotated it away), reopening by path if not; so no line is written into a
//! rotated or deleted file, and none is lost. The files are created owner-only (0600) on Unix.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use fs4::fs_std::FileExt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::AuditSpec;

/// One audited call.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry<'a> {
    pub time: String,
    pub server: &'a str,
    pub tool: &'a str,
    pub argument_keys: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a Map<String, Value>>,
    /// `ok`, `tool_error` (the server answered with `isError`) or `error`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'static str>,
    pub duration_ms: f64,
}

/// The audit log of one engine.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    max_bytes: u64,
    include_arguments: bool,
    /// Serialises appends and rotation.
    state: Mutex<Writer>,
}

/// The open lock and log files. An append costs a lock, a `stat` of the path, an `fstat` of
/// the open file and one `write`: the size is read under the lock because other gateways
/// append too.
#[derive(Debug, Default)]
struct Writer {
    lock: Option<File>,
    file: Option<File>,
    /// A write failure is reported once, not per call.
    reported: bool,
}

impl AuditLog {
    /// The log `spec` describes, or `None` when disabled or no state directory exists.
    #[must_use]
    pub fn from_spec(spec: &AuditSpec) -> Option<Self> {
        if !spec.enabled {
            return None;
        }
        let path = match &spec.path {
            Some(path) => PathBuf::from(path),
            None => crate::paths::state_dir()?.join("audit.jsonl"),
        };
        Some(Self {
            path,
            max_bytes: spec.max_bytes,
            include_arguments: spec.include_arguments,
            state: Mutex::new(Writer::default()),
        })
    }

    #[cfg(test)]
    fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Append one call.
    pub fn record(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
        outcome: Result<bool, crate::error::ErrorCode>,
        duration: Duration,
    ) {
        let entry = AuditEntry {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            server,
            tool,
            argument_keys: arguments
                .map(|a| a.keys().map(String::as_str).collect())
                .unwrap_or_default(),
            arguments: arguments.filter(|_| self.include_arguments),
            outcome: match outcome {
                Ok(false) => "ok",
                Ok(true) => "tool_error",
                Err(_) => "error",
            },
            error_code: outcome.err().map(crate::error::ErrorCode::as_str),
            duration_ms: (duration.as_secs_f64() * 1000.0 * 100.0).round() / 100.0,
        };
        let line = serde_json::to_string(&entry).expect("an audit entry serializes: strings and numbers");
        // A model may pass a key it saw as an argument (or a tool name); the file keeps none.
        let mut line = crate::secrets::scrub(&line).into_owned().into_bytes();
        line.push(b'\n');
        let mut writer = self
            .state
            .lock()
            .expect("audit lock is never poisoned: no panics while held");
        if let Err(error) = self.append(&mut writer, &line) {
            // Reopen on the next call: the file may have been moved or its folder removed.
            writer.file = None;
            writer.lock = None;
            if !writer.reported {
                tracing::warn!(path = %self.path.display(), %error, "cannot write the audit log");
                writer.reported = true;
            }
        }
    }

    /// Append `line` under the cross-process lock, rotating first when it would pass
    /// `max_bytes`.
    fn append(&self, writer: &mut Writer, line: &[u8]) -> std::io::Result<()> {
        if writer.lock.is_none() {
            if let Some(dir) = self.path.parent() {
                crate::paths::create_private_dir_all(dir)?;
            }
            writer.lock = Some(open_private(&suffixed(&self.path, ".lock"), false)?);
        }
        let lock = writer.lock.as_ref().expect("opened above");
        lock.lock_exclusive()?;
        let written = self.append_locked(writer, line);
        // Not `File::unlock` (std 1.89+, above this crate's MSRV). Closing the file on an
        // error also ends the lock.
        let unlocked = FileExt::unlock(writer.lock.as_ref().expect("opened above"));
        written.and(unlocked)
    }

    /// The append itself; the caller holds the lock.
    fn append_locked(&self, writer: &mut Writer, line: &[u8]) -> std::io::Result<()> {
        if !writer.file.as_ref().is_some_and(|file| is_at_path(file, &self.path)) {
            writer.file = Some(open_private(&self.path, true)?);
        }
        let size = writer.file.as_ref().expect("opened above").metadata()?.len();
        if size > 0 && size + line.len() as u64 > self.max_bytes {
            writer.file = None;
            std::fs::rename(&self.path, suffixed(&self.path, ".1"))?;
            writer.file = Some(open_private(&self.path, true)?);
        }
        writer.file.as_mut().expect("opened above").write_all(line)
    }
}

/// `path` with `suffix` appended to its file name (`audit.jsonl` → `audit.jsonl.1`).
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Open (creating, owner-only on Unix) for appending, or for locking only.
fn open_private(path: &Path, append: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    if append {
        options.append(true);
    } else {
        options.write(true).truncate(false);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    crate::paths::make_private(&file)?;
    Ok(file)
}

/// Whether `file` is still the file at `path` (not rotated away or deleted by another gateway).
#[cfg(unix)]
fn is_at_path(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// Elsewhere the file's identity is not at hand through std: reopen by path on each append
/// (still under the lock, so no line lands in a rotated file).
#[cfg(not(unix))]
fn is_at_path(_file: &File, _path: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log(dir: &std::path::Path, include_arguments: bool, max_bytes: u64) -> AuditLog {
        AuditLog::from_spec(&AuditSpec {
            enabled: true,
            path: Some(dir.join("audit.jsonl").display().to_string()),
            include_arguments,
            max_bytes,
        })
        .unwrap()
    }

    fn lines(path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn records_keys_not_values_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), false, 1 << 20);
        let args = json!({ "token": "s3cret", "path": "/x" });
        audit.record("fs", "read", args.as_object(), Ok(false), Duration::from_millis(12));
        audit.record(
            "fs",
            "write",
            None,
            Err(crate::error::ErrorCode::ToolDisabled),
            Duration::ZERO,
        );
        let text = std::fs::read_to_string(audit.path()).unwrap();
        assert!(!text.contains("s3cret"));
        let entries = lines(audit.path());
        assert_eq!(entries[0]["argumentKeys"], json!(["token", "path"]));
        assert_eq!(entries[0]["outcome"], "ok");
        assert_eq!(entries[0]["durationMs"], 12.0);
        assert_eq!(entries[1]["errorCode"], "TOOL_DISABLED");
        assert!(entries[0]["time"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn values_only_when_configured() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), true, 1 << 20);
        audit.record("s", "t", json!({ "q": "v" }).as_object(), Ok(true), Duration::ZERO);
        assert_eq!(lines(audit.path())[0]["arguments"], json!({ "q": "v" }));
        assert_eq!(lines(audit.path())[0]["outcome"], "tool_error");
    }

    #[test]
    fn rotates_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), false, 300);
        for _ in 0..5 {
            audit.record("server", "tool", None, Ok(false), Duration::ZERO);
        }
        let current = std::fs::metadata(audit.path()).unwrap().len();
        assert!(current <= 300, "{current}");
        assert!(dir.path().join("audit.jsonl.1").exists());
    }
}
