//! Load-time checks of what a server launch will need: its `cwd` exists, its command is on
//! PATH and its `${VAR}`s are set. Warnings, not errors: the folder may be mounted or the tool
//! installed before the server starts, and one server's problem must not stop the others
//! (it is reported again, as that server's `error` status, if it still fails then).

use std::path::{Path, PathBuf};

use super::{expand, ServerSpec, TransportKind};

/// Check `servers` (from `origin`, relative paths from `base`; `place(i)` is where server `i`'s
/// connection sits in `origin`). Returns the warnings, each naming file, place and fix.
pub(super) fn launch_checks(
    servers: &[ServerSpec],
    origin: &str,
    place: &dyn Fn(usize) -> String,
    base: &Path,
) -> Vec<String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let mut warnings = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let at = place(i);
        let conn = &server.connection;
        for (path, text) in conn.expandable(&at) {
            for name in expand::unset_variables(text, &lookup) {
                warnings.push(format!(
                    "{origin}: {path}: server `{}` uses `${{{name}}}`, which is not set: set it before starting, or write `${{{name}:-default}}`",
                    server.name
                ));
            }
        }
        if conn.kind != TransportKind::Stdio {
            continue;
        }
        let cwd = match conn.cwd.as_deref().map(|c| expand::expand(c, &lookup)) {
            Some(Ok(cwd)) => {
                let dir = base.join(&cwd);
                if !dir.is_dir() {
                    warnings.push(format!(
                        "{origin}: {at}.cwd: folder `{}` of server `{}` does not exist: create it or fix `cwd` (the server will fail to start)",
                        dir.display(),
                        server.name
                    ));
                }
                dir
            }
            _ => base.to_path_buf(),
        };
        if let Some(Ok(command)) = conn.command.as_deref().map(|c| expand::expand(c, &lookup)) {
            if !command_exists(&command, &cwd) {
                warnings.push(format!(
                    "{origin}: {at}.command: `{command}` of server `{}` is not on PATH: install it or write its full path (the server will fail to start)",
                    server.name
                ));
            }
        }
    }
    warnings
}

/// Whether `command` resolves: a path (from `cwd`), or a name found on PATH.
fn command_exists(command: &str, cwd: &Path) -> bool {
    if command.contains('/') || command.contains('\\') {
        return cwd.join(command).is_file();
    }
    let extensions: Vec<String> = if cfg!(windows) {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".EXE;.CMD;.BAT;.COM".into())
            .split(';')
            .map(str::to_owned)
            .chain(std::iter::once(String::new()))
            .collect()
    } else {
        vec![String::new()]
    };
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir: PathBuf| {
            extensions
                .iter()
                .any(|ext| dir.join(format!("{command}{ext}")).is_file())
        })
    })
}
