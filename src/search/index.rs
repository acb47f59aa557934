//! The inverted index: BM25F over five fields, kept per server, scored in one pass.
//!
//! Each tool is a document with five fields — name, server (name and description),
//! description, parameters (names and descriptions), tags — each with its own weight and
//! length normalisation. Terms are interned (`u32`); a term's postings hold, per document,
//! the term's saturated BM25F weight `w / (K1 + w)`, where `w` sums the field frequencies
//! scaled by field weight and length. Precomputing that weight makes a query one pass over
//! the postings of its terms into a dense accumulator: only documents that share a term
//! with the query are touched, and no text is looked at while searching.
//!
//! The index changes per server ([`Index::set_server`]): the replaced server's documents
//! leave the postings of their own terms, the new ones are appended; other servers'
//! postings are not rebuilt. Length normalisation uses the catalog's average field lengths;
//! they are refreshed (one pass over the forward lists, no re-tokenising) only when they
//! drift by more than [`NORM_DRIFT`], so adding servers one by one stays cheap. Many servers
//! at once (a startup from snapshots) go through a [`Batch`], which writes the postings once.
//! Interned terms are never forgotten: the vocabulary only grows with new words, and the
//! analysis cache (word → term, so a word is stemmed once) grows with it up to a bound.
//!
//! What a score *means* (relevance 0..1, the exact-name rule, thresholds) is decided by the
//! caller, `search::mod`; this module only answers "which documents, with what weight".

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::tokenize;
use super::view::View;
use crate::catalog::ToolEntry;
use crate::rules::Sight;

/// Number of fields.
const FIELDS: usize = 5;
const NAME: usize = 0;
const SERVER: usize = 1;
const DESCRIPTION: usize = 2;
const PARAMS: usize = 3;
const TAGS: usize = 4;

/// Per-field weight: the name says what a tool does; the description explains it at length;
/// parameters and the server's own words are weaker evidence.
const FIELD_WEIGHT: [f32; FIELDS] = [3.0, 0.6, 1.0, 0.4, 1.5];
/// Per-field length normalisation (BM25's `b`). Descriptions range from five words to tens of
/// thousands of characters: full normalisation keeps a huge description from matching every
/// query through sheer size. Names and tags are short and even; they are barely normalised.
const FIELD_B: [f32; FIELDS] = [0.3, 0.3, 0.75, 0.75, 0.0];
/// BM25 term-frequency saturation.
const K1: f32 = 1.2;
/// Terms kept per field; beyond this a field is a document dump, and its length (still
/// counted in full) already makes each of its terms weigh almost nothing.
const MAX_FIELD_TERMS: usize = 2_000;
/// Relative change of an average field length that triggers re-weighting the postings.
const NORM_DRIFT: f32 = 0.1;
/// Marks a posting whose term occurs in the document's name.
const IN_NAME: u32 = 1 << 31;

/// Hashes the words of every tool text looked up while indexing: std's `SipHash` was ~6 % of
/// a 5.6k-tool startup profile. aHash is several times faster on short keys and, randomly
/// keyed per process as std's is, still no easy target for a server crafting colliding
/// words. Nothing iterates these maps, so the hasher cannot change a ranking.
type WordHasher = ahash::RandomState;

/// What [`Index::word_terms`] holds for a word that gives no term (a stop word).
const NO_TERM: u32 = u32::MAX;
/// Distinct words remembered by the analysis cache; past this, new words are analysed each
/// time they occur (correct, only slower), so a flood of made-up words cannot grow it.
const MAX_CACHED_WORDS: usize = 1 << 18;

/// One document's entry in a term's postings.
#[derive(Debug, Clone, Copy)]
struct Posting {
    /// Document slot, with [`IN_NAME`] set when the term is in the tool's name.
    doc: u32,
    /// Saturated BM25F term weight, in 0..1.
    weight: f32,
}

