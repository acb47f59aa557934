//! The progress indicator on stderr while servers connect: a spinner naming the servers
//! still starting, then one line per server (`✓ name N tools` / `✗ name reason`). Only on a
//! terminal (`Ui::interactive`); piped, quiet or under `NO_COLOR` nothing is drawn.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::output::style::Paint;
use super::output::{self, Ui};
use crate::engine::{Engine, ServerInfo, ServerStatus};

const TICK: Duration = Duration::from_millis(80);

/// What a command reports about its servers on stderr: on a terminal a spinner, then one
/// line per server; piped, one line per server that failed (once: the supervisor's own
/// warnings, which promise retries a one-shot run never makes, are filtered out by the CLI's
/// log filter). Nothing with `--quiet`.
pub struct Progress {
    inner: Mutex<Option<Running>>,
}

struct Running {
    /// The spinner and the task updating it, on a terminal only.
    drawn: Option<(ProgressBar, tokio::task::JoinHandle<()>)>,
    engine: Engine,
    /// The one server the command started, when it started one.
    only: Option<String>,
    ui: Ui,
}

/// The servers the indicator reports on: every one, or the one the command started.
fn shown(engine: &Engine, only: Option<&str>) -> Vec<ServerInfo> {
    let mut servers = engine.server_statuses();
    if let Some(only) = only {
        servers.retain(|s| s.name == only);
    }
    servers
}

impl Progress {
    /// Start reporting on every server or only `only`, the one a command started (needs a
    /// tokio runtime); the spinner only when `ui` is interactive.
    pub fn start(engine: &Engine, ui: &Ui, only: Option<&str>) -> Self {
        let running = (!ui.quiet).then(|| Running {
            drawn: (ui.interactive && !shown(engine, only).is_empty()).then(|| spin(engine, ui, only)),
            engine: engine.clone(),
            only: only.map(str::to_owned),
            ui: *ui,
        });
        Self {
            inner: Mutex::new(running),
        }
    }

    /// A writer for lines to stderr while the indicator may be drawing (`execute --stream`):
    /// above the spinner while it runs, straight to stderr otherwise; terminal-safe either way
    /// (`paint`'s colour codes kept).
    pub fn line_writer(&self, paint: Paint) -> impl Fn(&str) + Send + Sync + 'static {
        let bar = self
            .inner
            .lock()
            .expect("progress lock is never poisoned")
            .as_ref()
            .and_then(|running| running.drawn.as_ref())
            .map(|(bar, _)| bar.clone());
        move |line: &str| match &bar {
            Some(bar) if !bar.is_finished() => {
                bar.println(output::terminal::safe(line, paint.enabled).trim_end_matches('\n'));
            }
            _ => output::eprint(line, paint),
        }
    }

    /// Clear the spinner and print each server's line; piped, only failed servers' lines, and
    /// only for a command about every server (one about a single server reports its failure
    /// as its error). Later calls do nothing.
    pub fn finish(&self) {
        let Some(running) = self.inner.lock().expect("progress lock is never poisoned").take() else {
            return;
        };
        let drawn = running.drawn.is_some();
        if let Some((bar, updater)) = running.drawn {
            updater.abort();
            output::show_indicator(None);
            bar.finish_and_clear();
        } else if running.only.is_some() {
            return;
        }
        let mut lines = String::new();
        for server in shown(&running.engine, running.only.as_deref()) {
            if drawn || server.status.is_trouble() {
                lines.push_str(&server_line(&server, running.ui, drawn));
            }
        }
        output::eprint(&lines, running.ui.err);
    }
}

/// The spinner on stderr, updated from the servers' states until [`Progress::finish`].
fn spin(engine: &Engine, ui: &Ui, only: Option<&str>) -> (ProgressBar, tokio::task::JoinHandle<()>) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        // Coloured only as our own output is: indicatif's colour detection does not know
        // `FORCE_COLOR=0`.
        ProgressStyle::with_template(if ui.err.enabled {
            "{spinner:.cyan} {msg}"
        } else {
            "{spinner} {msg}"
        })
        .expect("the template is valid")
        .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "),
    );
    bar.enable_steady_tick(TICK);
    bar.set_message("connecting servers…");
    output::show_indicator(Some(bar.clone()));
    let updater = tokio::spawn({
        let (bar, engine, only) = (bar.clone(), engine.clone(), only.map(str::to_owned));
        async move {
            loop {
                bar.set_message(waiting_message(&shown(&engine, only.as_deref())));
                tokio::time::sleep(TICK).await;
            }
        }
    });
    (bar, updater)
}

