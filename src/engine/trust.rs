//! The engine's side of trust: pinning and shadowing marks put on a server's entries when its
//! tools are indexed, the `trust` operation, and the check that blocks a call
//! (`discovery.security`). The checks themselves live in `crate::trust`.

use crate::caller::Caller;
use crate::catalog::ToolEntry;
use crate::config::OnToolChange;
use crate::error::{Error, Result};
use crate::paths::Durability;
use crate::search::IndexedCatalog;
use crate::trust::pins::parameters;
use crate::trust::{shadow_warning, Flag};

use super::shared::Review;
use super::state::State;

impl State {
    /// Mark `server`'s entries: how each differs from its pinned version (pinning tools seen
    /// for the first time) and whether its name shadows another server's. The pins are read
    /// from disk again first: another process may have trusted a tool, and pinning a new tool
    /// saves the record, so a stale copy would undo that trust. With `log`, changed and flagged
    /// tools are logged by name.
    pub(super) fn review_trust(&self, catalog: &mut IndexedCatalog, server: &str, log: bool) {
        self.review_pins(server, true, |review| catalog.annotate(server, review));
        catalog.annotate(server, |entry| self.mark_shadowing(server, entry, log));
    }

    /// [`State::review_trust`] for entries not in the catalog yet: snapshots are reviewed on
    /// the thread that reads them, beside the indexing rather than after it.
    pub(super) fn review_entries(&self, server: &str, entries: &mut [ToolEntry]) {
        self.review_pins(server, false, |review| entries.iter_mut().for_each(review));
        for entry in entries {
            self.mark_shadowing(server, entry, true);
        }
    }

    /// Compare each entry `visit` hands to `review` with its pin (pinning new tools). Declared
    /// tools are not the server's word and are never pinned.
    fn review_pins(&self, server: &str, reread: bool, visit: impl FnOnce(&mut dyn FnMut(&mut ToolEntry))) {
        let Some(pins) = &self.pins else { return };
        let mut first_seen = None;
        let reviewed = pins.with_server(server, reread, |record| {
            let mut grew = false;
            visit(&mut |entry: &mut ToolEntry| {
                if entry.declared {
                    return;
                }
                let (verdict, new) = record.review(entry.upstream_name(), entry.fingerprint, || {
                    parameters(&entry.tool.input_schema)
                });
                grew |= new;
                entry.change = verdict.change.map(Box::new);
                entry.approved = verdict.approved;
            });
            if grew {
                first_seen = Some(record.shared_fields());
            }
            ((), grew.then_some(Durability::Cache))
        });
        if let Err(error) = reviewed {
            tracing::warn!(server, %error, "cannot write tool pins; new tools are pinned again next time");
        }
        // The team's first sighting may have been another replica's: the store decides.
        if let Some(fields) = first_seen {
            self.shared.share_pins_later(server, fields);
        }
    }

    /// This replica's pins of `server` as the store keeps them (none without pins, or none seen).
    pub(super) fn own_pins(&self, server: &str) -> Option<Vec<(String, Vec<u8>, bool)>> {
        let pins = self.pins.as_ref()?;
        let fields = pins
            .with_server(server, false, |record| (record.shared_fields(), None))
            .ok()?;
        (!fields.is_empty()).then_some(fields)
    }

