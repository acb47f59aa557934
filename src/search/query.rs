//! From what the model typed to weighted index terms.
//!
//! A request mixes intent ("read the file") with arguments ("/root/txt/list.bib",
//! "https://…"). Argument text would match tools by accident (`root`, `txt`), so paths and
//! URLs are not split into words: a path stands for "path" plus "file" and its extension's
//! word (`.md` → markdown) or "directory"; a URL stands for "url" plus its host's words
//! (`www.youtube.com` → youtube). Then each word's stem gets, at lower weight, its
//! derivations the catalog knows (`read` ↔ `reader`, `convert` ↔ `converter`; Snowball keeps
//! short agent nouns apart from their verbs) and its thesaurus synonyms.

use super::index::{Index, QueryTerm};
use super::{synonyms, tokenize};

/// Distinct query words considered; the rest of a very long query is ignored.
pub const MAX_QUERY_TERMS: usize = 64;
/// Weight of a word that stands for a path or URL (the model gave an argument, not intent).
pub const ARGUMENT_HINT_WEIGHT: f32 = 0.5;
/// Weight of a derivation (`reader` for `read`): same meaning, different part of speech.
pub const DERIVED_WEIGHT: f32 = 0.5;

/// A query resolved against the index.
#[derive(Debug, Default)]
pub struct ParsedQuery {
    /// Terms the index knows, with their weights (query words 1, expansions less).
    pub terms: Vec<QueryTerm>,
    /// Sum of the idf of every query word, known to the catalog or not: what a tool
    /// explaining the whole query would match.
    pub idf_total: f32,
}

/// Resolve `text` against `index`.
#[must_use]
pub fn parse(index: &Index, text: &str) -> ParsedQuery {
    let words = weighted_words(text);
    let mut parsed = ParsedQuery::default();
    let add = |parsed: &mut ParsedQuery, term: Option<u32>, weight: f32| {
        let Some(term) = term else { return };
        match parsed.terms.iter_mut().find(|q| q.term == term) {
            Some(existing) => existing.weight = existing.weight.max(weight),
            None => parsed.terms.push(QueryTerm { term, weight }),
        }
    };
    for (word, weight) in &words {
        let term = index.term(word);
        parsed.idf_total += index.idf(term) * weight;
        add(&mut parsed, term, *weight);
    }
    for (word, weight) in &words {
        for derived in derivations(word) {
            add(&mut parsed, index.term(&derived), weight * DERIVED_WEIGHT);
        }
        for related in synonyms::related(word) {
            add(&mut parsed, index.term(related), weight * synonyms::SYNONYM_WEIGHT);
        }
    }
    parsed
}

/// Stems of the query with their weights: words 1, path/URL stand-ins less; deduplicated
/// (first weight wins), at most [`MAX_QUERY_TERMS`].
fn weighted_words(text: &str) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    let mut push = |term: String, weight: f32| {
        if out.len() < MAX_QUERY_TERMS && !out.iter().any(|(t, _)| *t == term) {
            out.push((term, weight));
        }
    };
    for chunk in text.split_whitespace() {
        let chunk = chunk.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '(' | ')' | ',' | ';' | '?' | '!'));
        let chunk = chunk.trim_end_matches('.');
        match argument_kind(chunk) {
            Some(Argument::Url { host }) => {
                push("url".to_owned(), ARGUMENT_HINT_WEIGHT);
                for term in tokenize::terms(host) {
                    push(term, ARGUMENT_HINT_WEIGHT);
                }
            }
            Some(Argument::Path { extension }) => {
                push("path".to_owned(), ARGUMENT_HINT_WEIGHT);
                match extension {
                    Some(extension) => {
                        push("file".to_owned(), ARGUMENT_HINT_WEIGHT);
                        for term in tokenize::terms(extension_word(extension)) {
                            push(term, ARGUMENT_HINT_WEIGHT);
                        }
                    }
                    None => push(tokenize::stem("directory").into_owned(), ARGUMENT_HINT_WEIGHT),
                }
            }
            None => {
                for term in tokenize::terms(chunk) {
                    push(term, 1.0);
                }
            }
        }
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Argument<'a> {
    Url { host: &'a str },
    Path { extension: Option<&'a str> },
}

/// Whether a whitespace-free chunk is a URL or a file path rather than words.
fn argument_kind(chunk: &str) -> Option<Argument<'_>> {
    if let Some((_, rest)) = chunk.split_once("://") {
        let host = rest.split(['/', '?', '#', ':']).next().unwrap_or_default();
        return Some(Argument::Url { host });
    }
    let rooted = ["/", "./", "../", "~/", "\\\\"].iter().any(|p| chunk.starts_with(p))
        || chunk.get(1..3) == Some(":\\")
        || chunk.matches(['/', '\\']).count() >= 2;
    if !rooted || chunk.chars().any(char::is_whitespace) {
        return None;
    }
    let last = chunk.rsplit(['/', '\\']).next().unwrap_or_default();
    let extension = last
        .rsplit_once('.')
        .filter(|(stem, ext)| {
            !stem.is_empty() && (1..=5).contains(&ext.len()) && ext.chars().all(char::is_alphanumeric)
        })
        .map(|(_, ext)| ext);
    Some(Argument::Path { extension })
}

