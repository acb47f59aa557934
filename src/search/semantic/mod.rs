//! The optional semantic tier: a sentence-embedding model whose cosine similarity is fused
//! with the lexical relevance (see [`super::search_fused`]).
//!
//! What it owns:
//! - Finding the model folder ([`locate`]): `search.model` in the config, else
//!   `ANYGPT_SEARCH_MODEL`, else the `@anygpt/discovery-model-minilm` package installed next to
//!   the main package. No model, no tier: search is lexical exactly as without it.
//! - Loading it ([`model::Model::load`], sha256 checked) off the caller's path, once per
//!   process and folder ([`Tier::shared`]); a reload keeps the same tier and its vectors.
//! - Tool vectors: one per tool, keyed in memory by server and the tool's content hash and on
//!   disk by the hash of the text embedded, in a file named after the model id beside the
//!   catalog snapshots. Tools without a vector are embedded by one background thread that
//!   yields between tools; a search never waits for it: tools without vectors are ranked
//!   lexically, and the answer says how many are still pending.

mod dense;
mod kernel;
pub mod model;
mod shared;
mod store;
pub mod wordpiece;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use crate::catalog::ToolEntry;
pub use dense::Dense;
pub use model::{Model, ModelError};
use store::VectorFile;

/// Environment variable naming a model folder (when the config names none).
pub const MODEL_ENV: &str = "ANYGPT_SEARCH_MODEL";
/// The weights package's npm name, looked for next to the main package.
pub const MODEL_PACKAGE: &str = "discovery-model-minilm";
/// Version of [`tool_text`]: part of every cached vector's key, so changing the text a tool
/// is embedded as re-embeds every tool.
const TEXT_VERSION: u8 = 1;
/// Set (to anything): the first search of an engine waits until every tool has its vector.
/// For the offline quality harness (`eval:search`), which measures the tier, not its warm-up;
/// a gateway never sets it.
pub const WAIT_ENV: &str = "ANYGPT_SEMANTIC_WAIT";
/// Longest description embedded, in characters (the model reads 256 word pieces anyway).
const MAX_DESCRIPTION_CHARS: usize = 1_200;
/// New vectors between two writes of the cache file.
const SAVE_EVERY: usize = 512;
/// Query vectors kept: a client searching the same words again (another server, another
/// limit, a retry) does not wait for the model twice.
const RECENT_QUERIES: usize = 32;

/// What the tier is doing, for `list_mcp_servers` and the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Turned off in the config.
    Off,
    /// No model folder found: lexical search.
    NoModel,
    /// Reading and checking the model.
    Loading,
    /// Fusing cosine with lexical relevance (`model` is its id).
    On { model: String },
    /// The model could not be loaded: lexical search; `reason` says why and what to do.
    Failed { reason: String },
}

impl Status {
    /// One word: `off`, `no-model`, `loading`, `on`, `failed`.
    #[must_use]
    pub fn word(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::NoModel => "no-model",
            Self::Loading => "loading",
            Self::On { .. } => "on",
            Self::Failed { .. } => "failed",
        }
    }
}

/// A tool the background thread should embed: its in-memory key and its text.
#[derive(Debug, Clone)]
pub struct Job {
    pub key: u64,
    pub text: String,
}

/// Where the background thread finds tools to embed: it returns the tools that have no vector
/// yet (`has` says which do), or `None` once its owner is gone.
pub type Source = Box<dyn Fn(&dyn Fn(u64) -> bool) -> Option<Vec<Job>> + Send + Sync>;

/// A tier in the process-wide registry: its model folder, vector cache folder, and itself.
type Registered = (PathBuf, Option<PathBuf>, Weak<Tier>);

