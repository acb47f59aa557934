//! Secrets of every transport, one mechanism: what counts as a secret in a server's launch
//! spec, the process-wide register of them, and scrubbing them out of any text.
//!
//! A gateway holds every credential its servers need, and servers quote them back: a stdio
//! server echoes its `--token=…` in a usage error, a remote one its key in a 401 body. So when a
//! server's spec is expanded for a launch, every value that may be a credential — `env` and
//! `headers` values, a URL's password and query values, arguments that look like credentials —
//! is registered as a secret of that server ([`register`]), and [`scrub`] replaces each of them
//! by `***` wherever it appears: errors and statuses the model sees, tool results (texts,
//! resource links, embedded resources, structured content), log lines, the audit log and the
//! texts of snapshots. [`mask_key_shaped`] masks keys nobody registered in texts a person
//! writes about a server (its `description`). [`redact_args`] and [`redact_url`] do the same for the
//! config as written (`getConfig()`), where `${VAR}` references are kept.
//!
//! The rules (each unit-tested below) trade recall for not eating ordinary words:
//! - a value is never a secret when it is short (< [`MIN_SECRET_CHARS`]), a number, a boolean,
//!   or a path (`1`, `true`, `/usr/bin`);
//! - under a name that says credential (`API_KEY`, `x-auth-token`, `--password`) anything else
//!   is one;
//! - an unnamed `env`/header/query value is one when it looks like a key or mixes letters and
//!   digits (`Tr0ub4dor&3`), never when it is a plain word (`production`) or a version;
//! - an unnamed argument only when it is shaped like a key ([`looks_like_key`]): a known
//!   prefix (`sk-`, `ghp_`…), or a random run by the entropy rule (16+ characters between
//!   separators, 3+ changes of character class, 3+ bits of entropy per character) —
//!   arguments are mostly package names and paths (`web3-research-mcp`), which must stay
//!   readable;
//! - header arguments (`-H "Authorization: Bearer …"`, `--header X-Api-Key:…`) under a
//!   credential's name give their value and token; a remote URL's random path segments
//!   (`/mcp/sk-ak-…/sse`, a UUID) are secrets too;
//! - a secret of 8+ characters that is not a plain word is replaced wherever it appears, glued
//!   to other text (`token=sk-…;`); shorter ones and words only as whole tokens, so `json`
//!   registered never blanks "jsonl";
//! - server names are never secrets ([`declare_names`]), and tool names are never rewritten:
//!   scrubbing is for text that leaves the gateway, not for what it stores about itself.
//!
//! Registered values are held as [`SecretString`]s, whose `Debug` prints `[REDACTED]` and
//! which have no `Display`, so a new log line cannot print one by accident.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use aho_corasick::AhoCorasick;
use reqwest::Url;
pub use secrecy::{ExposeSecret, SecretString};

/// Shortest value ever taken for a secret: shorter ones are not keys, and would blank out
/// parts of ordinary text.
pub const MIN_SECRET_CHARS: usize = 4;
/// Shortest random run ([`is_random_run`]) that makes a value a key by its shape alone.
const MIN_KEY_SHAPED_CHARS: usize = 16;
/// Fewest changes of character class in a random run.
const MIN_CLASS_CHANGES: usize = 3;
/// Lowest Shannon entropy of a random run, in bits per character.
const MIN_ENTROPY_BITS: f64 = 3.0;
/// Characters after a known prefix for a value to count as a key (`sk-` alone is not one).
const MIN_AFTER_PREFIX: usize = 8;
/// Shortest registered secret replaced even glued to other text ([`replaced_anywhere`]).
const MIN_GLUED_CHARS: usize = 8;
/// What replaces a secret.
pub const MASK: &str = "***";

/// Prefixes of well-known API keys and tokens: `OpenAI`, Stripe, `GitHub`, `GitLab`, Slack, AWS,
/// Google, Hugging Face, npm, `PyPI`, Shopify, `SendGrid`, `DigitalOcean`, Linear, Notion.
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "hf_",
    "npm_",
    "pypi-",
    "shpat_",
    "SG.",
    "dop_v1_",
    "lin_api_",
    "ntn_",
    "secret_",
    "eyJ",
];

/// Words that, as a part of a name (`GITHUB_TOKEN`, `x-api-key`, `clientSecret`), say the
/// value is a credential.
const SECRET_WORDS: &[&str] = &[
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pass",
    "pwd",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "session",
    "sessionid",
    "sig",
    "signature",
    "jwt",
    "cookie",
    "bearer",
    "pat",
    "private",
];

/// Values that are ordinary settings whatever their name (`AUTH_ENABLED=true`).
const ORDINARY_WORDS: &[&str] = &[
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "null",
    "none",
    "undefined",
    "enabled",
    "disabled",
    "required",
    "optional",
    "default",
    "bearer",
    "basic",
    "oauth",
];

// ---------------------------------------------------------------------------------------------
// Detection rules

/// Whether a name (env variable, header, query parameter, `--flag`) says its value is a
/// credential: one of its words (split at `_ - .` and camelCase) is a secret word, or ends in
/// one of the unambiguous ones (`apikey`, `accesstoken`).
#[must_use]
pub fn names_a_secret(name: &str) -> bool {
    words(name).iter().any(|word| {
        SECRET_WORDS.contains(&word.as_str())
            || ["key", "token", "secret", "password", "passwd"]
                .iter()
                .any(|end| word.len() > end.len() && word.ends_with(end) && !word.ends_with("monkey"))
    })
}

/// `GITHUB_PERSONAL_ACCESS_TOKEN` → github, personal, access, token; `apiKey` → api, key.
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            out.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    out.push(current);
    out.retain(|w| !w.is_empty());
    out
}

/// Never a secret, whatever its name: short, a number, a boolean-like word, or a path.
#[must_use]
pub fn is_ordinary(value: &str) -> bool {
    let value = value.trim();
    value.chars().count() < MIN_SECRET_CHARS
        || value.parse::<f64>().is_ok()
        || ORDINARY_WORDS.iter().any(|w| value.eq_ignore_ascii_case(w))
        || is_path_like(value)
}

/// `/usr/bin`, `~/x`, `./a`, `C:\x`, `a/b:c/d` (a `PATH` list), `file.json`: a file name
/// with an extension is also a path here.
fn is_path_like(value: &str) -> bool {
    let bytes = value.as_bytes();
    let drive =
        bytes.len() > 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && matches!(bytes[2], b'\\' | b'/');
    value.starts_with(['/', '~', '\\'])
        || value.starts_with("./")
        || value.starts_with("../")
        || drive
        || (value.contains('/') && !value.contains("://") && value.contains(':'))
        || has_file_extension(value)
}

/// `server.json`, `main.py`: a file name with a common extension.
fn has_file_extension(value: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "json", "jsonl", "yaml", "yml", "toml", "js", "mjs", "cjs", "ts", "py", "txt", "md", "sh", "exe", "cmd", "bat",
        "log", "db", "sqlite", "html", "csv", "xml", "env",
    ];
    value
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// The characters of a key: letters, digits and `-_+/=.~`.
fn in_key_alphabet(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_+/=.~".contains(c))
}

/// Whether a value looks like an API key or token whatever its name: a known prefix followed
/// by enough key characters (`sk-live-…`, `ghp_…`, a JWT's `eyJ…`), or a random-looking run
/// ([`is_random_run`]) in a value of a key's alphabet that mixes letters and digits.
#[must_use]
pub fn looks_like_key(value: &str) -> bool {
    let value = value.trim();
    if !in_key_alphabet(value) || value.starts_with(['/', '.', '~']) {
        return false;
    }
    if KEY_PREFIXES
        .iter()
        .any(|p| value.strip_prefix(p).is_some_and(is_key_after_prefix))
    {
        return true;
    }
    let mixed = value.chars().any(|c| c.is_ascii_alphabetic()) && value.chars().any(|c| c.is_ascii_digit());
    mixed && longest_run(value).is_some_and(|run| is_random_run(&run))
}

