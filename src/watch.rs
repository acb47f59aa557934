//! Live reload while serving. Four things ask for one: a change to the config's files, a
//! `config reload` request file for this gateway (`crate::registry`), SIGHUP (the Unix
//! convention for daemons: the native binary's `shutdown::os_signal` and the npm bin's
//! relay call [`request_reload`]) and `engine.reload()` from the Node API (direct). Requests
//! are gathered until they have been quiet for [`DEBOUNCE`], then the engine reloads once
//! (`Engine::reload`, which keeps the servers a change does not touch) and every request
//! file taken is answered with the outcome. A bad edit is logged and the previous config
//! keeps serving; the next good edit applies.
//!
//! A TS/JS config (the npm bin evaluated it with jiti) reloads too: the front end that
//! evaluated it hands over a [`Reevaluate`] hook, and a reload calls it for the new object
//! instead of reading the file in Rust. The Rust watcher stays the one place triggers meet:
//! a second, JS-side watcher (fs.watch) would miss `config reload` requests and SIGHUP, or
//! need the same debounce and reload plumbing twice; the hook is a napi threadsafe function
//! that runs `loadJsConfig` (jiti without its module cache) on Node's thread.
//!
//! Each file's folder is watched rather than the file itself: editors and atomic writers
//! replace a file by renaming another over it, which ends a watch on the file. A config that
//! is a symlink (dotfile managers link them so) is watched at both ends: the link, which may
//! be pointed elsewhere, and its target, where the edits happen. In a linked config's folder
//! any entry created, renamed or removed counts as a change too: a Kubernetes config map volume
//! is updated by pointing a second link (`..data`) at a new folder, so the target's folder
//! watched at start is gone after the first update, and only the link's folder sees the next.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::config::locate::is_js_config;
use crate::config::Config;
use crate::engine::Engine;
use crate::registry::{Mailbox, Outcome, Registration};

/// How long the files must stay quiet before a reload: an editor's save is several events.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// SIGHUP and its npm-bin relay: a counter every serving gateway of this process watches.
static SIGNALLED: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// Ask every gateway serving in this process to reload (SIGHUP). False when none is serving,
/// so the caller can treat the signal as the hangup it otherwise is.
pub fn request_reload() -> bool {
    if SIGNALLED.receiver_count() == 0 {
        return false;
    }
    SIGNALLED.send_modify(|n| *n = n.wrapping_add(1));
    true
}

/// What a [`Reevaluate`] call resolves with.
pub type Evaluation = Pin<Box<dyn Future<Output = crate::Result<serde_json::Value>> + Send>>;

/// Evaluates a TS/JS config again on the JS side: resolves with the new object (the
/// `discovery` section as `runCli` hands it over) or a configuration error.
#[derive(Clone)]
pub struct Reevaluate(pub Arc<dyn Fn() -> Evaluation + Send + Sync>);

impl std::fmt::Debug for Reevaluate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reevaluate")
    }
}

/// The config `origin` evaluated again: through `reevaluate` when the JS side evaluated it,
/// else `None` (the engine reads it again itself).
async fn reevaluated(reevaluate: Option<&Reevaluate>, origin: &str) -> Option<crate::Result<Config>> {
    let reevaluate = reevaluate?;
    Some(match (reevaluate.0)().await {
        Ok(value) => Config::from_value(value, origin),
        Err(error) => Err(error),
    })
}

