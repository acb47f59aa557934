//! The serving gateways of this user, so `config reload` can reach them (issue 12 part 6).
//!
//! A gateway that serves registers itself in [`crate::paths::gateways_dir`] (under the state
//! directory): `<id>.json` says which process it is, which config it serves and which files it
//! read; `<id>.lock` is held locked (an OS advisory lock) while the gateway lives. The lock,
//! not the pid, says whether an entry is live: the OS releases it when the process dies however
//! it dies, and a pid may be reused. Entries whose lock is free are stale and removed by the
//! next reader. Files are written atomically and owner-only (`paths::write_atomic`).
//!
//! A reload is asked for with a request file `<id>.reload.<nonce>`, which the gateway's
//! watcher (`crate::watch`) sees; the gateway takes the requests, reloads once (the same path
//! as a config file change), and answers each with `<id>.outcome.<nonce>`. Files rather than
//! a socket or a named pipe: they work the same on Linux, macOS and Windows, need no port,
//! and the state directory is already private to the user.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fs4::fs_std::FileExt;
use serde::{Deserialize, Serialize};

use crate::engine::ReloadSummary;
use crate::paths::{write_atomic, Durability};

/// What a serving gateway says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `<pid>-<n>`: unique among the live gateways.
    pub id: String,
    pub pid: u32,
    /// The config file served (absolute), or `<zero-config>` / `<object>`.
    pub config: String,
    /// The files the config was read from (the config file and the client files it imports).
    pub files: Vec<PathBuf>,
    /// Seconds since the Unix epoch.
    pub started_at: u64,
}

/// What a reload did, as a gateway answers a request: the servers by name, or the error
/// (the previous config keeps serving).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reloaded: Option<Reloaded>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OutcomeError>,
}

/// The servers a reload kept, restarted, stopped and added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    pub kept: Vec<String>,
    pub restarted: Vec<String>,
    pub stopped: Vec<String>,
    pub added: Vec<String>,
}

/// Why a reload failed: the engine's error code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeError {
    pub code: String,
    pub message: String,
}

impl Outcome {
    #[must_use]
    pub fn of(result: &crate::Result<ReloadSummary>) -> Self {
        match result {
            Ok(summary) => Self {
                reloaded: Some(Reloaded {
                    kept: summary.kept.clone(),
                    restarted: summary.restarted.clone(),
                    stopped: summary.stopped.clone(),
                    added: summary.added.clone(),
                }),
                error: None,
            },
            Err(error) => Self {
                reloaded: None,
                error: Some(OutcomeError {
                    code: error.code().to_string(),
                    message: crate::engine::scrub_secrets(&error.to_string()).into_owned(),
                }),
            },
        }
    }
}

/// This process's registration; dropping it removes the entry and releases the lock.
#[derive(Debug)]
pub struct Registration {
    mailbox: Mailbox,
    /// Held locked while the gateway lives.
    lock: Option<File>,
}

/// Where a registered gateway takes its reload requests and leaves its answers: what the
/// reload task needs, without owning the registration.
#[derive(Debug, Clone)]
pub struct Mailbox {
    dir: PathBuf,
    id: String,
}

/// A unique suffix per registration and request in this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

impl Registration {
    /// Register a serving gateway in `dir`: lock first, then the entry, so a reader never sees
    /// an entry of a live gateway without its lock held.
    ///
    /// # Errors
    /// The folder or a file cannot be written.
    pub fn register(dir: &Path, config: &str, files: &[PathBuf]) -> io::Result<Self> {
        crate::paths::create_private_dir_all(dir)?;
        // Absolute and with links resolved: the watcher reports paths so.
        let dir = &std::fs::canonicalize(dir)?;
        let pid = std::process::id();
        let id = format!("{pid}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let lock = open_lock(&dir.join(format!("{id}.lock")))?;
        if !FileExt::try_lock_exclusive(&lock)? {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "the registry lock is taken"));
        }
        let entry = Entry {
            id: id.clone(),
            pid,
            config: config.to_owned(),
            files: files.to_vec(),
            started_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        };
        let registration = Self {
            mailbox: Mailbox { dir: dir.clone(), id },
            lock: Some(lock),
        };
        let bytes = serde_json::to_vec_pretty(&entry).map_err(io::Error::other)?;
        write_atomic(&registration.entry_path(), &bytes, Durability::Cache)?;
        Ok(registration)
    }

    #[cfg(test)]
    fn id(&self) -> &str {
        &self.mailbox.id
    }

    #[must_use]
    pub fn mailbox(&self) -> Mailbox {
        self.mailbox.clone()
    }

    fn entry_path(&self) -> PathBuf {
        self.mailbox.dir.join(format!("{}.json", self.mailbox.id))
    }
}

