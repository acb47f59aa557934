//! One tool-name pattern and ordered pattern lists.
//!
//! Syntax:
//! - glob: `*github*`, `github_*`, `?`, `[abc]`, `{a,b}` — case-sensitive, `*` crosses every
//!   character (tool names have no path separators);
//! - regex: `/body/flags`; flags `i`, `m`, `s`, `u` are honoured, `g` and `y` are accepted and
//!   ignored (they change how JS iterates matches, not whether a name matches);
//! - negation: a leading `!` in front of either.
//!
//! A list is evaluated in order: a matching negation excludes at once; otherwise the first
//! matching positive pattern includes; nothing matching means no match.

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

/// Why a pattern could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern `{pattern}`: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
enum Matcher {
    Glob(GlobMatcher),
    Regex(Regex),
}

impl Matcher {
    fn is_match(&self, name: &str) -> bool {
        match self {
            Self::Glob(glob) => glob.is_match(name),
            Self::Regex(regex) => regex.is_match(name),
        }
    }
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    negated: bool,
    matcher: Matcher,
}

impl Pattern {
    /// Compile one pattern.
    ///
    /// # Errors
    /// An empty pattern, an invalid glob, an invalid regex or an unknown regex flag.
    pub fn parse(source: &str) -> Result<Self, PatternError> {
        let fail = |reason: Reason| PatternError {
            pattern: source.to_owned(),
            reason: reason.0,
        };
        let (negated, body) = match source.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, source),
        };
        if body.is_empty() {
            return Err(fail(Reason("pattern is empty".into())));
        }
        let matcher = match split_regex(body) {
            Some((expr, flags)) => Matcher::Regex(compile_regex(expr, flags).map_err(fail)?),
            None => Matcher::Glob(compile_glob(body).map_err(fail)?),
        };
        Ok(Self {
            source: source.to_owned(),
            negated,
            matcher,
        })
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the body (ignoring `!`) matches `name`.
    #[must_use]
    pub fn body_matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }
}

/// `/body/flags` → `(body, flags)` when `flags` holds only JS regex flag letters.
fn split_regex(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    let close = rest.rfind('/')?;
    let (expr, flags) = (&rest[..close], &rest[close + 1..]);
    flags.chars().all(|c| c.is_ascii_alphabetic()).then_some((expr, flags))
}

/// Why a pattern's body does not compile; [`Pattern::parse`] names the pattern around it.
struct Reason(String);

fn compile_regex(expr: &str, flags: &str) -> Result<Regex, Reason> {
    let mut builder = RegexBuilder::new(expr);
    for flag in flags.chars() {
        match flag {
            'i' => builder.case_insensitive(true),
            'm' => builder.multi_line(true),
            's' => builder.dot_matches_new_line(true),
            // Rust regexes are Unicode-aware already; `g`/`y` only affect JS iteration.
            'u' | 'g' | 'y' => &mut builder,
            other => {
                return Err(Reason(format!(
                    "unknown regex flag `{other}` (allowed: i, m, s, u, g, y)"
                )))
            }
        };
    }
    builder.build().map_err(|e| {
        // The regex crate's message is multi-line with a caret diagram; keep its last line.
        let text = e.to_string();
        Reason(
            text.lines()
                .last()
                .unwrap_or(&text)
                .trim()
                .trim_start_matches("error: ")
                .to_owned(),
        )
    })
}

fn compile_glob(glob: &str) -> Result<GlobMatcher, Reason> {
    GlobBuilder::new(glob)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Reason(e.kind().to_string()))
}

/// An ordered list of patterns, evaluated with the seed semantics.
#[derive(Debug, Clone, Default)]
pub struct PatternList(Vec<Pattern>);

