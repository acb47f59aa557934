//! Whether a client is running right now, so `setup` and `restore` can say "restart it" to a
//! user whose client still holds the old server list, rather than "restart it if it is
//! running".
//!
//! Read from the process table without privileges: `/proc/<pid>/cmdline` on Linux, `ps` on
//! macOS. Elsewhere (and when the table cannot be read) the answer is "unknown", and the
//! message stays conditional. Only the executable's own name is compared, never arguments:
//! an editor's helper processes are named after the editor, a shell that merely mentions it
//! is not.

use crate::config::sources::SourceKind;

/// Executable names (compared case-insensitively, without `.exe`) each client runs as.
fn executables(client: SourceKind) -> &'static [&'static str] {
    match client {
        SourceKind::ClaudeDesktop => &["claude-desktop", "claude desktop"],
        SourceKind::ClaudeCode => &["claude"],
        SourceKind::Cursor => &["cursor"],
        SourceKind::Vscode => &["code", "code-insiders", "code - insiders", "electron-code"],
        SourceKind::Windsurf => &["windsurf"],
        SourceKind::Zed => &["zed", "zed-editor", "zeditor"],
        SourceKind::DockerMcp | SourceKind::Custom => &[],
    }
}

/// `Some(true)` when a process of `client` runs, `Some(false)` when none does, `None` when
/// this platform's process table could not be read.
#[must_use]
pub fn is_running(client: SourceKind) -> Option<bool> {
    let wanted = executables(client);
    if wanted.is_empty() {
        return None;
    }
    let names = process_names()?;
    Some(names.iter().any(|name| matches(name, wanted)))
}

/// Whether an executable path or name is one of `wanted`.
fn matches(executable: &str, wanted: &[&str]) -> bool {
    let base = executable.rsplit(['/', '\\']).next().unwrap_or(executable);
    let base = base.strip_suffix(".exe").unwrap_or(base).to_lowercase();
    wanted.contains(&base.as_str())
}

/// The executable (argv[0]) of every process this user can see.
#[cfg(target_os = "linux")]
fn process_names() -> Option<Vec<String>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let names = entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .filter_map(|cmdline| {
            let first = cmdline.split(|b| *b == 0).next()?;
            (!first.is_empty()).then(|| String::from_utf8_lossy(first).into_owned())
        })
        .collect();
    Some(names)
}

#[cfg(target_os = "macos")]
fn process_names() -> Option<Vec<String>> {
    // `comm` is the executable's path; app bundles run as `…/Cursor.app/Contents/MacOS/Cursor`.
    let out = std::process::Command::new("ps").args(["-axo", "comm="]).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| line.trim().to_owned())
            .collect()
    })
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn process_names() -> Option<Vec<String>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_by_executable_not_path_or_case() {
        assert!(matches("/usr/share/cursor/Cursor", &["cursor"]));
        assert!(matches("C:\\Program Files\\Zed\\zed.exe", &["zed"]));
        assert!(!matches("/usr/bin/zsh", &["zed"]));
        assert!(!matches("/home/u/cursor-notes/vim", &["cursor"]));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_running_process_of_the_client_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let zed = dir.path().join("zed");
        // A link, not a copy: a copy's write handle, inherited by a process another test forks
        // meanwhile, makes running it fail with "text file busy".
        std::os::unix::fs::symlink("/bin/sleep", &zed).unwrap();
        let mut child = std::process::Command::new(&zed).arg("30").spawn().unwrap();
        // The process table may show the child a moment after `spawn` returns.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = is_running(SourceKind::Zed);
        while found != Some(true) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            found = is_running(SourceKind::Zed);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, Some(true));
        assert_eq!(is_running(SourceKind::Custom), None);
    }
}
