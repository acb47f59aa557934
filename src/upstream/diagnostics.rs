//! What a server's process said besides MCP: the tail of its stderr, non-JSON lines on its
//! stdout, and how it exited. Used to explain failures in a server's `error` status.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};

/// Lines of stderr kept.
const STDERR_TAIL_LINES: usize = 8;
/// Characters of one offending line kept.
const LINE_CHARS: usize = 160;

#[derive(Debug, Default)]
struct Inner {
    stderr: VecDeque<String>,
    garbage_lines: usize,
    last_garbage: Option<String>,
    exit: Option<String>,
}

/// Shared between the readers and whoever explains a failure.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics(Arc<Mutex<Inner>>);

impl Diagnostics {
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
                let _ = write!(text, "; stderr: {}", line.trim());
            }
            text
        })
    }
}

fn clip(line: &[u8]) -> String {
    String::from_utf8_lossy(line).trim().chars().take(LINE_CHARS).collect()
}

/// Forward a server's stderr to the log (debug level) and keep its tail.
pub async fn read_stderr(server: String, stderr: impl AsyncRead + Unpin, diagnostics: Diagnostics) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "downstream", server = %server, "{line}");
        diagnostics.push_stderr(line);
    }
}

/// Passes a server's stdout through unchanged, noting lines that cannot be JSON-RPC (rmcp skips
/// them silently, like the other SDKs; we want to say why a server never answered).
pub struct StdoutTap<R> {
    inner: R,
    line: Vec<u8>,
    diagnostics: Diagnostics,
}

impl<R> StdoutTap<R> {
    pub fn new(inner: R, diagnostics: Diagnostics) -> Self {
        Self {
            inner,
            line: Vec::new(),
            diagnostics,
        }
    }

    fn inspect(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
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
}
