//! Consent: which config files may be used.
//!
//! Two kinds of places. The user's own — files under the home folder (`~/.anygpt/…`, the
//! clients' user files, `~/.claude.json`'s user servers) and a file named explicitly
//! (`--config`, `ANYGPT_DISCOVERY_CONFIG`, an object given to the Node API) — load as they
//! are. Project-scoped ones — anything found relative to the starting folder (the gateway's
//! own `./.anygpt/…` and `./anygpt.config.*`, the project files of other clients) and the
//! `projects.<folder>` section of `~/.claude.json` — come with a cloned repository, so they
//! are used only once approved: by `anygpt-discovery allow` (the [`store`], keyed by real
//! path and content hash, so a changed file needs approval again) or, for a `.mcp.json`
//! server, by Claude Code's own per-project record ([`claude`]). Until then nothing from them
//! is started, contacted, expanded or evaluated; each skip is reported with its fix
//! ([`Skipped`]). This module owns that classification, the approval store, reading the
//! clients' own approvals and describing what a file would do ([`plan`]).

pub mod claude;
pub mod plan;
pub mod store;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::locate::Environment;

pub use store::{Approvals, Decision};

/// Where a config came from, for what it may do (path fields, for one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The user's own: under the home folder, or named explicitly.
    #[default]
    User,
    /// Found relative to the starting folder (approved, or it would not have loaded).
    Project,
}

/// The project files of other MCP clients, relative to the starting folder. The client
/// modules (`config::sources`) look for these same paths; a test keeps the two lists equal.
pub const PROJECT_CLIENT_FILES: [&str; 4] = [
    ".mcp.json",
    ".vscode/mcp.json",
    ".cursor/mcp.json",
    ".zed/settings.json",
];

/// Whether files found relative to the starting folder are project-scoped: they are, unless
/// the starting folder is the home folder itself (then `./.cursor/mcp.json` is the user's own
/// `~/.cursor/mcp.json`). Decided by how a file is found, never by its being under home: a
/// repository cloned under home is still a project.
#[must_use]
pub fn cwd_is_project(env: &Environment) -> bool {
    env.home
        .as_ref()
        .is_none_or(|home| real_path(home) != real_path(&env.cwd))
}

/// The scope of a client file found at one of its client's default places.
#[must_use]
pub fn scope_of_client_file(path: &Path, env: &Environment) -> Scope {
    let project = PROJECT_CLIENT_FILES.iter().any(|f| env.cwd.join(f) == path);
    if project && cwd_is_project(env) {
        Scope::Project
    } else {
        Scope::User
    }
}

/// One thing approved as a whole: a file, or a section of one (`~/.claude.json`'s
/// `projects.<folder>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    /// As found (not resolved): what the user recognises.
    pub file: PathBuf,
    /// The section inside the file, when only it is project-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

impl Place {
    #[must_use]
    pub fn file(file: &Path) -> Self {
        Self {
            file: file.to_path_buf(),
            section: None,
        }
    }

    /// The key of the approval store: the real path (links resolved), and the section.
    #[must_use]
    pub fn key(&self) -> String {
        let file = real_path(&self.file).display().to_string();
        match &self.section {
            Some(section) => format!("{file}#{section}"),
            None => file,
        }
    }

    /// How a message names it.
    #[must_use]
    pub fn shown(&self) -> String {
        match &self.section {
            Some(section) => format!("{} ({section})", self.file.display()),
            None => self.file.display().to_string(),
        }
    }

    /// A short name for the model: relative to the starting folder (`./.mcp.json`) or home,
    /// so a folder name chosen by a repository's author never reaches the model's context.
    #[must_use]
    pub fn short(&self, env: &Environment) -> String {
        let file = if let Ok(rest) = self.file.strip_prefix(&env.cwd) {
            format!("./{}", rest.display())
        } else if let Some(rest) = env.home.as_ref().and_then(|h| self.file.strip_prefix(h).ok()) {
            format!("~/{}", rest.display())
        } else {
            self.file
                .file_name()
                .map_or_else(|| "a file".to_owned(), |n| n.to_string_lossy().into_owned())
        };
        match &self.section {
            Some(_) => format!("{file} (this folder's servers)"),
            None => file,
        }
    }