impl Mailbox {
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `path` is a reload request for this gateway.
    #[must_use]
    pub fn is_request(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path()) && nonce_of(path, &self.id, "reload").is_some()
    }

    /// The pending requests' nonces; their files are removed (each is answered once).
    #[must_use]
    pub fn take_requests(&self) -> Vec<String> {
        let Ok(names) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut nonces = Vec::new();
        for path in names.filter_map(|e| e.ok().map(|e| e.path())) {
            if let Some(nonce) = nonce_of(&path, &self.id, "reload") {
                if std::fs::remove_file(&path).is_ok() {
                    nonces.push(nonce.to_owned());
                }
            }
        }
        nonces
    }

    /// Answer the requests `nonces` with `outcome`.
    pub fn answer(&self, nonces: &[String], outcome: &Outcome) {
        let Ok(bytes) = serde_json::to_vec(outcome) else {
            return;
        };
        for nonce in nonces {
            let path = self.dir.join(format!("{}.outcome.{nonce}", self.id));
            if let Err(error) = write_atomic(&path, &bytes, Durability::Cache) {
                tracing::warn!(%error, file = %path.display(), "cannot answer a reload request");
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Entry first: once the lock is released a reader may clean up too.
        let _ = std::fs::remove_file(self.entry_path());
        let _ = self.mailbox.take_requests();
        drop(self.lock.take());
        let _ = std::fs::remove_file(self.mailbox.dir.join(format!("{}.lock", self.mailbox.id)));
    }
}

fn open_lock(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// `<id>.<kind>.<nonce>` → the nonce.
fn nonce_of<'a>(path: &'a Path, id: &str, kind: &str) -> Option<&'a str> {
    let name = path.file_name()?.to_str()?;
    let nonce = name
        .strip_prefix(id)?
        .strip_prefix('.')?
        .strip_prefix(kind)?
        .strip_prefix('.')?;
    (!nonce.is_empty() && !nonce.contains('.')).then_some(nonce)
}

/// The live gateways registered in `dir`, oldest first. Stale entries (their gateway died
/// without removing them) are removed on the way; unreadable ones are skipped.
#[must_use]
pub fn live(dir: &Path) -> Vec<Entry> {
    let Ok(names) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    for path in names.filter_map(|e| e.ok().map(|e| e.path())) {
        let Some(id) = entry_id(&path) else { continue };
        if is_live(dir, id) {
            let entry = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Entry>(&bytes).ok());
            entries.extend(entry.filter(|e| e.id == id));
        } else {
            remove_stale(dir, id);
        }
    }
    entries.sort_by(|a, b| (a.started_at, &a.id).cmp(&(b.started_at, &b.id)));
    entries
}

/// `<id>.json` → `<id>` (an id has no dot).
fn entry_id(path: &Path) -> Option<&str> {
    let id = path.file_name()?.to_str()?.strip_suffix(".json")?;
    (!id.is_empty() && !id.contains('.') && !id.starts_with('.')).then_some(id)
}

/// Whether the gateway `id` holds its lock. A missing lock file means it is gone (or never
/// finished registering, which is as good as gone for a reload).
fn is_live(dir: &Path, id: &str) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(format!("{id}.lock")))
    else {
        return false;
    };
    // Taken: the gateway lives. A filesystem without locks (an error): assume live rather
    // than delete a live gateway's entry.
    !matches!(FileExt::try_lock_exclusive(&file), Ok(true))
}