/// One model and the vectors made with it.
pub struct Tier {
    dir: PathBuf,
    status: Mutex<Status>,
    model: OnceLock<Arc<Model>>,
    vectors: RwLock<HashMap<u64, Arc<[f32]>>>,
    /// Bumped after every vector added: catalogs' [`Dense`] copies know when to look again.
    generation: std::sync::atomic::AtomicU64,
    /// The last queries embedded, most recent last.
    recent: Mutex<std::collections::VecDeque<(String, Arc<[f32]>)>>,
    sources: Mutex<Vec<Source>>,
    /// Set when there may be work; the background thread sleeps on it.
    wake: (Mutex<bool>, Condvar),
    cache: Option<PathBuf>,
    /// Set once [`WAIT_ENV`]'s wait is over.
    waited: std::sync::atomic::AtomicBool,
    /// Set while the background thread works on a batch (until its vectors are saved).
    busy: std::sync::atomic::AtomicBool,
    /// Vectors shared with other replicas through the store (`discovery.store`), when set.
    share: OnceLock<shared::VectorShare>,
    /// Tools this process embedded itself (not read from a cache or the store).
    embedded: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier")
            .field("dir", &self.dir)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Tier {
    /// The tier for the model folder `dir`, shared by every engine of this process that uses
    /// it; loading starts in the background the first time. `cache` is the folder for the
    /// vector file (none: vectors live in memory only).
    #[must_use]
    pub fn shared(dir: &Path, cache: Option<PathBuf>) -> Arc<Self> {
        static TIERS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());
        let mut tiers = TIERS.lock().unwrap_or_else(PoisonError::into_inner);
        tiers.retain(|(_, _, tier)| tier.strong_count() > 0);
        if let Some(tier) = tiers
            .iter()
            .find(|(d, c, _)| d == dir && *c == cache)
            .and_then(|(_, _, tier)| tier.upgrade())
        {
            return tier;
        }
        let tier = Arc::new(Self::new(dir, cache.clone()));
        tiers.push((dir.to_owned(), cache, Arc::downgrade(&tier)));
        let worker = Arc::downgrade(&tier);
        let spawned = std::thread::Builder::new()
            .name("anygpt-embed".into())
            .spawn(move || run(&worker));
        if let Err(e) = spawned {
            tier.set_status(Status::Failed {
                reason: format!("cannot start the embedding thread: {e}"),
            });
        }
        tier
    }

