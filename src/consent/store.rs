//! The approval store: `approvals.json` in the state folder, owner-only, written atomically.
//! One entry per place (its real path, and section): the decision and the SHA-256 of the
//! content it was made on. An approval holds for that content only; a denial holds whatever
//! the content, until the place is allowed again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Place, Verdict, Why};
use crate::config::locate::Environment;

/// The store's file name in the state folder.
pub const FILE: &str = "approvals.json";

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

/// One stored decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The real path, as approved.
    pub file: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    pub decision: Decision,
    pub sha256: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    version: u32,
    /// By [`Place::key`].
    #[serde(default)]
    entries: BTreeMap<String, Entry>,
}

/// The decisions stored for one user.
#[derive(Debug, Default)]
pub struct Approvals {
    path: Option<PathBuf>,
    document: Document,
}

/// Why the store cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no state folder to keep approvals in: set ANYGPT_DISCOVERY_STATE_DIR")]
    NoStateFolder,
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot read {}: {source}", place.display())]
    Read { place: PathBuf, source: std::io::Error },
    #[error("{} changed while it was shown, so what was shown is not what would be approved: run the command again", place.display())]
    ChangedWhileShown { place: PathBuf },
}

impl Approvals {
    /// Where `env` keeps approvals.
    #[must_use]
    pub fn path_for(env: &Environment) -> Option<PathBuf> {
        env.state_dir.as_ref().map(|d| d.join(FILE))
    }

    /// The stored decisions; none when there is no store yet. A store that cannot be read
    /// approves nothing (and says so once on stderr).
    #[must_use]
    pub fn load(env: &Environment) -> Self {
        let path = Self::path_for(env);
        let document = path.as_deref().map(read).unwrap_or_default();
        Self { path, document }
    }

    #[must_use]
    pub fn verdict(&self, place: &Place, hash: &str) -> Verdict {
        match self.document.entries.get(&place.key()) {
            Some(entry) if entry.decision == Decision::Deny => Verdict::Skipped(Why::Denied),
            Some(entry) if entry.sha256 == hash => Verdict::Approved(hash.to_owned()),
            Some(_) => Verdict::Skipped(Why::Changed),
            None => Verdict::Skipped(Why::NotApproved),
        }
    }

    /// Every stored decision, by key.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.document.entries.values()
    }

    /// Record `decision` on `place` as its content is now, and save.
    ///
    /// # Errors
    /// The place cannot be read, or the store cannot be written.
    pub fn record(&mut self, place: &Place, decision: Decision) -> Result<Entry, StoreError> {
        self.record_seen(place, decision, None)
    }

    /// [`Approvals::record`], only if `place` still hashes to `seen` (the content the person
    /// was shown), so a file swapped while its plan was on screen is not approved unseen.
    ///
    /// # Errors
    /// As [`Approvals::record`], and `ChangedWhileShown`.
    pub fn record_seen(&mut self, place: &Place, decision: Decision, seen: Option<&str>) -> Result<Entry, StoreError> {
        let path = self.path.clone().ok_or(StoreError::NoStateFolder)?;
        let sha256 = place.hash().map_err(|source| StoreError::Read {
            place: place.file.clone(),
            source,
        })?;
        if seen.is_some_and(|seen| seen != sha256) {
            return Err(StoreError::ChangedWhileShown {
                place: place.file.clone(),
            });
        }
        let entry = Entry {
            file: super::real_path(&place.file),
            section: place.section.clone(),
            decision,
            sha256,
            at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        };
        self.document.version = 1;
        self.document.entries.insert(place.key(), entry.clone());
        let mut bytes = serde_json::to_vec_pretty(&self.document).unwrap_or_default();
        bytes.push(b'\n');
        crate::paths::write_atomic(&path, &bytes, crate::paths::Durability::Durable)
            .map_err(|source| StoreError::Write { path, source })?;
        Ok(entry)
    }
}

fn read(path: &Path) -> Document {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(file = %path.display(), %error, "the approvals file cannot be read: no project config is approved");
            Document::default()
        }),
        Err(_) => Document::default(),
    }
}
