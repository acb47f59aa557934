//! Where the gateway keeps files: the platform cache directory (catalog snapshots) and state
//! directory (audit log, the registry of serving gateways), each overridable by an
//! environment variable so tests and containers can point them elsewhere. What it writes there says which tools a user has and
//! what they ran, so on Unix the files are created owner-only (0600) and new folders 0700.

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

/// Where serving gateways register themselves so `config reload` can find them
/// (`crate::registry`): `gateways` under the state directory.
#[must_use]
pub fn gateways_dir() -> Option<PathBuf> {
    state_dir().map(|d| d.join("gateways"))
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

/// A name made safe in a file name on every file system: other characters become `_`, at
/// most 64 are kept. Names can collide this way (`a.b`, `a_b`): add something unique to it.
#[must_use]
pub fn file_safe(name: &str) -> String {
    name.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A server name as the stem of a file name: [`file_safe`], then a hash of the whole name, so
/// `a.b` and `a_b` — or two long names alike in their first 64 characters — never share a file.
#[must_use]
pub fn server_file_stem(server: &str) -> String {
    format!(
        "{}-{:08x}",
        file_safe(server),
        crate::hash::fnv1a(server.as_bytes()) & 0xffff_ffff
    )
}

pub fn create_private_dir_all(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Take group and other permissions off a file of ours created before files were private.
pub fn make_private(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, then a rename, so
/// readers see the old or the new content and never half of one. The file is owner-only on
/// Unix (the temporary one is created so, and the rename keeps it).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8], durability: Durability) -> std::io::Result<()> {
    write_atomic_with(path, bytes, durability, None)
}

/// [`write_atomic`] for a file of the user's that we edit (a client's config): it keeps the
/// permission bits `mode` (Unix; the file's own before the edit) instead of becoming
/// owner-only, and a symlink is followed, so the link stays and its target changes.
pub fn write_atomic_keeping_mode(path: &std::path::Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    write_atomic_with(&target, bytes, Durability::Durable, mode)
}

fn write_atomic_with(
    path: &std::path::Path,
    bytes: &[u8],
    durability: Durability,
    mode: Option<u32>,
) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Two writers in one process (two engines of the Node API) must not share a temporary file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    create_private_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temp)?;
    match mode {
        #[cfg(unix)]
        Some(mode) => {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
        }
        _ => make_private(&file)?,
    }
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
    fn server_file_stems_are_safe_and_distinct() {
        let stem = server_file_stem("../etc/passwd x");
        assert!(stem.starts_with("___etc_passwd_x-"), "{stem}");
        assert_ne!(server_file_stem("a.b"), server_file_stem("a_b"));
        assert_ne!(server_file_stem(&"x".repeat(70)), server_file_stem(&"x".repeat(71)));
    }

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

    #[cfg(unix)]
    #[test]
    fn written_files_and_new_folders_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/snapshot.json");
        write_atomic(&path, b"x", Durability::Cache).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
}
