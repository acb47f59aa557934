//! `config reload`: make the gateways that are serving re-read their config now, the way
//! `nginx -s reload` does, and say what each did. A one-shot command has no engine of its own
//! to reload: it finds the serving gateways in the registry (`crate::registry`), asks those
//! serving the same config (or every one with `--all`) through a request file each gateway
//! watches, and waits a few seconds for their answers. Each gateway reloads by the same path
//! a change to its config file takes (`crate::watch`).
//!
//! Exit 0 when every gateway asked reloaded; 2 when one reported a configuration error (it
//! keeps serving its previous config), did not answer in time, or when none is serving.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::output::{exit, Ui};
use super::Options;
use crate::config::{locate, Environment, ZERO_CONFIG_ORIGIN};
use crate::registry::{self, Entry, Outcome, OutcomeError, Reloaded};

#[derive(Debug, Clone, Copy, Args)]
pub struct ReloadArgs {
    /// Every serving gateway, whatever config it serves.
    #[arg(long)]
    all: bool,
    /// How long to wait for the gateways' answers, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    timeout: u64,
}

/// `config reload --json`: `{"config": …, "gateways": [{pid, config, status, …}], "others": n}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    /// The config whose gateways were asked (null with `--all`).
    config: Option<String>,
    gateways: Vec<GatewayReport>,
    /// Gateways serving another config, not asked.
    others: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GatewayReport {
    pid: u32,
    config: String,
    /// `reloaded`, `failed` (the previous config keeps serving) or `no-answer`.
    status: &'static str,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reloaded: Option<Reloaded>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<OutcomeError>,
}

pub fn run(args: ReloadArgs, options: &Options, ui: &Ui) -> i32 {
    let Some(dir) = crate::paths::gateways_dir() else {
        return nothing_serving(None, 0, ui);
    };
    let all = registry::live(&dir);
    let config = (!args.all).then(|| config_served(options));
    let (asked, others): (Vec<Entry>, Vec<Entry>) = all
        .into_iter()
        .partition(|e| config.as_ref().is_none_or(|c| *c == e.config));
    if asked.is_empty() {
        return nothing_serving(config.as_deref(), others.len(), ui);
    }
    let gateways = ask(&dir, &asked, Duration::from_secs(args.timeout));
    let code = if gateways.iter().all(|g| g.status == "reloaded") {
        exit::OK
    } else {
        exit::CONFIGURATION
    };
    let report = Report {
        config,
        gateways,
        others: others.len(),
    };
    ui.result(&report, || human(&report, ui));
    code
}

/// The config this command would serve, spelled as a gateway registers it: the file the
/// search order picks (or the TS/JS file the npm bin evaluated), else zero-config.
fn config_served(options: &Options) -> String {
    let file = match &options.object {
        Some(object) if !object.origin.starts_with('<') => Some(object.origin.clone().into()),
        Some(object) => return object.origin.clone(),
        None => locate(options.config.as_deref(), &Environment::current()).file,
    };
    file.map_or_else(
        || ZERO_CONFIG_ORIGIN.to_owned(),
        |f| crate::watch::canonical(&f).display().to_string(),
    )
}

/// Ask every gateway first, then wait for all: they reload side by side.
fn ask(dir: &Path, gateways: &[Entry], timeout: Duration) -> Vec<GatewayReport> {
    let requests: Vec<_> = gateways.iter().map(|g| registry::request_reload(dir, &g.id)).collect();
    let deadline = Instant::now() + timeout;
    gateways
        .iter()
        .zip(requests)
        .map(|(gateway, request)| {
            let outcome = match request {
                Ok(nonce) => registry::wait_outcome(dir, &gateway.id, &nonce, deadline),
                Err(error) => Some(Outcome {
                    reloaded: None,
                    error: Some(OutcomeError {
                        code: "IO_ERROR".into(),
                        message: format!("cannot write the reload request in {}: {error}", dir.display()),
                    }),
                }),
            };
            report(gateway, outcome)
        })
        .collect()
}

fn report(gateway: &Entry, outcome: Option<Outcome>) -> GatewayReport {
    let (status, reloaded, error) = match outcome {
        Some(Outcome {
            reloaded: Some(reloaded),
            ..
        }) => ("reloaded", Some(reloaded), None),
        Some(Outcome { error, .. }) => ("failed", None, error),
        None => ("no-answer", None, None),
    };
    GatewayReport {
        pid: gateway.pid,
        config: gateway.config.clone(),
        status,
        reloaded,
        error,
    }
}

fn human(report: &Report, ui: &Ui) -> String {
    let p = ui.out;
    let mut out = String::new();
    for g in &report.gateways {
        let head = format!("gateway {} ({})", g.pid, g.config);
        let line = match (&g.reloaded, &g.error) {
            (Some(r), _) => format!(
                "{} {head}: kept {}, restarted {}, stopped {}, added {}\n",
                p.ok("reloaded"),
                r.kept.len(),
                list(&r.restarted),
                list(&r.stopped),
                list(&r.added)
            ),
            (None, Some(e)) => format!(
                "{} {head}: {}\n  the previous config keeps serving; fix the config and run `config reload` again\n",
                p.bad("failed"),
                e.message
            ),
            (None, None) => format!(
                "{} {head}: no answer within the timeout (is it busy or stuck? its stderr says more)\n",
                p.warn("no answer")
            ),
        };
        out.push_str(&line);
    }
    if report.others > 0 {
        let _ = writeln!(
            out,
            "{} more serving other configs (`config reload --all` reloads them too)",
            report.others
        );
    }
    out
}

/// A count, and the names when there are few.
fn list(names: &[String]) -> String {
    match names.len() {
        0 => "0".to_owned(),
        n if n <= 5 => format!("{n} ({})", names.join(", ")),
        n => format!("{n} ({}, …)", names[..5].join(", ")),
    }
}

fn nothing_serving(config: Option<&str>, others: usize, ui: &Ui) -> i32 {
    let what = config.map_or_else(
        || "no gateway is serving".to_owned(),
        |c| format!("no gateway is serving {c}"),
    );
    let more = if others > 0 {
        format!(" ({others} serving other configs: `config reload --all`)")
    } else {
        String::new()
    };
    let message =
        format!("{what}{more}; nothing to reload. A serving gateway reloads by itself when its config file changes.");
    if ui.json {
        let report = serde_json::json!({
            "config": config,
            "gateways": [],
            "others": others,
            "error": { "code": "NOT_FOUND", "message": message },
        });
        super::output::print(&super::output::json::document(&report));
    } else {
        super::output::eprint(&format!("{message}\n"), ui.err);
    }
    exit::NOT_FOUND
}
