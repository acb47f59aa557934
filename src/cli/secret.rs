//! `anygpt-discovery secret set|list|delete NAME`: values a config names as `${secret:NAME}`,
//! kept in the OS keychain (or an owner-only file), never in the config (`crate::secret_store`).
//!
//! `set` reads the value from the terminal without echo, or from stdin with `--stdin` — never
//! from the command line, where shells keep history and other users see `ps`. No value is
//! ever printed. Exit codes: 0 done, 1 bad arguments (a bad name, an empty value, no terminal
//! without `--stdin`), 2 no such secret (`delete`) or a file that cannot be written.

use std::io::{IsTerminal, Read};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::{exit, Ui};
use crate::error::Error;
use crate::secret_store::{self, Kept};

#[derive(Debug, Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    action: SecretAction,
}

#[derive(Debug, Subcommand)]
enum SecretAction {
    /// Store a value (asked for without echo; `--stdin` reads it from stdin).
    Set {
        /// The name a config uses as `${secret:NAME}`.
        name: String,
        /// Read the value from stdin (for scripts; a trailing newline is dropped).
        #[arg(long)]
        stdin: bool,
    },
    /// The stored secrets' names and where each is kept (never their values).
    List,
    /// Forget a secret.
    Delete { name: String },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stored<'a> {
    name: &'a str,
    kept_in: Kept,
}

#[derive(Serialize)]
struct Deleted<'a> {
    name: &'a str,
    deleted: bool,
}

/// Run a `secret` command; returns the exit code.
pub fn run(args: &SecretArgs, ui: &Ui) -> i32 {
    match &args.action {
        SecretAction::Set { name, stdin } => set(name, *stdin, ui),
        SecretAction::List => match secret_store::list() {
            Ok(listed) => {
                ui.result(&serde_json::json!({ "secrets": listed }), || {
                    if listed.is_empty() {
                        return "no secrets stored: `anygpt-discovery secret set NAME` stores one\n".to_owned();
                    }
                    let lines: Vec<String> = listed
                        .iter()
                        .map(|s| format!("{}  ({})", s.name, kept_word(s.kept)))
                        .collect();
                    lines.join("\n") + "\n"
                });
                exit::OK
            }
            Err(e) => ui.error_hinted(&e, None),
        },
        SecretAction::Delete { name } => match secret_store::delete(name) {
            Ok(true) => {
                ui.result(&Deleted { name, deleted: true }, || format!("deleted secret {name}\n"));
                exit::OK
            }
            Ok(false) => ui.fail(
                crate::error::ErrorCode::ServerNotFound,
                &format!("no secret named `{name}`"),
                Some("`anygpt-discovery secret list` shows the stored ones"),
            ),
            Err(e) => ui.error_hinted(&e, None),
        },
    }
}

fn kept_word(kept: Kept) -> &'static str {
    match kept {
        Kept::Keychain => "OS keychain",
        Kept::File => "owner-only file",
    }
}

fn set(name: &str, from_stdin: bool, ui: &Ui) -> i32 {
    if let Err(e) = secret_store::check_name(name) {
        return ui.error_hinted(&e, None);
    }
    let value = match read_value(name, from_stdin) {
        Ok(value) => value,
        Err(e) => {
            return ui.error_hinted(
                &e,
                Some("type it on a terminal, or pipe it in with --stdin (never on the command line)"),
            )
        }
    };
    match secret_store::set(name, &value) {
        Ok(kept) => {
            ui.result(&Stored { name, kept_in: kept }, || {
                format!(
                    "stored secret {name} in the {}; use it as ${{secret:{name}}} in env, args, url or headers\n",
                    kept_word(kept)
                )
            });
            exit::OK
        }
        Err(e) => ui.error_hinted(&e, None),
    }
}

/// The value: from stdin (one trailing line break dropped), or typed on the terminal unseen.
fn read_value(name: &str, from_stdin: bool) -> crate::Result<String> {
    let value = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Error::validation(format!("cannot read the value from stdin: {e}")))?;
        let trimmed = text.strip_suffix('\n').unwrap_or(&text);
        trimmed.strip_suffix('\r').unwrap_or(trimmed).to_owned()
    } else {
        if !std::io::stdin().is_terminal() {
            return Err(Error::validation(
                "no terminal to type the value on: pass --stdin to read it from stdin",
            ));
        }
        let term = console::Term::stderr();
        let _ = term.write_str(&format!("value for {name} (not shown): "));
        let value = term
            .read_secure_line()
            .map_err(|e| Error::validation(format!("cannot read the value: {e}")))?;
        let _ = term.write_line("");
        value
    };
    if value.is_empty() {
        return Err(Error::validation(format!("secret `{name}`: the value is empty")));
    }
    Ok(value)
}