    fn new(dir: &Path, cache: Option<PathBuf>) -> Self {
        Self {
            dir: dir.to_owned(),
            status: Mutex::new(Status::Loading),
            model: OnceLock::new(),
            vectors: RwLock::default(),
            generation: std::sync::atomic::AtomicU64::new(0),
            recent: Mutex::default(),
            sources: Mutex::default(),
            wake: (Mutex::new(true), Condvar::new()),
            cache,
            waited: std::sync::atomic::AtomicBool::new(false),
            busy: std::sync::atomic::AtomicBool::new(true),
            share: OnceLock::new(),
            embedded: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Read vectors other replicas embedded from `store`, and put the ones embedded here in
    /// it (a shared store only; the first store set stays). Needs the tokio runtime.
    pub fn share_vectors(&self, store: &crate::store::Store) {
        if let Some(share) = shared::VectorShare::new(store) {
            if self.share.set(share).is_ok() {
                self.wake();
            }
        }
    }

    /// How many tool texts this process embedded itself since it started.
    #[must_use]
    pub fn embedded(&self) -> u64 {
        self.embedded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the tier is doing.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_status(&self, status: Status) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }

    /// The model, once loaded.
    #[must_use]
    pub fn model(&self) -> Option<&Arc<Model>> {
        self.model.get()
    }

    /// Add a place to find tools without vectors (an engine state's catalog), and look now.
    pub fn add_source(&self, source: Source) {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner).push(source);
        self.wake();
    }

    /// Tell the background thread there may be tools to embed (cheap; call after catalog
    /// changes, or when a search saw tools without vectors).
    pub fn wake(&self) {
        let (flag, condvar) = &self.wake;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        condvar.notify_one();
    }

    /// Read access to the vectors by tool key (see [`tool_key`]).
    pub fn vectors(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u64, Arc<[f32]>>> {
        self.vectors.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes whenever a vector is added (see [`Dense`]).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `text` embedded by `model` as a query (background embedding stepping aside meanwhile),
    /// or from the recent queries when it was one.
    #[must_use]
    pub fn embed_query(&self, model: &Model, text: &str) -> Arc<[f32]> {
        let recent = || self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, vector)) = recent().iter().find(|(seen, _)| seen == text) {
            return vector.clone();
        }
        let vector: Arc<[f32]> = kernel::searching(|| model.embed(text)).into();
        let mut kept = recent();
        if kept.len() >= RECENT_QUERIES {
            kept.pop_front();
        }
        kept.push_back((text.to_owned(), vector.clone()));
        vector
    }

    /// Wait until the model is loaded (or failed) and no source has a tool without a vector,
    /// at most `timeout`. For offline evaluation, which wants every tool embedded before it
    /// measures; a gateway never waits.
    pub fn wait_until_embedded(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.status() {
                Status::Failed { .. } | Status::NoModel | Status::Off => return true,
                Status::On { .. } if !self.busy.load(std::sync::atomic::Ordering::Acquire) && self.missing() == 0 => {
                    return true;
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        false
    }

    /// With [`WAIT_ENV`] set, the first call waits (at most 30 minutes) until every tool is
    /// embedded; otherwise, and afterwards, returns at once.
    pub fn wait_if_asked(&self) {
        use std::sync::atomic::Ordering;
        if !self.asks_to_wait() {
            return;
        }
        self.wake();
        self.wait_until_embedded(Duration::from_secs(1_800));
        self.waited.store(true, Ordering::Release);
    }

    /// Whether [`Tier::wait_if_asked`] would wait (cheap).
    #[must_use]
    pub fn asks_to_wait(&self) -> bool {
        !self.waited.load(std::sync::atomic::Ordering::Acquire) && std::env::var_os(WAIT_ENV).is_some()
    }

    /// Tools the sources know without a vector.
    fn missing(&self) -> usize {
        let vectors = self.vectors();
        let has = |key: u64| vectors.contains_key(&key);
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|source| source(&has))
            .map(|jobs| jobs.len())
            .sum()
    }

    fn jobs(&self) -> Vec<Job> {
        let vectors = self.vectors();
        let has = |key: u64| vectors.contains_key(&key);
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let mut jobs = Vec::new();
        // A source whose owner is gone answers `None`: forget it.
        sources.retain(|source| source(&has).map(|found| jobs.extend(found)).is_some());
        jobs.sort_unstable_by_key(|job| job.key);
        jobs.dedup_by_key(|job| job.key);
        jobs
    }
}

/// The background thread: load the model, then embed what the sources lack whenever woken,
/// until the tier is dropped.
fn run(tier: &Weak<Tier>) {
    let Some(model) = load(tier) else { return };
    let mut file = {
        let Some(tier) = tier.upgrade() else { return };
        tier.cache
            .as_ref()
            .map(|dir| VectorFile::open(dir, model.id(), model.dimensions()))
    };
    loop {
        let Some(strong) = tier.upgrade() else { return };
        strong.busy.store(false, std::sync::atomic::Ordering::Release);
        if !wait_for_work(&strong) {
            continue;
        }
        strong.busy.store(true, std::sync::atomic::Ordering::Release);
        let jobs = strong.jobs();
        drop(strong);
        if jobs.is_empty() {
            continue;
        }
        let share = tier.upgrade().and_then(|t| t.share.get().cloned());
        // What other replicas embedded already, in one read of the store.
        let from_store = share.as_ref().map_or_else(HashMap::new, |share| {
            let missing: Vec<u64> = jobs
                .iter()
                .map(|job| text_hash(&job.text))
                .filter(|key| file.as_mut().is_none_or(|f| f.get(*key).is_none()))
                .collect();
            share.read(model.id(), model.dimensions(), &missing)
        });
        let mut fresh = 0;
        let mut made = Vec::new();
        for job in jobs {
            let text_key = text_hash(&job.text);
            let known = file
                .as_mut()
                .and_then(|f| f.get(text_key))
                .or_else(|| from_store.get(&text_key).cloned());
            let embedded_here = known.is_none();
            let vector = known.unwrap_or_else(|| {
                fresh += 1;
                let started = Instant::now();
                let vector: Arc<[f32]> = model.embed_background(&job.text).into();
                made.push((text_key, vector.clone()));
                // Leave the cores to searches and servers: rest a quarter of the time worked.
                std::thread::sleep(started.elapsed() / 4);
                vector
            });
            if let Some(f) = file.as_mut() {
                f.insert(text_key, &vector);
            }
            let Some(strong) = tier.upgrade() else { return };
            if embedded_here {
                // Counted as each is made: `/metrics` shows a long first embedding progress.
                strong.embedded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            strong
                .vectors
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(job.key, vector);
            strong.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            if fresh > 0 && fresh % SAVE_EVERY == 0 {
                save(file.as_mut());
                if let Some(share) = &share {
                    share.write(model.id(), &std::mem::take(&mut made));
                }
            }
        }
        if let Some(share) = &share {
            share.write(model.id(), &made);
        }
        if fresh > 0 {
            save(file.as_mut());
        }
    }
}

fn save(file: Option<&mut VectorFile>) {
    if let Some(file) = file {
        if let Err(e) = file.save() {
            tracing::warn!("cannot write the tool vector cache: {e}");
        }
    }
}

/// Sleep until woken (or a minute passed: sources can go away); true when there may be work.
fn wait_for_work(tier: &Tier) -> bool {
    let (flag, condvar) = &tier.wake;
    let guard = flag.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut guard, _) = condvar
        .wait_timeout_while(guard, Duration::from_secs(60), |woken| !*woken)
        .unwrap_or_else(PoisonError::into_inner);
    std::mem::replace(&mut *guard, false)
}

fn load(tier: &Weak<Tier>) -> Option<Arc<Model>> {
    let dir = tier.upgrade()?.dir.clone();
    let started = Instant::now();
    let loaded = Model::load(&dir);
    let tier = tier.upgrade()?;
    match loaded {
        Ok(model) => {
            let model = Arc::new(model);
            tracing::info!(
                model = model.id(),
                dir = %dir.display(),
                ms = started.elapsed().as_millis(),
                "semantic search on"
            );
            let _ = tier.model.set(model.clone());
            tier.set_status(Status::On {
                model: model.id().to_owned(),
            });
            Some(model)
        }
        Err(e) => {
            tracing::warn!("semantic search off, lexical only: {e}");
            tier.set_status(Status::Failed { reason: e.to_string() });
            None
        }
    }
}

/// The tools of `catalog` without a vector (`has` says which have one), with their texts.
#[must_use]
pub fn jobs_for(catalog: &crate::catalog::Catalog, has: &dyn Fn(u64) -> bool) -> Vec<Job> {
    let mut jobs = Vec::new();
    for server in catalog.server_names() {
        let server_key = server_hash(server);
        for entry in catalog.server_tools(server).unwrap_or_default() {
            let key = tool_key(server_key, entry);
            if !has(key) {
                jobs.push(Job {
                    key,
                    text: tool_text(entry),
                });
            }
        }
    }
    jobs
}

/// The weights package as the host resolved it (see [`set_package_dir`]).
static PACKAGE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Tell [`locate`] where the weights package is installed. Inside Node the running program is
/// `node` itself, so its path says nothing about the package: the addon's loader (`index.js`)
/// resolves the package from its own location, as `require` would, and passes it here.
pub fn set_package_dir(dir: PathBuf) {
    *PACKAGE.lock().unwrap_or_else(PoisonError::into_inner) = Some(dir);
}

/// The model folder to use: `configured` (the config's `search.model`), else
/// [`MODEL_ENV`], else the weights package next to the main package (as the Node loader
/// found it, or beside the running program). `None` when there is none (and the caller logs
/// one line).
#[must_use]
pub fn locate(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = configured {
        return Some(model_folder(dir));
    }
    if let Some(dir) = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty()) {
        return Some(model_folder(Path::new(&dir)));
    }
    if let Some(dir) = PACKAGE.lock().unwrap_or_else(PoisonError::into_inner).as_deref() {
        // Installed but broken (no model inside) still names it: loading then says what is wrong.
        return Some(model_folder(dir));
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).take(8).find_map(|dir| {
        [
            dir.join("@anygpt").join(MODEL_PACKAGE),
            dir.join("node_modules").join("@anygpt").join(MODEL_PACKAGE),
        ]
        .into_iter()
        .map(|package| package.join("model"))
        .find(|candidate| candidate.join("manifest.json").is_file())
    })
}

/// A package folder holds the model in `model/`; accept either.
fn model_folder(dir: &Path) -> PathBuf {
    let inner = dir.join("model");
    if !dir.join("manifest.json").exists() && inner.join("manifest.json").exists() {
        inner
    } else {
        dir.to_owned()
    }
}

/// What a tool is embedded as: `"<server> <name words>: <description> Parameters: a, b"`,
/// identifiers split into words so the model reads `get_current_time` as three words.
#[must_use]
pub fn tool_text(entry: &ToolEntry) -> String {
    let name = super::tokenize::words(entry.name()).join(" ");
    let description: String = entry.description().chars().take(MAX_DESCRIPTION_CHARS).collect();
    let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut text = format!("{} {name}: {description}", entry.server);
    let parameters: Vec<String> = entry
        .tool
        .input_schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|properties| {
            properties
                .keys()
                .take(20)
                .map(|key| super::tokenize::words(key).join(" "))
                .collect()
        })
        .unwrap_or_default();
    if !parameters.is_empty() {
        text.push_str(" Parameters: ");
        text.push_str(&parameters.join(", "));
    }
    text
}

