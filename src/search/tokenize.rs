//! Text → index terms: word splitting, stop words, stemming.
//!
//! One analyzer for both sides, so a query word and a catalog word meet on the same term:
//! `readTextFile`, `read_text_file`, `read-text-file` and "reads text files" all become
//! `read text file`. Words are lowercased, split at non-alphanumerics and at case changes
//! (`getURL` → `get url`), CJK runs become overlapping character bigrams (Chinese has no
//! spaces; bigrams are the usual cheap substitute for a segmenter), English stop words are
//! dropped, and the rest is stemmed with Snowball English (`geocoding` → `geocod`).
//! Weighting the terms is the index's business, not this module's.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Alphanumeric runs longer than this are hashes or base64, not vocabulary; they are dropped.
const MAX_WORD_CHARS: usize = 48;

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));
static STOP_SET: LazyLock<HashSet<&'static str>> = LazyLock::new(|| STOP_WORDS.iter().copied().collect());

/// English function words plus the filler of requests ("please help me …"). They carry no
/// intent, and without this list "the" or "in" would match nearly every description.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "before",
    "being",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "during",
    "each",
    "either",
    "etc",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "let",
    "lets",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "need",
    "needs",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "please",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "thus",
    "to",
    "too",
    "until",
    "upon",
    "us",
    "very",
    "via",
    "was",
    "we",
    "were",
    "what",
    "whatever",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "want",
    "wants",
    "wanted",
    "like",
    "able",
    "ll",
    "re",
    "ve",
    "help",
    "tell",
    "give",
    "use",
    "using",
    "used",
    "kindly",
    "thanks",
    "thank",
];

/// Whether `word` (lowercase) carries no intent: a stop word or a lone Latin letter or digit.
#[must_use]
pub fn is_stop_word(word: &str) -> bool {
    let mut chars = word.chars();
    let lone_ascii = matches!((chars.next(), chars.next()), (Some(c), None) if c.is_ascii());
    lone_ascii || STOP_SET.contains(word)
}

/// The Snowball English stem of a lowercase word; CJK and digits pass through unchanged.
#[must_use]
pub fn stem(word: &str) -> Cow<'_, str> {
    if word.chars().all(|c| c.is_ascii_alphabetic()) {
        STEMMER.stem(word)
    } else {
        Cow::Borrowed(word)
    }
}

/// Index terms of `text`: words without stop words, stemmed, in order (repeats kept).
#[must_use]
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |w| {
        if !is_stop_word(w) {
            out.push(stem(w).into_owned());
        }
    });
    out
}

/// Lowercase words of `text`, split at non-alphanumerics and case changes (`snake_case`,
/// `kebab-case`, dots, `camelCase`, `HTTPRequest`); CJK runs become character bigrams.
#[must_use]
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |w| out.push(w.to_owned()));
    out
}

/// Calls `visit` with each word of [`words`], in order, lent from one reused buffer: the
/// index looks most words up in its cache, and a `String` per word was a large share of
/// indexing a catalog.
pub fn for_each_word(text: &str, mut visit: impl FnMut(&str)) {
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let mut rest = text.chars().peekable();
    while let Some(&c) = rest.peek() {
        if is_cjk(c) {
            run.clear();
            run.extend(std::iter::from_fn(|| rest.next_if(|&c| is_cjk(c))));
            visit_cjk(&run, &mut word, &mut visit);
        } else if c.is_alphanumeric() {
            run.clear();
            let mut length = 0;
            while let Some(c) = rest.next_if(|&c| c.is_alphanumeric() && !is_cjk(c)) {
                // Only the length of a run past the limit matters: it is dropped whole.
                if length <= MAX_WORD_CHARS {
                    run.push(c);
                }
                length += 1;
            }
            // A run this long is a hash or base64, not identifiers: case-splitting it would
            // make up dozens of nonsense words.
            if length <= MAX_WORD_CHARS {
                split_case(&run, &mut word, &mut visit);
            }
        } else {
            rest.next();
        }
    }
}

/// Split one alphanumeric run at case changes: `readTextFile`, `getURL`, `HTTPRequest`.
fn split_case(run: &[char], word: &mut String, visit: &mut impl FnMut(&str)) {
    let mut word_start = 0;
    for i in 1..run.len() {
        let (prev, cur) = (run[i - 1], run[i]);
        let lower_to_upper = cur.is_uppercase() && (prev.is_lowercase() || prev.is_numeric());
        // The last capital of an acronym starts the next word: `HTTPRequest` → `HTTP` `Request`.
        let acronym_end = cur.is_uppercase() && prev.is_uppercase() && run.get(i + 1).is_some_and(|n| n.is_lowercase());
        if lower_to_upper || acronym_end {
            visit_lowercase(&run[word_start..i], word, visit);
            word_start = i;
        }
    }
    visit_lowercase(&run[word_start..], word, visit);
}