fn waiting_message(servers: &[ServerInfo]) -> String {
    // Idle without tools: not started yet (an idle server with tools is served from its snapshot).
    let starting: Vec<&str> = servers
        .iter()
        .filter(|s| s.status == ServerStatus::Connecting || (s.status == ServerStatus::Idle && s.tool_count == 0))
        .map(|s| s.name.as_str())
        .collect();
    let failed = servers.iter().filter(|s| s.status.is_trouble()).count();
    let ready = servers.len() - starting.len() - failed;
    let failed = if failed > 0 {
        format!(", {failed} failed")
    } else {
        String::new()
    };
    if starting.is_empty() {
        return format!("{ready}/{} servers ready{failed}", servers.len());
    }
    format!(
        "connecting {} ({ready}/{} ready{failed})",
        starting.join(", "),
        servers.len()
    )
}

/// `✓ name 13 tools`, `… name connecting`, `✗ name reason`; one terminal line each under
/// the spinner (`fit`), else whole: piped, the reason is the news.
fn server_line(server: &ServerInfo, ui: Ui, fit: bool) -> String {
    let p = ui.err;
    let tools = format!(
        "{} tool{}",
        server.tool_count,
        if server.tool_count == 1 { "" } else { "s" }
    );
    let line = match server.status {
        ServerStatus::Connected => format!("{} {} {tools}", p.ok("✓"), server.name),
        ServerStatus::Idle => format!("{} {} {tools} {}", p.ok("✓"), server.name, p.dim("(cached)")),
        ServerStatus::Connecting => format!("{} {} still connecting", p.warn("…"), server.name),
        ServerStatus::NeedsSignIn | ServerStatus::Error => format!(
            "{} {} {}",
            p.bad("✗"),
            server.name,
            server.reason.as_deref().unwrap_or("failed")
        ),
    };
    let mut line = if fit {
        console::truncate_str(&line, ui.width, "…").into_owned()
    } else {
        line
    };
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, status: ServerStatus, tools: usize, error: Option<&str>) -> ServerInfo {
        ServerInfo::new(name, status, tools, error)
    }

    #[test]
    fn the_spinner_names_servers_still_starting() {
        let servers = [
            server("a", ServerStatus::Connected, 3, None),
            server("b", ServerStatus::Connecting, 0, None),
            server("c", ServerStatus::Idle, 0, None),
            server("d", ServerStatus::Error, 0, Some("boom")),
            server("e", ServerStatus::Idle, 2, None),
        ];
        assert_eq!(waiting_message(&servers), "connecting b, c (2/5 ready, 1 failed)");
        assert_eq!(waiting_message(&servers[..1]), "1/1 servers ready");
    }

    /// Human output without colour, `width` columns wide.
    fn uncoloured(width: usize, interactive: bool) -> Ui {
        Ui {
            json: false,
            quiet: false,
            out: Paint { enabled: false },
            err: Paint { enabled: false },
            width,
            interactive,
        }
    }

    #[test]
    fn one_line_per_server_fits_the_width() {
        let ui = uncoloured(40, true);
        assert_eq!(
            server_line(&server("a", ServerStatus::Connected, 1, None), ui, true),
            "✓ a 1 tool\n"
        );
        assert_eq!(
            server_line(&server("e", ServerStatus::Idle, 2, None), ui, true),
            "✓ e 2 tools (cached)\n"
        );
        let failed = server("d", ServerStatus::Error, 0, Some(&"x".repeat(80)));
        let line = server_line(&failed, ui, true);
        assert!(line.starts_with("✗ d xxx") && line.ends_with("…\n"), "{line}");
        assert_eq!(console::measure_text_width(line.trim_end()), 40);
        // Piped, the whole reason.
        assert_eq!(server_line(&failed, ui, false), format!("✗ d {}\n", "x".repeat(80)));
    }

    #[test]
    fn a_failed_servers_line_promises_no_retry() {
        let ui = uncoloured(80, false);
        let mut failed = server(
            "d",
            ServerStatus::Error,
            0,
            Some("command `nope` not found (next attempt in 2 s)"),
        );
        failed.reason = Some("command `nope` not found".into());
        assert_eq!(server_line(&failed, ui, false), "✗ d command `nope` not found\n");
    }

    #[test]
    fn a_server_waiting_for_a_sign_in_is_not_ready_and_says_how() {
        let how = "needs sign-in: run `anygpt-discovery auth login linear`";
        let waiting = server("linear", ServerStatus::NeedsSignIn, 4, Some(how));
        assert_eq!(
            server_line(&waiting, uncoloured(80, false), false),
            format!("✗ linear {how}\n")
        );
        let servers = [server("a", ServerStatus::Connected, 3, None), waiting];
        assert_eq!(waiting_message(&servers), "1/2 servers ready, 1 failed");
    }
}