/// A tool's in-memory key: its server and content (the text is a function of both).
#[must_use]
pub fn tool_key(server_hash: u64, entry: &ToolEntry) -> u64 {
    let mut bytes = [0u8; 17];
    bytes[..8].copy_from_slice(&server_hash.to_le_bytes());
    bytes[8..16].copy_from_slice(&entry.content_hash.to_le_bytes());
    bytes[16] = TEXT_VERSION;
    crate::hash::fnv1a(&bytes)
}

/// The hash of a server's name that [`tool_key`] takes.
#[must_use]
pub fn server_hash(server: &str) -> u64 {
    crate::hash::fnv1a(server.as_bytes())
}

/// The on-disk key: the text embedded, with the text format's version.
fn text_hash(text: &str) -> u64 {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.push(TEXT_VERSION);
    bytes.extend_from_slice(text.as_bytes());
    crate::hash::fnv1a(&bytes)
}

#[cfg(test)]
pub mod testing;

#[cfg(test)]
mod tests {
    use super::testing::{write_tiny_model, HIDDEN};
    use super::*;
    use crate::rules::RuleSet;
    use crate::search::{search_fused, IndexedCatalog, Query};
    use rmcp::model::Tool;

    fn tool(name: &str, description: &str) -> Tool {
        let schema = serde_json::json!({ "type": "object", "properties": { "path": {} } });
        Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    fn catalog() -> IndexedCatalog {
        let mut catalog = IndexedCatalog::default();
        let rules = RuleSet::default();
        catalog.set_server_tools(
            "files",
            vec![
                tool(
                    "read_file",
                    "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.",
                ),
                tool("read_text_file", "Read the complete contents of a file as text."),
                tool("write_file", "Write a file."),
            ],
            &rules,
        );
        catalog.set_server_tools(
            "clock",
            vec![
                tool("get_current_time", "Get the current time in a zone."),
                tool("convert_time", "Convert time between zones."),
            ],
            &rules,
        );
        catalog
    }

    /// A tier over `catalog` (shared with the background thread) with every tool embedded.
    fn embedded(model: &Path, cache: &Path, catalog: &Arc<RwLock<IndexedCatalog>>) -> Arc<Tier> {
        let tier = Tier::shared(model, Some(cache.to_owned()));
        let source = Arc::downgrade(catalog);
        tier.add_source(Box::new(move |has| {
            let catalog = source.upgrade()?;
            let catalog = catalog.read().unwrap();
            Some(jobs_for(&catalog, has))
        }));
        assert!(tier.wait_until_embedded(Duration::from_secs(60)), "{:?}", tier.status());
        tier
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replica_takes_the_vectors_another_embedded_from_the_store_and_embeds_nothing() {
        let redis = crate::store::tests::RedisServer::start();
        let store = redis.store(None);
        let dir = tempfile::tempdir().unwrap();
        let model_dir = write_tiny_model(&dir.path().join("model"));
        let catalog = Arc::new(RwLock::new(catalog()));
        let embed_with_store = |cache: &str| {
            let tier = Tier::shared(&model_dir, Some(dir.path().join(cache)));
            tier.share_vectors(&store);
            let source = Arc::downgrade(&catalog);
            tier.add_source(Box::new(move |has| {
                let catalog = source.upgrade()?;
                let catalog = catalog.read().unwrap();
                Some(jobs_for(&catalog, has))
            }));
            tokio::task::block_in_place(|| assert!(tier.wait_until_embedded(Duration::from_secs(60))));
            tier
        };
        let first = embed_with_store("cache-a");
        assert!(first.embedded() > 0, "the first replica embeds the tools");
        // Another replica, its own empty cache: every vector comes from the store.
        let second = embed_with_store("cache-b");
        assert_eq!(second.embedded(), 0, "nothing embedded twice");
        assert_eq!(*first.vectors(), *second.vectors());
    }

    #[test]
    fn the_tiny_model_loads_through_the_real_code_and_embeds_deterministically() {
        let dir = tempfile::tempdir().unwrap();
        let model = Model::load(&write_tiny_model(dir.path())).unwrap();
        assert_eq!((model.id(), model.dimensions()), ("tiny-test", HIDDEN));
        let a = model.embed("read a file");
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert_eq!(a, model.embed_background("read a file"));
        assert_ne!(a, model.embed("what time is it in tokyo"));
        // Longer than the model's positions: cut, not a panic.
        assert_eq!(model.embed(&"read ".repeat(500)).len(), HIDDEN);
    }

    #[test]
    fn corrupted_or_missing_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = write_tiny_model(dir.path());
        let weights = model_dir.join("model.safetensors");
        let mut bytes = std::fs::read(&weights).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&weights, &bytes).unwrap();
        let error = Model::load(&model_dir).unwrap_err().to_string();
        assert!(
            error.contains("model.safetensors") && error.contains("sha256") && error.contains("reinstall"),
            "{error}"
        );
        std::fs::remove_file(model_dir.join("manifest.json")).unwrap();
        let error = Model::load(&model_dir).unwrap_err().to_string();
        assert!(error.contains("manifest.json"), "{error}");
    }