/// Reloads an engine while it lives; dropping it stops watching and unregisters the gateway.
#[derive(Debug)]
pub struct LiveReload {
    _watcher: Option<RecommendedWatcher>,
    _registration: Option<Registration>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LiveReload {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The files of `config` a change to should reload: the config file when it is read natively,
/// every client file it imported, and every client file looked for but missing (so creating
/// one is noticed). None for an object. A TS/JS config: the file itself when it can be
/// evaluated again (`js_reloads`; the modules it imports are not watched), else none, said
/// once in the log.
/// With them, the approvals of project configs: `allow` and `deny` apply at once.
#[must_use]
pub fn config_files(config: &Config, js_reloads: bool) -> Vec<PathBuf> {
    let origin = config.origin.as_str();
    if origin == "<object>" {
        return Vec::new();
    }
    let mut files = if is_js_config(Path::new(origin)) {
        if js_reloads {
            vec![PathBuf::from(origin)]
        } else {
            tracing::info!(config = %origin, "TS/JS config: changes apply when the gateway restarts");
            return Vec::new();
        }
    } else {
        config.files_to_watch()
    };
    files.extend(crate::consent::Approvals::path_for(
        &crate::config::Environment::current(),
    ));
    files
}

/// Serve `engine`'s config live: watch `files`, register the gateway in the state directory
/// (so `config reload` finds it) and listen for SIGHUP; reload after each. Needs a tokio
/// runtime. What cannot start (no state directory, a platform watcher failing) is logged and
/// the rest goes on.
#[must_use]
pub fn live_reload(
    engine: &Engine,
    config_origin: &str,
    files: &[PathBuf],
    reevaluate: Option<Reevaluate>,
) -> LiveReload {
    let files = absolute(files);
    let registration = register(config_origin, &files);
    let mailbox = registration.as_ref().map(Registration::mailbox);
    let (signal, changes) = mpsc::channel::<()>(1);
    let watcher = watch_changes(signal.clone(), &files, mailbox.as_ref());
    let how = HowToReload {
        engine: engine.clone(),
        origin: config_origin.to_owned(),
        reevaluate,
    };
    // Subscribed before the task runs: a SIGHUP from now on is this gateway's, not a hangup.
    let hangups = SIGNALLED.subscribe();
    let task = tokio::spawn(reload_loop(how, changes, signal, hangups, mailbox));
    LiveReload {
        _watcher: watcher,
        _registration: registration,
        task,
    }
}

fn register(origin: &str, files: &[PathBuf]) -> Option<Registration> {
    let origin = if origin.starts_with('<') {
        origin.to_owned()
    } else {
        canonical(Path::new(origin)).display().to_string()
    };
    let dir = crate::paths::gateways_dir()?;
    match Registration::register(&dir, &origin, files) {
        Ok(registration) => Some(registration),
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "cannot register the gateway; `config reload` will not reach it");
            None
        }
    }
}

/// A path made absolute, its links resolved when it exists, so two spellings of one config
/// compare equal.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    let here = std::env::current_dir().unwrap_or_default();
    let path = here.join(path);
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// One watcher for the config's folders and the registry's folder: a change to one of
/// `files`, or a request file for this gateway, sends on `signal`.
fn watch_changes(signal: mpsc::Sender<()>, files: &[PathBuf], mailbox: Option<&Mailbox>) -> Option<RecommendedWatcher> {
    if files.is_empty() && mailbox.is_none() {
        return None;
    }
    let ours = files.to_vec();
    let linked = linked_folders(files);
    let requests = mailbox.cloned();
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(event)
            if touches(&event, &ours)
                || relinks(&event, &linked)
                || requests.as_ref().is_some_and(|m| asks(&event, m)) =>
        {
            // Full means a change is already waiting to be seen: this one joins it.
            let _ = signal.try_send(());
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "config watcher"),
    };
    let mut folders: BTreeSet<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    if let Some(mailbox) = mailbox {
        folders.insert(mailbox.dir());
    }
    match watch_folders(handler, &folders) {
        Ok(watcher) => {
            tracing::info!(files = files.len(), "watching the config for changes");
            Some(watcher)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot watch the config; changes apply on SIGHUP or when the gateway restarts");
            None
        }
    }
}

/// The engine, and how its config is read again.
struct HowToReload {
    engine: Engine,
    origin: String,
    reevaluate: Option<Reevaluate>,
}

impl HowToReload {
    async fn reload(&self) -> crate::Result<crate::engine::ReloadSummary> {
        // A project TS/JS config is code: evaluated again only while its approval holds.
        // Otherwise the search runs again in Rust, which passes it over (and a change to it
        // keeps what the gateway had, `consent::keeps_what_it_had`).
        if self.reevaluate.is_some() && self.engine.config_scope() == crate::consent::Scope::Project {
            let place = crate::consent::Place::file(Path::new(&self.origin));
            let env = crate::config::Environment::current();
            if !matches!(
                crate::consent::verdict(&place, &env),
                crate::consent::Verdict::Approved(_)
            ) {
                return self.engine.reload(None).await;
            }
        }
        match reevaluated(self.reevaluate.as_ref(), &self.origin).await {
            Some(Ok(config)) => self.engine.reload(Some(config)).await,
            Some(Err(error)) => Err(error),
            None => self.engine.reload(None).await,
        }
    }
}