    /// The one command that approves it (run from the starting folder for a section).
    #[must_use]
    pub fn allow_command(&self) -> String {
        format!(
            "anygpt-discovery allow {}",
            shell_word(&self.file.display().to_string())
        )
    }

    /// The bytes its approval is a hash of: the file, or the section's JSON.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn content(&self) -> std::io::Result<Vec<u8>> {
        let bytes = crate::config::read_limited(&self.file)?;
        let Some(section) = &self.section else { return Ok(bytes) };
        let folder = section.strip_prefix("projects.").unwrap_or(section);
        Ok(claude::project_servers_bytes(&bytes, folder))
    }

    /// SHA-256 of [`Place::content`], hex.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn hash(&self) -> std::io::Result<String> {
        self.content().map(|bytes| sha256_hex(&bytes))
    }
}

/// Why a project place is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// Never approved.
    NotApproved,
    /// Approved once; its content has changed since.
    Changed,
    /// Denied with `anygpt-discovery deny`.
    Denied,
}

impl Why {
    fn text(self) -> &'static str {
        match self {
            Self::NotApproved => "a project config, not approved",
            Self::Changed => "a project config that changed since it was approved",
            Self::Denied => "a project config denied with `anygpt-discovery deny`",
        }
    }
}

/// A project place passed over: reported on stderr, by `list_mcp_servers`, `list`, `config
/// sources` and `config path`, each time with the command that approves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    #[serde(flatten)]
    pub place: Place,
    pub reason: Why,
    /// Said beside the reason (VS Code's own trust cannot be read, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
    pub fix: String,
}

impl Skipped {
    #[must_use]
    pub fn new(place: Place, reason: Why) -> Self {
        let note = place
            .file
            .ends_with(".vscode/mcp.json")
            .then_some("VS Code's workspace trust is kept in its own database, which cannot be read");
        let fix = place.allow_command();
        Self {
            place,
            reason,
            note,
            fix,
        }
    }

    /// One line for stderr and the human outputs.
    #[must_use]
    pub fn line(&self) -> String {
        let note = self.note.map(|n| format!("; {n}")).unwrap_or_default();
        format!(
            "{}: not used: {}{note}; nothing from it runs until you approve it: `{}`",
            self.place.shown(),
            self.reason.text(),
            self.fix
        )
    }
}

/// What the approvals say about a project place now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Approved with this content hash.
    Approved(String),
    Skipped(Why),
}

/// The verdict on `place` from the approvals stored for `env`: a file that cannot be read is
/// not approved.
#[must_use]
pub fn verdict(place: &Place, env: &Environment) -> Verdict {
    let Ok(hash) = place.hash() else {
        return Verdict::Skipped(Why::NotApproved);
    };
    Approvals::load(env).verdict(place, &hash)
}

/// A reload must not drop what an approved project place gave: when a place in use by
/// `current` changed since its approval, `next` is refused (the gateway keeps serving what it
/// had) until the new content is approved, which reloads again. A denied place does stop.
///
/// # Errors
/// `CONFIGURATION_ERROR` naming the changed place and the command that approves it.
pub fn keeps_what_it_had(current: &crate::config::Config, next: &crate::config::Config) -> crate::Result<()> {
    for (place, _) in current.approved() {
        if let Some(skip) = next
            .skipped()
            .iter()
            .find(|s| &s.place == place && s.reason == Why::Changed)
        {
            return Err(crate::error::Error::config(
                place.shown(),
                "(file)",
                format!(
                    "changed since it was approved, so the new version is not used and the servers it gave keep running as they were; approve it to use it: `{}`",
                    skip.fix
                ),
            ));
        }
    }
    Ok(())
}

pub use crate::hash::sha256_hex;

/// `path` made absolute with its links resolved, when it exists.
#[must_use]
pub fn real_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `text` as one shell word: as is when plain, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '+' | ',' | ':' | '@'));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;

/// Whether Claude Code's per-folder record speaks for `file`: only for the folder's own
/// `./.mcp.json`, as in Claude Code. Any other file in its format (one a project config names
/// under `sources`) needs an approval of its own.
#[must_use]
pub fn record_applies(file: &Path, env: &Environment) -> bool {
    real_path(file) == real_path(&env.cwd.join(".mcp.json"))
}
