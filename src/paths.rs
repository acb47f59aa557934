//! Where the gateway keeps files: the platform cache directory (catalog snapshots) and state
//! directory (audit log), each overridable by an environment variable so tests and
//! containers can point them elsewhere.

use std::path::PathBuf;

/// Overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "ANYGPT_DISCOVERY_CACHE_DIR";
/// Overrides the state directory.
pub const STATE_DIR_ENV: &str = "ANYGPT_DISCOVERY_STATE_DIR";

const APP: &str = "anygpt-discovery";

/// `$ANYGPT_DISCOVERY_CACHE_DIR`, else e.g. `~/.cache/anygpt-discovery`.
#[must_use]
pub fn cache_dir() -> Option<PathBuf> {
    from_env(CACHE_DIR_ENV).or_else(|| dirs::cache_dir().map(|d| d.join(APP)))
}

/// `$ANYGPT_DISCOVERY_STATE_DIR`, else e.g. `~/.local/state/anygpt-discovery` (platforms
/// without a state directory use the local data directory).
#[must_use]
pub fn state_dir() -> Option<PathBuf> {
    from_env(STATE_DIR_ENV).or_else(|| dirs::state_dir().or_else(dirs::data_local_dir).map(|d| d.join(APP)))
}

fn from_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Whether a write must survive a crash of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed to disk before the rename (anything a user would miss).
    Durable,
    /// Not flushed: a cache the next start can do without. A crash may lose or truncate it,
    /// which readers must treat as absent; in exchange the gateway's one thread never waits
    /// for the disk.
    Cache,
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, then a rename, so
/// readers see the old or the new content and never half of one.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8], durability: Durability) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(bytes)?;
    if durability == Durability::Durable {
        file.sync_all()?;
    }
    drop(file);
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/snapshot.json");
        write_atomic(&path, b"one", Durability::Durable).unwrap();
        write_atomic(&path, b"two", Durability::Cache).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["snapshot.json"]);
    }
}
