//! The copy `setup` keeps of a client's file before editing it, and what `restore` checks:
//! one record per client file under `<state>/setup/`, owner-only like everything in the state
//! folder, holding the original text, its mode and a hash of the text `setup` wrote (a file
//! that no longer has it was changed since, and `restore` would lose that change).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::paths::Durability;

/// One backup on disk.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backup {
    /// The client, as `setup` names it.
    pub client: String,
    /// The client's file, as `setup` found it.
    pub file: PathBuf,
    /// The file's text before `setup`.
    pub original: String,
    /// Its Unix permission bits (restored with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// FNV-1a of the text `setup` wrote, hex.
    pub written: String,
    /// When `setup` ran, ms since the epoch.
    pub saved_at_ms: u64,
}

/// The hash `written` holds, of a file's text.
#[must_use]
pub fn text_hash(text: &str) -> String {
    format!("{:016x}", crate::hash::fnv1a(text.as_bytes()))
}

/// Where the backup of `file` lives (named by the client and a hash of the path, so the same
/// client's user and project files each have one).
///
/// # Errors
/// `CONFIGURATION_ERROR` when there is no state folder on this machine.
pub fn path_for(client: &str, file: &Path) -> Result<PathBuf> {
    let dir = crate::paths::state_dir().ok_or_else(|| {
        Error::config(
            file.display().to_string(),
            "(file)",
            format!(
                "no state folder to keep a backup in: set {} to a folder of yours",
                crate::paths::STATE_DIR_ENV
            ),
        )
    })?;
    let key = format!("{client}:{}", file.display());
    Ok(dir
        .join("setup")
        .join(format!("{}.json", crate::paths::server_file_stem(&key))))
}

/// Store `backup` (owner-only, atomic), replacing an older one of the same file.
///
/// # Errors
/// `CONFIGURATION_ERROR` naming the backup file when it cannot be written.
pub fn save(path: &Path, backup: &Backup) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(backup).unwrap_or_default();
    crate::paths::write_atomic(path, &bytes, Durability::Durable).map_err(|e| {
        Error::config(
            path.display().to_string(),
            "(file)",
            format!("cannot write the backup: {e}; nothing was changed"),
        )
    })
}

/// The backup at `path`, or `None` when there is none.
///
/// # Errors
/// `CONFIGURATION_ERROR` for a backup that cannot be read or parsed.
pub fn load(path: &Path) -> Result<Option<Backup>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::config(
                path.display().to_string(),
                "(file)",
                format!("cannot read the backup: {e}"),
            ))
        }
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        Error::config(
            path.display().to_string(),
            "(file)",
            format!("the backup is damaged ({e}); the client's file was left as it is"),
        )
    })
}

/// Milliseconds since the epoch, now.
#[must_use]
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