/// One indexed tool.
#[derive(Debug, Clone)]
struct Doc {
    server: Arc<str>,
    name: Box<str>,
    /// Position in the server's tool list (what the catalog resolves).
    position: u32,
    enabled: bool,
    /// Terms per field, counted before [`MAX_FIELD_TERMS`] applies.
    lens: [u32; FIELDS],
    /// Distinct terms of the name.
    name_terms: u16,
    /// Forward list: each distinct term with its frequency per field (saturating at 255).
    terms: Box<[(u32, [u8; FIELDS])]>,
}

/// What the hot loops read about a slot: small and contiguous, so scoring never touches the
/// (large) `Doc`s of documents that do not make the top.
#[derive(Debug, Clone, Copy, Default)]
struct SlotMeta {
    live: bool,
    enabled: bool,
    /// Distinct terms of the name.
    name_terms: u16,
    /// The server's ordinal in `Index::server_ords`.
    server: u32,
}

/// Per-slot sums of one query, kept in a reused per-thread buffer.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    bm25: f32,
    matched: f32,
    name: f32,
}

thread_local! {
    /// Reused accumulators: allocating and zeroing one per query would cost more than
    /// scoring a typical query; only the touched slots are reset after use.
    static SCRATCH: RefCell<Vec<Acc>> = const { RefCell::new(Vec::new()) };
}

/// A document sharing a term with the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub slot: u32,
    /// Weighted BM25F sum over the query's terms.
    pub bm25: f32,
    /// Sum of the idf (times query weight) of the query terms this document has.
    pub matched: f32,
    /// Share of the name's terms the query covers (expansions count at their weight), 0..1.
    pub name_coverage: f32,
}

/// Where a document's tool lives, resolved by the caller through the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DocRef<'a> {
    pub server: &'a str,
    pub name: &'a str,
    pub position: usize,
}

/// A query term resolved against the index.
#[derive(Debug, Clone, Copy)]
pub struct QueryTerm {
    pub term: u32,
    /// 1 for a word of the query, less for an expansion.
    pub weight: f32,
}

/// Which documents a search may return.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'q> {
    pub server: Option<&'q str>,
    pub include_disabled: bool,
    /// One caller's view of this index (`None`: the local user's, the rules as indexed).
    pub view: Option<&'q View>,
}

impl Filter<'_> {
    fn keeps(&self, slot: u32, doc: &Doc) -> bool {
        shown(self.include_disabled, self.view, slot, doc.enabled) && self.server.is_none_or(|s| *s == *doc.server)
    }
}

/// A [`Filter`] with its server resolved to an ordinal.
#[derive(Debug, Clone, Copy)]
struct SlotFilter<'q> {
    server: Option<u32>,
    include_disabled: bool,
    view: Option<&'q View>,
}

impl SlotFilter<'_> {
    fn keeps(self, slot: u32, meta: SlotMeta) -> bool {
        meta.live
            && shown(self.include_disabled, self.view, slot, meta.enabled)
            && self.server.is_none_or(|s| s == meta.server)
    }
}

/// Whether the document in `slot` (enabled for everyone or not) may be shown: enabled for the
/// caller, or disabled and asked for; never hidden from the caller.
fn shown(include_disabled: bool, view: Option<&View>, slot: u32, enabled: bool) -> bool {
    let sight = view.map_or(Sight::of_enabled(enabled), |view| view.sight(slot));
    sight == Sight::Enabled || (include_disabled && sight == Sight::Disabled)
}