    #[test]
    fn a_corrupted_model_leaves_search_lexical_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = write_tiny_model(&dir.path().join("model"));
        std::fs::write(model_dir.join("vocab.txt"), "changed").unwrap();
        let tier = Tier::shared(&model_dir, None);
        assert!(tier.wait_until_embedded(Duration::from_secs(60)));
        let Status::Failed { reason } = tier.status() else {
            panic!("{:?}", tier.status())
        };
        assert!(reason.contains("vocab.txt"), "{reason}");
        assert!(tier.model().is_none());
        // The engine then searches lexically (search_fused is only called with a model); the
        // fallback inside it gives the lexical order too.
        let catalog = catalog();
        let fused = search_fused(&catalog, &Query::new("convert time"), &tier);
        let lexical = crate::search::search(&catalog, &Query::new("convert time"));
        let ids = |hits: &[crate::search::Hit<'_>]| hits.iter().map(|h| h.entry.id()).collect::<Vec<_>>();
        assert_eq!(ids(&fused.hits), ids(&lexical));
    }

    #[test]
    fn no_model_folder_means_no_tier() {
        assert_eq!(
            locate(Some(Path::new("/nonexistent/model"))),
            Some(PathBuf::from("/nonexistent/model"))
        );
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("pkg");
        write_tiny_model(&package.join("model"));
        // A package folder is accepted for its model folder.
        assert_eq!(locate(Some(&package)), Some(package.join("model")));
    }

