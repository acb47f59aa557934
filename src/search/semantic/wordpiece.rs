//! BERT's uncased `WordPiece` tokenizer: what all-MiniLM-L6-v2 was trained with.
//!
//! Basic tokenization (lowercase, accents stripped after NFD, control characters dropped,
//! punctuation and CJK ideographs split off as words of their own), then greedy
//! longest-match-first word pieces from `vocab.txt` (`##` marks a continuation). A word
//! with no split into known pieces, or longer than [`MAX_WORD_CHARS`], is `[UNK]`. Written
//! here rather than taken from the `tokenizers` crate: this is all the model needs, in a
//! page, where that crate adds dozens of dependencies (BENCHMARKS.md, "runtime").

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// Words longer than this are one `[UNK]` (as BERT does).
const MAX_WORD_CHARS: usize = 100;

/// A vocabulary and its special tokens.
#[derive(Debug)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
}

/// What is wrong with a `vocab.txt`.
#[derive(Debug, thiserror::Error)]
#[error("the vocabulary has no {0} token")]
pub struct MissingToken(&'static str);

impl WordPiece {
    /// A tokenizer over `vocab.txt` (one token a line, the line number is its id).
    ///
    /// # Errors
    /// When `[UNK]`, `[CLS]` or `[SEP]` is missing.
    pub fn from_vocab(text: &str) -> Result<Self, MissingToken> {
        let vocab: HashMap<String, u32> = text
            .lines()
            .zip(0u32..)
            .map(|(token, id)| (token.to_owned(), id))
            .collect();
        let special = |token: &'static str| vocab.get(token).copied().ok_or(MissingToken(token));
        Ok(Self {
            unk: special("[UNK]")?,
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            vocab,
        })
    }

    /// Number of tokens in the vocabulary.
    #[must_use]
    pub fn len(&self) -> usize {
        self.vocab.len()
    }

    /// Whether the vocabulary is empty (never, for one that loaded).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.vocab.is_empty()
    }

    /// `[CLS] pieces… [SEP]`, at most `max` ids (longer texts are cut, `[SEP]` kept).
    #[must_use]
    pub fn encode(&self, text: &str, max: usize) -> Vec<u32> {
        let max = max.max(2);
        let mut ids = vec![self.cls];
        for word in basic_words(text) {
            self.push_pieces(&word, &mut ids);
            if ids.len() >= max - 1 {
                ids.truncate(max - 1);
                break;
            }
        }
        ids.push(self.sep);
        ids
    }

    fn push_pieces(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let mut pieces = Vec::new();
        let mut key = String::new();
        let mut start = 0;
        while start < word.len() {
            let found = (start + 1..=word.len())
                .rev()
                .filter(|&end| word.is_char_boundary(end))
                .find_map(|end| {
                    key.clear();
                    if start > 0 {
                        key.push_str("##");
                    }
                    key.push_str(&word[start..end]);
                    self.vocab.get(&key).map(|&id| (id, end))
                });
            let Some((id, end)) = found else {
                out.push(self.unk);
                return;
            };
            pieces.push(id);
            start = end;
        }
        out.extend(pieces);
    }
}

/// CJK ideographs, which BERT treats as words of their own.
fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2CEAF
        | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// ASCII punctuation, and anything else that is neither a letter, a digit nor a space.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace() && !c.is_control())
}

fn basic_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in text.to_lowercase().nfd() {
        if unicode_normalization::char::is_combining_mark(c) || c == '\u{fffd}' {
            continue;
        }
        if c.is_whitespace() || c.is_control() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else if is_cjk(c) || is_punctuation(c) {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            words.push(c.to_string());
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPiece {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "read", "##ing", "file", "_", "cafe", "東", "京", "un", "##aff",
            "##able",
        ];
        WordPiece::from_vocab(&vocab.join("\n")).unwrap()
    }

    #[test]
    fn splits_words_into_known_pieces() {
        let wp = tokenizer();
        assert_eq!(wp.encode("Reading read_file", 16), [2, 4, 5, 4, 7, 6, 3]);
        assert_eq!(wp.encode("unaffable", 16), [2, 11, 12, 13, 3]);
    }

    #[test]
    fn accents_cjk_and_unknown_words() {
        let wp = tokenizer();
        assert_eq!(wp.encode("Café 東京 zzz", 16), [2, 8, 9, 10, 1, 3]);
        assert_eq!(wp.encode("", 16), [2, 3]);
    }

    #[test]
    fn long_texts_are_cut_keeping_the_end_marker() {
        let wp = tokenizer();
        let ids = wp.encode(&"read ".repeat(50), 8);
        assert_eq!(ids.len(), 8);
        assert_eq!((ids[0], ids[7]), (2, 3));
    }

    #[test]
    fn a_vocabulary_without_special_tokens_is_refused() {
        assert_eq!(
            WordPiece::from_vocab("a\nb").unwrap_err().to_string(),
            "the vocabulary has no [UNK] token"
        );
    }
}