/// What follows a known prefix in a key: [`MIN_AFTER_PREFIX`]+ characters holding a digit or
/// an upper case letter, or one long run — not words joined (`npm_max_file_size`,
/// `secret_push_protection_enabled` are settings).
fn is_key_after_prefix(rest: &str) -> bool {
    rest.len() >= MIN_AFTER_PREFIX
        && (rest.chars().any(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
            || !rest.contains(['-', '_', '.']) && rest.len() >= MIN_KEY_SHAPED_CHARS)
}

/// The longest part of `value` between separators (`-_.~/`): a key is one long run, or has
/// one (`sk-…-<run>`); a package or file name is short words joined (`web3-research-mcp`).
/// Base64 (upper and lower case, `/` or `+` inside, no other separator) is one run, without
/// its `/+=`.
fn longest_run(value: &str) -> Option<Cow<'_, str>> {
    let has = |f: fn(&char) -> bool| value.chars().any(|c| f(&c));
    let base64 = !value.contains(['-', '_', '.', '~'])
        && value.contains(['/', '+'])
        && has(char::is_ascii_uppercase)
        && has(char::is_ascii_lowercase);
    if base64 {
        return Some(Cow::Owned(value.chars().filter(char::is_ascii_alphanumeric).collect()));
    }
    value
        .split(['-', '_', '.', '~', '/'])
        .max_by_key(|run| run.len())
        .map(Cow::Borrowed)
}

/// Whether a run of letters and digits reads as random rather than as a word or an
/// identifier, by three measures a key passes and a name fails (thresholds measured with
/// `bench/scrub_fp.rs`, see BENCHMARKS.md): at least [`MIN_KEY_SHAPED_CHARS`] characters; at
/// least [`MIN_CLASS_CHANGES`] changes between digits, lower and upper case letters (those of
/// a capitalised word do not count, so `camelCaseNames` score low); and a Shannon entropy of at least [`MIN_ENTROPY_BITS`] bits per character
/// (`aaaa1111aaaa1111` changes class often but repeats itself).
fn is_random_run(run: &str) -> bool {
    run.len() >= MIN_KEY_SHAPED_CHARS
        && class_changes(run) >= MIN_CLASS_CHANGES
        && entropy_bits(run) >= MIN_ENTROPY_BITS
}

/// How often consecutive characters change class (digit, lower, upper), not counting the
/// changes of a capitalised word (`…Profile2Settings…` changes once, at the `2`): the start
/// of a word is an upper case letter followed by a lower case one.
fn class_changes(run: &str) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Digit,
        Lower,
        Upper,
        Other,
    }
    let class = |c: char| match c {
        '0'..='9' => Class::Digit,
        'a'..='z' => Class::Lower,
        'A'..='Z' => Class::Upper,
        _ => Class::Other,
    };
    let classes: Vec<Class> = run.chars().map(class).collect();
    (1..classes.len())
        .filter(|&i| {
            let (before, now, next) = (classes[i - 1], classes[i], classes.get(i + 1).copied());
            let starts_word = now == Class::Upper && next == Some(Class::Lower);
            let inside_word = before == Class::Upper && now == Class::Lower;
            before != now && !starts_word && !inside_word
        })
        .count()
}

/// Shannon entropy of the characters of `text`, in bits per character.
#[allow(clippy::cast_precision_loss)] // counts of a short run
fn entropy_bits(text: &str) -> f64 {
    let mut counts = std::collections::HashMap::<char, usize>::new();
    for c in text.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let total = text.chars().count() as f64;
    counts
        .values()
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum()
}

/// `8-4-4-4-12` hexadecimal: an id by its shape. Not a key among arguments (`--project`
/// ids), but one in a remote server's URL path, where hosted servers put the capability
/// (`https://mcp.example.net/<uuid>/gmail`).
fn is_uuid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Whether the value of a setting (an `env` variable, a header, a query parameter) named
/// `name` is a secret: never when ordinary; always under a credential's name; else when it
/// looks like a key, or mixes letters and digits over 8+ characters without being a version
/// (`Tr0ub4dor&3` is one; `production`, `2026-01-01`, `1.2.0-beta` are not).
#[must_use]
pub fn is_secret_setting(name: &str, value: &str) -> bool {
    let value = value.trim();
    if is_ordinary(value) {
        return false;
    }
    let mixed = value.chars().any(char::is_alphabetic) && value.chars().any(|c| c.is_ascii_digit());
    names_a_secret(name)
        || looks_like_key(value)
        || (mixed && value.chars().count() >= 8 && !value.contains(char::is_whitespace) && !is_version(value))
}

/// `1.2.3`, `v20.1.0`, `1.0.0-beta.2`: digits and dots (at least one) before any `-`/`+` tail.
fn is_version(value: &str) -> bool {
    let value = value.strip_prefix(['v', 'V']).unwrap_or(value);
    let core = value.split(['-', '+']).next().unwrap_or_default();
    core.contains('.')
        && core.chars().all(|c| c.is_ascii_digit() || c == '.')
        && core.starts_with(|c: char| c.is_ascii_digit())
}

/// The secrets a setting holds: its value (the token alone for `Bearer …`), or, for a URL,
/// the URL's own secrets.
#[must_use]
pub fn setting_secrets(name: &str, value: &str) -> Vec<String> {
    if let Some(url) = as_url(value) {
        return url_secrets(&url);
    }
    let token = strip_scheme(value.trim());
    if is_secret_setting(name, token) {
        vec![token.to_owned()]
    } else {
        Vec::new()
    }
}

/// `value` as a URL when it is one (`postgres://u:p@h/db`, `http://localhost:3000`): only its
/// credentials and secret query values are secrets, not the URL.
fn as_url(value: &str) -> Option<Url> {
    if !value.contains("://") {
        return None;
    }
    Url::parse(value.trim()).ok()
}

/// `Bearer abc` → `abc` (any case), so the token alone is found in a text.
#[must_use]
pub fn strip_scheme(value: &str) -> &str {
    for scheme in ["bearer ", "basic ", "token "] {
        if value.len() > scheme.len()
            && value.is_char_boundary(scheme.len())
            && value[..scheme.len()].eq_ignore_ascii_case(scheme)
        {
            return value[scheme.len()..].trim_start();
        }
    }
    value
}

/// The secrets of a URL, as written and as decoded: its password, a user name shaped like a
/// key (`https://ghp_…@github.com`), query values that are secrets by [`is_secret_setting`],
/// and random path segments ([`is_secret_path_segment`]: `/mcp/sk-ak-…/sse`).
#[must_use]
pub fn url_secrets(url: &Url) -> Vec<String> {
    let raw_pairs = url
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
    let decoded_pairs = url
        .query_pairs()
        .map(|(name, value)| (name.into_owned(), value.into_owned()));
    let password = url.password().map(|p| ("password".to_owned(), p.to_owned()));
    let user = Some(url.username())
        .filter(|u| looks_like_key(u))
        .map(|u| ("token".to_owned(), u.to_owned()));
    let password_decoded = password.as_ref().map(|(n, p)| (n.clone(), percent_decode(p)));
    let segments: Vec<String> = url
        .path_segments()
        .into_iter()
        .flatten()
        .flat_map(|segment| [segment.to_owned(), percent_decode(segment)])
        .filter(|segment| is_secret_path_segment(segment))
        .collect();
    longest_first(
        password
            .into_iter()
            .chain(password_decoded)
            .chain(user)
            .chain(raw_pairs)
            .chain(decoded_pairs)
            .filter(|(name, value)| is_secret_setting(name, value))
            .map(|(_, value)| value)
            .chain(segments),
    )
}

/// Whether a segment of a URL's path is a credential: shaped like a key ([`looks_like_key`],
/// the entropy rule) or a UUID. Hosted MCP servers put the key in the path
/// (`https://actions.zapier.com/mcp/sk-ak-…/sse`, `https://mcp.example.net/<uuid>/gmail`);
/// ordinary paths (`/mcp`, `/v1/sse`, `/servers/web3-research-mcp`) are words.
#[must_use]
pub fn is_secret_path_segment(segment: &str) -> bool {
    looks_like_key(segment) || is_uuid(segment)
}

fn percent_decode(text: &str) -> String {
    // A query value of one pair decodes the way a password would (`+` aside, rare in both).
    Url::parse(&format!("x:?v={text}"))
        .ok()
        .and_then(|u| u.query_pairs().next().map(|(_, v)| v.into_owned()))
        .unwrap_or_else(|| text.to_owned())
}

