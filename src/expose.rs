//! `discovery.expose`: the tools shown to the client directly, beside the five meta-tools,
//! and the names they are shown under.
//!
//! An entry is `server:tool`, each side a toolRules pattern (glob, `/regex/flags`), the whole
//! entry negated by a leading `!`. Entries are read in order like a pattern list: the first
//! entry whose server and tool both match decides (a negation hides the tool); none matching
//! means not shown. Server names never hold `:`, so the first `:` splits an entry.
//!
//! Names: every major client accepts `[A-Za-z0-9_-]{1,64}` as a tool name. A tool is shown as
//! `<server>__<tool>` when that is such a name and can be read back unambiguously (the server
//! name holds no `__` and does not end in `_`, so the first `__` is the separator). Any other
//! pair gets `<that text, other characters as _, cut to 55>_<8 hex digits>`, the digits a hash
//! of the exact server and tool names. A name depends only on its own server and tool, so it
//! stays the same while other tools come and go. Should two tools still meet on one name (or a
//! meta-tool's), the first in catalog order keeps it and the other is left out, logged.

use crate::rules::{Pattern, PatternError};

/// Longest tool name every major client accepts.
pub const MAX_NAME_CHARS: usize = 64;
/// Hex digits of the hash that makes a rewritten name unique.
const HASH_DIGITS: usize = 8;

/// Why an `expose` entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExposeError {
    #[error("`{0}` has no `:`: write `server:tool` (e.g. `filesystem:read_text_file` or `github:*_issue`)")]
    NoServer(String),
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

/// One compiled entry.
#[derive(Debug, Clone)]
struct Entry {
    negated: bool,
    server: Pattern,
    tool: Pattern,
}

/// The compiled `discovery.expose` list.
#[derive(Debug, Clone, Default)]
pub struct Expose {
    entries: Vec<Entry>,
}

impl Expose {
    /// Compile the entries.
    ///
    /// # Errors
    /// The index and reason of the first bad entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, (usize, ExposeError)> {
        let entries = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| parse_entry(entry.as_ref()).map_err(|e| (i, e)))
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// Whether nothing is exposed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `server`'s `tool` is shown directly.
    #[must_use]
    pub fn shows(&self, server: &str, tool: &str) -> bool {
        self.entries
            .iter()
            .find(|e| e.server.body_matches(server) && e.tool.body_matches(tool))
            .is_some_and(|e| !e.negated)
    }
}

fn parse_entry(source: &str) -> Result<Entry, ExposeError> {
    let (negated, body) = source.strip_prefix('!').map_or((false, source), |rest| (true, rest));
    let (server, tool) = body
        .split_once(':')
        .ok_or_else(|| ExposeError::NoServer(source.to_owned()))?;
    Ok(Entry {
        negated,
        server: Pattern::parse(server)?,
        tool: Pattern::parse(tool)?,
    })
}

/// The name `server`'s `tool` is shown under (see the module docs).
#[must_use]
pub fn exposed_name(server: &str, tool: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let plain = format!("{server}__{tool}");
    let readable = !server.is_empty()
        && !tool.is_empty()
        && !server.contains("__")
        && !server.ends_with('_')
        && plain.chars().all(allowed);
    if readable && plain.len() <= MAX_NAME_CHARS {
        return plain;
    }
    let kept: String = plain
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_NAME_CHARS - HASH_DIGITS - 1)
        .collect();
    let hash = crate::hash::fnv1a_from(crate::hash::fnv1a(server.as_bytes()), &[0]);
    let hash = crate::hash::fnv1a_from(hash, tool.as_bytes());
    format!("{kept}_{:0width$x}", hash & 0xffff_ffff, width = HASH_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expose(entries: &[&str]) -> Expose {
        Expose::parse(entries).unwrap()
    }

    #[test]
    fn entries_match_server_and_tool_in_order() {
        let list = expose(&[
            "!github:*delete*",
            "github:*_issue",
            "filesystem:read_text_file",
            "*:echo",
        ]);
        assert!(list.shows("github", "create_issue"));
        assert!(!list.shows("github", "delete_issue"), "the negation comes first");
        assert!(!list.shows("gitlab", "create_issue"));
        assert!(list.shows("filesystem", "read_text_file"));
        assert!(!list.shows("filesystem", "read_file"));
        assert!(list.shows("anything", "echo"));
        assert!(expose(&["github:/issue$/i"]).shows("github", "CREATE_ISSUE"));
        assert!(Expose::default().is_empty());
    }

    #[test]
    fn a_bad_entry_names_its_index_and_fix() {
        let (index, error) = Expose::parse(&["a:b", "read_file"]).unwrap_err();
        assert_eq!(index, 1);
        assert_eq!(
            error.to_string(),
            "`read_file` has no `:`: write `server:tool` (e.g. `filesystem:read_text_file` or `github:*_issue`)"
        );
        let (index, error) = Expose::parse(&["a:/(x/"]).unwrap_err();
        assert_eq!(index, 0);
        assert!(error.to_string().contains("invalid pattern `/(x/`"), "{error}");
    }

    #[test]
    fn plain_names_when_readable_and_short() {
        assert_eq!(
            exposed_name("filesystem", "read_text_file"),
            "filesystem__read_text_file"
        );
        assert_eq!(exposed_name("my-server", "get-thing"), "my-server__get-thing");
    }

    #[test]
    fn other_names_are_rewritten_with_a_stable_hash() {
        let valid = |name: &str| {
            name.len() <= MAX_NAME_CHARS && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        let long = exposed_name("server", &"x".repeat(100));
        assert!(valid(&long) && long.starts_with("server__xxx"), "{long}");
        assert_eq!(long, exposed_name("server", &"x".repeat(100)), "stable");
        assert_ne!(long, exposed_name("server", &"x".repeat(101)));
        let dotted = exposed_name("srv", "files.read");
        assert!(valid(&dotted) && dotted.starts_with("srv__files_read_"), "{dotted}");
        assert_ne!(dotted, exposed_name("srv", "files_read"));
        // Without the rule `a_` + `_b` and `a` + `__b` would both read `a____b`.
        assert_ne!(exposed_name("a_", "_b"), exposed_name("a", "__b"));
        assert_ne!(exposed_name("a__b", "c"), exposed_name("a", "b__c"));
        assert!(valid(&exposed_name("ünï", "çödé")));
    }
}
