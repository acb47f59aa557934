//! What a server's process said besides MCP: the tail of its stderr, non-JSON lines on its
//! stdout, and how it exited. Used to explain failures in a server's `error` status.
//!
//! Stderr is read as bytes and split into lines here, never by a UTF-8 line reader: one
//! invalid byte would end such a reader, dropping the pipe, and the server's next log write
//! would fail with EPIPE (a Node server dies of it). Each line keeps at most
//! `MAX_LINE_BYTES`, so a 20 MiB line without a newline costs 4 KiB; the rest is counted and
//! dropped. Control characters and terminal escapes are removed: these lines reach the
//! gateway's log and, quoted in a status, the model.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::watch;

/// Lines of stderr kept.
const STDERR_TAIL_LINES: usize = 8;
/// Characters of one offending line kept.
const LINE_CHARS: usize = 160;
/// Bytes of one stderr line kept (for the log and the tail); the rest is counted, not stored.
pub const MAX_LINE_BYTES: usize = 4096;
/// Characters of the last stderr line quoted in an explanation.
const QUOTED_STDERR_CHARS: usize = 500;

#[derive(Debug, Default)]
struct Inner {
    stderr: VecDeque<String>,
    garbage_lines: usize,
    last_garbage: Option<String>,
    exit: Option<String>,
}

/// Shared between the readers and whoever explains a failure. The first flag turns true at
/// the server's first line on stdout (it has run its start-up code and speaks), the second
/// when its process exits (the supervisor notices a crash of an idle server at once).
#[derive(Debug, Clone)]
pub struct Diagnostics(Arc<Mutex<Inner>>, Arc<watch::Sender<bool>>, Arc<watch::Sender<bool>>);

impl Default for Diagnostics {
    fn default() -> Self {
        Self(
            Arc::default(),
            Arc::new(watch::channel(false).0),
            Arc::new(watch::channel(false).0),
        )
    }
}

impl Diagnostics {
    /// Turns true once the server wrote its first line on stdout.
    #[must_use]
    pub fn answered(&self) -> watch::Receiver<bool> {
        self.1.subscribe()
    }

    fn mark_answered(&self) {
        self.1.send_if_modified(|answered| !std::mem::replace(answered, true));
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .expect("diagnostics lock is never poisoned: no panics while held"))
    }

    pub fn push_stderr(&self, line: String) {
        self.with(|d| {
            if d.stderr.len() == STDERR_TAIL_LINES {
                d.stderr.pop_front();
            }
            d.stderr.push_back(line);
        });
    }

    fn push_garbage(&self, line: String) {
        self.with(|d| {
            d.garbage_lines += 1;
            d.last_garbage = Some(line);
        });
    }

    pub fn set_exit(&self, how: String) {
        self.with(|d| d.exit = Some(how));
        self.2.send_replace(true);
    }

    /// Turns true once the process has exited (its exit recorded for [`Self::explain`]).
    #[must_use]
    pub fn exit_watch(&self) -> watch::Receiver<bool> {
        self.2.subscribe()
    }

    /// Whether the process has exited.
    #[must_use]
    pub fn exited(&self) -> bool {
        self.with(|d| d.exit.is_some())
    }

    /// `reason`, followed by what the process did that explains it.
    #[must_use]
    pub fn explain(&self, reason: &str) -> String {
        self.with(|d| {
            use std::fmt::Write;
            let mut text = reason.to_owned();
            // Writing into a String cannot fail.
            if let Some(exit) = &d.exit {
                let _ = write!(text, "; the process {exit}");
            }
            if let Some(line) = &d.last_garbage {
                let count = d.garbage_lines;
                let _ = write!(
                    text,
                    "; it wrote {count} non-JSON line(s) to stdout, the MCP channel (last: {line:?})"
                );
            }
            if let Some(line) = d.stderr.iter().rev().find(|l| !l.trim().is_empty()) {
                let _ = write!(text, "; stderr: {}", cut(line.trim(), QUOTED_STDERR_CHARS));
            }
            text
        })
    }

    /// The last lines of stderr (oldest first), each already capped, joined by newlines and
    /// cut to `max_chars` from the end: for an error that carries the server's last words.
    #[must_use]
    #[allow(dead_code, reason = "for the supervisor's typed `Closed` error (issue 11)")]
    pub fn stderr_tail(&self, max_chars: usize) -> String {
        self.with(|d| {
            let joined = d.stderr.iter().map(String::as_str).collect::<Vec<_>>().join("\n");
            let count = joined.chars().count();
            if count <= max_chars {
                joined
            } else {
                let kept: String = joined.chars().skip(count - max_chars).collect();
                format!("…{kept}")
            }
        })
    }
}