    #[test]
    fn fused_search_ranks_exact_names_first_deterministically_with_every_tool_embedded() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = write_tiny_model(&dir.path().join("model"));
        let catalog = Arc::new(RwLock::new(catalog()));
        let tier = embedded(&model_dir, &dir.path().join("cache"), &catalog);
        let catalog = catalog.read().unwrap();
        let exact = search_fused(&catalog, &Query::new("convert_time"), &tier);
        assert_eq!(exact.pending, 0);
        assert_eq!(exact.hits[0].entry.id(), "clock:convert_time");
        assert!((exact.hits[0].relevance - 1.0).abs() < f64::EPSILON);
        assert!(exact.hits[1..].iter().all(|h| h.relevance < 1.0));
        let first = search_fused(&catalog, &Query::new("what time is it in tokyo"), &tier);
        let again = search_fused(&catalog, &Query::new("what time is it in tokyo"), &tier);
        let ids = |hits: &[crate::search::Hit<'_>]| hits.iter().map(|h| h.entry.id()).collect::<Vec<_>>();
        assert!(!first.hits.is_empty());
        assert_eq!(ids(&first.hits), ids(&again.hits));
        assert!(first.hits.iter().all(|h| (0.0..1.0).contains(&h.relevance)));
        // A deprecated tool ranks below its live twin that matches as well.
        let read = ids(&search_fused(&catalog, &Query::new("read a file"), &tier).hits);
        let position = |id: &str| read.iter().position(|x| x == id).unwrap();
        assert!(
            position("files:read_text_file") < position("files:read_file"),
            "{read:?}"
        );
    }