fn remove_stale(dir: &Path, id: &str) {
    let _ = std::fs::remove_file(dir.join(format!("{id}.json")));
    if let Ok(names) = std::fs::read_dir(dir) {
        for path in names.filter_map(|e| e.ok().map(|e| e.path())) {
            if nonce_of(&path, id, "reload").is_some() || nonce_of(&path, id, "outcome").is_some() {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let _ = std::fs::remove_file(dir.join(format!("{id}.lock")));
}

/// Ask gateway `id` to reload; returns the request's nonce.
///
/// # Errors
/// The request file cannot be written.
pub fn request_reload(dir: &Path, id: &str) -> io::Result<String> {
    let nonce = format!(
        "{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    write_atomic(&dir.join(format!("{id}.reload.{nonce}")), b"", Durability::Cache)?;
    Ok(nonce)
}

/// Wait until `deadline` for gateway `id`'s answer to request `nonce` (the answer file is
/// removed once read). `None` when none came in time, or the gateway ended.
#[must_use]
pub fn wait_outcome(dir: &Path, id: &str, nonce: &str, deadline: Instant) -> Option<Outcome> {
    const POLL: Duration = Duration::from_millis(20);
    let path = dir.join(format!("{id}.outcome.{nonce}"));
    loop {
        if let Ok(bytes) = std::fs::read(&path) {
            let _ = std::fs::remove_file(&path);
            return serde_json::from_slice(&bytes).ok();
        }
        if Instant::now() >= deadline || !is_live(dir, id) {
            let _ = std::fs::remove_file(dir.join(format!("{id}.reload.{nonce}")));
            return None;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_live_gateway_is_listed_and_its_entry_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![PathBuf::from("/x/c.yaml")];
        let registration = Registration::register(dir.path(), "/x/c.yaml", &files).unwrap();
        let found = live(dir.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, registration.id());
        assert_eq!(found[0].pid, std::process::id());
        assert_eq!(found[0].config, "/x/c.yaml");
        assert_eq!(found[0].files, files);
        drop(registration);
        assert!(live(dir.path()).is_empty());
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn an_entry_whose_lock_is_free_is_stale_and_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        // What a killed gateway leaves: its entry, its lock file (released by the OS), a request.
        let entry = Entry {
            id: "999999-0".into(),
            pid: 999_999,
            config: "/x/c.yaml".into(),
            files: vec![],
            started_at: 1,
        };
        std::fs::write(dir.path().join("999999-0.json"), serde_json::to_vec(&entry).unwrap()).unwrap();
        std::fs::write(dir.path().join("999999-0.lock"), b"").unwrap();
        request_reload(dir.path(), "999999-0").unwrap();
        // And one that never got its lock file.
        std::fs::write(dir.path().join("888888-0.json"), serde_json::to_vec(&entry).unwrap()).unwrap();
        let live_one = Registration::register(dir.path(), "/y/c.json", &[]).unwrap();
        let found = live(dir.path());
        assert_eq!(found.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), [live_one.id()]);
        let left = names(dir.path());
        assert_eq!(
            left,
            [format!("{}.json", live_one.id()), format!("{}.lock", live_one.id())]
        );
    }

    #[test]
    fn an_entry_is_written_atomically_and_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let registration = Registration::register(dir.path(), "<zero-config>", &[]).unwrap();
        // No temporary file left beside it: the rename completed.
        assert!(
            names(dir.path()).iter().all(|n| !n.contains(".tmp")),
            "{:?}",
            names(dir.path())
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(format!("{}.json", registration.id())))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_request_is_taken_once_and_answered() {
        let dir = tempfile::tempdir().unwrap();
        let registration = Registration::register(dir.path(), "/x/c.yaml", &[]).unwrap();
        let nonce = request_reload(dir.path(), registration.id()).unwrap();
        let request = dir.path().join(format!("{}.reload.{nonce}", registration.id()));
        assert!(registration.mailbox().is_request(&request));
        assert!(!registration.mailbox().is_request(&dir.path().join("other-0.reload.1")));
        assert_eq!(registration.mailbox().take_requests(), std::slice::from_ref(&nonce));
        assert!(registration.mailbox().take_requests().is_empty());
        let outcome = Outcome::of(&Ok(ReloadSummary {
            kept: vec!["a".into()],
            ..ReloadSummary::default()
        }));
        registration.mailbox().answer(std::slice::from_ref(&nonce), &outcome);
        let got = wait_outcome(dir.path(), registration.id(), &nonce, Instant::now()).unwrap();
        assert_eq!(got, outcome);
        assert_eq!(names(dir.path()).len(), 2, "the answer is removed once read");
    }

    #[test]
    fn no_answer_from_a_gateway_that_ended() {
        let dir = tempfile::tempdir().unwrap();
        let registration = Registration::register(dir.path(), "/x/c.yaml", &[]).unwrap();
        let id = registration.id().to_owned();
        let nonce = request_reload(dir.path(), &id).unwrap();
        drop(registration);
        let far = Instant::now() + Duration::from_secs(30);
        let began = Instant::now();
        assert!(wait_outcome(dir.path(), &id, &nonce, far).is_none());
        assert!(began.elapsed() < Duration::from_secs(5));
    }
}
