//! Deprecated tools: recognised from their description, ranked below live ones
//! ([`super::DEPRECATED_FACTOR`]), and their summary keeps the note, since the first sentence
//! alone ("Read the complete contents of a file.") hides it from the model.

/// Longest deprecation note added to a summary, in characters.
const MAX_NOTE_CHARS: usize = 60;

/// Whether `description` marks its tool deprecated: `DEPRECATED` in capitals anywhere, or
/// "deprecated" as a marker (at the start, after `(`, `[`, `@` or a sentence end, in "this
/// tool is deprecated", or followed by `:`, `)`, `]`, `;`, `,` or " -"). "Lists deprecated
/// APIs" or "Check if packages are deprecated" describe what a tool does, not a mark.
#[must_use]
pub fn is_deprecated(description: &str) -> bool {
    marker(description).is_some()
}

/// Byte offset of the deprecation marker in `description`.
fn marker(description: &str) -> Option<usize> {
    if let Some(at) = description
        .match_indices("DEPRECATED")
        .map(|(at, _)| at)
        .find(|&at| is_word(description, at, 10))
    {
        return Some(at);
    }
    let lower = description.to_ascii_lowercase();
    lower.match_indices("deprecated").map(|(at, _)| at).find(|&at| {
        if !is_word(&lower, at, 10) {
            return false;
        }
        let before = lower[..at].trim_end();
        let after = &lower[at + 10..];
        let starts = before.is_empty()
            || before.ends_with(['(', '[', '@', '.', '!', '?', ':', '-', '*', '#'])
            || says_this_is(before);
        // Not a final "." alone: "Check if a package is deprecated." ends that way too.
        let ends = after.starts_with([':', ')', ']', ';']) || after.starts_with(" -");
        starts || ends
    })
}

/// Whether the words before "deprecated" say the tool itself is ("this tool is", "this
/// endpoint has been now"), not something it works on ("check if packages are").
fn says_this_is(before: &str) -> bool {
    let words: Vec<&str> = before.split_whitespace().rev().take(4).collect();
    matches!(words.first(), Some(&("is" | "now" | "been"))) && words.iter().any(|w| matches!(*w, "this" | "tool"))
}

/// Whether the `len` bytes at `at` are a whole word (not inside "undeprecated").
fn is_word(text: &str, at: usize, len: usize) -> bool {
    let before = text[..at].chars().next_back();
    let after = text[at + len..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

/// The sentence of `description` that marks it deprecated, bounded, for a summary that does
/// not already say so; `None` for a live tool or a summary that already carries the note.
#[must_use]
pub fn deprecation_note(description: &str, summary: &str) -> Option<String> {
    let at = marker(description)?;
    if summary.to_ascii_lowercase().contains("deprecated") {
        return None;
    }
    let start = description[..at].rfind(['.', '!', '?', '\n']).map_or(0, |end| end + 1);
    let rest = &description[at..];
    let end = rest
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '.' | '!' | '?' | '\n')
                && rest[i + c.len_utf8()..].chars().next().is_none_or(char::is_whitespace)
        })
        .map_or(description.len(), |(i, c)| at + i + c.len_utf8());
    let sentence = description[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
    if sentence.chars().count() <= MAX_NOTE_CHARS {
        return Some(sentence);
    }
    let cut: String = sentence.chars().take(MAX_NOTE_CHARS - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_count_and_descriptions_of_deprecation_do_not() {
        for marked in [
            "Read a file. DEPRECATED: Use read_text_file instead.",
            "Deprecated: use v2.",
            "(deprecated) Old search",
            "This tool is deprecated and will be removed.",
            "Old endpoint [Deprecated]",
            "@deprecated use list_items",
        ] {
            assert!(is_deprecated(marked), "{marked}");
        }
        for live in [
            "Lists deprecated APIs in a project",
            "Find undeprecated functions",
            "Check whether a package version is deprecatedly old",
            "Check if packages are deprecated",
            "Tell whether a package is deprecated",
            "",
        ] {
            assert!(!is_deprecated(live), "{live}");
        }
    }

    #[test]
    fn the_note_is_the_marking_sentence_once() {
        let description = "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead. More.";
        assert_eq!(
            deprecation_note(description, "Read the complete contents of a file as text.").as_deref(),
            Some("DEPRECATED: Use read_text_file instead.")
        );
        assert_eq!(
            deprecation_note(description, "DEPRECATED: Use read_text_file instead."),
            None
        );
        assert_eq!(deprecation_note("Read a file.", "Read a file."), None);
        let long = format!("Old. Deprecated: {}", "word ".repeat(100));
        assert!(deprecation_note(&long, "Old.").unwrap().chars().count() <= MAX_NOTE_CHARS);
    }
}
