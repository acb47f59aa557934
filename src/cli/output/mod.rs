//! The CLI's output layer: the one place that writes to stdout (stdout is the MCP channel
//! while serving, so nothing else in the crate may print to it), how each command's result
//! looks for people (`human`) and as JSON (`json`), errors on stderr, and the one mapping
//! from the engine's error codes to exit statuses (`exit`).

pub mod exit;
pub mod human;
pub mod json;
pub mod log_lines;
pub mod style;
pub mod terminal;

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use indicatif::ProgressBar;

use crate::error::{Error, ErrorCode};
use style::Paint;

/// The progress indicator on screen, if any (`cli::progress` draws it): every write goes
/// above it ([`suspended`]) instead of through the middle of it.
static INDICATOR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// The indicator writes must step around from now on (`None`: it is gone).
pub fn show_indicator(bar: Option<ProgressBar>) {
    *INDICATOR.lock().unwrap_or_else(PoisonError::into_inner) = bar;
}

/// Run `write` (a write to stdout or stderr) with the indicator cleared and redrawn after.
pub fn suspended<T>(write: impl FnOnce() -> T) -> T {
    let bar = INDICATOR.lock().unwrap_or_else(PoisonError::into_inner).clone();
    match bar {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// Write `text` to stdout as is (a JSON document, a completion script). A closed pipe
/// (`… | head`) is not an error worth a panic.
pub fn print(text: &str) {
    // Stdout and the indicator on stderr share one terminal: clear the spinner for the write
    // (`execute` prints its header while servers still connect).
    suspended(|| {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    });
}

/// Write human text to stdout, made safe for a terminal ([`terminal::safe`]): it quotes
/// what servers sent. `paint` is the stream's, whose colour codes are kept.
pub fn print_human(text: &str, paint: Paint) {
    print(&terminal::safe(text, paint.enabled));
}

/// Write human text to stderr, made safe for a terminal like [`print_human`].
pub fn eprint(text: &str, paint: Paint) {
    let text = terminal::safe(text, paint.enabled);
    suspended(|| {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes()).and_then(|()| stderr.flush());
    });
}

/// How this run prints: JSON or human, colours, width.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// One JSON document on stdout instead of human text.
    pub json: bool,
    /// No progress indicator and no notes on stderr.
    pub quiet: bool,
    pub out: Paint,
    pub err: Paint,
    pub width: usize,
    /// stderr is a terminal a progress indicator may draw on.
    pub interactive: bool,
}

impl Ui {
    /// Detect the terminal.
    #[must_use]
    pub fn detect(json: bool, quiet: bool) -> Self {
        Self {
            json,
            quiet,
            out: Paint {
                enabled: !json && style::stdout_colour(),
            },
            err: Paint {
                enabled: style::stderr_colour(),
            },
            width: style::width(),
            interactive: !quiet && style::stderr_interactive(),
        }
    }

    /// Print a command's result: `human` text or the JSON document.
    pub fn result<T: serde::Serialize + ?Sized>(&self, value: &T, human: impl FnOnce() -> String) {
        if self.json {
            print(&json::document(value));
        } else {
            print_human(&human(), self.out);
        }
    }

    /// Report an engine error (stderr for people; the JSON document on stdout with `--json`)
    /// and return its exit status.
    #[must_use]
    pub fn error(&self, error: &Error) -> i32 {
        self.error_hinted(error, human::hint(error.code()))
    }

    /// Report a failure that is not an engine error (the `auth` commands' own): `code` and
    /// `message` as [`Ui::error`] shows an error's. Returns the code's exit status.
    #[must_use]
    pub fn fail(&self, code: ErrorCode, message: &str, hint: Option<&'static str>) -> i32 {
        let message = crate::engine::scrub_secrets(message).into_owned();
        if self.json {
            let error = json::ErrorDetail {
                code: code.as_str(),
                message,
                suggestions: Vec::new(),
                hint,
            };
            print(&json::document(&json::ErrorBody { error }));
        } else {
            eprint(&human::failure(code, &message, &[], hint, self.err), self.err);
        }
        exit::status_of(code)
    }

    /// [`Ui::error`] with a hint of the caller's instead of the one for the error's code.
    #[must_use]
    pub fn error_hinted(&self, error: &Error, hint: Option<&'static str>) -> i32 {
        if self.json {
            let mut body = json::ErrorBody::of(error);
            body.error.hint = hint;
            print(&json::document(&body));
        } else {
            eprint(&human::error(error, hint, self.err), self.err);
        }
        exit::status_of(error.code())
    }
}

/// Whether a question can be put to a person: a terminal on stdin and stderr, and no `--json`.
#[must_use]
pub fn can_ask(ui: &Ui) -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !ui.json
}

/// Ask `question` (`… [y/N] `) on the terminal; `false` for anything but yes, and when there is
/// no one to ask ([`can_ask`]): then the command needs its `--yes`.
#[must_use]
pub fn confirm(ui: &Ui, question: &str) -> bool {
    if !can_ask(ui) {
        return false;
    }
    eprint(question, ui.err);
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