/// The word a file extension stands for (`md` → markdown); unknown ones stand for themselves.
fn extension_word(extension: &str) -> &str {
    match extension.to_ascii_lowercase().as_str() {
        "md" | "markdown" => "markdown",
        "txt" | "log" => "text",
        "py" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "ts" | "tsx" => "typescript",
        "rs" => "rust",
        "doc" | "docx" => "word document",
        "xls" | "xlsx" => "excel spreadsheet",
        "ppt" | "pptx" => "powerpoint presentation",
        "png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" | "bmp" => "image",
        "mp3" | "wav" | "flac" | "ogg" => "audio",
        "mp4" | "mov" | "avi" | "mkv" | "webm" => "video",
        "yml" => "yaml",
        "htm" => "html",
        _ => extension,
    }
}

/// Agent-noun forms of a stem and back: `read` → `reader`, `get` → `getter`,
/// `write` → `writer`, `reader` → `read`. Only forms the caller finds in the index count.
fn derivations(stem: &str) -> Vec<String> {
    if stem.len() < 3 || !stem.chars().all(|c| c.is_ascii_lowercase()) {
        return Vec::new();
    }
    let mut out = vec![format!("{stem}er")];
    if stem.ends_with('e') {
        out.push(format!("{stem}r"));
    }
    if let Some(last) = stem.chars().last().filter(|c| !"aeiouwxy".contains(*c)) {
        out.push(format!("{stem}{last}er"));
    }
    if let Some(base) = stem.strip_suffix("er").filter(|b| b.len() >= 3) {
        out.push(base.to_owned());
        out.push(format!("{base}e"));
        let bytes = base.as_bytes();
        if bytes.len() >= 2 && bytes[bytes.len() - 1] == bytes[bytes.len() - 2] {
            out.push(base[..base.len() - 1].to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<(String, f32)> {
        weighted_words(text)
    }

    fn terms(text: &str) -> Vec<String> {
        weighted_words(text).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn paths_stand_for_file_and_extension_not_their_words() {
        assert_eq!(
            terms("open the /root/txt/paper_list.bib"),
            ["open", "path", "file", "bib"]
        );
        assert_eq!(
            terms("save it in /root/markdown/bitcoin.md."),
            ["save", "path", "file", "markdown"]
        );
        assert_eq!(terms("what is in ./test_project_root/docs"), ["path", "directori"]);
        assert_eq!(terms(r"C:\Users\me\notes.txt"), ["path", "file", "text"]);
        let hint = words("/a/b.py").into_iter().find(|(t, _)| t == "path").unwrap().1;
        assert!((hint - ARGUMENT_HINT_WEIGHT).abs() < f32::EPSILON);
    }

    #[test]
    fn urls_stand_for_url_and_host() {
        assert_eq!(
            terms("summarize https://www.youtube.com/watch?v=arj7oStGLkU"),
            ["summar", "url", "www", "youtub", "com"]
        );
    }

    #[test]
    fn ordinary_words_and_slashes_in_prose_stay_words() {
        assert_eq!(terms("read/write access"), ["read", "write", "access"]);
        assert_eq!(terms("Node.js version"), ["node", "js", "version"]);
    }

    #[test]
    fn words_are_deduplicated_and_bounded() {
        assert_eq!(terms("file files FILE"), ["file"]);
        let many = (0..500).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ");
        assert_eq!(terms(&many).len(), MAX_QUERY_TERMS);
    }

    #[test]
    fn agent_nouns_and_verbs_derive_each_other() {
        assert!(derivations("read").contains(&"reader".to_owned()));
        assert!(derivations("write").contains(&"writer".to_owned()));
        assert!(derivations("get").contains(&"getter".to_owned()));
        assert!(derivations("reader").contains(&"read".to_owned()));
        assert!(derivations("getter").contains(&"get".to_owned()));
        assert!(derivations("ab").is_empty());
        assert!(derivations("数据").is_empty());
    }
}
