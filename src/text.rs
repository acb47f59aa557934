//! Cutting a text someone else chose (a server's name, a tool's name, a key in a request) to a
//! number of characters before it is quoted in a message, a log or a statistic.

use std::borrow::Cow;

/// `text` cut to `max` characters, with `…` when cut.
#[must_use]
pub fn cut_chars(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]).into(),
        None => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_on_a_character_boundary_and_marked() {
        assert_eq!(cut_chars("short", 8), "short");
        assert_eq!(cut_chars("ééééé", 3), "ééé…");
        assert_eq!(cut_chars("abc", 3), "abc");
    }
}
