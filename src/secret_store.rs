//! Named secrets, kept out of config files: `anygpt-discovery secret set|list|delete NAME`
//! stores a value, and `${secret:NAME}` in a server's `env`, `args`, `url` or `headers` stands
//! for it (`config::expand`).
//!
//! Values live where sign-in tokens do (`upstream::oauth::keychain`): the OS keychain (service
//! `anygpt-discovery`, account `secret:NAME`) while it answers, else an owner-only file. Every
//! secret also has a file under `<state>/secrets/` so `list` can name them (a keychain cannot
//! be enumerated): with the value when the keychain is off, with only a marker when the
//! keychain holds it. Every value read is registered with `crate::secrets` first, so it is
//! scrubbed from every answer, log line and audit line.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::paths::Durability;
use crate::upstream::Keychain;

/// Longest name.
const MAX_NAME: usize = 64;

/// One secret's file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Entry {
    name: String,
    /// The value, when the keychain does not hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    /// The keychain holds the value.
    #[serde(default)]
    keychain: bool,
}

/// Where a secret's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kept {
    Keychain,
    File,
}

/// A stored secret, for `secret list` (never its value).
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub name: String,
    pub kept: Kept,
}

/// Check a secret's name: letters, digits, `_`, `-` and `.`, starting with a letter or `_`.
///
/// # Errors
/// `VALIDATION_ERROR` naming what is wrong.
pub fn check_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if valid {
        Ok(())
    } else {
        Err(Error::validation(format!(
            "secret name `{}`: use letters, digits, `_`, `-` and `.` (at most {MAX_NAME}), starting with a letter or `_`, e.g. GITHUB_TOKEN",
            crate::secrets::scrub(name)
        )))
    }
}

fn dir() -> Result<PathBuf> {
    crate::paths::state_dir().map(|d| d.join("secrets")).ok_or_else(|| {
        Error::config(
            "<state>/secrets",
            "(folder)",
            format!(
                "no state folder on this machine to keep secrets in: set {}",
                crate::paths::STATE_DIR_ENV
            ),
        )
    })
}

fn file_of(name: &str) -> Result<PathBuf> {
    Ok(dir()?.join(format!("{}.json", crate::paths::server_file_stem(name))))
}

fn account(name: &str) -> String {
    format!("secret:{name}")
}

/// Store `value` under `name` (replacing an older value); where it went.
///
/// # Errors
/// A bad name, an empty value, or a file that cannot be written.
pub fn set(name: &str, value: &str) -> Result<Kept> {
    check_name(name)?;
    if value.is_empty() {
        return Err(Error::validation(format!("secret `{name}`: the value is empty")));
    }
    let file = file_of(name)?;
    let keychain = Keychain::process();
    let in_keychain = keychain.set_blocking(&account(name), value.to_owned(), &file);
    let entry = Entry {
        name: name.to_owned(),
        value: (!in_keychain).then(|| value.to_owned()),
        keychain: in_keychain,
    };
    let bytes = serde_json::to_vec(&entry).unwrap_or_default();
    crate::paths::write_atomic(&file, &bytes, Durability::Durable).map_err(|e| {
        Error::config(
            file.display().to_string(),
            "(file)",
            format!("cannot write the secret's file: {e}"),
        )
    })?;
    crate::secrets::register(&account(name), [value.to_owned()]);
    Ok(if in_keychain { Kept::Keychain } else { Kept::File })
}

/// The value of `name`, registered as a secret, or `None` when there is none (or it cannot be
/// read: the keychain is off or failed, which is said on stderr once).
#[must_use]
pub fn get(name: &str) -> Option<String> {
    check_name(name).ok()?;
    let file = file_of(name).ok()?;
    let entry: Entry = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
    let value = match entry.value {
        Some(value) => Some(value),
        None if entry.keychain => Keychain::process().get_blocking(&account(name), &file),
        None => None,
    }?;
    crate::secrets::register(&account(name), [value.clone()]);
    Some(value)
}

/// Forget `name`: whether there was such a secret.
///
/// # Errors
/// A bad name, or a file that cannot be removed.
pub fn delete(name: &str) -> Result<bool> {
    check_name(name)?;
    let file = file_of(name)?;
    let existed = file.exists();
    let in_keychain = Keychain::process()
        .delete_blocking(&account(name), &file)
        .unwrap_or(false);
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Error::config(
                file.display().to_string(),
                "(file)",
                format!("cannot remove the secret's file: {e}"),
            ))
        }
    }
    Ok(existed || in_keychain)
}

/// Every stored secret's name and where its value is, by name.
///
/// # Errors
/// No state folder.
pub fn list() -> Result<Vec<Listed>> {
    let dir = dir()?;
    let Ok(files) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut listed: Vec<Listed> = files
        .filter_map(|f| std::fs::read(f.ok()?.path()).ok())
        .filter_map(|bytes| serde_json::from_slice::<Entry>(&bytes).ok())
        .filter(|e| check_name(&e.name).is_ok())
        .map(|e| Listed {
            kept: if e.keychain { Kept::Keychain } else { Kept::File },
            name: e.name,
        })
        .collect();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["GITHUB_TOKEN", "_x", "a.b-c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1X", "a b", "a/b", "${X}", &"x".repeat(65)] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.contains("use letters, digits"), "{error}");
        }
    }
}
