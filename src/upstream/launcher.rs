//! Which file a server's `command` names, the way a Windows shell finds it.
//!
//! `CreateProcess` only appends `.exe`, so `"command": "npx"` would fail on Windows, where npm
//! installs `npx.cmd`. A bare name (no directory, no extension) is looked up in each `PATH`
//! directory with each `PATHEXT` extension, in order, as `cmd.exe` does; the standard library
//! then runs a `.cmd`/`.bat` through `cmd.exe` with its own argument escaping. Elsewhere the
//! OS resolves names itself and this is not used. The search is a pure function of `PATH`,
//! `PATHEXT` and a file test, so it is tested on every platform.

use std::path::{Path, PathBuf};

/// What `cmd.exe` tries when `PATHEXT` is unset.
const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// The file `program` resolves to, or `None` to pass it to the OS unchanged (it has a
/// directory or an extension, or nothing on `PATH` matches).
#[cfg_attr(
    not(windows),
    allow(dead_code, reason = "only Windows needs the lookup; tested everywhere")
)]
pub fn resolve(
    program: &str,
    path: Option<&str>,
    pathext: Option<&str>,
    is_file: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let named = Path::new(program);
    if program.is_empty() || program.contains(['/', '\\']) || named.extension().is_some() {
        return None;
    }
    // Lower case, as npm and most installers name the files (Windows itself does not care).
    let extensions: Vec<String> = pathext
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(DEFAULT_PATHEXT)
        .split(';')
        .map(str::trim)
        .filter(|e| e.starts_with('.'))
        .map(str::to_ascii_lowercase)
        // PATHEXT may list script types (.js, .py, .ps1) that only a shell can open;
        // CreateProcess runs programs and, through cmd.exe, batch files.
        .filter(|e| matches!(e.as_str(), ".com" | ".exe" | ".bat" | ".cmd"))
        .collect();
    path.unwrap_or_default()
        .split(';')
        .map(|dir| dir.trim().trim_matches('"'))
        .filter(|dir| !dir.is_empty())
        .flat_map(|dir| {
            extensions
                .iter()
                .map(move |ext| Path::new(dir).join(format!("{program}{ext}")))
        })
        .find(|candidate| is_file(candidate))
}

/// `resolve` against the file system, with the server's own `PATH` when its config sets one
/// (the child will run with it), else the gateway's (Windows only).
#[cfg(windows)]
pub fn resolve_from_env(program: &str, server_path: Option<&str>) -> Option<PathBuf> {
    let path = server_path.map(str::to_owned).or_else(|| std::env::var("PATH").ok());
    let pathext = std::env::var("PATHEXT").ok();
    resolve(program, path.as_deref(), pathext.as_deref(), Path::is_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files<'a>(present: &'a [&'a str]) -> impl Fn(&Path) -> bool + 'a {
        move |p: &Path| present.iter().any(|f| Path::new(f) == p)
    }

    #[test]
    fn bare_name_finds_the_cmd_shim() {
        let found = resolve(
            "npx",
            Some("/a;/nodejs"),
            None,
            files(&["/nodejs/npx.cmd", "/nodejs/npx"]),
        );
        assert_eq!(found, Some(PathBuf::from("/nodejs/npx.cmd")));
    }

    #[test]
    fn path_order_wins_over_extension_order() {
        let present = ["/first/tool.cmd", "/second/tool.exe"];
        assert_eq!(
            resolve("tool", Some("/first;/second"), None, files(&present)),
            Some(PathBuf::from("/first/tool.cmd"))
        );
        // Within one directory, PATHEXT order decides.
        let present = ["/d/tool.cmd", "/d/tool.exe"];
        assert_eq!(
            resolve("tool", Some("/d"), None, files(&present)),
            Some(PathBuf::from("/d/tool.exe"))
        );
        assert_eq!(
            resolve("tool", Some("/d"), Some(".CMD;.EXE"), files(&present)),
            Some(PathBuf::from("/d/tool.cmd"))
        );
    }

    #[test]
    fn names_with_a_directory_or_extension_are_left_to_the_os() {
        let any = |_: &Path| true;
        for program in [
            "node.exe",
            "C:\\tools\\server",
            "./server",
            "bin/server",
            "python3.12",
            "",
        ] {
            assert_eq!(resolve(program, Some("/d"), None, any), None, "{program}");
        }
    }

    #[test]
    fn nothing_found_and_odd_entries_are_harmless() {
        assert_eq!(resolve("npx", None, None, files(&["/d/npx.cmd"])), None);
        assert_eq!(
            resolve("npx", Some(";;\"/d\";"), Some(" ;CMD;.CMD "), files(&["/d/npx.cmd"])),
            Some(PathBuf::from("/d/npx.cmd"))
        );
        assert_eq!(
            resolve("npx", Some("/d"), Some(""), files(&["/d/npx.bat"])),
            Some(PathBuf::from("/d/npx.bat"))
        );
        // Script extensions in PATHEXT are not launchable by CreateProcess: skipped.
        let present = ["/d/tool.js", "/d/tool.cmd"];
        assert_eq!(
            resolve("tool", Some("/d"), Some(".JS;.PY;.CMD"), files(&present)),
            Some(PathBuf::from("/d/tool.cmd"))
        );
    }
}