/// The inverted index over every server's tools.
#[derive(Clone, Default)]
pub struct Index {
    vocabulary: HashMap<Box<str>, u32, WordHasher>,
    /// Analysis cache: lowercase word → its term (or [`NO_TERM`]). Stemming was most of the
    /// cost of indexing a catalog, and a catalog says the same few thousand words again and
    /// again.
    word_terms: HashMap<Box<str>, u32, WordHasher>,
    /// Per term, where it sits in the document being analysed ([`NO_TERM`]: not in it).
    scratch_positions: Vec<u32>,
    /// Postings by term id, in no particular order.
    postings: Vec<Vec<Posting>>,
    /// Document slots; `None` is a free slot (listed in `free`).
    docs: Vec<Option<Doc>>,
    /// Per slot, what scoring needs (parallel to `docs`).
    meta: Vec<SlotMeta>,
    /// Server ordinals (never reused for another name).
    server_ords: HashMap<Arc<str>, u32>,
    free: Vec<u32>,
    /// Each server's document slots.
    servers: BTreeMap<Arc<str>, Vec<u32>>,
    /// Lowercased tool name → slots, for exact-name lookups.
    names: HashMap<Box<str>, Vec<u32>>,
    len_sum: [u64; FIELDS],
    live: u32,
    /// Average field lengths the posting weights were computed with.
    norm_avg: [f32; FIELDS],
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("documents", &self.live)
            .field("terms", &self.vocabulary.len())
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Replace `server`'s documents with `tools` (an empty list removes the server).
    /// `description` is the server's own description, if it has one.
    pub fn set_server(&mut self, server: &str, description: Option<&str>, tools: &[ToolEntry]) {
        self.batch().set_server(server, description, tools);
    }