/// The credentials in a command line: the value of a flag whose name says credential
/// (`--token=…`, `--api-key …`), header arguments (`-H "Authorization: Bearer …"`,
/// `--header=X-Api-Key:…`, see [`header_secrets`]), values shaped like keys, and the
/// secrets of URL arguments.
#[must_use]
pub fn arg_secrets<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    let mut found = Vec::new();
    let mut named_next = false;
    let mut header_next = false;
    for arg in args.iter().map(AsRef::as_ref) {
        if std::mem::take(&mut header_next) {
            found.extend(header_secrets(arg));
            continue;
        }
        if std::mem::take(&mut named_next) && !arg.starts_with('-') && !is_ordinary(arg) {
            found.push(arg.to_owned());
            continue;
        }
        match header_flag(arg) {
            Some(HeaderFlag::Next) => {
                header_next = true;
                continue;
            }
            Some(HeaderFlag::Inline(header)) => {
                found.extend(header_secrets(header));
                continue;
            }
            None => {}
        }
        if let Some((flag, value)) = arg.split_once('=') {
            let name = flag.trim_start_matches('-');
            if !name.is_empty() && names_a_secret(name) && !is_ordinary(value) && !name.contains(char::is_whitespace) {
                found.push(value.to_owned());
                continue;
            }
        }
        if let Some(name) = arg.strip_prefix('-').filter(|_| !arg.contains('=')) {
            named_next = names_a_secret(name.trim_start_matches('-'));
            continue;
        }
        let value = arg.split_once('=').map_or(arg, |(_, v)| v);
        if let Some(url) = as_url(value) {
            found.extend(url_secrets(&url));
        } else if looks_like_key(value) {
            found.push(value.to_owned());
        }
    }
    longest_first(found.into_iter())
}

/// A header argument: its value follows (`-H`, `--header`), or is in it (`--header=…`).
enum HeaderFlag<'a> {
    Next,
    Inline(&'a str),
}

/// Whether `arg` is a header flag, as `mcp-remote`, `curl` and most HTTP bridges spell it.
fn header_flag(arg: &str) -> Option<HeaderFlag<'_>> {
    match arg {
        "-H" | "--header" | "--headers" => Some(HeaderFlag::Next),
        _ => arg
            .strip_prefix("--header=")
            .or_else(|| arg.strip_prefix("--headers="))
            .or_else(|| arg.strip_prefix("-H").filter(|rest| rest.contains(':')))
            .map(HeaderFlag::Inline),
    }
}

/// The secrets of one `Name: value` header argument. Under a credential's name
/// (`Authorization`, `Proxy-Authorization`, `Cookie`, `X-Api-Key`, `*-Token`, `*-Secret` …,
/// see [`names_a_secret`]) the value is one, and so is the token of `Bearer …`/`Basic …` and
/// each value of a cookie list; under another name the value is one by the rules of any
/// setting ([`setting_secrets`]).
#[must_use]
pub fn header_secrets(header: &str) -> Vec<String> {
    let Some((name, value)) = header.split_once(':') else {
        return Vec::new();
    };
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() || name.contains(char::is_whitespace) || is_ordinary(value) {
        return Vec::new();
    }
    if !names_a_secret(name) {
        return setting_secrets(name, value);
    }
    let token = strip_scheme(value);
    let cookies = value
        .split(';')
        .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.trim()))
        .filter(|v| !is_ordinary(v));
    let values = [value, token]
        .into_iter()
        .chain(cookies)
        .filter(|v| !is_ordinary(v))
        .map(str::to_owned);
    longest_first(values)
}

/// Whether `text` is exactly one reference (`${NAME}` or `${NAME:-…}`): safe to display,
/// since it names a variable instead of holding a value.
#[must_use]
pub fn is_single_reference(text: &str) -> bool {
    text.strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .is_some_and(|inner| !inner.contains('}') && !inner.contains("${"))
}

/// `args` with their credentials ([`arg_secrets`]) replaced by `***`; `${VAR}` references
/// are kept (they name a secret, they are not one).
#[must_use]
pub fn redact_args(args: &[String]) -> Vec<String> {
    let secrets: Vec<String> = arg_secrets(args)
        .into_iter()
        .filter(|s| !is_single_reference(s))
        .collect();
    args.iter()
        .map(|arg| {
            secrets
                .iter()
                .fold(arg.clone(), |arg, secret| replace_token(&arg, secret).into_owned())
        })
        .collect()
}

/// A URL as written in a config with its password and secret query values replaced by
/// `***`; `${VAR}` references are kept. Text-based, so an unexpanded URL works too.
#[must_use]
pub fn redact_url(text: &str) -> String {
    let (base, fragment) = text.split_once('#').map_or((text, None), |(b, f)| (b, Some(f)));
    let (head, query) = base.split_once('?').map_or((base, None), |(h, q)| (h, Some(q)));
    let mut out = redact_path(&redact_userinfo(head));
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value))
                    if !is_single_reference(value)
                        && (is_secret_setting(name, value) || is_secret_setting(name, &percent_decode(value))) =>
                {
                    format!("{name}={MASK}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// `scheme://host/path` with the random segments of its path ([`is_secret_path_segment`])
/// replaced by `***`; references (`/${KEY}/sse`) are kept.
fn redact_path(head: &str) -> String {
    let Some(scheme_end) = head.find("://").map(|i| i + 3) else {
        return head.to_owned();
    };
    let Some(path_start) = head[scheme_end..].find('/').map(|i| scheme_end + i) else {
        return head.to_owned();
    };
    let path: Vec<&str> = head[path_start..]
        .split('/')
        .map(|segment| {
            if !segment.contains("${") && is_secret_path_segment(&percent_decode(segment)) {
                MASK
            } else {
                segment
            }
        })
        .collect();
    format!("{}{}", &head[..path_start], path.join("/"))
}

/// `scheme://user:password@host…` with the password (or a key-shaped user name) masked.
fn redact_userinfo(head: &str) -> String {
    let Some(scheme_end) = head.find("://").map(|i| i + 3) else {
        return head.to_owned();
    };
    let authority_end = head[scheme_end..].find('/').map_or(head.len(), |i| scheme_end + i);
    let Some(at) = head[scheme_end..authority_end].rfind('@').map(|i| scheme_end + i) else {
        return head.to_owned();
    };
    let userinfo = &head[scheme_end..at];
    let shown = match userinfo.split_once(':') {
        Some((user, password)) if !is_single_reference(password) => format!("{user}:{MASK}"),
        None if looks_like_key(userinfo) => MASK.to_owned(),
        _ => userinfo.to_owned(),
    };
    format!("{}{shown}{}", &head[..scheme_end], &head[at..])
}

/// Distinct values, longest first, so that a value is never half-replaced through a shorter
/// one it contains.
fn longest_first(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in values {
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

// ---------------------------------------------------------------------------------------------
// Scrubbing

/// Whether a character continues a token: a secret next to one is part of a longer word.
fn continues_token(c: char) -> bool {
    c.is_alphanumeric() || "-_~%+".contains(c)
}

fn is_whole_token(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(continues_token) && !after.is_some_and(continues_token)
}

/// Whether a secret is replaced wherever it appears, glued to other text (`token=sk-…;x`,
/// `key%3Dabc…`, `Bearer_abc…`), not only as a whole token: when it has at least
/// [`MIN_GLUED_CHARS`] characters and is not a plain word (it holds a digit or a symbol). A
/// shorter secret, or a word (`production` under `API_TOKEN`), is replaced as a whole token
/// only, so that it never blanks the middle of an ordinary word ("reproduction").
fn replaced_anywhere(secret: &str) -> bool {
    secret.chars().count() >= MIN_GLUED_CHARS && !secret.chars().all(char::is_alphabetic)
}

/// Whether the occurrence of a secret at `start..end` of `text` is masked.
fn masks_at(text: &str, start: usize, end: usize) -> bool {
    replaced_anywhere(&text[start..end]) || is_whole_token(text, start, end)
}

/// `text` with each occurrence of `secret` replaced by `***`: anywhere for a long secret
/// that is not a word ([`replaced_anywhere`]), else as a whole token only (the characters
/// around it must not continue a token: `json` in "jsonl" stays). A dot ends a token, so a
/// key at the end of a sentence still goes.
#[must_use]
pub fn replace_token<'t>(text: &'t str, secret: &str) -> Cow<'t, str> {
    if secret.is_empty() {
        return Cow::Borrowed(text);
    }
    let spans: Vec<(usize, usize)> = text
        .match_indices(secret)
        .map(|(at, _)| (at, at + secret.len()))
        .filter(|&(start, end)| masks_at(text, start, end))
        .collect();
    mask_spans(text, spans)
}

/// `text` with every token shaped like a key ([`looks_like_key`]: a known prefix, or a
/// random run by the entropy rule) replaced by `***`, registered or not: for texts a person
/// writes about a server (its `description`), where a pasted key is never meant to be shown.
#[must_use]
pub fn mask_key_shaped(text: &str) -> Cow<'_, str> {
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || "-_+/=.~".contains(c);
    let mut spans = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        let in_token = at < text.len() && is_key_char(c);
        match (start, in_token) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                // A sentence's dot after a key is not part of it.
                let token = text[from..at].trim_end_matches('.');
                if looks_like_key(token) {
                    spans.push((from, from + token.len()));
                }
                start = None;
            }
            _ => {}
        }
    }
    mask_spans(text, spans)
}

