//! The one place the CLI writes to stdout (stdout is the MCP channel while serving, so
//! nothing else in the crate may print to it).

use std::io::Write;

/// Write `text` to stdout as is. A closed pipe (`… | head`) is not an error worth a panic.
pub fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}
