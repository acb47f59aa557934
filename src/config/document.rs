//! Reading one config or client file into a JSON value: JSON with comments and trailing
//! commas, or YAML, by extension; syntax errors named with their line and column.
//!
//! A file that says which commands run as the user must be the user's alone to change: one
//! writable by group or others is refused before it is read ([`check_writers`]), as ssh
//! refuses such key and config files.

use std::path::Path;

use serde_json::Value;

use super::locate::{extension, is_js_config};
use crate::error::{Error, Result};

/// Read a config or client file into a value, by extension (`.json`/`.jsonc` allow comments
/// and trailing commas, as the clients' own files do).
///
/// # Errors
/// An unreadable file, a syntax error (with its line and column), or a TS/JS file.
pub(crate) fn read_document(path: &Path) -> Result<Value> {
    read_document_hashed(path).map(|(value, _)| value)
}

/// [`read_document`], with the SHA-256 of the very bytes parsed: a project file is used only
/// when they are the bytes approved, even if it changed between the approval check and now.
///
/// # Errors
/// As [`read_document`].
pub(crate) fn read_document_hashed(path: &Path) -> Result<(Value, String)> {
    let origin = path.display().to_string();
    if is_js_config(path) {
        return Err(Error::config(
            &origin,
            "(file)",
            "TS/JS configs are evaluated by the npm package (`npx @anygpt/discovery` or the Node API); \
             the native binary reads JSON and YAML",
        ));
    }
    check_writers(path)?;
    let bytes = read_limited(path).map_err(|e| Error::config(&origin, "(file)", format!("cannot read file: {e}")))?;
    let hash = crate::consent::sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::config(
            &origin,
            "(file)",
            "cannot read file: stream did not contain valid UTF-8",
        )
    })?;
    Ok((parse_text(&text, extension(path).as_deref(), &origin)?, hash))
}