/// `text` with the given spans (sorted by start, longest first on ties) masked; a span that
/// overlaps one already masked is skipped.
fn mask_spans(text: &str, spans: Vec<(usize, usize)>) -> Cow<'_, str> {
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in spans {
        if start < last {
            continue;
        }
        out.push_str(&text[last..start]);
        out.push_str(MASK);
        last = end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// Tokens of one server kept beyond those in use ([`register_tokens`]): the most recently used
/// this many.
const MAX_TOKENS_PER_SERVER: usize = 512;
/// A token used within this long is never forgotten, however many came after it: a call or a
/// connection may still carry it (calls, and idle connections, end well within it).
const TOKEN_IN_USE: std::time::Duration = std::time::Duration::from_secs(60 * 60);
/// A token's use is recorded again only this long after the last record: calls in a burst take
/// the register's read lock alone. Against [`TOKEN_IN_USE`], being a minute late changes nothing.
const USE_RECORDED_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// One registered secret of one server (or of the gateway's own: `(environment)`, `store`…).
struct Entry {
    server: String,
    value: SecretString,
    /// `None`: from the config or the environment, kept for the life of the process. `Some`: a
    /// token that comes and goes (OAuth), with when it was last registered or used.
    used: Option<std::time::Instant>,
}

/// The register: every secret of every server launched in this process (a reload or a second
/// engine adds to it; a configured secret once seen stays one; tokens stay while in use and
/// among their server's most recent, [`register_tokens`]), and the automaton that finds them
/// all in one pass over a text.
#[derive(Default)]
struct Register {
    entries: Vec<Entry>,
    finder: Option<Arc<AhoCorasick>>,
    /// Server names: never secrets, whatever they look like (see [`declare_names`]).
    names: BTreeSet<String>,
}

static REGISTER: RwLock<Register> = RwLock::new(Register {
    entries: Vec::new(),
    finder: None,
    names: BTreeSet::new(),
});

/// Declare the names of configured servers, which are never secrets: a name that looks like
/// a key, or that is also an argument taken for one (`npx -y web3-research-mcp` in a server
/// named `web3-research-mcp`), is how the gateway, its snapshots and the model refer to the
/// server, and masking it would hide the server and break what is stored about it. A value
/// already registered that is a name is dropped.
pub fn declare_names<'a>(names: impl IntoIterator<Item = &'a str>) {
    let mut register = REGISTER.write().unwrap_or_else(PoisonError::into_inner);
    let fresh: Vec<&str> = names.into_iter().filter(|n| !register.names.contains(*n)).collect();
    if fresh.is_empty() {
        return;
    }
    register.names.extend(fresh.iter().map(|n| (*n).to_owned()));
    let before = register.entries.len();
    let names = std::mem::take(&mut register.names);
    register.entries.retain(|e| !names.contains(e.value.expose_secret()));
    register.names = names;
    if register.entries.len() != before {
        rebuild_finder(&mut register);
    }
}

fn rebuild_finder(register: &mut Register) {
    let patterns: Vec<&str> = register.entries.iter().map(|e| e.value.expose_secret()).collect();
    // Standard semantics: every match, overlapping ones too, so the masking rule can pick.
    register.finder = if patterns.is_empty() {
        None
    } else {
        AhoCorasick::new(patterns).ok().map(Arc::new)
    };
}

/// Environment variables that hold the gateway's own secrets (the store's URL and key): a
/// stdio server does not inherit them unless its own `env` sets them.
static WITHHELD: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Keep the variables `names` from the servers the gateway starts (see [`withheld`]).
pub fn withhold_variables(names: impl IntoIterator<Item = String>) {
    let mut withheld = WITHHELD.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    for name in names {
        if !withheld.contains(&name) {
            withheld.push(name);
        }
    }
}

/// The variables servers must not inherit.
#[must_use]
pub fn withheld() -> Vec<String> {
    WITHHELD
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Register `values` as secrets of `server` (values not worth a secret, shorter than
/// [`MIN_SECRET_CHARS`], are ignored; duplicates are kept once).
pub fn register(server: &str, values: impl IntoIterator<Item = String>) {
    register_all([(server, values)]);
}

/// Register the secrets of many servers at once, as [`register`] does for one: the automaton
/// that finds them is rebuilt once for the whole batch. A config of hundreds of servers, each
/// with a key, registered one by one rebuilt it per server (quadratic: ~0.2 s for 328 keys).
pub fn register_all<'a, V: IntoIterator<Item = String>>(servers: impl IntoIterator<Item = (&'a str, V)>) {
    let fresh: Vec<(&str, String)> = servers
        .into_iter()
        .flat_map(|(server, values)| values.into_iter().map(move |v| (server, v.trim().to_owned())))
        .filter(|(_, v)| v.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    if fresh.is_empty() {
        return;
    }
    let mut register = REGISTER.write().unwrap_or_else(PoisonError::into_inner);
    // Borrowed views only, so no secret is copied into a plain string to compare it.
    let new: Vec<bool> = {
        // A token registered again as a setting (a per-caller connection's `Authorization`
        // header) stays a token: it goes when its caller's use of it does.
        let mut known: HashSet<&str> = register.entries.iter().map(|e| e.value.expose_secret()).collect();
        known.extend(register.names.iter().map(String::as_str));
        fresh.iter().map(|(_, v)| known.insert(v.as_str())).collect()
    };
    if !new.contains(&true) {
        return;
    }
    for ((server, value), new) in fresh.into_iter().zip(new) {
        if new {
            register.entries.push(Entry {
                server: server.to_owned(),
                value: SecretString::from(value),
                used: None,
            });
        }
    }
    rebuild_finder(&mut register);
}

/// Register `values` as tokens of `server` (OAuth access, refresh and id tokens), or mark them
/// used now when they are registered already. Unlike [`register`], which keeps a secret for the
/// life of the process, a token is forgotten once it is neither among its server's
/// [`MAX_TOKENS_PER_SERVER`] most recently used nor used within [`TOKEN_IN_USE`]: a gateway with
/// per-user servers sees a new token per caller per refresh, and must not keep them all. Every
/// use of a token registers it again (it is read through the token store, which calls this
/// each time), so a forgotten token that comes back into use is a secret again before it is
/// sent.
pub fn register_tokens(server: &str, values: impl IntoIterator<Item = String>) {
    register_tokens_at(server, values, std::time::Instant::now());
}

/// [`register_tokens`], used at `used`.
fn register_tokens_at(server: &str, values: impl IntoIterator<Item = String>, used: std::time::Instant) {
    let fresh: Vec<String> = values
        .into_iter()
        .map(|v| v.trim().to_owned())
        .filter(|v| v.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    if fresh.is_empty() {
        return;
    }
    // Every per-user call registers its token: the read lock spares other callers' scrubbing a
    // wait when nothing is new.
    if recorded(&REGISTER.read().unwrap_or_else(PoisonError::into_inner), &fresh, used) {
        return;
    }
    let mut register = REGISTER.write().unwrap_or_else(PoisonError::into_inner);
    let mut changed = false;
    for value in fresh {
        if register.names.contains(&value) {
            continue;
        }
        if let Some(entry) = register.entries.iter_mut().find(|e| e.value.expose_secret() == value) {
            // A configured secret (`used: None`) stays one for good.
            if let Some(last) = &mut entry.used {
                *last = used.max(*last);
            }
            continue;
        }
        register.entries.push(Entry {
            server: server.to_owned(),
            value: SecretString::from(value),
            used: Some(used),
        });
        changed = true;
    }
    changed |= forget_stale_tokens(&mut register, server, std::time::Instant::now());
    if changed {
        rebuild_finder(&mut register);
    }
}

/// Whether each of `values` is registered with a use recorded within [`USE_RECORDED_WITHIN`]
/// of `now` (or for good): registering them again would change nothing that matters.
fn recorded(register: &Register, values: &[String], now: std::time::Instant) -> bool {
    values.iter().all(|value| {
        register.names.contains(value)
            || register.entries.iter().any(|e| {
                e.value.expose_secret() == value
                    && e.used
                        .is_none_or(|last| now.saturating_duration_since(last) < USE_RECORDED_WITHIN)
            })
    })
}

/// Forget the tokens of `server` beyond its [`MAX_TOKENS_PER_SERVER`] most recently used that
/// were not used within [`TOKEN_IN_USE`]; whether any was.
fn forget_stale_tokens(register: &mut Register, server: &str, now: std::time::Instant) -> bool {
    let mut uses: Vec<std::time::Instant> = register
        .entries
        .iter()
        .filter(|e| e.server == server)
        .filter_map(|e| e.used)
        .collect();
    if uses.len() <= MAX_TOKENS_PER_SERVER {
        return false;
    }
    uses.sort_unstable_by(|a, b| b.cmp(a));
    // Kept: the most recent ones, and any used within the window.
    let oldest_kept = uses[MAX_TOKENS_PER_SERVER - 1].min(now.checked_sub(TOKEN_IN_USE).unwrap_or(now));
    let before = register.entries.len();
    register
        .entries
        .retain(|e| e.server != server || e.used.is_none_or(|used| used >= oldest_kept));
    register.entries.len() != before
}

/// Register the secrets of a stdio server's expanded launch spec: `env` values (by name and
/// shape, and the names of the variables they were expanded from) and credential arguments.
pub fn register_stdio<'a>(server: &str, args: &[String], env: impl Iterator<Item = (&'a str, &'a str, &'a str)>) {
    let mut values = arg_secrets(args);
    for (name, written, expanded) in env {
        values.extend(setting_secrets_named(name, written, expanded));
    }
    register(server, values);
}

