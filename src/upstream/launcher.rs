//! Starting a server's program: which file its `command` names (the way a Windows shell
//! finds it), and why a start failed, in words that name the real cause and its fix.
//!
//! The OS answers a failed spawn with one errno for several causes: `ENOENT` when the
//! program is missing, but also when the `cwd` is, or when a script's `#!` interpreter is.
//! `SpawnError::classify` looks at the file system after the failure to tell them apart.
//!
//! `CreateProcess` only appends `.exe`, so `"command": "npx"` would fail on Windows, where npm
//! installs `npx.cmd`. A bare name (no directory, no extension) is looked up in each `PATH`
//! directory with each `PATHEXT` extension, in order, as `cmd.exe` does; the standard library
//! then runs a `.cmd`/`.bat` through `cmd.exe` with its own argument escaping. Elsewhere the
//! OS resolves names itself and this is not used. The search is a pure function of `PATH`,
//! `PATHEXT` and a file test, so it is tested on every platform.

use std::ffi::OsStr;
use std::io;
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

/// Why a server's process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("working directory `{}` does not exist: create it, or fix `cwd` in the server's config", .cwd.display())]
    CwdMissing {
        cwd: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("working directory `{}` is not a directory: point `cwd` at a folder", .cwd.display())]
    CwdNotADirectory {
        cwd: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("working directory `{}` cannot be entered (permission denied): fix its permissions or `cwd`", .cwd.display())]
    CwdNotAccessible {
        cwd: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("command `{program}` not found on PATH: install it, or give its full path in `command`")]
    CommandNotFound {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("command `{}` not found: no such file{}", .path.display(), if .path.is_relative() {
        " (relative paths start from the server's `cwd`)"
    } else {
        ""
    })]
    FileNotFound {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` exists, but {}", .path.display(), if *.script {
        "the interpreter its `#!` line names is not installed: install it, or run the script through an interpreter in `command`"
    } else {
        "the loader it needs is missing (a program built for another system?): install a build for this one"
    })]
    InterpreterNotFound {
        path: PathBuf,
        /// A `#!` script (else a binary).
        script: bool,
        #[source]
        source: io::Error,
    },
    #[error("`{program}` is not executable (permission denied): `chmod +x` it, or run it through its interpreter in `command`")]
    NotExecutable {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("`{program}` is not a program this system can run (a script without a `#!` line, or built for another platform): run it through its interpreter in `command`")]
    NotAProgram {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot start `{program}`: {source}")]
    Other {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// What the child's environment and file system say about a failed start; the real
/// file system in production, anything in tests.
pub trait Probe {
    /// Whether `path` exists (following links), and is a directory.
    fn kind(&self, path: &Path) -> Option<FileKind>;
    /// The first line of a file, when it starts with `#!`.
    fn shebang(&self, path: &Path) -> Option<String>;
}

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
}

/// The real file system.
pub struct Disk;

impl Probe for Disk {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        let meta = std::fs::metadata(path).ok()?;
        Some(if meta.is_dir() { FileKind::Dir } else { FileKind::File })
    }

    fn shebang(&self, path: &Path) -> Option<String> {
        use std::io::Read;
        let mut head = [0u8; 256];
        let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
        let head = head.get(..n)?;
        let line = head.split(|&b| b == b'\n').next()?;
        line.starts_with(b"#!")
            .then(|| String::from_utf8_lossy(line).into_owned())
    }
}

impl SpawnError {
    /// The cause of `error`, returned by spawning `program` in `cwd` (`None`: the gateway's)
    /// with `path` as the child's `PATH`.
    #[must_use]
    pub fn classify(
        error: io::Error,
        program: &OsStr,
        cwd: Option<&Path>,
        path: Option<&OsStr>,
        probe: &impl Probe,
    ) -> Self {
        let shown = program.to_string_lossy().into_owned();
        if let Some(cwd) = cwd {
            match (probe.kind(cwd), error.kind()) {
                (None, io::ErrorKind::NotFound) => {
                    return Self::CwdMissing {
                        cwd: cwd.to_owned(),
                        source: error,
                    }
                }
                (Some(FileKind::File), _) => {
                    return Self::CwdNotADirectory {
                        cwd: cwd.to_owned(),
                        source: error,
                    }
                }
                _ => {}
            }
        }
        let named = Path::new(program);
        // Unix resolves a program with a directory part from the child's working directory.
        let file = if named.components().count() > 1 || named.is_absolute() {
            Some(cwd.map_or_else(|| named.to_owned(), |cwd| cwd.join(named)))
        } else {
            find_on_path(program, path, probe)
        };
        match error.kind() {
            io::ErrorKind::NotFound => match file {
                Some(file) if probe.kind(&file) == Some(FileKind::File) => {
                    let script = probe.shebang(&file).is_some();
                    Self::InterpreterNotFound {
                        path: file,
                        script,
                        source: error,
                    }
                }
                Some(file) if named.components().count() > 1 || named.is_absolute() => Self::FileNotFound {
                    path: file,
                    source: error,
                },
                _ => Self::CommandNotFound {
                    program: shown,
                    source: error,
                },
            },
            io::ErrorKind::PermissionDenied => match (cwd, file) {
                (_, Some(file)) if probe.kind(&file) == Some(FileKind::File) => Self::NotExecutable {
                    program: shown,
                    source: error,
                },
                // No program file in sight: the directory is what could not be entered.
                (Some(cwd), _) => Self::CwdNotAccessible {
                    cwd: cwd.to_owned(),
                    source: error,
                },
                (None, _) => Self::NotExecutable {
                    program: shown,
                    source: error,
                },
            },
            _ if is_exec_format_error(&error) => Self::NotAProgram {
                program: shown,
                source: error,
            },
            _ => Self::Other {
                program: shown,
                source: error,
            },
        }
    }
}