/// `text` cut to `max` characters, with a marker when cut.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}… [cut]", &text[..end]).into(),
        None => text.into(),
    }
}

fn clip(line: &[u8]) -> String {
    String::from_utf8_lossy(line).trim().chars().take(LINE_CHARS).collect()
}

/// Splits a byte stream into lines, keeping at most `max` bytes of each: the memory a line
/// costs is bounded whatever the server writes.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    line: Vec<u8>,
    /// Bytes of the current line beyond `max`, dropped.
    cut: usize,
}

impl LineSplitter {
    #[must_use]
    pub fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            cut: 0,
        }
    }

    /// Feed `bytes`; `emit` gets every line they complete, decoded and scrubbed.
    pub fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(String)) {
        while !bytes.is_empty() {
            let (part, rest, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = self.max.saturating_sub(self.line.len());
            let kept = part.len().min(room);
            self.line.extend_from_slice(&part[..kept]);
            self.cut += part.len() - kept;
            if ended {
                emit(self.take());
            }
            bytes = rest;
        }
    }

    /// The unfinished last line, if any (at end of stream).
    pub fn finish(mut self) -> Option<String> {
        (!self.line.is_empty() || self.cut > 0).then(|| self.take())
    }

    fn take(&mut self) -> String {
        // Secrets out before anything cuts the line: a cut key is no longer found whole.
        let mut text = crate::secrets::scrub(&scrub(&String::from_utf8_lossy(&self.line))).into_owned();
        if self.cut > 0 {
            use std::fmt::Write;
            let total = self.line.len() + self.cut;
            let _ = write!(text, "… [line of {total} bytes cut]");
        }
        self.line.clear();
        self.cut = 0;
        text
    }
}

