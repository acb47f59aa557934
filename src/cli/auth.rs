//! `anygpt-discovery auth login|status|logout [server]`: sign in to a server that needs it
//! from a terminal, see which servers hold a sign-in, and forget one.
//!
//! `login` connects the server as the gateway would, and when it asks for a sign-in opens the
//! browser (or prints the address) and waits for it; the tokens land in the token store the
//! gateway reads (`upstream::oauth`), so a running gateway's next attempt uses them. `status`
//! says where each server's tokens are (the OS keychain or the file); `logout` deletes them from
//! both. No token text is ever printed. Exit codes: 0 done, 1 bad arguments or config or a failed sign-in,
//! 2 no such server.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::{exit, output};
use crate::config::{Config, ServerSpec, TransportKind};

/// How long `auth login` waits for the person to finish in the browser.
const LOGIN_WAIT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Args)]
pub struct AuthArgs {
    #[command(subcommand)]
    action: AuthAction,
}

#[derive(Debug, Subcommand)]
enum AuthAction {
    /// Sign in to a server (opens the browser; BROWSER picks which).
    Login { server: String },
    /// Which servers hold a sign-in and where: the OS keychain, or the owner-only file in the
    /// state directory (`ANYGPT_DISCOVERY_TOKEN_STORE=file` skips the keychain).
    Status { server: Option<String> },
    /// Forget a server's tokens and registered client (keychain and file).
    Logout { server: String },
}

pub async fn run(args: AuthArgs, config: &Config) -> i32 {
    match args.action {
        AuthAction::Login { server } => match find(config, &server) {
            Ok(spec) => login(spec).await,
            Err(code) => code,
        },
        AuthAction::Status { server } => status(config, server.as_deref()).await,
        AuthAction::Logout { server } => match find(config, &server) {
            Ok(spec) => logout(spec).await,
            Err(code) => code,
        },
    }
}

fn find<'c>(config: &'c Config, name: &str) -> Result<&'c ServerSpec, i32> {
    config.servers().iter().find(|s| s.name == name).ok_or_else(|| {
        let http: Vec<&str> = http_servers(config).map(|s| s.name.as_str()).collect();
        eprintln!(
            "error: no server named `{name}` in the config; http servers: {}",
            if http.is_empty() {
                "none".to_owned()
            } else {
                http.join(", ")
            }
        );
        exit::NOT_FOUND
    })
}

fn http_servers(config: &Config) -> impl Iterator<Item = &ServerSpec> {
    config
        .servers()
        .iter()
        .filter(|s| s.connection.kind == TransportKind::Http)
}

async fn login(spec: &ServerSpec) -> i32 {
    match crate::upstream::sign_in_now(spec, LOGIN_WAIT).await {
        Ok(tools) => {
            output::print(&format!("{}: signed in; {tools} tool(s) listed\n", spec.name));
            exit::OK
        }
        Err(error) => {
            eprintln!("error: {}: {error}", spec.name);
            exit::BAD_INPUT
        }
    }
}

async fn status(config: &Config, only: Option<&str>) -> i32 {
    let servers: Vec<&ServerSpec> = http_servers(config)
        .filter(|s| only.is_none_or(|o| s.name == o))
        .collect();
    if servers.is_empty() {
        eprintln!(
            "error: {}",
            only.map_or("no http servers in the config".to_owned(), |o| format!(
                "no http server named `{o}`"
            ))
        );
        return exit::NOT_FOUND;
    }
    let mut text = String::new();
    for spec in servers {
        let stored = crate::upstream::stored_sign_ins(&spec.name).await;
        let line = match stored.iter().find(|s| s.has_token) {
            Some(sign_in) => format!(
                "{}: signed in ({}{}{}); tokens in {}",
                spec.name,
                sign_in.resource,
                if sign_in.has_refresh_token {
                    ", refreshes by itself"
                } else {
                    ""
                },
                if sign_in.scopes.is_empty() {
                    String::new()
                } else {
                    format!(", scopes: {}", sign_in.scopes.join(" "))
                },
                sign_in.kept_in,
            ),
            None if crate::upstream::sign_in_waiting(&spec.name) => format!("{}: waiting for the browser", spec.name),
            None => format!(
                "{}: not signed in (run `anygpt-discovery auth login {}` if it needs it)",
                spec.name, spec.name
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    output::print(&text);
    exit::OK
}

async fn logout(spec: &ServerSpec) -> i32 {
    match crate::upstream::forget_sign_in(&spec.name).await {
        Ok(done) => {
            let said = if done.had_any {
                "signed out (its tokens and registered client are deleted)"
            } else {
                "was not signed in"
            };
            let unchecked = done.keychain_unchecked.map_or(String::new(), |why| {
                format!(
                    "; the OS keychain was not checked ({why}): run this again where it answers to delete a copy there"
                )
            });
            output::print(&format!("{}: {said}{unchecked}\n", spec.name));
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {}: cannot delete its tokens: {e}", spec.name);
            exit::BAD_INPUT
        }
    }
}
