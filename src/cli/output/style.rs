//! How output looks on this terminal: colour on or off, the width to fit, and wrapping.
//!
//! Colour follows the common conventions: `NO_COLOR` (any non-empty value) turns it off,
//! `CLICOLOR_FORCE`/`FORCE_COLOR` (non-empty, not `0`) turn it on even when piped, otherwise
//! only a terminal that is not `TERM=dumb` gets it. The width is `COLUMNS` when set, else the
//! terminal's, else 80.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

/// Fallback width when neither `COLUMNS` nor a terminal says.
const DEFAULT_WIDTH: usize = 80;
/// Below this, wrapping would make text harder to read than long lines.
const MIN_WIDTH: usize = 20;

/// Whether to colour a stream that is (or is not) a terminal, given the environment.
///
/// `FORCE_COLOR=0` (or `false`) and `CLICOLOR=0` turn colour off on a terminal too: Node's
/// tools (chalk, `util.styleText`) and the BSD `CLICOLOR` convention read them so.
pub fn colour_wanted(is_terminal: bool, var: &dyn Fn(&str) -> Option<String>) -> bool {
    let value = |name: &str| var(name).filter(|v| !v.is_empty());
    let off = |v: &str| v == "0" || v.eq_ignore_ascii_case("false");
    if value("NO_COLOR").is_some() {
        return false;
    }
    if let Some(force) = value("FORCE_COLOR") {
        return !off(&force);
    }
    if value("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    if value("CLICOLOR").as_deref() == Some("0") {
        return false;
    }
    is_terminal && var("TERM").as_deref() != Some("dumb")
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Colour for stdout in this process.
pub fn stdout_colour() -> bool {
    colour_wanted(std::io::stdout().is_terminal(), &env_var)
}

/// Colour for stderr in this process.
pub fn stderr_colour() -> bool {
    colour_wanted(std::io::stderr().is_terminal(), &env_var)
}

/// Whether stderr is a terminal a progress indicator may draw on: a terminal, colour not
/// refused (`NO_COLOR` asks for plain output), not `TERM=dumb`.
pub fn stderr_interactive() -> bool {
    std::io::stderr().is_terminal()
        && env_var("NO_COLOR").is_none_or(|v| v.is_empty())
        && env_var("TERM").as_deref() != Some("dumb")
}

/// The width to fit: `COLUMNS`, the terminal's, else 80; never below 20.
pub fn width() -> usize {
    env_var("COLUMNS")
        .and_then(|c| c.trim().parse::<usize>().ok())
        .or_else(|| {
            console::Term::stdout()
                .size_checked()
                .map(|(_, cols)| usize::from(cols))
        })
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// Fewest columns `wrap` fills after the indent, however narrow the terminal.
const MIN_ROOM: usize = 12;

/// Paints text, or passes it through when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    pub enabled: bool,
}

impl Paint {
    fn with(self, style: Style, text: &str) -> String {
        if self.enabled {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    pub fn ok(self, text: &str) -> String {
        self.with(Style::new().fg_color(Some(AnsiColor::Green.into())), text)
    }

    pub fn bad(self, text: &str) -> String {
        self.with(Style::new().fg_color(Some(AnsiColor::Red.into())), text)
    }

    pub fn warn(self, text: &str) -> String {
        self.with(Style::new().fg_color(Some(AnsiColor::Yellow.into())), text)
    }

    pub fn bold(self, text: &str) -> String {
        self.with(Style::new().bold(), text)
    }

    pub fn name(self, text: &str) -> String {
        self.with(Style::new().bold().fg_color(Some(AnsiColor::Cyan.into())), text)
    }

    pub fn dim(self, text: &str) -> String {
        self.with(Style::new().dimmed(), text)
    }
}

/// `text` wrapped at word boundaries to `width` columns, each line prefixed by `indent`.
/// Existing line breaks are kept; a word longer than the line stays whole on its own line.
pub fn wrap(text: &str, indent: &str, width: usize) -> String {
    let room = width.saturating_sub(console::measure_text_width(indent)).max(MIN_ROOM);
    let mut out = String::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        let mut used = 0;
        for word in paragraph.split_whitespace() {
            let len = console::measure_text_width(word);
            if used > 0 && used + 1 + len > room {
                push_line(&mut out, indent, &line);
                line.clear();
                used = 0;
            }
            if used > 0 {
                line.push(' ');
                used += 1;
            }
            line.push_str(word);
            used += len;
        }
        push_line(&mut out, indent, &line);
    }
    out
}

fn push_line(out: &mut String, indent: &str, line: &str) {
    if line.is_empty() {
        out.push('\n');
    } else {
        out.push_str(indent);
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn colour_on_a_terminal_only_and_never_with_no_color() {
        assert!(colour_wanted(true, &env(&[])));
        assert!(!colour_wanted(false, &env(&[])));
        assert!(!colour_wanted(true, &env(&[("NO_COLOR", "1")])));
        assert!(!colour_wanted(true, &env(&[("NO_COLOR", "1"), ("FORCE_COLOR", "1")])));
        assert!(!colour_wanted(true, &env(&[("TERM", "dumb")])));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(colour_wanted(true, &env(&[("NO_COLOR", "")])));
    }

    #[test]
    fn force_color_and_clicolor_force_colour_a_pipe() {
        assert!(colour_wanted(false, &env(&[("FORCE_COLOR", "1")])));
        assert!(colour_wanted(false, &env(&[("CLICOLOR_FORCE", "1")])));
        assert!(!colour_wanted(false, &env(&[("FORCE_COLOR", "0")])));
    }

    #[test]
    fn force_color_0_and_clicolor_0_turn_a_terminal_plain() {
        assert!(!colour_wanted(true, &env(&[("FORCE_COLOR", "0")])));
        assert!(!colour_wanted(true, &env(&[("FORCE_COLOR", "false")])));
        assert!(!colour_wanted(
            true,
            &env(&[("FORCE_COLOR", "0"), ("CLICOLOR_FORCE", "1")])
        ));
        assert!(!colour_wanted(true, &env(&[("CLICOLOR", "0")])));
        assert!(colour_wanted(
            false,
            &env(&[("CLICOLOR", "0"), ("CLICOLOR_FORCE", "1")])
        ));
        assert!(colour_wanted(true, &env(&[("CLICOLOR", "1")])));
    }

    #[test]
    fn wraps_at_words_with_the_indent() {
        assert_eq!(
            wrap("one two three four five six", "  ", 34),
            "  one two three four five six\n"
        );
        let long = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";
        let wrapped = wrap(long, "    ", 40);
        assert!(wrapped.lines().all(|l| l.len() <= 40), "{wrapped}");
        assert!(wrapped.lines().all(|l| l.starts_with("    ")), "{wrapped}");
        assert_eq!(wrapped.split_whitespace().collect::<Vec<_>>().join(" "), long);
    }

    #[test]
    fn keeps_paragraph_breaks_and_long_words() {
        let word = "x".repeat(60);
        assert_eq!(wrap(&format!("a\n\n{word}"), "  ", 40), format!("  a\n\n  {word}\n"));
    }
}