    /// Change many servers, with the postings written once at the end: the same index as
    /// [`Index::set_server`] for each in turn, without re-weighting every posting each time
    /// the average lengths drift (which, while a catalog is loaded server by server, is often).
    pub fn batch(&mut self) -> Batch<'_> {
        Batch {
            index: self,
            unposted: Vec::new(),
            renormalized: false,
        }
    }

    /// Forget `server`'s documents.
    pub fn remove_server(&mut self, server: &str) {
        self.remove_docs(server);
        if self.renormalize() {
            self.rebuild_postings();
        }
    }

    /// Number of indexed tools.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live as usize
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The interned id of a term, if any tool has it.
    #[must_use]
    pub fn term(&self, term: &str) -> Option<u32> {
        self.vocabulary
            .get(term)
            .copied()
            .filter(|&t| !self.postings[t as usize].is_empty())
    }

    /// BM25 inverse document frequency of `term` (`None`: a term no tool has, the rarest).
    #[must_use]
    pub fn idf(&self, term: Option<u32>) -> f32 {
        let df = term.map_or(0, |t| self.postings[t as usize].len());
        #[expect(clippy::cast_precision_loss, reason = "document counts are far below 2^24")]
        let (n, df) = (self.live as f32, df as f32);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The weight a term gets in a tool that has it once in its name and once in its
    /// description, both of average length: what a "full" match of one word looks like.
    #[must_use]
    pub fn reference_weight() -> f32 {
        let w = FIELD_WEIGHT[NAME] + FIELD_WEIGHT[DESCRIPTION];
        w / (K1 + w)
    }

    /// Documents named exactly `name` (case-insensitive), passing `filter`, as
    /// `(server, name, position)`, ordered by server then name.
    #[must_use]
    pub fn named(&self, name: &str, filter: Filter<'_>) -> Vec<(&str, &str, usize)> {
        let Some(slots) = self.names.get(name.to_lowercase().as_str()) else {
            return Vec::new();
        };
        let mut found: Vec<(&str, &str, usize)> = slots
            .iter()
            .filter_map(|&slot| Some((slot, self.doc(slot)?)))
            .filter(|&(slot, doc)| filter.keeps(slot, doc))
            .map(|(_, doc)| (&*doc.server, &*doc.name, doc.position as usize))
            .collect();
        found.sort_unstable();
        found
    }

    /// Whether `server` has documents.
    #[must_use]
    pub fn has_server(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }

    /// Every document sharing a term with `query` and passing `filter`, with its BM25F sum,
    /// matched idf and name coverage; unordered.
    #[must_use]
    pub fn score(&self, query: &[QueryTerm], filter: Filter<'_>) -> Vec<Candidate> {
        let server = match filter.server {
            Some(name) => match self.server_ords.get(name) {
                Some(&ord) => Some(ord),
                None => return Vec::new(),
            },
            None => None,
        };
        let filter = SlotFilter {
            server,
            include_disabled: filter.include_disabled,
            view: filter.view,
        };
        SCRATCH.with_borrow_mut(|acc| {
            if acc.len() < self.docs.len() {
                acc.resize(self.docs.len(), Acc::default());
            }
            let mut touched: Vec<u32> = Vec::new();
            for q in query {
                let idf = self.idf(Some(q.term)) * q.weight;
                for p in &self.postings[q.term as usize] {
                    let slot = p.doc & !IN_NAME;
                    let a = &mut acc[slot as usize];
                    if a.matched == 0.0 {
                        touched.push(slot);
                    }
                    a.bm25 += idf * p.weight;
                    a.matched += idf;
                    if p.doc & IN_NAME != 0 {
                        a.name += q.weight;
                    }
                }
            }
            let mut out = Vec::with_capacity(touched.len());
            for slot in touched {
                let a = std::mem::take(&mut acc[slot as usize]);
                let meta = self.meta[slot as usize];
                if filter.keeps(slot, meta) {
                    out.push(Candidate {
                        slot,
                        bm25: a.bm25,
                        matched: a.matched,
                        name_coverage: (a.name / f32::from(meta.name_terms.max(1))).min(1.0),
                    });
                }
            }
            out
        })
    }

    /// Where the document in `slot` lives (a slot from [`Index::score`] of this index).
    #[must_use]
    pub fn doc_ref(&self, slot: u32) -> DocRef<'_> {
        let doc = self.doc(slot).expect("scored slots hold documents");
        DocRef {
            server: &doc.server,
            name: &doc.name,
            position: doc.position as usize,
        }
    }

    /// The slot of `server`'s tool at `position` (its place in the server's list).
    #[must_use]
    pub fn slot(&self, server: &str, position: usize) -> Option<u32> {
        self.servers.get(server)?.get(position).copied()
    }

    /// `sight` of every document, by slot (a free slot is hidden): a caller's [`View`].
    pub fn view(&self, mut sight: impl FnMut(&str, &str) -> Sight) -> View {
        View::new(
            self.docs
                .iter()
                .map(|doc| doc.as_ref().map_or(Sight::Hidden, |doc| sight(&doc.server, &doc.name)))
                .collect(),
        )
    }

    /// Every `(server, name)` of the index, for suggestions.
    pub fn names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.docs.iter().flatten().map(|d| (&*d.server, &*d.name))
    }

    fn doc(&self, slot: u32) -> Option<&Doc> {
        self.docs.get(slot as usize)?.as_ref()
    }

    fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.vocabulary.get(term) {
            return id;
        }
        let id = u32::try_from(self.postings.len()).expect("fewer than 2^32 distinct terms");
        self.vocabulary.insert(term.into(), id);
        self.postings.push(Vec::new());
        id
    }

    /// The term of a lowercase word ([`NO_TERM`] for a stop word), from the cache when the
    /// word was seen before.
    fn word_term(&mut self, word: &str) -> u32 {
        if let Some(&term) = self.word_terms.get(word) {
            return term;
        }
        let term = if tokenize::is_stop_word(word) {
            NO_TERM
        } else {
            self.intern(&tokenize::stem(word))
        };
        if self.word_terms.len() < MAX_CACHED_WORDS {
            self.word_terms.insert(word.into(), term);
        }
        term
    }

    /// Append the terms of `text` to `out`: [`tokenize::terms`], interned.
    fn push_terms(&mut self, text: &str, out: &mut Vec<u32>) {
        tokenize::for_each_word(text, |word| {
            let term = self.word_term(word);
            if term != NO_TERM {
                out.push(term);
            }
        });
    }

    /// Terms of the server field: the server's name and description.
    fn server_field_terms(&mut self, server: &str, description: Option<&str>) -> Vec<u32> {
        let mut terms = Vec::new();
        self.push_terms(server, &mut terms);
        if let Some(description) = description {
            self.push_terms(description, &mut terms);
        }
        terms
    }

    /// Terms of the parameters: each top-level property's name and description.
    fn param_terms(&mut self, schema: &serde_json::Map<String, Value>, out: &mut Vec<u32>) {
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return;
        };
        for (name, property) in properties {
            self.push_terms(name, out);
            if let Some(Value::String(description)) = property.get("description") {
                self.push_terms(description, out);
            }
        }
    }

    /// Tokenise one tool into a document (interning its terms).
    fn analyze(&mut self, server: &Arc<str>, server_terms: &[u32], position: u32, entry: &ToolEntry) -> Doc {
        let mut fields: [Vec<u32>; FIELDS] = Default::default();
        self.push_terms(entry.name(), &mut fields[NAME]);
        fields[SERVER].extend_from_slice(server_terms);
        self.push_terms(entry.description(), &mut fields[DESCRIPTION]);
        self.param_terms(&entry.tool.input_schema, &mut fields[PARAMS]);
        for tag in &entry.tags {
            self.push_terms(tag, &mut fields[TAGS]);
        }
        let mut lens = [0u32; FIELDS];
        let mut counts: Vec<(u32, [u8; FIELDS])> = Vec::new();
        if self.scratch_positions.len() < self.postings.len() {
            self.scratch_positions.resize(self.postings.len(), NO_TERM);
        }
        for (field, terms) in fields.iter().enumerate() {
            lens[field] = u32::try_from(terms.len()).unwrap_or(u32::MAX);
            for &term in terms.iter().take(MAX_FIELD_TERMS) {
                let at = &mut self.scratch_positions[term as usize];
                if *at == NO_TERM {
                    *at = u32::try_from(counts.len()).expect("a document has fewer than 2^32 terms");
                    counts.push((term, [0; FIELDS]));
                }
                let tf = &mut counts[*at as usize].1[field];
                *tf = tf.saturating_add(1);
            }
        }
        for &(term, _) in &counts {
            self.scratch_positions[term as usize] = NO_TERM;
        }
        // Ordered by term, as before the dense counting: nothing depends on it but a stable
        // layout is easier to reason about.
        counts.sort_unstable_by_key(|&(term, _)| term);
        let name_terms = counts.iter().filter(|(_, tf)| tf[NAME] > 0).count();
        Doc {
            server: server.clone(),
            name: entry.name().into(),
            position,
            enabled: entry.enabled,
            lens,
            name_terms: u16::try_from(name_terms).unwrap_or(u16::MAX),
            terms: counts.into_boxed_slice(),
        }
    }

    /// Add a document without its postings (the caller writes them).
    fn insert(&mut self, doc: Doc) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.docs.push(None);
            u32::try_from(self.docs.len() - 1).expect("fewer than 2^31 tools")
        });
        for (field, len) in doc.lens.iter().enumerate() {
            self.len_sum[field] += u64::from(*len);
        }
        self.live += 1;
        self.names.entry(doc.name.to_lowercase().into()).or_default().push(slot);
        let next_ord = u32::try_from(self.server_ords.len()).expect("fewer than 2^32 servers");
        let server = *self.server_ords.entry(doc.server.clone()).or_insert(next_ord);
        if self.meta.len() < self.docs.len() {
            self.meta.resize(self.docs.len(), SlotMeta::default());
        }
        self.meta[slot as usize] = SlotMeta {
            live: true,
            enabled: doc.enabled,
            name_terms: doc.name_terms,
            server,
        };
        self.docs[slot as usize] = Some(doc);
        slot
    }

    /// Take `server`'s documents out of the postings of the terms they use, and nothing else;
    /// says which slots were freed.
    fn remove_docs(&mut self, server: &str) -> Vec<u32> {
        let Some(slots) = self.servers.remove(server) else {
            return Vec::new();
        };
        let mut affected: Vec<u32> = Vec::new();
        for &slot in &slots {
            let doc = self.docs[slot as usize]
                .take()
                .expect("a server's slots hold its documents");
            self.meta[slot as usize] = SlotMeta::default();
            for (field, len) in doc.lens.iter().enumerate() {
                self.len_sum[field] -= u64::from(*len);
            }
            self.live -= 1;
            affected.extend(doc.terms.iter().map(|&(t, _)| t));
            let key = doc.name.to_lowercase();
            if let Some(named) = self.names.get_mut(key.as_str()) {
                named.retain(|&s| s != slot);
                if named.is_empty() {
                    self.names.remove(key.as_str());
                }
            }
        }
        affected.sort_unstable();
        affected.dedup();
        let mut removed = slots;
        removed.sort_unstable();
        for term in affected {
            self.postings[term as usize].retain(|p| removed.binary_search(&(p.doc & !IN_NAME)).is_err());
        }
        self.free.extend_from_slice(&removed);
        removed
    }

    /// Take the current average field lengths as the norm when they moved by more than
    /// [`NORM_DRIFT`] since the weights were computed; says whether they did (every posting
    /// must then be re-weighted).
    fn renormalize(&mut self) -> bool {
        if self.live == 0 {
            return false;
        }
        #[expect(clippy::cast_precision_loss, reason = "term counts are far below 2^24 per tool")]
        let current: [f32; FIELDS] = std::array::from_fn(|f| self.len_sum[f] as f32 / self.live as f32);
        let drifted = current
            .iter()
            .zip(self.norm_avg)
            .any(|(&now, then)| (now - then).abs() > NORM_DRIFT * then.max(f32::EPSILON));
        if drifted {
            self.norm_avg = current;
        }
        drifted
    }

    /// Write every document's postings again, weighted with the current norm.
    fn rebuild_postings(&mut self) {
        for postings in &mut self.postings {
            postings.clear();
        }
        for (slot, doc) in self.docs.iter().enumerate() {
            let Some(doc) = doc else { continue };
            let slot = u32::try_from(slot).expect("fewer than 2^31 tools");
            for &(term, tf) in &doc.terms {
                self.postings[term as usize].push(posting(slot, tf, doc.lens, self.norm_avg));
            }
        }
    }
}

