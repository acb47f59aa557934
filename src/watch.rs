//! Live reload while serving: the config's files are watched, and a change — once the files
//! have been quiet for [`DEBOUNCE`] — reloads the engine (`Engine::reload`, which keeps the
//! servers a change does not touch). A bad edit is logged and the previous config keeps
//! serving; the next good edit applies.
//!
//! Each file's folder is watched rather than the file itself: editors and atomic writers
//! replace a file by renaming another over it, which ends a watch on the file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::config::locate::is_js_config;
use crate::config::Config;
use crate::engine::Engine;

/// How long the files must stay quiet before a reload: an editor's save is several events.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Reloads an engine while it lives; dropping it stops watching.
#[derive(Debug)]
pub struct ReloadOnChange {
    _watcher: RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReloadOnChange {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The files of `config` a change to should reload: the config file when it is read natively,
/// every client file it imported, and every client file looked for but missing (so creating
/// one is noticed). None for an object, and none for a TS/JS config: the JS side evaluated it
/// once, at start (said once in the log).
#[must_use]
pub fn config_files(config: &Config) -> Vec<PathBuf> {
    let origin = config.origin.as_str();
    if origin == "<object>" {
        return Vec::new();
    }
    if is_js_config(Path::new(origin)) {
        tracing::info!(config = %origin, "TS/JS config: changes apply when the gateway restarts");
        return Vec::new();
    }
    config.files_to_watch()
}

/// Watch `files` and reload `engine` after each change. `None` when there is nothing to watch
/// or the platform's watcher cannot start (logged; serving goes on without live reload).
/// Needs a tokio runtime.
#[must_use]
pub fn reload_on_change(engine: &Engine, files: &[PathBuf]) -> Option<ReloadOnChange> {
    if files.is_empty() {
        return None;
    }
    let files = absolute(files);
    let (signal, mut changes) = mpsc::channel::<()>(1);
    let ours = files.clone();
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(event) if touches(&event, &ours) => {
            // Full means a change is already waiting to be seen: this one joins it.
            let _ = signal.try_send(());
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "config watcher"),
    };
    let watcher = match watch_folders(handler, &files) {
        Ok(watcher) => watcher,
        Err(error) => {
            tracing::warn!(%error, "cannot watch the config; changes apply when the gateway restarts");
            return None;
        }
    };
    tracing::info!(files = files.len(), "watching the config for changes");
    let engine = engine.clone();
    let task = tokio::spawn(async move {
        while changes.recv().await.is_some() {
            quiet(&mut changes, DEBOUNCE).await;
            if let Err(error) = engine.reload(None).await {
                tracing::error!(%error, "config reload failed; still serving the previous config");
            }
        }
    });
    Some(ReloadOnChange {
        _watcher: watcher,
        task,
    })
}

fn watch_folders(handler: impl notify::EventHandler, files: &[PathBuf]) -> notify::Result<RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(handler)?;
    let folders: BTreeSet<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    // A client that is not installed has no folder to watch; its config appearing later
    // (with its folder) is picked up on the next restart or reload.
    for folder in folders.into_iter().filter(|f| f.is_dir()) {
        watcher.watch(folder, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

/// Wait until no change has come for `window`.
async fn quiet(changes: &mut mpsc::Receiver<()>, window: Duration) {
    while let Ok(Some(())) = tokio::time::timeout(window, changes.recv()).await {}
}

/// Whether `event` may have changed one of `files` (reads do not).
fn touches(event: &notify::Event, files: &[PathBuf]) -> bool {
    !matches!(event.kind, EventKind::Access(_)) && event.paths.iter().any(|p| files.iter().any(|f| f == p))
}

fn absolute(files: &[PathBuf]) -> Vec<PathBuf> {
    let here = std::env::current_dir().unwrap_or_default();
    files.iter().map(|f| here.join(f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_from(origin: &str) -> Config {
        let mut config = Config::from_value(serde_json::json!({}), "<object>").unwrap();
        origin.clone_into(&mut config.origin);
        config
    }

    #[test]
    fn objects_and_scripts_are_not_watched() {
        assert!(config_files(&config_from("<object>")).is_empty());
        assert!(config_files(&config_from("/x/anygpt.config.ts")).is_empty());
    }

    #[test]
    fn a_native_file_and_its_imported_clients_are_watched() {
        let dir = tempfile::tempdir().unwrap();
        let desktop = dir.path().join("claude_desktop_config.json");
        std::fs::write(&desktop, r#"{"mcpServers":{"a":{"command":"node"}}}"#).unwrap();
        let file = dir.path().join("c.yaml");
        let yaml = format!(
            "discovery:\n  sources:\n    - type: claude-desktop\n      path: {}\n",
            desktop.display()
        );
        std::fs::write(&file, yaml).unwrap();
        let config = Config::from_file(&file).unwrap();
        let watched = config_files(&config);
        assert!(watched.contains(&file), "{watched:?}");
        assert!(watched.contains(&desktop), "{watched:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_one_reload_after_the_quiet_window() {
        let (send, mut changes) = mpsc::channel(1);
        let _open = send.clone();
        let sender = tokio::spawn(async move {
            for _ in 0..5 {
                let _ = send.try_send(());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        changes.recv().await.unwrap();
        let began = tokio::time::Instant::now();
        quiet(&mut changes, DEBOUNCE).await;
        // The last change came 200 ms after the first; quiet 200 ms after that.
        assert_eq!(began.elapsed().as_millis() / 10, 40, "{:?}", began.elapsed());
        sender.await.unwrap();
        assert!(changes.try_recv().is_err(), "the burst was absorbed");
    }
}