impl PatternList {
    /// Compile every pattern; the error carries the index of the first bad one.
    ///
    /// # Errors
    /// The first pattern that does not compile, with its index in the list.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, (usize, PatternError)> {
        patterns
            .iter()
            .enumerate()
            .map(|(i, p)| Pattern::parse(p.as_ref()).map_err(|e| (i, e)))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// The index of the pattern that makes `name` match, or `None`. A matching negation, or
    /// no matching positive pattern before one, means no match.
    #[must_use]
    pub fn deciding(&self, name: &str) -> Option<usize> {
        for (i, pattern) in self.0.iter().enumerate() {
            if pattern.body_matches(name) {
                if pattern.negated {
                    return None;
                }
                return Some(i);
            }
        }
        None
    }

    /// Whether `name` matches the list.
    #[must_use]
    pub fn is_match(&self, name: &str) -> bool {
        self.deciding(name).is_some()
    }

    /// Whether a set of `names` (a caller's groups) matches the list: the list is read in
    /// order as for one name, each pattern tried against every name, so a negation matching
    /// any of them excludes the set at once. An empty set matches nothing.
    #[must_use]
    pub fn is_match_any<S: AsRef<str>>(&self, names: &[S]) -> bool {
        for pattern in &self.0 {
            if names.iter().any(|name| pattern.body_matches(name.as_ref())) {
                return !pattern.negated;
            }
        }
        false
    }

    /// Whether the list matches every name whatever it is: a glob of `*` alone (`*`, `**`)
    /// comes before any negation. What "the whole server" means to a rule (the offers of a
    /// server are no tool names a pattern could be read against).
    #[must_use]
    pub fn covers_every_name(&self) -> bool {
        for pattern in &self.0 {
            if pattern.negated {
                return false;
            }
            if matches!(pattern.matcher, Matcher::Glob(_)) && pattern.source.chars().all(|c| c == '*') {
                return true;
            }
        }
        false
    }
}