/// The first `PATH` entry holding a file named `program`.
fn find_on_path(program: &OsStr, path: Option<&OsStr>, probe: &impl Probe) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|candidate| probe.kind(candidate) == Some(FileKind::File))
}

/// `ENOEXEC` (unix) / `ERROR_BAD_EXE_FORMAT` (windows): the file is not a runnable image.
fn is_exec_format_error(error: &io::Error) -> bool {
    const ENOEXEC: i32 = 8;
    const ERROR_BAD_EXE_FORMAT: i32 = 193;
    let code = if cfg!(windows) { ERROR_BAD_EXE_FORMAT } else { ENOEXEC };
    error.raw_os_error() == Some(code)
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

    /// A pretend file system: paths that are files, dirs, and scripts with a `#!` line.
    struct Fake {
        files: Vec<&'static str>,
        dirs: Vec<&'static str>,
        scripts: Vec<&'static str>,
    }

    impl Probe for Fake {
        fn kind(&self, path: &Path) -> Option<FileKind> {
            let is = |list: &[&str]| list.iter().any(|p| Path::new(p) == path);
            if is(&self.dirs) {
                Some(FileKind::Dir)
            } else if is(&self.files) || is(&self.scripts) {
                Some(FileKind::File)
            } else {
                None
            }
        }
        fn shebang(&self, path: &Path) -> Option<String> {
            self.scripts
                .iter()
                .any(|p| Path::new(p) == path)
                .then(|| "#!/usr/bin/python9".to_owned())
        }
    }

    fn fake() -> Fake {
        Fake {
            files: vec!["/usr/bin/node", "/srv/file.txt", "/srv/app/run"],
            dirs: vec!["/usr/bin", "/srv", "/srv/app"],
            scripts: vec!["/srv/app/tool.py", "/usr/bin/tool.py"],
        }
    }

    fn classify(error: io::Error, program: &str, cwd: Option<&str>) -> String {
        let path = Some(OsStr::new("/nowhere:/usr/bin"));
        SpawnError::classify(error, OsStr::new(program), cwd.map(Path::new), path, &fake()).to_string()
    }

    fn os(kind: io::ErrorKind) -> io::Error {
        io::Error::from(kind)
    }

    #[test]
    fn a_missing_cwd_is_named_not_the_command() {
        let text = classify(os(io::ErrorKind::NotFound), "/usr/bin/node", Some("/srv/gone"));
        assert_eq!(
            text,
            "working directory `/srv/gone` does not exist: create it, or fix `cwd` in the server's config"
        );
    }

    #[test]
    fn a_cwd_that_is_a_file() {
        let text = classify(os(io::ErrorKind::NotADirectory), "node", Some("/srv/file.txt"));
        assert!(
            text.starts_with("working directory `/srv/file.txt` is not a directory"),
            "{text}"
        );
    }

    #[test]
    fn a_command_missing_from_path_or_disk() {
        let text = classify(os(io::ErrorKind::NotFound), "nodez", Some("/srv"));
        assert_eq!(
            text,
            "command `nodez` not found on PATH: install it, or give its full path in `command`"
        );
        let text = classify(os(io::ErrorKind::NotFound), "./server", Some("/srv/app"));
        assert!(
            text.starts_with("command `/srv/app/./server` not found: no such file"),
            "{text}"
        );
    }

    #[test]
    fn a_script_whose_interpreter_is_missing() {
        for (program, cwd) in [("./tool.py", Some("/srv/app")), ("tool.py", None)] {
            let text = classify(os(io::ErrorKind::NotFound), program, cwd);
            assert!(
                text.contains("the interpreter its `#!` line names is not installed"),
                "{text}"
            );
        }
    }

    #[test]
    fn permission_denied_names_the_file_or_the_folder() {
        let text = classify(os(io::ErrorKind::PermissionDenied), "./run", Some("/srv/app"));
        assert!(text.starts_with("`./run` is not executable"), "{text}");
        let text = classify(os(io::ErrorKind::PermissionDenied), "node", None);
        assert!(text.starts_with("`node` is not executable"), "{text}");
        // No program file found: the folder is what could not be entered.
        let text = classify(os(io::ErrorKind::PermissionDenied), "mystery", Some("/srv"));
        assert!(text.starts_with("working directory `/srv` cannot be entered"), "{text}");
    }

    #[test]
    fn exec_format_and_other_errors() {
        let enoexec = io::Error::from_raw_os_error(if cfg!(windows) { 193 } else { 8 });
        let text = classify(enoexec, "/srv/app/run", None);
        assert!(text.contains("is not a program this system can run"), "{text}");
        let text = classify(io::Error::other("boom"), "node", None);
        assert_eq!(text, "cannot start `node`: boom");
    }

    #[test]
    fn the_real_disk_tells_a_missing_cwd_from_a_missing_command() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let error = std::process::Command::new("sh").current_dir(&gone).spawn().unwrap_err();
        let path = std::env::var_os("PATH");
        let text = SpawnError::classify(error, OsStr::new("sh"), Some(&gone), path.as_deref(), &Disk).to_string();
        assert!(text.contains("does not exist"), "{text}");
        let error = std::process::Command::new("surely-not-a-command-x")
            .spawn()
            .unwrap_err();
        let text = SpawnError::classify(
            error,
            OsStr::new("surely-not-a-command-x"),
            None,
            path.as_deref(),
            &Disk,
        );
        assert!(matches!(text, SpawnError::CommandNotFound { .. }), "{text}");
    }
}
