//! `anygpt-discovery auth login|status|logout [server]`: sign in to a server that needs it
//! from a terminal, see which servers hold a sign-in, and forget one.
//!
//! `login` connects the server as the gateway would, and when it asks for a sign-in opens the
//! browser (or prints the address) and waits for it; the tokens land in the token store the
//! gateway reads (`upstream::oauth`) — the shared store when the config names one, so every
//! replica uses them — and a running gateway's next attempt uses them. `status` says where each
//! server's tokens are (the shared store, the OS keychain or the file); `logout` deletes them
//! from all three. No token text is ever printed. Output goes through the CLI's output layer (`--json`: one document).
//! Exit codes: 0 done, 1 bad arguments, 2 a bad config, no such server, a server that cannot
//! sign in as configured, or tokens that cannot be deleted, 3 a failed sign-in.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::{exit, output::Ui};
use crate::config::{Config, ServerSpec, TransportKind};
use crate::error::ErrorCode;
use crate::store::Store;

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
    /// Which servers hold a sign-in (all http servers, or one).
    Status { server: Option<String> },
    /// Forget a server's tokens.
    Logout { server: String },
}

pub async fn run(args: AuthArgs, config: &Config, ui: &Ui) -> i32 {
    // With `discovery.store`, shared sign-ins are kept there, for every replica.
    let shared = match Store::open(&config.discovery.store) {
        Ok(store) => store,
        Err(error) => return ui.fail(ErrorCode::ConfigurationError, &error.to_string(), None),
    };
    let shared = shared.as_ref();
    match args.action {
        AuthAction::Login { server } => match find(config, &server, ui) {
            Ok(spec) => login(spec, shared, ui).await,
            Err(code) => code,
        },
        AuthAction::Status { server } => status(config, server.as_deref(), shared, ui).await,
        AuthAction::Logout { server } => match find(config, &server, ui) {
            Ok(spec) => logout(spec, shared, ui).await,
            Err(code) => code,
        },
    }
}

/// `--json` documents: `{server, signedIn, tools}` (login), `{servers:[{server, status,
/// resource?, refreshes?, scopes?, keptIn?}]}` (status), `{server, signedOut,
/// keychainUnchecked?}` (logout).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LoggedIn<'a> {
    server: &'a str,
    signed_in: bool,
    tools: usize,
}

#[derive(serde::Serialize)]
struct SignInStates {
    servers: Vec<SignInState>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct SignInState {
    server: String,
    /// `signed-in`, `waiting` (for the browser) or `signed-out`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refreshes: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    /// Where the tokens are: the OS keychain, or the file and why not the keychain.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_in: Option<String>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LoggedOut<'a> {
    server: &'a str,
    signed_out: bool,
    /// Why a copy in the OS keychain could not be checked (it may still be there).
    #[serde(skip_serializing_if = "Option::is_none")]
    keychain_unchecked: Option<&'a str>,
}

fn find<'c>(config: &'c Config, name: &str, ui: &Ui) -> Result<&'c ServerSpec, i32> {
    config.servers().iter().find(|s| s.name == name).ok_or_else(|| {
        let http: Vec<&str> = http_servers(config).map(|s| s.name.as_str()).collect();
        let message = format!(
            "no server named `{name}` in the config; http servers: {}",
            if http.is_empty() {
                "none".to_owned()
            } else {
                http.join(", ")
            }
        );
        ui.fail(ErrorCode::ServerNotFound, &message, None)
    })
}

fn http_servers(config: &Config) -> impl Iterator<Item = &ServerSpec> {
    config
        .servers()
        .iter()
        .filter(|s| s.connection.kind == TransportKind::Http)
}

async fn login(spec: &ServerSpec, shared: Option<&Store>, ui: &Ui) -> i32 {
    match crate::upstream::sign_in_now(spec, LOGIN_WAIT, shared).await {
        Ok(tools) => {
            let body = LoggedIn {
                server: &spec.name,
                signed_in: true,
                tools,
            };
            ui.result(&body, || format!("{}: signed in; {tools} tool(s) listed\n", spec.name));
            exit::OK
        }
        Err(error) => {
            // Configured so that it cannot sign in (not http, a fixed Authorization header)
            // is the config's to fix; anything else is the server's or the sign-in's failure.
            let code = if matches!(error, crate::upstream::UpstreamError::Spec { .. }) {
                ErrorCode::ConfigurationError
            } else {
                ErrorCode::ServerConnectionError
            };
            ui.fail(code, &format!("{}: {error}", spec.name), None)
        }
    }
}

async fn status(config: &Config, only: Option<&str>, shared: Option<&Store>, ui: &Ui) -> i32 {
    let servers: Vec<&ServerSpec> = http_servers(config)
        .filter(|s| only.is_none_or(|o| s.name == o))
        .collect();
    if servers.is_empty() {
        let message = only.map_or("no http servers in the config".to_owned(), |o| {
            format!("no http server named `{o}`")
        });
        return ui.fail(ErrorCode::ServerNotFound, &message, None);
    }
    let mut text = String::new();
    let mut json = SignInStates { servers: Vec::new() };
    for spec in servers {
        let stored = crate::upstream::stored_sign_ins(spec, shared).await;
        let held = stored.iter().find(|s| s.has_token);
        json.servers.push(sign_in_status(&spec.name, held));
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
    ui.result(&json, || text);
    exit::OK
}

/// A server's sign-in for `status --json`, as its text line says it: `held` is the stored
/// sign-in with a token, if any.
fn sign_in_status(server: &str, held: Option<&crate::upstream::StoredSignIn>) -> SignInState {
    let status = match held {
        Some(_) => "signed-in",
        None if crate::upstream::sign_in_waiting(server) => "waiting",
        None => "signed-out",
    };
    SignInState {
        server: server.to_owned(),
        status,
        resource: held.map(|s| s.resource.clone()),
        refreshes: held.map(|s| s.has_refresh_token),
        scopes: held.map(|s| s.scopes.clone()).unwrap_or_default(),
        kept_in: held.map(|s| s.kept_in.clone()),
    }
}

async fn logout(spec: &ServerSpec, shared: Option<&Store>, ui: &Ui) -> i32 {
    match crate::upstream::forget_sign_in(spec, shared).await {
        Ok(done) => {
            let said = if done.had_any {
                "signed out (its tokens and registered client are deleted)"
            } else {
                "was not signed in"
            };
            let unchecked = done.keychain_unchecked.as_ref().map_or(String::new(), |why| {
                format!(
                    "; the OS keychain was not checked ({why}): run this again where it answers to delete a copy there"
                )
            });
            let body = LoggedOut {
                server: &spec.name,
                signed_out: done.had_any,
                keychain_unchecked: done.keychain_unchecked.as_deref(),
            };
            ui.result(&body, || format!("{}: {said}{unchecked}\n", spec.name));
            exit::OK
        }
        Err(e) => {
            let message = format!("{}: cannot delete its tokens: {e}", spec.name);
            ui.fail(ErrorCode::ConfigurationError, &message, None)
        }
    }
}