fn visit_lowercase(chars: &[char], word: &mut String, visit: &mut impl FnMut(&str)) {
    if chars.is_empty() || chars.len() > MAX_WORD_CHARS {
        return;
    }
    word.clear();
    for &c in chars {
        if c.is_ascii() {
            word.push(c.to_ascii_lowercase());
        } else {
            word.extend(c.to_lowercase());
        }
    }
    visit(word);
}

/// Overlapping bigrams of a CJK run; a single character stands alone.
fn visit_cjk(run: &[char], word: &mut String, visit: &mut impl FnMut(&str)) {
    if run.len() == 1 {
        word.clear();
        word.push(run[0]);
        visit(word);
    } else {
        for pair in run.windows(2) {
            word.clear();
            word.extend(pair);
            visit(word);
        }
    }
}

/// Han, kana and Hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B–F, supplement
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_kebab_dots_and_camel_case_split() {
        assert_eq!(words("readTextFile"), ["read", "text", "file"]);
        assert_eq!(words("create-issue.v2"), ["create", "issue", "v2"]);
        assert_eq!(words("get_URL"), ["get", "url"]);
        assert_eq!(words("getURL"), ["get", "url"]);
        assert_eq!(words("HTTPRequest"), ["http", "request"]);
        assert_eq!(words("base64Encode"), ["base64", "encode"]);
        assert_eq!(words("server__tool"), ["server", "tool"]);
    }

    #[test]
    fn unicode_words_are_kept_and_lowercased() {
        assert_eq!(words("Ünïcode Wörds"), ["ünïcode", "wörds"]);
        assert_eq!(terms("Ünïcode"), ["ünïcode"]);
    }

    #[test]
    fn cjk_becomes_bigrams() {
        assert_eq!(words("必应搜索"), ["必应", "应搜", "搜索"]);
        assert_eq!(words("搜 索"), ["搜", "索"]);
        assert_eq!(words("使用bing搜索"), ["使用", "bing", "搜索"]);
    }

    #[test]
    fn stop_words_and_lone_letters_are_dropped() {
        assert_eq!(terms("the file in a folder"), ["file", "folder"]);
        assert!(terms("what is the of to and").is_empty());
        assert!(terms("x y z").is_empty());
    }

    #[test]
    fn stemming_conflates_inflections() {
        assert_eq!(terms("geocoding"), terms("geocode"));
        assert_eq!(terms("files"), terms("file"));
        assert_eq!(terms("searching searches"), ["search", "search"]);
        assert_eq!(stem("42"), "42");
    }

    #[test]
    fn overlong_words_are_dropped() {
        let blob = "a".repeat(MAX_WORD_CHARS + 1);
        assert_eq!(terms(&format!("{blob} file")), ["file"]);
    }

    /// The splitter before it lent words from a buffer, kept to prove the two agree.
    fn reference_words(text: &str) -> Vec<String> {
        fn run_end(chars: &[char], start: usize, belongs: impl Fn(char) -> bool) -> usize {
            chars[start..]
                .iter()
                .position(|&c| !belongs(c))
                .map_or(chars.len(), |n| start + n)
        }
        fn push_word(word: &[char], out: &mut Vec<String>) {
            if !word.is_empty() && word.len() <= MAX_WORD_CHARS {
                out.push(word.iter().flat_map(|c| c.to_lowercase()).collect());
            }
        }
        let mut out = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            let c = chars[start];
            if is_cjk(c) {
                let end = run_end(&chars, start, is_cjk);
                let run = &chars[start..end];
                if run.len() == 1 {
                    out.push(run[0].to_string());
                } else {
                    out.extend(run.windows(2).map(|pair| pair.iter().collect()));
                }
                start = end;
            } else if c.is_alphanumeric() {
                let end = run_end(&chars, start, |c| c.is_alphanumeric() && !is_cjk(c));
                if end - start <= MAX_WORD_CHARS {
                    let run = &chars[start..end];
                    let mut word_start = 0;
                    for i in 1..run.len() {
                        let (prev, cur) = (run[i - 1], run[i]);
                        let lower_to_upper = cur.is_uppercase() && (prev.is_lowercase() || prev.is_numeric());
                        let acronym_end = cur.is_uppercase()
                            && prev.is_uppercase()
                            && run.get(i + 1).is_some_and(|n| n.is_lowercase());
                        if lower_to_upper || acronym_end {
                            push_word(&run[word_start..i], &mut out);
                            word_start = i;
                        }
                    }
                    push_word(&run[word_start..], &mut out);
                }
                start = end;
            } else {
                start += 1;
            }
        }
        out
    }

    proptest::proptest! {
        /// Mixed case, digits, separators, CJK, accented and special-casing letters (`İ`
        /// lowercases to two chars), and runs around the length limit.
        #[test]
        fn the_buffered_splitter_agrees_with_the_reference(
            text in "([a-zA-Z0-9_. \\-]|[İßÉéΣσ]|[必应搜索한국]|A{40,60}|a{45,50}){0,40}"
        ) {
            proptest::prop_assert_eq!(words(&text), reference_words(&text));
        }
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(words("  !!! ... ").is_empty());
        assert!(words("").is_empty());
    }
}