/// `text` without terminal escapes (`ESC [ … final`) and other control characters, which would
/// let a server recolour or rewrite the operator's terminal through our log; tabs become spaces.
#[must_use]
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // A CSI sequence runs to its final byte (@ to ~); other escapes take one char.
                if chars.next_if_eq(&'[').is_some() {
                    while chars.next().is_some_and(|c| !('@'..='~').contains(&c)) {}
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Forward a server's stderr to the log (debug level) and keep its tail.
///
/// Reads until the server closes its end. Nothing else ends the loop while the process lives:
/// closing our end would make its next write fail with EPIPE. A read error (not seen on a
/// pipe in practice) is retried slowly until the process has exited.
pub async fn read_stderr(server: String, mut stderr: impl AsyncRead + Unpin, diagnostics: Diagnostics) {
    let mut splitter = LineSplitter::new(MAX_LINE_BYTES);
    let mut buffer = vec![0u8; 8192];
    let keep = |line: String| {
        tracing::debug!(target: "downstream", server = %server, "{line}");
        diagnostics.push_stderr(line);
    };
    loop {
        match stderr.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => splitter.feed(&buffer[..n], keep),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                if diagnostics.exited() {
                    break;
                }
                tracing::debug!(server = %server, %error, "cannot read stderr; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    if let Some(line) = splitter.finish() {
        keep(line);
    }
}

/// Passes a server's stdout through unchanged, noting lines that cannot be JSON-RPC (rmcp skips
/// them silently, like the other SDKs; we want to say why a server never answered).
pub struct StdoutTap<R> {
    inner: R,
    line: Vec<u8>,
    diagnostics: Diagnostics,
    answered: bool,
}

impl<R> StdoutTap<R> {
    pub fn new(inner: R, diagnostics: Diagnostics) -> Self {
        Self {
            inner,
            line: Vec::new(),
            diagnostics,
            answered: false,
        }
    }

    fn inspect(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                if !self.answered {
                    self.answered = true;
                    self.diagnostics.mark_answered();
                }
                let first = self.line.iter().find(|b| !b.is_ascii_whitespace());
                if first.is_some_and(|b| !matches!(b, b'{' | b'[')) {
                    self.diagnostics.push_garbage(clip(&self.line));
                }
                self.line.clear();
            } else if self.line.len() < LINE_CHARS {
                // Only the start of a line decides; a 10 MB JSON line is not copied.
                self.line.push(byte);
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutTap<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        // Every downstream response passes here: inspect the bytes in place, never copy them.
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.inspect(&buf.filled()[before..]);
        }
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn tap_passes_bytes_through_and_notes_non_json_lines() {
        let input = b"{\"jsonrpc\":\"2.0\"}\nWelcome!\n\n  [1]\nnot json either\n".to_vec();
        let diagnostics = Diagnostics::default();
        let mut tap = StdoutTap::new(&input[..], diagnostics.clone());
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input);
        let text = diagnostics.explain("no answer");
        assert!(text.contains("2 non-JSON line(s)"), "{text}");
        assert!(text.contains("not json either"), "{text}");
    }

    #[test]
    fn explain_mentions_exit_and_stderr() {
        let diagnostics = Diagnostics::default();
        assert_eq!(diagnostics.explain("x"), "x");
        diagnostics.set_exit("exited with exit status: 3".into());
        diagnostics.push_stderr("Error: missing token".into());
        let text = diagnostics.explain("closed");
        assert!(
            text.contains("exit status: 3") && text.contains("missing token"),
            "{text}"
        );
    }

    fn split(max: usize, chunks: &[&[u8]]) -> (Vec<String>, Option<String>) {
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        for chunk in chunks {
            splitter.feed(chunk, |l| lines.push(l));
        }
        (lines, splitter.finish())
    }

    #[test]
    fn lines_split_across_chunks_and_invalid_utf8_is_replaced() {
        let (lines, rest) = split(64, &[b"one\ntw", b"o\n\xff\xfebad\r\n", b"tail"]);
        assert_eq!(lines, ["one", "two", "\u{fffd}\u{fffd}bad"]);
        assert_eq!(rest.as_deref(), Some("tail"));
        assert_eq!(split(64, &[b"a\n"]).1, None);
    }

    #[test]
    fn a_long_line_keeps_only_its_start_and_says_so() {
        let big = vec![b'x'; 1 << 20];
        let mut splitter = LineSplitter::new(16);
        let mut lines = Vec::new();
        for _ in 0..20 {
            splitter.feed(&big, |l| lines.push(l));
            // Bounded whatever comes: never more than the cap is held.
            assert!(splitter.line.capacity() < 1024, "{}", splitter.line.capacity());
        }
        splitter.feed(b"\nnext\n", |l| lines.push(l));
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            format!("{}… [line of {} bytes cut]", "x".repeat(16), 20 << 20)
        );
        assert_eq!(lines[1], "next");
    }

    #[test]
    fn scrub_drops_terminal_escapes_and_controls() {
        assert_eq!(scrub("\u{1b}[31mred\u{1b}[0m\tok\r\u{7}!"), "red ok!");
        assert_eq!(scrub("\u{1b}Mx"), "x");
        assert_eq!(scrub("plain é"), "plain é");
    }

    #[tokio::test]
    async fn stderr_is_read_to_the_end_past_invalid_bytes() {
        let mut input = b"\xff\xfe not utf-8\n".to_vec();
        input.extend(vec![b'y'; 3 * MAX_LINE_BYTES]);
        input.extend(b"\nstill logging\n");
        let diagnostics = Diagnostics::default();
        read_stderr("s".into(), &input[..], diagnostics.clone()).await;
        let tail = diagnostics.stderr_tail(10_000);
        assert!(tail.ends_with("still logging"), "{tail}");
        assert!(tail.contains("not utf-8"), "{tail}");
        assert!(tail.len() < 2 * MAX_LINE_BYTES, "{}", tail.len());
        assert!(diagnostics.explain("x").len() < 700);
    }

    #[test]
    fn stderr_tail_is_cut_from_the_front() {
        let diagnostics = Diagnostics::default();
        for i in 0..20 {
            diagnostics.push_stderr(format!("line {i}"));
        }
        let tail = diagnostics.stderr_tail(1000);
        assert!(tail.starts_with("line 12\n") && tail.ends_with("line 19"), "{tail}");
        assert_eq!(diagnostics.stderr_tail(7), "…line 19");
    }
}