/// The register's name for secrets of the gateway's own environment.
const ENVIRONMENT: &str = "(environment)";

/// Register the secrets of the gateway's own environment once per process: every stdio server
/// inherits it, so a server that prints its environment (server-everything's `get-env`) would
/// otherwise hand `OPENAI_API_KEY` to the model.
pub fn register_process_environment() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        register_environment(
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        );
    });
}

/// Register the environment variables `vars` that hold a credential: a key-shaped value
/// (`sk-…`, `ghp_…`, long mixed base64), or any value under a credential's name that is more
/// than one short plain word. Narrower than [`is_secret_setting`]: a whole environment holds
/// host names and ids that mix letters and digits, and `DESKTOP_SESSION=ubuntu` says `session`
/// without being a secret; masking those would blank ordinary words in every tool result.
pub fn register_environment(vars: impl IntoIterator<Item = (String, String)>) {
    let values = vars.into_iter().filter_map(|(name, value)| {
        let value = strip_scheme(value.trim());
        let credential =
            !is_ordinary(value) && (looks_like_key(value) || (names_a_secret(&name) && !is_short_plain_word(value)));
        credential.then(|| value.to_owned())
    });
    register(ENVIRONMENT, values);
}

/// `ubuntu`, `wayland`, `GNOME`: one word of letters, up to 12 of them.
fn is_short_plain_word(value: &str) -> bool {
    value.chars().count() <= 12 && value.chars().all(|c| c.is_ascii_alphabetic())
}

/// Register the secrets of a remote server: its URL's, and those found in its headers.
pub fn register_remote(server: &str, url: &Url, header_secrets: impl IntoIterator<Item = String>) {
    register(server, url_secrets(url).into_iter().chain(header_secrets));
}

/// The secrets of a setting as written (`"${GITHUB_TOKEN}"`) and expanded: the variables it
/// names count as its name too, so `X: ${MY_TOKEN}` is a credential.
#[must_use]
pub fn setting_secrets_named(name: &str, written: &str, expanded: &str) -> Vec<String> {
    let referenced = written
        .split("${")
        .skip(1)
        .filter_map(|r| r.split(['}', ':']).next())
        .find(|var| names_a_secret(var));
    setting_secrets(referenced.unwrap_or(name), expanded)
}

