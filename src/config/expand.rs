//! `${VAR}` and `${VAR:-default}` expansion in launch specs (args, env, cwd, url, headers).
//! VS Code's spelling `${env:VAR}` means the same as `${VAR}`. `${secret:NAME}` is a value
//! kept by `anygpt-discovery secret set NAME` (`crate::secret_store`), never in the file.
//!
//! Expansion happens when a server is launched, not at load time, so the config kept in memory
//! (and shown by `getConfig` / `config show`) never holds resolved secrets. `check` runs at load
//! time and rejects malformed references early.

/// A reference that cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("environment variable `{0}` is not set (use `${{{0}:-default}}` for a fallback)")]
    Unset(String),
    #[error("secret `{0}` is not stored: run `anygpt-discovery secret set {0}` (or write `${{secret:{0}:-default}}`)")]
    SecretUnset(String),
    #[error("unterminated `${{` in `{0}`")]
    Unterminated(String),
    #[error("empty variable name in `{0}`")]
    EmptyName(String),
}

/// Expand every reference in `text`, reading variables through `lookup`.
///
/// # Errors
/// An unset variable without default, or a malformed reference.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| ExpandError::Unterminated(text.to_owned()))?;
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let name = name.strip_prefix("env:").unwrap_or(name);
        if name.is_empty() {
            return Err(ExpandError::EmptyName(text.to_owned()));
        }
        // Like the shell's `:-`: an empty value also falls back to the default.
        match (lookup(name).filter(|v| !v.is_empty() || default.is_none()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(match name.strip_prefix(SECRET_PREFIX) {
                    Some(secret) => ExpandError::SecretUnset(secret.to_owned()),
                    None => ExpandError::Unset(name.to_owned()),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What marks a stored secret's name in a reference: `${secret:NAME}`.
pub const SECRET_PREFIX: &str = "secret:";

/// The value a reference names at launch: a stored secret (`secret:NAME`, read from the
/// keychain or its file and registered as a secret), else an environment variable.
#[must_use]
pub fn lookup(name: &str) -> Option<String> {
    match name.strip_prefix(SECRET_PREFIX) {
        Some(secret) => crate::secret_store::get(secret),
        None => std::env::var(name).ok(),
    }
}

/// Expand with the process environment and the stored secrets.
///
/// # Errors
/// As [`expand`].
pub fn expand_env(text: &str) -> Result<String, ExpandError> {
    expand(text, &lookup)
}

/// Check the syntax of every reference without reading the environment.
///
/// # Errors
/// A malformed reference.
pub fn check(text: &str) -> Result<(), ExpandError> {
    expand(text, &|_| Some(String::new())).map(drop)
}

/// The environment variables `text` references (not stored secrets), in order.
#[must_use]
pub fn referenced_variables(text: &str) -> Vec<String> {
    let seen = std::cell::RefCell::new(Vec::new());
    let _ = expand(text, &|name: &str| {
        if !name.starts_with(SECRET_PREFIX) {
            seen.borrow_mut().push(name.to_owned());
        }
        Some(String::new())
    });
    seen.into_inner()
}

/// The variables `text` references without a default that `lookup` does not know, in order:
/// what a launch would fail on, reported when the config is loaded.
#[must_use]
pub fn unset_variables(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    // Expansion stops at the first unset name: record it, treat it as set, and expand again.
    let mut unset: Vec<String> = Vec::new();
    loop {
        let known = |name: &str| {
            if unset.iter().any(|u| u == name) {
                Some(String::new())
            } else {
                lookup(name)
            }
        };
        match expand(text, &known) {
            Err(ExpandError::Unset(name)) => unset.push(name),
            Err(ExpandError::SecretUnset(name)) => unset.push(format!("{SECRET_PREFIX}{name}")),
            _ => return unset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_variables_are_named_and_stored_secrets_are_not() {
        assert_eq!(
            referenced_variables("redis://:${PASS}@${HOST:-localhost}:${secret:X}/${env:DB}"),
            vec!["PASS", "HOST", "DB"]
        );
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("secret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_variable() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer secret");
    }

    #[test]
    fn default_used_when_unset_or_empty() {
        assert_eq!(expand("${NOPE:-x}", &env).unwrap(), "x");
        assert_eq!(expand("${EMPTY:-y}", &env).unwrap(), "y");
        assert_eq!(expand("${NOPE:-}", &env).unwrap(), "");
    }

    #[test]
    fn empty_value_without_default_is_kept() {
        assert_eq!(expand("a${EMPTY}b", &env).unwrap(), "ab");
    }

    #[test]
    fn unset_without_default_is_an_error_naming_the_variable() {
        let err = expand("${NOPE}", &env).unwrap_err();
        assert_eq!(err, ExpandError::Unset("NOPE".into()));
        assert!(err.to_string().contains("`NOPE` is not set"));
    }

    #[test]
    fn several_references_and_plain_text() {
        assert_eq!(expand("${TOKEN}-${NOPE:-d}-$HOME", &env).unwrap(), "secret-d-$HOME");
    }

    #[test]
    fn malformed_references() {
        assert!(matches!(check("${OPEN"), Err(ExpandError::Unterminated(_))));
        assert!(matches!(check("${}"), Err(ExpandError::EmptyName(_))));
        assert!(check("${OK} ${OK:-x}").is_ok());
    }

    #[test]
    fn vscode_env_spelling_is_the_same_variable() {
        assert_eq!(expand("Bearer ${env:TOKEN}", &env).unwrap(), "Bearer secret");
        assert_eq!(expand("${env:NOPE:-d}", &env).unwrap(), "d");
        assert_eq!(
            expand("${env:NOPE}", &env).unwrap_err(),
            ExpandError::Unset("NOPE".into())
        );
    }

    #[test]
    fn a_missing_secret_says_how_to_store_it() {
        let error = expand("Bearer ${secret:GH}", &env).unwrap_err();
        assert_eq!(error, ExpandError::SecretUnset("GH".into()));
        assert!(error.to_string().contains("anygpt-discovery secret set GH"), "{error}");
        assert_eq!(expand("${secret:GH:-none}", &env).unwrap(), "none");
    }

    #[test]
    fn unset_variables_lists_each_missing_name_once() {
        assert_eq!(unset_variables("${A}-${TOKEN}-${B:-x}-${A}-${C}", &env), ["A", "C"]);
        assert!(unset_variables("${TOKEN}", &env).is_empty());
        assert_eq!(unset_variables("${secret:GH}-${A}", &env), ["secret:GH", "A"]);
    }
}
