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
//!
//! Where the log goes is a path a config names, so it is contained ([`resolve_path`]): a
//! project's config may only name a file inside the state directory (else a cloned repository
//! could have the model's text appended to `~/.bashrc`), and whatever config names it, the
//! gateway never appends to a file that is not already an audit log: not a symlink, a device,
//! `/dev/stdout` (the MCP channel) or a file with other content ([`open_log`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use fs4::fs_std::FileExt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::AuditSpec;

/// Why a configured `audit.path` is refused; said as the reason of a configuration error at
/// `discovery.audit.path`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuditPathError {
    #[error(
        "a project's config may only put the audit log inside the state folder `{}`, not at `{}`: \
         name the file relative to that folder (e.g. `audit.jsonl`), or set `audit.path` in your \
         user config (~/.anygpt/mcp-discovery.config.*)",
        .state_dir.display(), .path
    )]
    OutsideStateDir { path: String, state_dir: PathBuf },
    #[error(
        "a project's config may only put the audit log inside the state folder, and `{0}` climbs out of it \
         with `..`: name a file inside that folder, or set `audit.path` in your user config"
    )]
    ParentComponent(String),
    #[error("`{0}` starts with `~` but no home folder is known: write the whole path")]
    NoHome(String),
    #[error("no state folder is known on this machine for the audit log: set ANYGPT_DISCOVERY_STATE_DIR")]
    NoStateDir,
}

/// Where the log of `configured` (`audit.path` as written) goes: `~/` expanded with `home`;
/// `None` for the default, `audit.jsonl` in `state_dir`. `users_own` is whether the config
/// naming it is the user's own (under their home, or named by `--config`); a project's config
/// is held to the state folder: a relative path is taken inside it, `..` is refused, and an
/// absolute one must lie within it.
///
/// # Errors
/// A project path outside the state folder, or a `~` path without a home.
pub fn resolve_path(
    configured: Option<&str>,
    users_own: bool,
    home: Option<&Path>,
    state_dir: Option<&Path>,
) -> Result<PathBuf, AuditPathError> {
    let Some(written) = configured else {
        return state_dir
            .map(|dir| dir.join("audit.jsonl"))
            .ok_or(AuditPathError::NoStateDir);
    };
    let path = expand_home(written, home)?;
    if users_own {
        return Ok(path);
    }
    let state_dir = state_dir.ok_or(AuditPathError::NoStateDir)?;
    if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(AuditPathError::ParentComponent(written.to_owned()));
    }
    let path = state_dir.join(path);
    if !path.starts_with(state_dir) || path == state_dir {
        return Err(AuditPathError::OutsideStateDir {
            path: written.to_owned(),
            state_dir: state_dir.to_owned(),
        });
    }
    Ok(path)
}

/// `~` or `~/…` made absolute with `home`; other paths as written.
fn expand_home(written: &str, home: Option<&Path>) -> Result<PathBuf, AuditPathError> {
    let rest = match written.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with(['/', '\\']) => &rest[1..],
        _ => return Ok(PathBuf::from(written)),
    };
    let home = home.ok_or_else(|| AuditPathError::NoHome(written.to_owned()))?;
    Ok(home.join(rest))
}

/// Where the log `spec` names goes on this machine (see [`resolve_path`]).
///
/// # Errors
/// As [`resolve_path`].
pub fn log_path(spec: &AuditSpec, users_own: bool) -> Result<PathBuf, AuditPathError> {
    let home = crate::config::Environment::current().home;
    let state_dir = crate::paths::state_dir();
    resolve_path(spec.path.as_deref(), users_own, home.as_deref(), state_dir.as_deref())
}

/// The log at `path` and its rotated predecessor, oldest first, as far as they exist.
#[must_use]
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    [suffixed(path, ".1"), path.to_owned()]
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

/// When a call ended and how long it took: taken once, so the audit line and the live
/// statistics ([`crate::stats::Stats::record`]) agree and `stats` rebuilt from the log matches.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub at: SystemTime,
    pub took: Duration,
}

impl Finished {
    /// A call that started at `started` and ends now.
    #[must_use]
    pub fn now(started: std::time::Instant) -> Self {
        Self {
            at: SystemTime::now(),
            took: started.elapsed(),
        }
    }

    /// A call that took `took` and ends now (tests).
    #[cfg(test)]
    pub fn took(took: Duration) -> Self {
        Self {
            at: SystemTime::now(),
            took,
        }
    }
}