/// Whether debug logs may show argument values (`--log-arguments`); keys only otherwise.
static LOG_ARGUMENTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set by the CLI's `--log-arguments`.
pub fn set_log_arguments(on: bool) {
    LOG_ARGUMENTS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether debug logs may show argument values.
#[must_use]
pub fn log_arguments() -> bool {
    LOG_ARGUMENTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether any secret is registered (callers skip walking large values when none is).
#[must_use]
pub fn any_registered() -> bool {
    REGISTER.read().unwrap_or_else(PoisonError::into_inner).finder.is_some()
}

/// How many secrets `server` registered (never the values).
#[cfg(test)]
#[must_use]
pub fn registered_count(server: &str) -> usize {
    REGISTER
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .entries
        .iter()
        .filter(|e| e.server == server)
        .count()
}

/// `text` with every registered secret replaced by `***` (glued to other text when long
/// enough, else whole tokens only: [`replaced_anywhere`]; the longest one where several start
/// at one place). Borrowed when nothing was found.
#[must_use]
pub fn scrub(text: &str) -> Cow<'_, str> {
    let Some(finder) = REGISTER.read().unwrap_or_else(PoisonError::into_inner).finder.clone() else {
        return Cow::Borrowed(text);
    };
    let mut spans: Vec<(usize, usize)> = finder
        .find_overlapping_iter(text)
        .map(|m| (m.start(), m.end()))
        .filter(|&(start, end)| masks_at(text, start, end))
        .collect();
    spans.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
    mask_spans(text, spans)
}

/// [`scrub`] a string in place (left untouched, not reallocated, when it holds no secret).
pub fn scrub_in_place(text: &mut String) {
    if let Cow::Owned(clean) = scrub(text) {
        *text = clean;
    }
}

/// Scrub every string inside a JSON value, in place (keys too: a server may key a map by
/// its token).
pub fn scrub_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) => scrub_in_place(text),
        Value::Array(items) => items.iter_mut().for_each(scrub_json),
        Value::Object(map) => scrub_map(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// [`scrub_json`] for an object.
pub fn scrub_map(map: &mut serde_json::Map<String, serde_json::Value>) {
    if map.keys().any(|k| matches!(scrub(k), Cow::Owned(_))) {
        let entries = std::mem::take(map);
        for (key, value) in entries {
            map.insert(scrub(&key).into_owned(), value);
        }
    }
    map.values_mut().for_each(scrub_json);
}

/// A tool as the model and the snapshot see it, without registered secrets in its title,
/// description or schemas (a server may document its own key as a default). Its name is
/// left alone: names are not secrets, and a masked name could no longer be called, trusted
/// or matched to its snapshot.
pub fn scrub_tool(tool: &mut rmcp::model::Tool) {
    if let Some(title) = &mut tool.title {
        scrub_in_place(title);
    }
    if let Some(description) = &mut tool.description {
        if let Cow::Owned(clean) = scrub(description) {
            *description = clean.into();
        }
    }
    scrub_shared_map(&mut tool.input_schema);
    if let Some(schema) = &mut tool.output_schema {
        scrub_shared_map(schema);
    }
}

/// [`scrub_map`] for a map that may be shared (a tool cloned for its snapshot): copied only
/// when it holds a secret.
fn scrub_shared_map(map: &mut Arc<serde_json::Map<String, serde_json::Value>>) {
    if map_holds_secret(map) {
        scrub_map(Arc::make_mut(map));
    }
}

fn map_holds_secret(map: &serde_json::Map<String, serde_json::Value>) -> bool {
    use serde_json::Value;
    fn holds(value: &Value) -> bool {
        match value {
            Value::String(text) => matches!(scrub(text), Cow::Owned(_)),
            Value::Array(items) => items.iter().any(holds),
            Value::Object(map) => map_holds_secret(map),
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }
    map.iter()
        .any(|(key, value)| matches!(scrub(key), Cow::Owned(_)) || holds(value))
}

/// A tool's result without registered secrets in anything the model reads: texts, the
/// `uri`, `name`, `title`, `description` and icon URLs of resource links and the `uri` of
/// embedded resources (a server may hand back a link holding the token it was given),
/// structured content and `_meta`. Images, audio and blobs are data, left alone.
pub fn scrub_result(result: &mut rmcp::model::CallToolResult) {
    use rmcp::model::{ContentBlock, ResourceContents};
    if !any_registered() {
        return;
    }
    for block in &mut result.content {
        let meta = match block {
            ContentBlock::Text(content) => {
                scrub_in_place(&mut content.text);
                &mut content.meta
            }
            ContentBlock::Resource(embedded) => {
                match &mut embedded.resource {
                    ResourceContents::TextResourceContents { uri, text, meta, .. } => {
                        scrub_in_place(uri);
                        scrub_in_place(text);
                        scrub_meta(meta);
                    }
                    ResourceContents::BlobResourceContents { uri, meta, .. } => {
                        scrub_in_place(uri);
                        scrub_meta(meta);
                    }
                    // Kinds a later protocol adds.
                    _ => {}
                }
                &mut embedded.meta
            }
            ContentBlock::ResourceLink(link) => {
                scrub_in_place(&mut link.uri);
                scrub_in_place(&mut link.name);
                for text in [&mut link.title, &mut link.description].into_iter().flatten() {
                    scrub_in_place(text);
                }
                for icon in link.icons.iter_mut().flatten() {
                    scrub_in_place(&mut icon.src);
                }
                &mut link.meta
            }
            ContentBlock::Image(image) => &mut image.meta,
            ContentBlock::Audio(audio) => &mut audio.meta,
            // Kinds a later protocol adds.
            _ => continue,
        };
        scrub_meta(meta);
    }
    if let Some(structured) = &mut result.structured_content {
        scrub_json(structured);
    }
    scrub_meta(&mut result.meta);
}

fn scrub_meta(meta: &mut Option<rmcp::model::MetaObject>) {
    if let Some(meta) = meta {
        scrub_map(&mut meta.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_reference_detection() {
        assert!(is_single_reference("${TOKEN}"));
        assert!(is_single_reference("${TOKEN:-x}"));
        assert!(!is_single_reference("Bearer ${TOKEN}"));
        assert!(!is_single_reference("${A}${B}"));
        assert!(!is_single_reference("literal"));
    }

    #[test]
    fn names_that_say_credential() {
        for name in [
            "API_KEY",
            "apiKey",
            "x-api-key",
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "Authorization",
            "X-Auth-Token",
            "OPENAI_APIKEY",
            "client_secret",
            "clientSecret",
            "DB_PASSWORD",
            "PGPASSWORD",
            "token",
            "sessionId",
            "Cookie",
        ] {
            assert!(names_a_secret(name), "{name}");
        }
        for name in [
            "DESIGN_MODE",
            "author",
            "KEYBOARD_LAYOUT",
            "MONKEY",
            "PATH",
            "HOME",
            "passthrough",
            "compass",
            "NODE_ENV",
            "format",
        ] {
            assert!(!names_a_secret(name), "{name}");
        }
    }

    #[test]
    fn ordinary_values_are_never_secrets() {
        for value in [
            "1",
            "true",
            "TRUE",
            "off",
            "/usr/bin",
            "/usr/local/bin:/usr/bin",
            "~/x",
            "./a",
            "C:\\tools",
            "3.14",
            "8080",
            "config.json",
            "abc",
        ] {
            assert!(is_ordinary(value), "{value}");
            assert!(!is_secret_setting("API_TOKEN", value), "{value}");
        }
        assert!(!is_ordinary("sk-live-abc"));
    }

    #[test]
    fn settings_named_or_shaped_or_not_plain_words() {
        assert!(is_secret_setting("API_TOKEN", "hunter"));
        assert!(is_secret_setting("OPENAI_API_KEY", "sk-live-0123456789abcdef"));
        assert!(is_secret_setting("X", "a1b2c3d4e5f6g7h8i9"));
        assert!(is_secret_setting("DB", "Tr0ub4dor&3"));
        for (name, value) in [
            ("NODE_ENV", "production"),
            ("MODE", "stdio"),
            ("TZ", "Europe-Berlin"),
            ("X-Client", "anygpt-test"),
            ("format", "json"),
            ("since", "2026-01-01"),
            ("VERSION", "1.2.0-beta.2"),
            ("NODE", "v20.11.1"),
        ] {
            assert!(!is_secret_setting(name, value), "{name}={value}");
        }
        assert_eq!(
            setting_secrets("Authorization", "Bearer tok-remembered"),
            ["tok-remembered"]
        );
        assert_eq!(
            setting_secrets("DATABASE_URL", "postgres://app:pa55word@db/x"),
            ["pa55word"]
        );
        assert!(setting_secrets("ALLOWED_ORIGIN", "http://localhost:3000").is_empty());
    }

    #[test]
    fn key_shapes() {
        for key in [
            "sk-live-0123456789",
            "ghp_abcdefghijklmnop",
            "github_pat_11ABCDEFG0123456789",
            "xoxb-1234-5678-abcdef",
            "AKIAIOSFODNN7EXAMPLE",
            "a1b2c3d4e5f6g7h8i9",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcDEF123",
        ] {
            assert!(looks_like_key(key), "{key}");
        }
        for not_key in [
            "sk-short",
            "@modelcontextprotocol/server-everything@2025.1.14",
            "src/server-2026/main",
            "/home/user/project2026-data",
            "2026-01-01T00:00:00Z",
            "server-everything",
            "1234567890123456",
            "report-2026-q1.json",
            // Real server names of the 328-server benchmark catalog, given as arguments.
            "web3-research-mcp",
            "destiny2-mcp-server",
            "stdio-context7-mcp",
            "dysmsapi20180501",
            "aws-elasticloadbalancingv2-actions",
            "TFT5_Item_HandOfJusticeRadiant",
            "getUserProfile2SettingsByAccountId",
            "550e8400-e29b-41d4-a716-446655440000",
            "aaaa1111aaaa1111aaaa",
            "npm_max_file_size",
            "secret_push_protection_enabled",
        ] {
            assert!(!looks_like_key(not_key), "{not_key}");
        }
    }

    #[test]
    fn the_entropy_rule_measures_runs() {
        assert_eq!(class_changes("web3research"), 2);
        assert_eq!(class_changes("HandOfJustice"), 0, "capitalised words are no change");
        assert_eq!(class_changes("getUserProfile2SettingsById"), 1);
        assert_eq!(class_changes("q8Zr2L"), 3);
        assert!(entropy_bits("aaaa") < 0.01);
        assert!((entropy_bits("abcd") - 2.0).abs() < 1e-9);
        assert!(is_random_run("q8Zr2LmX7vKp4TnW"));
        assert!(!is_random_run("q8Zr2LmX7vKp4Tn"), "15 characters");
        assert!(is_uuid("550e8400-e29b-41d4-a716-446655440000"));
        assert!(!is_uuid("550e8400-e29b-41d4-a716-44665544000g"));
    }

    #[test]
    fn header_arguments_register_their_credentials() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-Abc123";
        let args: Vec<String> = [
            "-y",
            "mcp-remote",
            "https://mcp.example.com/sse",
            "-H",
            &format!("Authorization: Bearer {jwt}"),
            "--header",
            "X-Api-Key: plainkeyword",
            "--header=Cookie: sid=c00kie-value-1; theme=dark",
            "-HProxy-Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "--header",
            "X-Tenant-Token:tenant-tok-9",
            "--header",
            "Accept: application/json",
            "-H",
            "X-Client: anygpt-test",
        ]
        .map(String::from)
        .to_vec();
        let found = arg_secrets(&args);
        for secret in [
            jwt,
            "plainkeyword",
            "c00kie-value-1",
            "dXNlcjpwYXNzd29yZA==",
            "tenant-tok-9",
        ] {
            assert!(found.iter().any(|s| s == secret), "{secret} not in {found:?}");
        }
        assert!(
            !found
                .iter()
                .any(|s| s.contains("application/json") || s.contains("anygpt-test")),
            "{found:?}"
        );
        let shown = redact_args(&args).join(" ");
        assert!(
            !shown.contains(jwt) && !shown.contains("plainkeyword") && !shown.contains("c00kie"),
            "{shown}"
        );
        assert!(
            shown.contains("-H Authorization: *** --header X-Api-Key: ***"),
            "{shown}"
        );
        assert!(shown.contains("Accept: application/json"), "{shown}");
        assert_eq!(
            redact_args(&["--header".to_owned(), "Authorization:${AUTH_HEADER}".to_owned()]),
            ["--header", "Authorization:${AUTH_HEADER}"]
        );
    }

    #[test]
    fn random_url_path_segments_are_secrets() {
        let zapier = Url::parse("https://actions.zapier.com/mcp/sk-ak-Xq81vTz0LmR2pW9sKd4F/sse").unwrap();
        assert_eq!(url_secrets(&zapier), ["sk-ak-Xq81vTz0LmR2pW9sKd4F"]);
        let hosted = Url::parse("https://mcp.example.net/s/k7Qm2XrT9vLp4ZwN8cYb3HdF6gJs1AeU/mcp").unwrap();
        assert_eq!(url_secrets(&hosted), ["k7Qm2XrT9vLp4ZwN8cYb3HdF6gJs1AeU"]);
        let uuid = Url::parse("https://mcp.example.net/550e8400-e29b-41d4-a716-446655440000/gmail").unwrap();
        assert_eq!(url_secrets(&uuid), ["550e8400-e29b-41d4-a716-446655440000"]);
        for plain in [
            "https://mcp.example.com/v1/sse",
            "https://server.smithery.ai/@user/web3-research-mcp/mcp",
            "http://localhost:3001/mcp",
        ] {
            assert!(url_secrets(&Url::parse(plain).unwrap()).is_empty(), "{plain}");
        }
        assert_eq!(
            redact_url("https://actions.zapier.com/mcp/sk-ak-Xq81vTz0LmR2pW9sKd4F/sse?x=1"),
            "https://actions.zapier.com/mcp/***/sse?x=1"
        );
        assert_eq!(
            redact_url("https://h/mcp/${ZAPIER_KEY}/sse"),
            "https://h/mcp/${ZAPIER_KEY}/sse"
        );
    }

    #[test]
    fn key_shaped_tokens_in_free_text_are_masked() {
        assert_eq!(
            mask_key_shaped(
                "Team tools (key sk-proj-Ab12Cd34Ef56Gh78, or ghp_abcdefghijklmnop1234.) for web3-research-mcp"
            ),
            "Team tools (key ***, or ***.) for web3-research-mcp"
        );
        assert!(matches!(
            mask_key_shaped("GitHub issues, v2.1.0, destiny2-mcp-server"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_tool_keeps_its_name_and_loses_secrets_elsewhere() {
        register("test-tool", ["tool-secret-5e4d3c2b".to_owned()]);
        let schema =
            serde_json::json!({ "type": "object", "properties": { "k": { "default": "tool-secret-5e4d3c2b" } } });
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let shared = Arc::new(schema);
        let mut tool = rmcp::model::Tool::new("tool-secret-5e4d3c2b", "uses tool-secret-5e4d3c2b", shared.clone());
        scrub_tool(&mut tool);
        assert_eq!(tool.name, "tool-secret-5e4d3c2b", "names are not rewritten");
        assert_eq!(tool.description.as_deref(), Some("uses ***"));
        assert_eq!(tool.input_schema["properties"]["k"]["default"], "***");
        assert_eq!(
            shared["properties"]["k"]["default"], "tool-secret-5e4d3c2b",
            "a shared schema is copied, not changed"
        );
        let clean = Arc::new(serde_json::Map::new());
        let mut plain = rmcp::model::Tool::new("plain", "nothing", clean.clone());
        scrub_tool(&mut plain);
        assert!(
            Arc::ptr_eq(&plain.input_schema, &clean),
            "a schema without secrets is not copied"
        );
    }

    #[test]
    fn server_names_are_never_secrets() {
        declare_names(["test-name-sk-live-0123456789ab"]);
        register(
            "test-name",
            [
                "test-name-sk-live-0123456789ab".to_owned(),
                "test-name-real-9f8e7d6c".to_owned(),
            ],
        );
        assert_eq!(registered_count("test-name"), 1);
        assert_eq!(
            scrub("test-name-sk-live-0123456789ab uses test-name-real-9f8e7d6c"),
            "test-name-sk-live-0123456789ab uses ***"
        );
        // Declared after it was registered (a reload adds the server): dropped then.
        register("test-late", ["test-late-name-4f3e2d1c".to_owned()]);
        assert_eq!(scrub("test-late-name-4f3e2d1c"), "***");
        declare_names(["test-late-name-4f3e2d1c"]);
        assert_eq!(scrub("test-late-name-4f3e2d1c"), "test-late-name-4f3e2d1c");
    }

    #[test]
    fn credential_arguments() {
        let args: Vec<String> = [
            "-y",
            "@modelcontextprotocol/server-everything",
            "--token=tok-abc-123",
            "--api-key",
            "k3y-value",
            "--port",
            "8080",
            "ghp_abcdefghijklmnop",
            "--db=postgres://u:dbpass99@h/x",
            "--verbose",
            "--password",
            "--other",
            "/srv/data",
        ]
        .map(String::from)
        .to_vec();
        let found = arg_secrets(&args);
        for secret in ["tok-abc-123", "k3y-value", "ghp_abcdefghijklmnop", "dbpass99"] {
            assert!(found.iter().any(|s| s == secret), "{secret} not in {found:?}");
        }
        assert_eq!(found.len(), 4, "{found:?}");
        let shown = redact_args(&args).join(" ");
        assert_eq!(
            shown,
            "-y @modelcontextprotocol/server-everything --token=*** --api-key *** --port 8080 *** --db=postgres://u:***@h/x --verbose --password --other /srv/data"
        );
        let kept = redact_args(&["--token=${TOKEN}".to_owned()]);
        assert_eq!(kept, ["--token=${TOKEN}"]);
    }

    #[test]
    fn config_urls_are_redacted_as_text() {
        assert_eq!(
            redact_url("https://user:pw12@api.example.com/sse?api_key=s3cret&format=json&v=1#top"),
            "https://user:***@api.example.com/sse?api_key=***&format=json&v=1#top"
        );
        assert_eq!(
            redact_url("https://${USER}:${PASS}@h/mcp?key=${KEY}"),
            "https://${USER}:${PASS}@h/mcp?key=${KEY}"
        );
        assert_eq!(redact_url("http://h:3001/mcp"), "http://h:3001/mcp");
    }

    #[test]
    fn scrub_takes_long_secrets_anywhere_and_short_ones_whole_longest_first() {
        register(
            "test-scrub",
            [
                "k1-registered".to_owned(),
                "k1-registered-longer".to_owned(),
                "ab".to_owned(),
                "k1-tok".to_owned(),
                "scrubword".to_owned(),
            ],
        );
        assert_eq!(registered_count("test-scrub"), 4, "short values are not registered");
        assert_eq!(
            scrub("x k1-registered-longer, k1-registered. k1-registeredZ ab"),
            "x ***, ***. ***Z ab"
        );
        assert_eq!(
            scrub("token=k1-registered; key%3Dk1-registered&x \"Bearer k1-registered\""),
            "token=***; key%3D***&x \"Bearer ***\""
        );
        assert_eq!(
            scrub("k1-tok k1-toks xk1-tok scrubword scrubwords"),
            "*** k1-toks xk1-tok *** scrubwords",
            "short secrets and plain words only as whole tokens"
        );
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        let mut value = serde_json::json!({ "k1-registered": ["k1-registered", 1, { "t": "use k1-registered now" }] });
        scrub_json(&mut value);
        assert_eq!(value, serde_json::json!({ "***": ["***", 1, { "t": "use *** now" }] }));
    }

    #[test]
    fn a_batch_registers_every_server_once_and_scrubs_them_all() {
        let keys: Vec<(String, String)> = (0..50)
            .map(|i| (format!("test-batch-{i}"), format!("k2-batch-key-{i:03}")))
            .collect();
        register_all(keys.iter().map(|(server, key)| {
            // Each key twice, and server 0's key again under server 1: kept once, by its first.
            let again = if server == "test-batch-1" {
                "k2-batch-key-000"
            } else {
                key
            };
            (server.as_str(), [key.clone(), key.clone(), again.to_owned()])
        }));
        assert_eq!(registered_count("test-batch-0"), 1);
        assert_eq!(registered_count("test-batch-1"), 1);
        register_all([("test-batch-late", vec!["k2-batch-key-049".to_owned()])]);
        assert_eq!(registered_count("test-batch-late"), 0, "already known");
        let text = "k2-batch-key-000 k2-batch-key-025 k2-batch-key-049 k2-batch-key-050";
        assert_eq!(scrub(text), "*** *** *** k2-batch-key-050");
    }

    #[test]
    fn expanded_values_count_under_the_variable_they_came_from() {
        assert_eq!(
            setting_secrets_named("X_HEADER", "${MY_TOKEN}", "plainword"),
            ["plainword"]
        );
        assert!(setting_secrets_named("MODE", "${APP_MODE}", "production").is_empty());
    }

    #[test]
    fn the_environment_registers_credentials_not_ordinary_settings() {
        let vars = [
            ("OPENAI_API_KEY", "sk-proj-env1abcdefghijklmnop1234"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIenv1K7MDENGbPxRfiCYEXAMPLE"),
            ("DB_PASSWORD", "envhunter2"),
            ("UNNAMED", "ghp_env1abcdefghijklmnopqrstuvwxyz0123"),
            ("DESKTOP_SESSION", "envubuntu"),
            (
                "SESSION_MANAGER",
                "local/envhost:@/tmp/.ICE-unix/1,unix/envhost:/tmp/.ICE-unix/1",
            ),
            ("HOSTNAME", "envbox-1a2b3c4d"),
            ("AUTH_ENABLED", "true"),
            ("HOME", "/home/envuser"),
        ];
        register_environment(vars.map(|(k, v)| (k.to_owned(), v.to_owned())));
        let masked = |value: &str| scrub(value) == "***";
        for (name, value) in &vars[..4] {
            assert!(masked(value), "{name} should be masked");
        }
        for (name, value) in &vars[4..] {
            assert!(!masked(value), "{name}={value} is a setting, not a secret");
        }
        assert_eq!(scrub("envubuntu envhunter2"), "envubuntu ***");
    }

    #[test]
    fn only_whole_tokens_are_replaced() {
        assert_eq!(replace_token("json jsonl (json)", "json"), "*** jsonl (***)");
        assert!(matches!(replace_token("nothing", "json"), Cow::Borrowed(_)));
    }

    #[test]
    fn secret_strings_do_not_print() {
        let secret = SecretString::from("sk-live-never-printed".to_owned());
        assert!(!format!("{secret:?}").contains("never"));
    }

    /// A token of `server` shaped so that it is masked glued to other text.
    fn token(server: &str, i: usize) -> String {
        format!("{server}-tok-{i:05}-Zq8xW2mP")
    }

    fn ago(seconds: u64) -> std::time::Instant {
        std::time::Instant::now()
            .checked_sub(std::time::Duration::from_secs(seconds))
            .expect("the clock runs for hours")
    }

    #[test]
    fn tokens_out_of_use_are_forgotten_beyond_the_most_recent_of_their_server() {
        let server = "lru-forgotten";
        let older: Vec<String> = (0..10).map(|i| token(server, i)).collect();
        register_tokens_at(server, older.clone(), ago(7300));
        register_tokens_at(
            server,
            (10..MAX_TOKENS_PER_SERVER + 10).map(|i| token(server, i)),
            ago(7200),
        );
        assert_eq!(registered_count(server), MAX_TOKENS_PER_SERVER, "bounded");
        let oldest = &older[0];
        assert_eq!(
            scrub(&format!("old {oldest}")),
            format!("old {oldest}"),
            "the least recently used is forgotten"
        );
        let newest = token(server, MAX_TOKENS_PER_SERVER + 9);
        assert_eq!(scrub(&format!("new {newest}")), "new ***");
        // Another server's tokens do not push these out.
        register_tokens("lru-other", (0..20).map(|i| token("lru-other", i)));
        assert_eq!(registered_count(server), MAX_TOKENS_PER_SERVER);
        // A forgotten token that is used again is a secret again before it is sent.
        register_tokens(server, [oldest.clone()]);
        assert_eq!(scrub(&format!("old {oldest}")), "old ***");
    }

    #[test]
    fn a_token_used_again_within_a_minute_needs_no_new_record() {
        let server = "lru-recorded";
        let value = token(server, 0);
        register_tokens_at(server, [value.clone()], ago(30));
        let register = REGISTER.read().unwrap();
        assert!(recorded(
            &register,
            std::slice::from_ref(&value),
            std::time::Instant::now()
        ));
        let later = std::time::Instant::now() + USE_RECORDED_WITHIN;
        assert!(
            !recorded(&register, std::slice::from_ref(&value), later),
            "a minute on: recorded again"
        );
        assert!(
            !recorded(&register, &[token(server, 1)], std::time::Instant::now()),
            "a new token"
        );
        drop(register);
        // Recorded again a minute on: its use moves, so it is not the least recently used.
        register_tokens_at(server, [value.clone()], later);
        let register = REGISTER.read().unwrap();
        let entry = register
            .entries
            .iter()
            .find(|e| e.value.expose_secret() == value)
            .unwrap();
        assert_eq!(entry.used, Some(later));
    }

    #[test]
    fn a_token_in_use_is_never_forgotten_however_many_come_after_it() {
        let server = "lru-in-use";
        let live = token(server, 0);
        register_tokens_at(server, [live.clone()], ago(30 * 60));
        register_tokens_at(server, (1..=5).map(|i| token(server, i)), ago(7000));
        // More tokens than are kept, all used after it.
        register_tokens(server, (10..MAX_TOKENS_PER_SERVER + 10).map(|i| token(server, i)));
        assert_eq!(
            scrub(&format!("still {live}")),
            "still ***",
            "used half an hour ago: in use"
        );
        let gone = token(server, 1);
        assert_eq!(
            scrub(&format!("gone {gone}")),
            format!("gone {gone}"),
            "out of use and not recent"
        );
        assert_eq!(registered_count(server), MAX_TOKENS_PER_SERVER + 1);
    }

    #[test]
    fn a_configured_secret_is_kept_even_when_it_is_also_seen_as_a_token() {
        let server = "lru-configured";
        let configured = "lru-configured-secret-Zq8xW2mP".to_owned();
        register(server, [configured.clone()]);
        register_tokens_at(server, [configured.clone(), token(server, 0)], ago(7200));
        register_tokens(server, (1..=MAX_TOKENS_PER_SERVER).map(|i| token(server, i)));
        let gone = token(server, 0);
        assert_eq!(scrub(&format!("gone {gone}")), format!("gone {gone}"));
        assert_eq!(scrub(&format!("key {configured}")), "key ***");
    }

    #[test]
    fn a_token_registered_again_as_a_setting_stays_a_token() {
        // A per-caller connection sends its token in a header, which registers it as a setting.
        let server = "lru-header";
        let header = "lru-header-token-Zq8xW2mP".to_owned();
        register_tokens_at(server, [header.clone()], ago(7200));
        register(server, [header.clone()]);
        assert_eq!(scrub(&format!("is {header}")), "is ***");
        register_tokens(server, (0..MAX_TOKENS_PER_SERVER).map(|i| token(server, i)));
        assert_eq!(
            scrub(&format!("was {header}")),
            format!("was {header}"),
            "forgotten with the tokens"
        );
    }
}