    /// Take the store's pins of `server` (`fields`) over this replica's and mark its tools
    /// again: with `Review::IfChanged` when they changed anything, with `Review::Always` in
    /// any case (another process sharing this cache folder may have written the same pins
    /// already, leaving the catalog's marks stale). From a blocking thread.
    pub(super) fn adopt_pins(&self, server: &str, fields: &[(String, Vec<u8>)], review: Review) {
        let Some(pins) = &self.pins else { return };
        let adopted = pins.with_server(server, true, |record| {
            let changed = record.adopt_shared(fields.iter().map(|(name, pin)| (name.as_str(), pin.as_slice())));
            (changed, changed.then_some(Durability::Durable))
        });
        match adopted {
            Ok(changed) if review == Review::Always || (changed && review == Review::IfChanged) => {
                let _applying = self.applying_lock();
                let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
                if catalog.server_tools(server).is_some() {
                    self.review_trust(&mut catalog, server, true);
                    drop(catalog);
                    self.tools_changed.send_replace(());
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(server, %error, "cannot write the team's tool pins here"),
        }
    }

    /// Flag `entry` if its name reads as another server's tool; with `log`, say so if it
    /// changed or is flagged.
    fn mark_shadowing(&self, server: &str, entry: &mut ToolEntry, log: bool) {
        let servers = self.config.servers();
        let shadow = shadow_warning(server, entry.name(), |name| servers.iter().any(|s| s.name == name));
        entry.warnings.retain(|w| w.flag != Flag::ShadowName);
        entry.warnings.extend(shadow);
        if !log {
            return;
        }
        if let Some(change) = &entry.change {
            tracing::warn!(
                server,
                tool = entry.name(),
                changed = %change.describe().join("; "),
                "tool changed since it was first seen; review it, then `anygpt-discovery trust {server} {}`",
                entry.name()
            );
        }
        if !entry.warnings.is_empty() && !entry.approved {
            tracing::info!(server, tool = entry.name(), flags = %entry.flags().join(","), "tool flagged by the trust checks");
        }
    }

    /// Accept the current version of `server`'s tools (all, or `tool`): their pins are
    /// replaced and they are approved, findings and all. Returns the names trusted.
    ///
    /// # Errors
    /// `SERVER_NOT_FOUND`, `TOOL_NOT_FOUND`, `SERVER_CONNECTION_ERROR` (tools never listed),
    /// `CONFIGURATION_ERROR` when pins are off (no cache) or cannot be written.
    pub(super) async fn trust(&self, server: &str, tool: Option<&str>) -> Result<Vec<String>> {
        let handle = self.server(server)?;
        // Declared tools are not what the server would run: what it reports is what gets
        // trusted, so it is started (and waited for, as a first start) before anything is.
        let declared = self
            .read_catalog()
            .server_tools(server)
            .is_some_and(|tools| tools.iter().any(|t| t.declared));
        if declared {
            handle.start();
        }
        match tool {
            // Trusting is the config owner's: they see every tool the config has.
            Some(tool) => self.find_tool(handle, tool, &Caller::local()).await.map(|_| ())?,
            None => self.with_server_tools(handle, |_| ()).await?,
        }
        let Some(pins) = &self.pins else {
            return Err(Error::config(
                &self.config.origin,
                "discovery.cache.enabled",
                "tool pins live beside the catalog snapshots; enable the cache to pin and trust tools",
            ));
        };
        self.apply_events();
        let mut trusted = Vec::new();
        let written = {
            let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
            pins.with_server(server, true, |record| {
                catalog.annotate(server, |entry| {
                    // A declared tool is not the server's word: what it says once it connects is
                    // what gets pinned and judged.
                    if entry.declared || tool.is_some_and(|t| t != entry.name()) {
                        return;
                    }
                    record.trust(
                        entry.upstream_name(),
                        entry.fingerprint,
                        parameters(&entry.tool.input_schema),
                    );
                    entry.change = None;
                    entry.approved = true;
                    trusted.push(entry.name().to_owned());
                });
                (record.shared_fields(), Some(Durability::Durable))
            })
        };
        let shared = written
            .map_err(|error| Error::config(&self.config.origin, "tool pins", format!("cannot write: {error}")))?;
        // Awaited: `anygpt-discovery trust` ends right after, and the team must see it.
        if let Err(error) = self.shared.share_pins(server, shared).await {
            tracing::warn!(server, %error, "trusted here, but the other replicas were not told");
        }
        tracing::info!(server, tools = %trusted.join(","), "tools trusted");
        Ok(trusted)
    }

    /// Why `entry` must not run under `discovery.security`, if it must not. A tool about to be
    /// refused is checked against the pins on disk first: `anygpt-discovery trust` may have
    /// accepted it from another process.
    pub(super) fn block_reason(&self, entry: &ToolEntry) -> Option<String> {
        let security = &self.config.discovery.security;
        let blocks = |entry: &ToolEntry| {
            if security.on_tool_change == OnToolChange::Block {
                if let Some(change) = &entry.change {
                    return Some(format!(
                        "it changed since it was first seen ({}) and security.onToolChange is \"block\"",
                        change.describe().join("; ")
                    ));
                }
            }
            (security.block_flagged && !entry.warnings.is_empty() && !entry.approved).then(|| {
                format!(
                    "flagged ({}) and security.blockFlagged is on; get_tool_details shows why",
                    entry.flags().join(", ")
                )
            })
        };
        blocks(entry)?;
        let server = entry.server.as_str();
        let mut catalog = self.catalog.write().expect("catalog lock is never poisoned");
        self.review_trust(&mut catalog, server, false);
        let fresh = catalog.tool(server, entry.name())?;
        blocks(fresh)
    }
}
