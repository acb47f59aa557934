//! Log lines on their way to stderr: one event a line, scrubbed, escaped, bounded, and —
//! while serving — never blocking the gateway.
//!
//! A log line quotes what servers and clients sent (a server's command, its stderr, a tool
//! name), so each line is made inert before it leaves: registered secrets scrubbed, every
//! control, escape and invisible character (bidi overrides included, which reorder what a
//! reader sees) written as a `\u{…}` escape, line breaks inside an event as `\n` so one event
//! can never forge another line, and at most [`MAX_LINE_BYTES`].
//!
//! While serving, stderr may be a pipe nobody reads (some clients never drain it): a full
//! pipe would block the thread that logs, which is the gateway's only runtime thread. So a
//! server's lines go through a bounded queue to a writer thread of their own; when the queue
//! is full a line is dropped and counted, and the next line written says how many were lost.
//! Commands (not serving) write at once, in order with the rest of their output.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::trust::poison::is_invisible;

/// Longest log line written, in bytes; the rest is cut and its size said.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Lines queued for the writer thread before new ones are dropped.
const QUEUE_LINES: usize = 4096;

/// The writer thread's queue, once a server started it.
static QUEUE: OnceLock<SyncSender<String>> = OnceLock::new();
/// Lines dropped since the last one written.
static DROPPED: AtomicUsize = AtomicUsize::new(0);
/// Lines queued and not yet written.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// From now on, lines go through the writer thread (a server's logging). Idempotent.
pub fn write_in_background() {
    QUEUE.get_or_init(|| {
        let (send, receive) = sync_channel::<String>(QUEUE_LINES);
        let spawned = std::thread::Builder::new().name("anygpt-log".into()).spawn(move || {
            for line in receive {
                let lost = DROPPED.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    write_now(&format!(
                        "WARN {lost} log lines dropped: stderr was not being read fast enough\n"
                    ));
                }
                write_now(&line);
                PENDING.fetch_sub(1, Ordering::Release);
            }
        });
        if let Err(error) = spawned {
            // Without the thread, the queue's receiver is gone and `emit` writes at once.
            eprintln!("WARN cannot start the log writer thread ({error}); logging synchronously");
        }
        send
    });
}

/// Wait up to `within` for queued lines to be written (before the process exits).
pub fn drain(within: Duration) {
    let deadline = Instant::now() + within;
    while PENDING.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Write one event's text: made inert, then queued (serving) or written at once.
pub fn emit(event: &[u8]) {
    if event.is_empty() {
        return;
    }
    let line = inert_line(&String::from_utf8_lossy(event));
    let Some(queue) = QUEUE.get() else {
        write_now(&line);
        return;
    };
    PENDING.fetch_add(1, Ordering::Release);
    match queue.try_send(line) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) => {
            PENDING.fetch_sub(1, Ordering::Release);
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Err(TrySendError::Disconnected(line)) => {
            PENDING.fetch_sub(1, Ordering::Release);
            write_now(&line);
        }
    }
}

fn write_now(line: &str) {
    // Above a command's progress indicator, not through it.
    super::suspended(|| {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(line.as_bytes()).and_then(|()| stderr.flush());
    });
}

/// One event as one safe line ending in `\n`.
#[must_use]
pub fn inert_line(event: &str) -> String {
    let event = event.strip_suffix('\n').unwrap_or(event);
    let event = crate::engine::scrub_secrets(event);
    let mut line = String::with_capacity(event.len() + 1);
    let mut cut_at = None;
    for (at, c) in event.char_indices() {
        if line.len() >= MAX_LINE_BYTES {
            cut_at = Some(at);
            break;
        }
        match c {
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push('\t'),
            c if c.is_control() || is_invisible(c) => {
                let _ = std::fmt::Write::write_fmt(&mut line, format_args!("\\u{{{:x}}}", c as u32));
            }
            c => line.push(c),
        }
    }
    if let Some(at) = cut_at {
        let _ = std::fmt::Write::write_fmt(&mut line, format_args!("… ({} bytes cut)", event.len() - at));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_is_one_line_with_controls_and_bidi_escaped() {
        let line = inert_line("WARN server \u{202e}evil\u{202c} said\nINFO forged\x1b[2J\r\n");
        assert_eq!(
            line,
            "WARN server \\u{202e}evil\\u{202c} said\\nINFO forged\\u{1b}[2J\\r\n"
        );
        assert_eq!(line.matches('\n').count(), 1);
    }

    #[test]
    fn a_long_event_is_cut_and_says_how_much() {
        let line = inert_line(&"é".repeat(MAX_LINE_BYTES));
        assert!(line.len() <= MAX_LINE_BYTES + 40, "{}", line.len());
        assert!(
            line.ends_with(&format!("… ({MAX_LINE_BYTES} bytes cut)\n")),
            "{}",
            &line[line.len() - 40..]
        );
    }
}