/// Gather requests until quiet, reload once, answer the request files taken. SIGHUP joins
/// the same stream.
async fn reload_loop(
    how: HowToReload,
    mut changes: mpsc::Receiver<()>,
    signal: mpsc::Sender<()>,
    mut hangups: watch::Receiver<u64>,
    mailbox: Option<Mailbox>,
) {
    // Without a watcher nothing else holds a sender, and SIGHUP must still work.
    let _open = signal;
    loop {
        tokio::select! {
            change = changes.recv() => if change.is_none() { return },
            signalled = hangups.changed() => {
                if signalled.is_err() { return }
                tracing::info!("SIGHUP: reloading the config");
            }
        }
        quiet(&mut changes, DEBOUNCE).await;
        // Taken before the reload: a request written during it gets the next one, which
        // then reads whatever it was asked after.
        let requests = mailbox.as_ref().map(Mailbox::take_requests).unwrap_or_default();
        let result = how.reload().await;
        if let Err(error) = &result {
            tracing::error!(%error, "config reload failed; still serving the previous config");
        }
        if let Some(mailbox) = &mailbox {
            mailbox.answer(&requests, &Outcome::of(&result));
        }
    }
}

fn watch_folders(handler: impl notify::EventHandler, folders: &BTreeSet<&Path>) -> notify::Result<RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(handler)?;
    // A client that is not installed has no folder to watch; its config appearing later
    // (with its folder) is picked up on the next restart or reload.
    for folder in folders.iter().filter(|f| f.is_dir()) {
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

/// The folders of those `files` that are symlinks.
fn linked_folders(files: &[PathBuf]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| f.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect()
}

/// Whether `event` creates, renames or removes an entry of a folder holding a linked config:
/// a link on the way to the config may now point elsewhere.
fn relinks(event: &notify::Event, linked: &[PathBuf]) -> bool {
    use notify::event::ModifyKind;
    matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
    ) && event
        .paths
        .iter()
        .any(|p| p.parent().is_some_and(|parent| linked.iter().any(|l| l == parent)))
}

/// Whether `event` is a reload request for this gateway arriving (created or renamed in).
fn asks(event: &notify::Event, mailbox: &Mailbox) -> bool {
    matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_))
        && event.paths.iter().any(|p| mailbox.is_request(p))
}

/// `files` made absolute, each followed by its resolved target when it is a symlink.
fn absolute(files: &[PathBuf]) -> Vec<PathBuf> {
    let here = std::env::current_dir().unwrap_or_default();
    let mut all = Vec::with_capacity(files.len());
    for file in files.iter().map(|f| here.join(f)) {
        let target = file
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
            .then(|| std::fs::canonicalize(&file).ok())
            .flatten();
        all.push(file);
        all.extend(target);
    }
    all
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
        assert!(config_files(&config_from("<object>"), true).is_empty());
        assert!(config_files(&config_from("/x/anygpt.config.ts"), false).is_empty());
        // With the approvals, so `allow` and `deny` apply to a serving gateway at once.
        let approvals = crate::consent::Approvals::path_for(&crate::config::Environment::current());
        let expected: Vec<PathBuf> = std::iter::once(PathBuf::from("/x/anygpt.config.ts"))
            .chain(approvals)
            .collect();
        assert_eq!(config_files(&config_from("/x/anygpt.config.ts"), true), expected);
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
        let watched = config_files(&config, false);
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

    /// A config map update as the kubelet makes it: the file in a new timestamped folder, a
    /// `..data_tmp` link to it renamed over `..data`, the old folder removed.
    #[cfg(unix)]
    fn kubelet_update(dir: &Path, n: u32) {
        let fresh = dir.join(format!("..2026_11_27_00_00_{n:02}"));
        std::fs::create_dir(&fresh).unwrap();
        std::fs::write(fresh.join("c.json"), format!("{{\"n\": {n}}}")).unwrap();
        let old = std::fs::read_link(dir.join("..data")).ok();
        let _ = std::fs::remove_file(dir.join("..data_tmp"));
        std::os::unix::fs::symlink(fresh.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        if let Some(old) = old {
            std::fs::remove_dir_all(dir.join(old)).unwrap();
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn every_configmap_update_is_seen_not_only_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        kubelet_update(dir, 0);
        std::os::unix::fs::symlink("..data/c.json", dir.join("c.json")).unwrap();
        let (signal, mut changes) = mpsc::channel(8);
        let _watcher = watch_changes(signal, &absolute(&[dir.join("c.json")]), None).unwrap();
        for n in 1..=3 {
            kubelet_update(dir, n);
            let seen = tokio::time::timeout(Duration::from_secs(5), changes.recv()).await;
            assert!(matches!(seen, Ok(Some(()))), "update {n} not seen");
            quiet(&mut changes, DEBOUNCE).await;
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_config_is_watched_at_the_link_and_at_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).unwrap();
        let target = dotfiles.join("c.json");
        std::fs::write(&target, "{}").unwrap();
        let link = dir.path().join("c.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let watched = absolute(std::slice::from_ref(&link));
        assert_eq!(watched, [link, std::fs::canonicalize(&target).unwrap()]);
    }
}