/// One audited call.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry<'a> {
    pub time: String,
    /// Who asked: `local`, or the HTTP face's authenticated caller (`issuer#subject`).
    pub caller: &'a str,
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
    /// The human's answer when a toolRules `confirm` covered the call (`crate::confirm::Answer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirm: Option<&'static str>,
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
    /// The log `spec` describes, or `None` when disabled or its path cannot be had (no state
    /// directory; a path [`resolve_path`] refuses, which config validation reported already).
    /// `users_own`: whether the config is the user's own (see [`resolve_path`]).
    #[must_use]
    pub fn from_spec(spec: &AuditSpec, users_own: bool) -> Option<Self> {
        if !spec.enabled {
            return None;
        }
        let path = match log_path(spec, users_own) {
            Ok(path) => path,
            Err(error) => {
                tracing::warn!(%error, "no audit log");
                return None;
            }
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

    /// Append one call, made for `caller` ([`crate::caller::Caller::label`]).
    // One argument per field of the line it writes.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        caller: &str,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
        outcome: Result<bool, crate::error::ErrorCode>,
        finished: Finished,
        confirm: Option<&'static str>,
    ) {
        let duration = finished.took;
        let entry = AuditEntry {
            time: humantime::format_rfc3339_millis(finished.at).to_string(),
            caller,
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
            confirm,
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
            writer.file = Some(open_log(&self.path)?);
        }
        let size = writer.file.as_ref().expect("opened above").metadata()?.len();
        if size > 0 && size + line.len() as u64 > self.max_bytes {
            writer.file = None;
            let rotated = suffixed(&self.path, ".1");
            // The rename replaces `<file>.1`: only ever an old log of ours.
            if let Ok(old) = open_existing(&rotated) {
                check_is_log(&old, &rotated)?;
            }
            std::fs::rename(&self.path, rotated)?;
            writer.file = Some(open_log(&self.path)?);
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

/// Open (creating, owner-only on Unix) for appending, or for locking only. A symlink at
/// `path` is not followed (the open fails): the log is written where the path says.
fn open_private(path: &Path, append: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    if append {
        options.append(true).read(true);
    } else {
        options.write(true).truncate(false);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    // Only a file that is ours to write may be made private.
    if append {
        check_is_log(&file, path)?;
    }
    crate::paths::make_private(&file)?;
    Ok(file)
}

/// The log at `path`, opened for appending: created, or an existing audit log.
fn open_log(path: &Path) -> std::io::Result<File> {
    open_private(path, true)
}

/// An existing file, read-only, links not followed.
fn open_existing(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, nix::libc::O_NOFOLLOW);
    options.open(path)
}

/// The longest first line read to tell an audit log from another file.
const FIRST_LINE_BYTES: u64 = 64 * 1024;

/// Refuse `file` unless it is a regular file that is empty or begins with an audit line: the
/// gateway never appends to (nor changes the mode of) a file that is not its own log.
fn check_is_log(file: &File, path: &Path) -> std::io::Result<()> {
    use std::io::{BufRead, BufReader, Read};
    let refuse = |what: &str| {
        std::io::Error::other(format!(
            "`{}` {what}: the gateway appends only to its own audit log; point `audit.path` at a new file",
            path.display()
        ))
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(refuse("is not a regular file"));
    }
    if metadata.len() == 0 {
        return Ok(());
    }
    let mut first = Vec::new();
    BufReader::new(file.take(FIRST_LINE_BYTES)).read_until(b'\n', &mut first)?;
    if is_audit_line(&first) {
        Ok(())
    } else {
        Err(refuse("is not an audit log (its first line is not an audit entry)"))
    }
}

/// Whether `line` is one of ours: a JSON object with an entry's fields.
fn is_audit_line(line: &[u8]) -> bool {
    serde_json::from_slice::<Map<String, Value>>(line.trim_ascii()).is_ok_and(|entry| {
        ["time", "server", "tool", "outcome"]
            .iter()
            .all(|key| entry.contains_key(*key))
    })
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
        AuditLog::from_spec(
            &AuditSpec {
                enabled: true,
                path: Some(dir.join("audit.jsonl").display().to_string()),
                include_arguments,
                max_bytes,
            },
            true,
        )
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
        audit.record(
            "https://id.example#alice",
            "fs",
            "read",
            args.as_object(),
            Ok(false),
            Finished::took(Duration::from_millis(12)),
            None,
        );
        audit.record(
            "local",
            "fs",
            "write",
            None,
            Err(crate::error::ErrorCode::ToolDisabled),
            Finished::took(Duration::ZERO),
            None,
        );
        let text = std::fs::read_to_string(audit.path()).unwrap();
        assert!(!text.contains("s3cret"));
        let entries = lines(audit.path());
        assert_eq!(entries[0]["argumentKeys"], json!(["token", "path"]));
        assert_eq!(entries[0]["caller"], "https://id.example#alice");
        assert_eq!(entries[1]["caller"], "local");
        assert_eq!(entries[0]["outcome"], "ok");
        assert_eq!(entries[0]["durationMs"], 12.0);
        assert_eq!(entries[1]["errorCode"], "TOOL_DISABLED");
        assert!(entries[0]["time"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn the_line_and_the_live_statistics_show_one_instant() {
        // Two clocks read a moment apart once made `stats` from the log differ by a millisecond.
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), false, 1 << 20);
        let stats = crate::stats::Stats::default();
        let finished = Finished {
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_790_000_000_123),
            took: Duration::from_millis(5),
        };
        audit.record("local", "s", "t", None, Ok(false), finished, None);
        stats.record("s", "t", crate::stats::Outcome::Ok, finished);
        let line = &lines(audit.path())[0];
        assert_eq!(line["time"], "2026-09-21T14:13:20.123Z");
        assert_eq!(
            stats.snapshot(None).tools[0].last_call.as_deref(),
            line["time"].as_str()
        );
    }

    #[test]
    fn values_only_when_configured() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), true, 1 << 20);
        audit.record(
            "local",
            "s",
            "t",
            json!({ "q": "v" }).as_object(),
            Ok(true),
            Finished::took(Duration::ZERO),
            None,
        );
        assert_eq!(lines(audit.path())[0]["arguments"], json!({ "q": "v" }));
        assert_eq!(lines(audit.path())[0]["outcome"], "tool_error");
    }

    #[test]
    fn rotates_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), false, 300);
        for _ in 0..5 {
            audit.record(
                "local",
                "server",
                "tool",
                None,
                Ok(false),
                Finished::took(Duration::ZERO),
                None,
            );
        }
        let current = std::fs::metadata(audit.path()).unwrap().len();
        assert!(current <= 300, "{current}");
        assert!(dir.path().join("audit.jsonl.1").exists());
    }

    #[test]
    fn a_project_config_keeps_the_log_in_the_state_folder() {
        let home = Path::new("/home/u");
        let state = Path::new("/home/u/.local/state/anygpt-discovery");
        let resolve = |path: &str, users_own| resolve_path(Some(path), users_own, Some(home), Some(state));
        // The user's own config puts it anywhere, `~` expanded.
        assert_eq!(resolve("~/.bashrc", true).unwrap(), home.join(".bashrc"));
        assert_eq!(
            resolve("/var/log/a.jsonl", true).unwrap(),
            Path::new("/var/log/a.jsonl")
        );
        // A project's: inside the state folder only.
        assert_eq!(resolve("p.jsonl", false).unwrap(), state.join("p.jsonl"));
        assert_eq!(
            resolve(&state.join("x/p.jsonl").display().to_string(), false).unwrap(),
            state.join("x/p.jsonl")
        );
        for outside in [
            "~/.bashrc",
            "/etc/passwd",
            "/home/u/.local/state/anygpt-discovery-evil/a",
        ] {
            let error = resolve(outside, false).unwrap_err();
            assert!(
                matches!(error, AuditPathError::OutsideStateDir { .. }),
                "{outside}: {error:?}"
            );
            assert!(error.to_string().contains("user config"), "{error}");
        }
        assert!(matches!(
            resolve("../../.bashrc", false),
            Err(AuditPathError::ParentComponent(_))
        ));
        assert!(matches!(
            resolve(&state.display().to_string(), false),
            Err(AuditPathError::OutsideStateDir { .. })
        ));
        assert_eq!(
            resolve_path(None, false, None, Some(state)).unwrap(),
            state.join("audit.jsonl")
        );
        assert!(matches!(
            resolve_path(Some("~/a"), true, None, Some(state)),
            Err(AuditPathError::NoHome(_))
        ));
    }

    #[test]
    fn never_appends_to_a_file_that_is_not_an_audit_log() {
        let dir = tempfile::tempdir().unwrap();
        let rc = dir.path().join("audit.jsonl");
        std::fs::write(&rc, "export PATH=/usr/bin\n").unwrap();
        #[cfg(unix)]
        std::fs::set_permissions(&rc, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let audit = log(dir.path(), true, 1 << 20);
        audit.record(
            "local",
            "s",
            "t",
            json!({ "q": "echo owned" }).as_object(),
            Ok(false),
            Finished::took(Duration::ZERO),
            None,
        );
        assert_eq!(std::fs::read_to_string(&rc).unwrap(), "export PATH=/usr/bin\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&rc).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "its mode is left alone too");
        }
    }

    #[cfg(unix)]
    #[test]
    fn never_follows_a_link_or_writes_to_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("audit.jsonl")).unwrap();
        log(dir.path(), false, 1 << 20).record(
            "local",
            "s",
            "t",
            None,
            Ok(false),
            Finished::took(Duration::ZERO),
            None,
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "",
            "the link's target is untouched"
        );

        let error = open_log(Path::new("/dev/null")).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }

    #[test]
    fn an_existing_log_is_appended_to_and_a_foreign_rotation_target_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let audit = log(dir.path(), false, 1 << 20);
        audit.record("local", "s", "t", None, Ok(false), Finished::took(Duration::ZERO), None);
        let again = log(dir.path(), false, 1 << 20);
        again.record("local", "s", "u", None, Ok(false), Finished::took(Duration::ZERO), None);
        assert_eq!(lines(again.path()).len(), 2);

        let small = log(dir.path(), false, 10);
        let rotated = dir.path().join("audit.jsonl.1");
        std::fs::write(&rotated, "precious\n").unwrap();
        small.record("local", "s", "v", None, Ok(false), Finished::took(Duration::ZERO), None);
        assert_eq!(std::fs::read_to_string(&rotated).unwrap(), "precious\n");
    }
}
