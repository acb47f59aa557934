//! Query expansion: a small general thesaurus of the verbs and nouns tool descriptions use.
//!
//! A model asks to "fetch" what a server calls `get_*`, to "remove" what it calls `delete_*`.
//! Each group below is a set of words that name the same action or thing in software tools;
//! a query word pulls in the other members of its groups as extra terms. The index weights
//! them below the words the user actually wrote ([`SYNONYM_WEIGHT`]), so an exact word still
//! wins and a synonym only decides between tools that the original words leave tied or miss.
//! Groups are matched on stems, so "fetching" expands like "fetch". The list is deliberately
//! generic (no product or server names); it is not fit to any query set.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::tokenize::stem;

/// Weight of an expanded term relative to a query word (1.0).
pub const SYNONYM_WEIGHT: f32 = 0.35;
const _: () = assert!(
    SYNONYM_WEIGHT > 0.0 && SYNONYM_WEIGHT < 1.0,
    "a synonym weighs less than the word"
);

/// Groups of interchangeable words (lowercase, unstemmed).
const GROUPS: &[&[&str]] = &[
    // Verbs: what tools do.
    &["get", "fetch", "retrieve", "obtain", "read", "load", "open"],
    &["find", "search", "lookup", "locate", "query", "seek", "discover"],
    &["list", "enumerate", "browse", "show", "display", "view"],
    &["create", "make", "add", "new", "generate", "build", "insert", "compose"],
    &["update", "modify", "edit", "change", "alter", "patch", "set", "adjust"],
    &[
        "delete", "remove", "erase", "drop", "destroy", "purge", "discard", "unlink",
    ],
    &["send", "post", "publish", "submit", "deliver"],
    &["run", "execute", "invoke", "launch", "start", "trigger", "perform"],
    &["stop", "kill", "terminate", "halt", "cancel", "abort"],
    &["write", "save", "store", "persist", "record"],
    &["download", "fetch", "pull"],
    &["upload", "push", "attach"],
    &["copy", "duplicate", "clone"],
    &["move", "relocate", "transfer", "rename"],
    &["convert", "transform", "export"],
    &["summarize", "summarise", "summary", "overview", "recap", "digest"],
    &[
        "analyze", "analyse", "analysis", "inspect", "examine", "assess", "evaluate",
    ],
    &["compare", "diff", "difference"],
    &["check", "verify", "validate", "test"],
    &["calculate", "compute", "calculator"],
    &["navigate", "goto", "visit", "open"],
    &["click", "press", "tap"],
    &["type", "fill", "enter", "input"],
    &["capture", "screenshot", "snapshot"],
    &["hover", "mouseover"],
    &["translate", "translation", "translator"],
    &["monitor", "watch", "track"],
    &["sort", "order", "rank"],
    &["filter", "narrow", "refine"],
    &["merge", "combine", "join"],
    &["extract", "parse", "scrape"],
    &["crawl", "scrape", "spider"],
    &["login", "signin", "authenticate", "auth"],
    &["reply", "respond", "answer"],
    &[
        "chart",
        "graph",
        "plot",
        "visualize",
        "visualise",
        "visualization",
        "diagram",
    ],
    &["schedule", "book", "reserve"],
    &["explain", "describe", "define"],
    // Nouns: what tools work on.
    &["file", "document", "doc"],
    &["folder", "directory", "dir"],
    &["image", "picture", "photo", "img", "pic"],
    &["video", "movie", "clip", "film"],
    &["audio", "sound", "music", "song"],
    &["message", "msg", "chat"],
    &["email", "mail", "inbox"],
    &["calendar", "event", "meeting", "appointment"],
    &["note", "memo"],
    &["repository", "repo"],
    &["issue", "ticket", "bug"],
    &["url", "link", "uri", "href"],
    &["website", "site", "webpage", "page", "web"],
    &["location", "place", "position", "venue"],
    &[
        "coordinate",
        "coordinates",
        "latitude",
        "longitude",
        "lat",
        "lng",
        "lon",
    ],
    &["nearby", "near", "around", "vicinity", "surrounding"],
    &["weather", "forecast", "temperature", "climate"],
    &["stock", "share", "equity", "ticker"],
    &["price", "cost", "quote"],
    &["news", "headline", "article"],
    &["company", "business", "firm", "organization", "organisation"],
    &["user", "account", "profile", "member"],
    &["database", "db", "sql"],
    &["spreadsheet", "sheet", "excel", "workbook", "xlsx"],
    &["presentation", "slide", "slides", "powerpoint", "pptx", "deck"],
    &["docx", "word"],
    &["text", "string", "content"],
    &["code", "script", "program", "source"],
    &["command", "shell", "terminal", "cli", "bash"],
    &["process", "task", "job"],
    &["time", "date", "clock", "timezone"],
    &["date", "day", "week", "month", "year", "period"],
    &["currency", "money", "exchange", "forex"],
    &["crypto", "cryptocurrency", "bitcoin", "coin"],
    &["paper", "publication", "research", "scholar"],
    &["trend", "trending", "popular", "hot"],
    &["route", "direction", "directions", "itinerary", "navigation"],
    &["memory", "remember", "memorize"],
    &["error", "exception", "failure"],
    &["metric", "statistics", "stats", "analytics"],
    &["payment", "pay", "invoice", "billing", "transaction"],
    &["purchase", "buy", "order"],
    &["customer", "client"],
    &["comment", "reply"],
    &["definition", "meaning", "dictionary", "define"],
    &["latest", "recent", "newest", "current"],
    &["colour", "color"],
];

/// Stem → stems of every word it shares a group with (itself excluded), sorted.
static THESAURUS: LazyLock<HashMap<String, Vec<String>>> = LazyLock::new(|| {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for group in GROUPS {
        let stems: Vec<String> = group.iter().map(|w| stem(w).into_owned()).collect();
        for own in &stems {
            let entry = map.entry(own.clone()).or_default();
            entry.extend(stems.iter().filter(|s| *s != own).cloned());
        }
    }
    for related in map.values_mut() {
        related.sort_unstable();
        related.dedup();
    }
    map
});

/// Stems related to the stem `term`, or none.
#[must_use]
pub fn related(term: &str) -> &'static [String] {
    THESAURUS.get(term).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn related_to(word: &str) -> Vec<String> {
        related(&stem(word)).to_vec()
    }

    #[test]
    fn verbs_expand_both_ways() {
        assert!(related_to("fetch").contains(&"get".to_owned()));
        assert!(related_to("get").contains(&"fetch".to_owned()));
        assert!(related_to("remove").contains(&stem("delete").into_owned()));
        assert!(related_to("find").contains(&"search".to_owned()));
    }

    #[test]
    fn inflected_words_expand_like_their_stem() {
        assert_eq!(related_to("fetching"), related_to("fetch"));
        assert_eq!(related_to("deleted"), related_to("delete"));
    }

    #[test]
    fn a_word_in_two_groups_gets_both() {
        let fetch = related_to("fetch");
        assert!(fetch.contains(&"retriev".to_owned()), "{fetch:?}");
        assert!(fetch.contains(&"download".to_owned()), "{fetch:?}");
    }

    #[test]
    fn a_word_is_not_its_own_synonym_and_unknown_words_have_none() {
        assert!(!related_to("fetch").contains(&"fetch".to_owned()));
        assert!(related_to("zzzqqq").is_empty());
    }
}
