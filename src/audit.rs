//! The audit log: one JSON line per `execute_tool`, appended to a file in the platform state
//! directory and rotated by size.
//!
//! By default a line holds the argument *keys* only: values can carry secrets, so they are
//! written only when `audit.includeArguments` is set. Writing never fails a call: an audit
//! problem is logged once and the call goes on.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

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

/// The open file and its size, so an append costs one `write`, not an open and a stat.
#[derive(Debug, Default)]
struct Writer {
    file: Option<std::fs::File>,
    size: u64,
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
        outcome: Result<bool, crate::ErrorCode>,
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
            error_code: outcome.err().map(crate::ErrorCode::as_str),
            duration_ms: (duration.as_secs_f64() * 1000.0 * 100.0).round() / 100.0,
        };
        let mut line = serde_json::to_vec(&entry).expect("an audit entry serializes: strings and numbers");
        line.push(b'\n');
        let mut writer = self
            .state
            .lock()
            .expect("audit lock is never poisoned: no panics while held");
        if let Err(error) = self.append(&mut writer, &line) {
            // Reopen on the next call: the file may have been moved or its folder removed.
            writer.file = None;
            if !writer.reported {
                tracing::warn!(path = %self.path.display(), %error, "cannot write the audit log");
                writer.reported = true;
            }
        }
    }

    fn append(&self, writer: &mut Writer, line: &[u8]) -> std::io::Result<()> {
        if writer.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
            writer.size = file.metadata()?.len();
            writer.file = Some(file);
        }
        if writer.size > 0 && writer.size + line.len() as u64 > self.max_bytes {
            writer.file = None;
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            std::fs::rename(&self.path, rotated)?;
            writer.file = Some(std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?);
            writer.size = 0;
        }
        writer
            .file
            .as_mut()
            .expect("the file was opened above")
            .write_all(line)?;
        writer.size += line.len() as u64;
        Ok(())
    }
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
        audit.record("fs", "write", None, Err(crate::ErrorCode::ToolDisabled), Duration::ZERO);
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
