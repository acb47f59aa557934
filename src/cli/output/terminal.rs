//! Text made safe for a terminal, applied where human output leaves the process.
//!
//! Human output quotes text the user did not write: tool results, progress messages and
//! error text from downstream servers, their stderr. The trust module cleans tool metadata
//! for the model, but a result or an error message reaches the terminal as the server sent
//! it, and a terminal obeys what it reads: `ESC[2J` clears the screen, `ESC]0;…BEL` retitles
//! the window, `ESC]52;…` writes the clipboard, `ESC]8;…` hides a link behind text, a bare
//! `\r` or backspaces overwrite what was printed, bidi controls reorder a line. So every
//! human byte goes through [`safe`] on its way out: escape sequences are removed (except the
//! plain colour codes our own `Paint` writes, when colour is on), invisible and control
//! characters too, line breaks and tabs kept. Registered secrets are scrubbed again there, a
//! second net under the engine's.
//!
//! JSON output keeps every character (it is data), but the ones a terminal would act on or
//! hide are written as `\uXXXX` escapes ([`json_safe`]), so `--json` in a terminal is safe too
//! and a parser reads back the same string.

use std::fmt::Write as _;

use crate::trust::poison::is_invisible;

/// `text` with escape sequences, control and invisible characters removed, registered
/// secrets scrubbed. With `keep_colour`, SGR sequences (`ESC [ digits ; … m`), which only
/// set colours and weight, stay.
#[must_use]
pub fn safe(text: &str, keep_colour: bool) -> String {
    let text = crate::engine::scrub_secrets(text);
    if !text.chars().any(needs_removal) {
        return text.into_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\u{1b}' | '\u{9b}' => {
                let end = escape_end(&chars, i);
                if keep_colour && is_sgr(&chars[i..end]) {
                    out.extend(&chars[i..end]);
                }
                i = end;
                continue;
            }
            // `\r\n` is a line break; a lone `\r` would return the cursor and overwrite.
            '\r' => {
                if chars.get(i + 1) != Some(&'\n') {
                    out.push('\n');
                }
            }
            // A zero-width joiner only glues emoji; harmless on a terminal.
            '\u{200d}' => out.push(c),
            c if is_invisible(c) => {}
            c => out.push(c),
        }
        i += 1;
    }
    out
}

fn needs_removal(c: char) -> bool {
    c == '\u{1b}' || c == '\r' || (c != '\u{200d}' && is_invisible(c))
}

/// Whether `sequence` (from ESC) only sets graphic rendition: `ESC [ [0-9;:]* m`.
fn is_sgr(sequence: &[char]) -> bool {
    matches!(sequence, ['\u{1b}', '[', params @ .., 'm'] if params.iter().all(|c| c.is_ascii_digit() || matches!(c, ';' | ':')))
}

/// Index after the escape sequence starting at `start`: CSI (`ESC [` or C1 `U+009B`, then
/// parameters and one final byte in `@`..`~`), OSC/DCS/APC/PM (`ESC ] P _ ^` up to BEL or
/// `ESC \`), otherwise ESC and the one character after it.
fn escape_end(chars: &[char], start: usize) -> usize {
    let csi = |from: usize| {
        chars[from..]
            .iter()
            .position(|c| ('@'..='~').contains(c))
            .map_or(chars.len(), |at| from + at + 1)
    };
    if chars[start] == '\u{9b}' {
        return csi(start + 1);
    }
    match chars.get(start + 1) {
        Some('[') => csi(start + 2),
        Some(']' | 'P' | '_' | '^' | 'X') => {
            let mut j = start + 2;
            while j < chars.len() {
                match chars[j] {
                    '\u{7}' | '\u{9c}' => return j + 1,
                    '\u{1b}' if chars.get(j + 1) == Some(&'\\') => return j + 2,
                    _ => j += 1,
                }
            }
            chars.len()
        }
        Some(_) => start + 2,
        None => start + 1,
    }
}

/// A JSON document with every character a terminal would act on or hide written as a
/// `\uXXXX` escape (serde already escapes those below U+0020). Such characters only occur
/// inside strings in valid JSON, so the document means exactly the same.
#[must_use]
pub fn json_safe(document: String) -> String {
    if !document.chars().any(is_invisible) {
        return document;
    }
    let mut out = String::with_capacity(document.len() + 16);
    for c in document.chars() {
        if is_invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "a\u{1b}[2Jb\u{1b}]0;pwned\u{7}c\u{1b}]52;c;ZXZpbA==\u{1b}\\d\u{9b}1;1He\u{1b}]8;;http://x\u{7}f\u{1b}]8;;\u{7}g";

    #[test]
    fn removes_every_escape_sequence() {
        assert_eq!(safe(HOSTILE, false), "abcdefg");
        assert_eq!(safe(HOSTILE, true), "abcdefg");
    }

    #[test]
    fn keeps_colour_only_when_asked() {
        let painted = "\u{1b}[1;36mname\u{1b}[0m";
        assert_eq!(safe(painted, true), painted);
        assert_eq!(safe(painted, false), "name");
    }

    #[test]
    fn removes_overwrites_bidi_and_invisible_characters() {
        assert_eq!(safe("safe\rEVIL", false), "safe\nEVIL");
        assert_eq!(safe("line\r\nnext\ttab", false), "line\nnext\ttab");
        assert_eq!(safe("rm -rf\u{8}\u{8}\u{8}\u{8}\u{8}\u{8}ls", false), "rm -rfls");
        assert_eq!(safe("abc\u{202e}fed\u{202c}\u{200b}", false), "abcfed");
        assert_eq!(safe("👩\u{200d}💻 ünïcödé 日本", false), "👩\u{200d}💻 ünïcödé 日本");
    }

    #[test]
    fn an_unterminated_sequence_is_dropped_to_the_end() {
        assert_eq!(safe("ok\u{1b}]0;never ends", false), "ok");
        assert_eq!(safe("ok\u{1b}", false), "ok");
    }

    #[test]
    fn json_keeps_the_data_and_escapes_what_a_terminal_acts_on() {
        let value = serde_json::json!({ "text": "a\u{9b}2Jb\u{202e}c\u{e0041}d\u{1b}" });
        let document = json_safe(serde_json::to_string(&value).unwrap());
        assert!(document.is_ascii(), "{document}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&document).unwrap(), value);
    }
}