/// Match `name` against `patterns` once (the `matchPattern` of the Node API).
///
/// # Errors
/// The first pattern that does not compile, with its index.
pub fn match_pattern<S: AsRef<str>>(name: &str, patterns: &[S]) -> Result<bool, (usize, PatternError)> {
    Ok(PatternList::parse(patterns)?.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `matches!(name, [patterns…])` asserts a match, `nmatches!` the opposite.
    macro_rules! matches {
        ($name:expr, [$($p:expr),+ $(,)?]) => {
            assert!(match_pattern($name, &[$($p),+]).unwrap(), "{:?} should match {:?}", $name, [$($p),+]);
        };
    }
    macro_rules! nmatches {
        ($name:expr, [$($p:expr),+ $(,)?]) => {
            assert!(!match_pattern($name, &[$($p),+]).unwrap(), "{:?} should not match {:?}", $name, [$($p),+]);
        };
    }
    macro_rules! syntaxerr {
        ($p:expr, $index:expr, $needle:expr) => {
            let (index, err) = match_pattern("x", &$p).unwrap_err();
            assert_eq!(index, $index);
            assert!(err.reason.contains($needle), "{err} should contain {:?}", $needle);
        };
    }

    #[test]
    fn glob_contains() {
        matches!("github_create_issue", ["*github*"]);
        matches!("my_github", ["*github*"]);
        nmatches!("gitlab_issue", ["*github*"]);
    }

    #[test]
    fn glob_prefix() {
        matches!("github_list", ["github_*"]);
        nmatches!("list_github", ["github_*"]);
    }

    #[test]
    fn glob_suffix() {
        matches!("create_issue", ["*_issue"]);
        nmatches!("create_issues", ["*_issue"]);
    }

    #[test]
    fn glob_single_char_and_class() {
        matches!("fs_a", ["fs_?"]);
        nmatches!("fs_ab", ["fs_?"]);
        matches!("tool_b", ["tool_[abc]"]);
        nmatches!("tool_d", ["tool_[abc]"]);
    }

    #[test]
    fn glob_is_case_sensitive() {
        nmatches!("GitHub_list", ["*github*"]);
        matches!("GitHub_list", ["/github/i"]);
    }

    #[test]
    fn negation_alone_never_includes() {
        // Seed semantics: a list of only negations includes nothing.
        nmatches!("delete_file", ["!*delete*"]);
        nmatches!("read_file", ["!*delete*"]);
    }

    #[test]
    fn negation_excludes_before_a_later_positive() {
        nmatches!("delete_file", ["!*delete*", "*file*"]);
        matches!("read_file", ["!*delete*", "*file*"]);
    }

    #[test]
    fn positive_before_negation_wins() {
        // In order: the first pattern already matched, the negation is never reached.
        matches!("delete_file", ["*file*", "!*delete*"]);
    }

    #[test]
    fn regex_with_case_insensitive_flag() {
        matches!("GitHub_Create_Issue", ["/github.*issue/i"]);
        nmatches!("GitHub_Create_Issue", ["/github.*issue/"]);
    }

    #[test]
    fn regex_anchored_alternation() {
        matches!("fs_read", ["/^fs_(read|write)$/"]);
        matches!("fs_write", ["/^fs_(read|write)$/"]);
        nmatches!("fs_read_all", ["/^fs_(read|write)$/"]);
    }

    #[test]
    fn regex_word_boundary() {
        matches!("create issue", [r"/\b(create|update)\b/"]);
        matches!("update", [r"/\b(create|update)\b/"]);
        nmatches!("recreated", [r"/\b(create|update)\b/"]);
    }

    #[test]
    fn regex_ignored_and_honoured_flags() {
        matches!("a\nb", ["/a.b/s"]);
        nmatches!("a\nb", ["/a.b/"]);
        matches!("x\nbeta", ["/^beta$/m"]);
        matches!("GITHUB", ["/github/gi"]);
        matches!("naïve", ["/^na.ve$/u"]);
    }

    #[test]
    fn negated_regex() {
        nmatches!("delete_repo", ["!/delete/", "*"]);
        matches!("create_repo", ["!/delete/", "*"]);
    }

    #[test]
    fn mixed_list() {
        matches!("github_list_repos", ["!*delete*", "/^github_/", "*_issue"]);
        matches!("jira_create_issue", ["!*delete*", "/^github_/", "*_issue"]);
        nmatches!("github_delete_repo", ["!*delete*", "/^github_/", "*_issue"]);
        nmatches!("slack_post", ["!*delete*", "/^github_/", "*_issue"]);
    }

    #[test]
    fn leading_slash_without_closing_slash_is_a_glob() {
        matches!("/abc", ["/abc"]);
        matches!("/abc", ["/ab?"]);
    }

    #[test]
    fn errors_name_the_index_and_reason() {
        syntaxerr!(["ok", "/(unclosed/"], 1, "unclosed");
        syntaxerr!(["tool_[abc"], 0, "unclosed");
        syntaxerr!(["/x/q"], 0, "unknown regex flag `q`");
        syntaxerr!(["!"], 0, "empty");
        syntaxerr!([""], 0, "empty");
    }

    #[test]
    fn deciding_names_the_pattern() {
        let list = PatternList::parse(&["*_a", "*_b"]).unwrap();
        assert_eq!(list.deciding("x_b"), Some(1));
        assert_eq!(list.deciding("x_c"), None);
    }

    #[test]
    fn only_a_star_before_any_negation_covers_every_name() {
        let covers = |p: &[&str]| PatternList::parse(p).unwrap().covers_every_name();
        assert!(covers(&["*"]));
        assert!(covers(&["**"]));
        assert!(covers(&["read_*", "*"]));
        assert!(!covers(&["!secret_*", "*"]), "a negation first leaves some names out");
        assert!(!covers(&["*_delete"]));
        assert!(!covers(&["/.*/"]), "regexes are not analysed: only `*` says it");
        assert!(!covers(&["\\*"]), "an escaped star is the literal name `*`");
    }
}