/// The largest config or client file read. Clients' files are small, but `~/.claude.json`
/// keeps every project's history and reaches megabytes; a file past this is no config (a
/// repository's `.mcp.json` made huge, or a link to a device, must not exhaust memory).
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A regular file's bytes, at most [`MAX_FILE_BYTES`].
pub(crate) fn read_limited(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB, which no config is",
            MAX_FILE_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// Refuse a config file that users other than its owner may write (group or others), naming
/// the `chmod` that fixes it. A symlink is judged by its target, the file actually read. A file
/// that cannot be examined passes here: reading it reports why.
///
/// # Errors
/// `CONFIGURATION_ERROR` at `(file)` for a group- or world-writable file.
pub fn check_writers(path: &Path) -> Result<()> {
    #[cfg(unix)]
    let private = |uid, gid| {
        let read = |file: &str| std::fs::read_to_string(file).unwrap_or_default();
        is_private_group(&read("/etc/passwd"), &read("/etc/group"), uid, gid)
    };
    #[cfg(not(unix))]
    let private = |_: u32, _: u32| false;
    check_writers_with(path, &private)
}

/// [`check_writers`], with `private(uid, gid)` telling whether the file's group is its
/// owner's private group.
fn check_writers_with(path: &Path, private: &dyn Fn(u32, u32) -> bool) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(metadata) = std::fs::metadata(path) else {
            return Ok(());
        };
        let mode = metadata.permissions().mode();
        let group_is_owners_own = || {
            use std::os::unix::fs::MetadataExt;
            private(metadata.uid(), metadata.gid())
        };
        if mode & 0o002 != 0 || (mode & 0o020 != 0 && !group_is_owners_own()) {
            let who = if mode & 0o002 != 0 { "every user" } else { "its group" };
            return Err(Error::config(
                path.display().to_string(),
                "(file)",
                format!(
                    "the file is writable by {who} (mode {:o}), who could make the gateway run commands as you; \
                     refused until only you can write it: chmod go-w '{}'",
                    mode & 0o777,
                    path.display()
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, private);
    Ok(())
}

/// Whether `gid` is the private group of user `uid` (Debian's user-private groups, under which
/// umask 002 makes every new file group-writable): a group of the user's own name, the user's
/// primary group, with no other member. Then group write is harmless, as Debian's ssh also
/// holds. Read from the `passwd` and `group` texts; anything not found there is not private.
#[cfg(unix)]
fn is_private_group(passwd: &str, group: &str, uid: u32, gid: u32) -> bool {
    let field = |line: &str, i: usize| line.split(':').nth(i).map(str::to_owned);
    let Some(user) = passwd
        .lines()
        .find(|line| field(line, 2).as_deref() == Some(&uid.to_string()))
    else {
        return false;
    };
    let (name, primary) = (field(user, 0), field(user, 3));
    if primary.as_deref() != Some(&gid.to_string()) {
        return false;
    }
    group.lines().any(|line| {
        field(line, 0) == name
            && field(line, 2).as_deref() == Some(&gid.to_string())
            && field(line, 3)
                .unwrap_or_default()
                .split(',')
                .all(|member| member.is_empty() || Some(member) == name.as_deref())
    })
}

/// Parse a file's text by its extension.
fn parse_text(text: &str, extension: Option<&str>, origin: &str) -> Result<Value> {
    // Notepad and other Windows tools save UTF-8 with a byte-order mark; the clients read it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        // Not "no servers": an emptied file is more often a save caught half-way, and a running
        // gateway must keep serving the old config rather than stop every server.
        return Err(Error::config(
            origin,
            "(file)",
            "the file is empty: write a config into it; for no servers, `{\"discovery\": {\"servers\": []}}`",
        ));
    }
    match extension {
        Some("yaml" | "yml") => parse_yaml(text, origin),
        // Everything else is JSON: the clients' files all are, whatever they are called.
        _ => parse_jsonc(text, origin),
    }
}

fn parse_jsonc(text: &str, origin: &str) -> Result<Value> {
    let options = jsonc_parser::ParseOptions::default();
    jsonc_parser::parse_to_serde_value::<Value>(text, &options).map_err(|e| {
        Error::config(
            origin,
            format!("line {} column {}", e.line_display(), e.column_display()),
            format!("{}: fix the JSON syntax there", e.kind()),
        )
    })
}

fn parse_yaml(text: &str, origin: &str) -> Result<Value> {
    serde_norway::from_str::<Value>(text).map_err(|e| {
        let at = e.location().map_or_else(
            || "(document)".to_owned(),
            |l| format!("line {} column {}", l.line(), l.column()),
        );
        // The message repeats the position the path already gives.
        let message = e.to_string();
        let message = message
            .rfind(" at line ")
            .map_or(message.as_str(), |i| &message[..i])
            .to_owned();
        Error::config(origin, at, format!("{message}: fix the YAML syntax there"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_read_past_in_json_and_yaml() {
        let json = parse_text("\u{feff}{\"discovery\": {\"servers\": []}}", Some("json"), "c.json").unwrap();
        assert!(json["discovery"]["servers"].is_array());
        let yaml = parse_text("\u{feff}discovery:\n  servers: []\n", Some("yaml"), "c.yaml").unwrap();
        assert!(yaml["discovery"]["servers"].is_array());
    }

    #[test]
    fn an_empty_file_is_an_error_not_a_config_without_servers() {
        for (text, extension) in [
            ("", Some("json")),
            (" \n\t", Some("jsonc")),
            ("\u{feff}\n", Some("yaml")),
        ] {
            let error = parse_text(text, extension, "c").unwrap_err().to_string();
            assert!(error.contains("the file is empty"), "{text:?}: {error}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_write_is_refused_with_the_chmod_that_fixes_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        for (mode, who) in [(0o664, "its group"), (0o646, "every user")] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            for file in [&path, &link] {
                let text = check_writers_with(file, &|_, _| false).unwrap_err().to_string();
                assert!(text.contains(who), "{text}");
                assert!(text.contains(&format!("chmod go-w '{}'", file.display())), "{text}");
            }
        }
        // Group write by the owner's private group (umask 002 under user-private groups) is theirs.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(check_writers_with(&path, &|_, _| true).is_ok());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_document(&link).is_ok());
    }

    #[test]
    fn a_file_past_the_size_cap_or_not_a_file_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".mcp.json");
        // Sparse: no disk is used, and the read stops one byte past the cap.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let text = read_document(&path).unwrap_err().to_string();
        assert!(text.contains("larger than 64 MiB"), "{text}");
        let text = read_document(dir.path()).unwrap_err().to_string();
        assert!(text.contains("cannot read file"), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn a_users_private_group_may_write_like_the_user() {
        let passwd =
            "root:x:0:0::/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/sh\nbob:x:1001:100::/home/bob:/bin/sh\n";
        let group = "root:x:0:\nann:x:1000:\nusers:x:100:bob,ann\nann2:x:1002:ann,eve\n";
        assert!(is_private_group(passwd, group, 1000, 1000));
        assert!(!is_private_group(passwd, group, 1001, 100), "a shared group");
        assert!(
            !is_private_group(passwd, group, 1000, 100),
            "not the user's primary group"
        );
        assert!(
            !is_private_group(passwd, "ann:x:1000:eve\n", 1000, 1000),
            "another member"
        );
        assert!(!is_private_group("", group, 1000, 1000), "an unknown user");
    }
}
