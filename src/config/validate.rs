//! Load-time checks of what a server launch will need: its `cwd` exists, its command is on
//! PATH and its `${VAR}`s are set. Warnings, not errors: the folder may be mounted or the tool
//! installed before the server starts, and one server's problem must not stop the others
//! (it is reported again, as that server's `error` status, if it still fails then).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{expand, ServerSpec, TransportKind};

/// Which bare command names were found on PATH, for one config load. Hundreds of servers
/// launched by a handful of commands (`npx`, `uvx`, `docker`…) would otherwise probe every
/// PATH folder once per server: about ten `stat`s a server, all before `initialize` is
/// answered (3 ms with 328 servers, the whole of their startup cost over 3 servers).
#[derive(Default)]
pub(super) struct OnPath(HashMap<String, bool>);

impl OnPath {
    fn has(&mut self, command: &str) -> bool {
        if let Some(&found) = self.0.get(command) {
            return found;
        }
        let found = on_path(command);
        self.0.insert(command.to_owned(), found);
        found
    }
}

/// Check `servers` (from `origin`, relative paths from `base`; `place(i)` is where server `i`'s
/// connection sits in `origin`). Returns the warnings, each naming file, place and fix.
pub(super) fn launch_checks(
    servers: &[ServerSpec],
    origin: &str,
    place: &dyn Fn(usize) -> String,
    base: &Path,
    on_path: &mut OnPath,
) -> Vec<String> {
    let lookup = expand::lookup;
    let mut warnings = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let at = place(i);
        let conn = &server.connection;
        for (path, text) in conn.expandable(&at) {
            for name in expand::unset_variables(text, &lookup) {
                if let Some(secret) = name.strip_prefix(expand::SECRET_PREFIX) {
                    warnings.push(format!(
                        "{origin}: {path}: server `{}` uses `${{secret:{secret}}}`, which is not stored: run `anygpt-discovery secret set {secret}` before starting",
                        server.name
                    ));
                    continue;
                }
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
            if !command_exists(&command, &cwd, on_path) {
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
fn command_exists(command: &str, cwd: &Path, on_path: &mut OnPath) -> bool {
    if command.contains('/') || command.contains('\\') {
        cwd.join(command).is_file()
    } else {
        on_path.has(command)
    }
}

/// Whether a file named `command` (with a PATHEXT extension on Windows) is in a PATH folder.
fn on_path(command: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: &str) -> ServerSpec {
        serde_json::from_value(serde_json::json!({ "name": name, "connection": { "command": command } })).unwrap()
    }

    #[test]
    fn a_command_looked_up_once_is_reported_for_every_server_that_uses_it() {
        let servers = [
            server("a", "no-such-command-anygpt"),
            server("b", "sh"),
            server("c", "no-such-command-anygpt"),
            server("d", "sh"),
        ];
        let mut on_path = OnPath::default();
        let warnings = launch_checks(&servers, "c.json", &|i| format!("s[{i}]"), Path::new("/"), &mut on_path);
        let flagged: Vec<&str> = warnings
            .iter()
            .filter_map(|w| w.split("of server `").nth(1)?.split('`').next())
            .collect();
        assert_eq!(flagged, ["a", "c"], "{warnings:?}");
        assert_eq!(on_path.0.len(), 2, "each command looked up once");
    }
}