    #[test]
    fn a_changed_tool_waits_for_its_new_vector_and_the_cache_serves_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = write_tiny_model(&dir.path().join("model"));
        let cache = dir.path().join("cache");
        let catalog = Arc::new(RwLock::new(catalog()));
        let tier = embedded(&model_dir, &cache, &catalog);
        let file = cache.join("vectors-tiny-test.bin");
        assert!(file.is_file(), "the vectors are cached on disk");
        let key_before = {
            let catalog = catalog.read().unwrap();
            tool_key(server_hash("clock"), catalog.tool("clock", "convert_time").unwrap())
        };
        // Change one tool: its key changes, so it has no vector until the thread embeds it.
        catalog.write().unwrap().set_server_tools(
            "clock",
            vec![
                tool("get_current_time", "Get the current time in a zone."),
                tool("convert_time", "Convert a time from one zone to another."),
            ],
            &RuleSet::default(),
        );
        let key_after = {
            let catalog = catalog.read().unwrap();
            tool_key(server_hash("clock"), catalog.tool("clock", "convert_time").unwrap())
        };
        assert_ne!(key_before, key_after);
        {
            let snapshot = catalog.read().unwrap();
            let pending = search_fused(&snapshot, &Query::new("convert"), &tier).pending;
            assert!(pending <= 1, "{pending}");
        }
        assert!(tier.wait_until_embedded(Duration::from_secs(60)));
        assert!(tier.vectors().contains_key(&key_after));
        // The catalog's matrix, made by the search above, takes the new vector in.
        {
            let snapshot = catalog.read().unwrap();
            assert_eq!(search_fused(&snapshot, &Query::new("convert"), &tier).pending, 0);
        }
        // Another process (a fresh file handle) finds every current text in the cache.
        let mut reopened = VectorFile::open(&cache, "tiny-test", HIDDEN);
        let catalog = catalog.read().unwrap();
        for job in jobs_for(&catalog, &|_| false) {
            assert!(reopened.get(text_hash(&job.text)).is_some(), "{}", job.text);
        }
    }

    #[test]
    fn tool_text_reads_identifiers_as_words() {
        let catalog = catalog();
        let entry = catalog.tool("clock", "get_current_time").unwrap();
        assert_eq!(
            tool_text(entry),
            "clock get current time: Get the current time in a zone. Parameters: path"
        );
    }
}