/// Changes to an [`Index`] whose postings are written when it is dropped.
pub struct Batch<'a> {
    index: &'a mut Index,
    /// Slots added in this batch, in order, whose postings are not written yet.
    unposted: Vec<u32>,
    /// The norm changed during the batch: every posting must be re-weighted.
    renormalized: bool,
}

impl Batch<'_> {
    /// [`Index::set_server`] within the batch.
    pub fn set_server(&mut self, server: &str, description: Option<&str>, tools: &[ToolEntry]) {
        let index = &mut *self.index;
        let freed = index.remove_docs(server);
        if !freed.is_empty() {
            self.unposted.retain(|slot| !freed.contains(slot));
        }
        if !tools.is_empty() {
            let server_arc: Arc<str> = Arc::from(server);
            let server_terms = index.server_field_terms(server, description);
            let mut slots = Vec::with_capacity(tools.len());
            for (position, entry) in tools.iter().enumerate() {
                let position = u32::try_from(position).unwrap_or(u32::MAX);
                let doc = index.analyze(&server_arc, &server_terms, position, entry);
                slots.push(index.insert(doc));
            }
            self.unposted.extend_from_slice(&slots);
            index.servers.insert(server_arc, slots);
        }
        // Decided after each server as one `set_server` would, so the final norm (and every
        // weight) is what the same changes made one by one give.
        self.renormalized |= index.renormalize();
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let index = &mut *self.index;
        if self.renormalized {
            index.rebuild_postings();
            return;
        }
        for &slot in &self.unposted {
            let doc = index.docs[slot as usize]
                .as_ref()
                .expect("an unposted slot holds its document");
            for &(term, tf) in &doc.terms {
                index.postings[term as usize].push(posting(slot, tf, doc.lens, index.norm_avg));
            }
        }
    }
}

/// A posting for `slot` with its saturated BM25F weight.
fn posting(slot: u32, tf: [u8; FIELDS], lens: [u32; FIELDS], avg: [f32; FIELDS]) -> Posting {
    let mut w = 0.0;
    for field in 0..FIELDS {
        if tf[field] == 0 {
            continue;
        }
        #[expect(clippy::cast_precision_loss, reason = "lengths are far below 2^24 terms")]
        let relative = lens[field] as f32 / avg[field].max(1.0);
        let norm = 1.0 - FIELD_B[field] + FIELD_B[field] * relative;
        w += FIELD_WEIGHT[field] * f32::from(tf[field]) / norm;
    }
    Posting {
        doc: slot | if tf[NAME] > 0 { IN_NAME } else { 0 },
        weight: w / (K1 + w),
    }
}
