//! serde's messages, rewritten for people who write configs: config words (key, object, list,
//! whole number) instead of Rust ones (field, struct `DiscoverySection`, sequence, u64), a
//! "did you mean" for typos, and the fix.

use std::sync::LazyLock;

use regex::Regex;

/// ` (did you mean `x`?)` when a known word is close to `word`, else nothing.
#[must_use]
pub fn did_you_mean(word: &str, known: &[&str]) -> String {
    let lower = word.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(distance, k)| *distance <= 2.max(k.len() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

static UNKNOWN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^unknown (field|variant) `([^`]*)`, (?:expected (?:one of )?(.*)|there are no (?:fields|variants))$")
        .expect("valid regex")
});
static INVALID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^invalid (?:type|value): (.*), expected (.*)$").expect("valid regex"));
static MISSING: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^missing field `([^`]*)`$").expect("valid regex"));
static QUOTED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]*)`").expect("valid regex"));

/// Rewrite one serde message (the inner error, without a path).
#[must_use]
pub fn reason(message: &str) -> String {
    if let Some(c) = UNKNOWN.captures(message) {
        let what = &c[2];
        let known: Vec<&str> = c
            .get(3)
            .map(|k| {
                QUOTED
                    .captures_iter(k.as_str())
                    .filter_map(|q| q.get(1))
                    .map(|m| m.as_str())
                    .collect()
            })
            .unwrap_or_default();
        let hint = did_you_mean(what, &known);
        let list = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        return if &c[1] == "field" {
            format!("unknown key `{what}`{hint}; remove it or use one of: {list}")
        } else {
            format!("unknown value `{what}`{hint}; use one of: {list}")
        };
    }
    if let Some(c) = MISSING.captures(message) {
        return format!("missing key `{}`: add it", &c[1]);
    }
    if let Some(c) = INVALID.captures(message) {
        return format!("expected {}, found {}", expected(&c[2]), found(&c[1]));
    }
    if message.starts_with("data did not match any variant of untagged enum") {
        return "expected a pattern string or a list of pattern strings".into();
    }
    message.to_owned()
}

fn expected(what: &str) -> String {
    match what {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number (0 or more)".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "a list".into(),
        "a map" | "map" => "an object".into(),
        _ if what.starts_with("struct ") || what.starts_with("enum ") => "an object".into(),
        _ => what.to_owned(),
    }
}

/// Longest quoted value in a message: a wrong-typed value may be long, or a secret.
const MAX_QUOTED_CHARS: usize = 40;

fn found(what: &str) -> String {
    if let Some(text) = what.strip_prefix("string ") {
        if text.chars().count() > MAX_QUOTED_CHARS {
            let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
            return format!("the string {cut}…");
        }
        return format!("the string {text}");
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(value) = what.strip_prefix(prefix) {
            return value.trim_matches('`').to_owned();
        }
    }
    match what {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "unit value" | "null" => "null".into(),
        _ => what.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_suggests_the_close_one() {
        assert_eq!(
            reason("unknown field `toolrules`, expected one of `enabled`, `toolRules`"),
            "unknown key `toolrules` (did you mean `toolRules`?); remove it or use one of: enabled, toolRules"
        );
        assert_eq!(
            reason("unknown field `zzz`, expected `name`"),
            "unknown key `zzz`; remove it or use one of: name"
        );
    }

    #[test]
    fn types_in_config_words() {
        assert_eq!(
            reason("invalid type: string \"x\", expected a sequence"),
            "expected a list, found the string \"x\""
        );
        assert_eq!(
            reason("invalid value: integer `-1`, expected u64"),
            "expected a whole number (0 or more), found -1"
        );
        assert_eq!(
            reason("invalid type: sequence, expected struct CacheSpec"),
            "expected an object, found a list"
        );
        assert_eq!(reason("missing field `name`"), "missing key `name`: add it");
        let long = format!("invalid type: string \"{}\", expected a boolean", "x".repeat(10_000));
        assert_eq!(
            reason(&long),
            format!("expected a boolean, found the string \"{}…", "x".repeat(39))
        );
        assert_eq!(
            reason("data did not match any variant of untagged enum OneOrMany"),
            "expected a pattern string or a list of pattern strings"
        );
    }
}
