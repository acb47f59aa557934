//! Lexical relevance fused with the model's cosine similarity, by score.
//!
//! For every tool that has a vector: `w·max(cos, 0) + (1 − w)·relevance`, where `relevance` is
//! the lexical engine's (0 for a tool it did not match) and `w` depends on the query
//! ([`fusion_weight`]): the less the lexical match explains of the query, and the less of the
//! query is literal identifiers, paths or quoted names, the more the meaning counts. A tool
//! without a vector yet keeps its lexical relevance. Exact names still come first with
//! relevance 1, deprecated tools are demoted as in lexical search, ties break by server then
//! name, and the same query over the same vectors gives the same order. The weights and why
//! they are what they are: BENCHMARKS.md, "Semantic tier".

use super::semantic::Tier;
use super::{open, rank_with, Hit, IndexedCatalog, Opening, Query, DEPRECATED_FACTOR, MIN_RELEVANCE, RELATIVE_FLOOR};
use crate::catalog::ToolEntry;
use crate::rules::Sight;

/// Lexical hits considered for fusion (the best ones; the rest count as relevance 0).
const LEXICAL_POOL: usize = 300;
/// Cosine weight when the lexical match is confident or the query is literal.
pub const WEIGHT_MIN: f64 = 0.10;
/// Cosine weight when nothing lexical explains the query and none of it is literal.
pub const WEIGHT_MAX: f64 = 0.25;
/// Lexical relevance at and above which the lexical match counts as fully confident.
pub const CONFIDENT: f64 = 0.10;
/// With no lexical match at all, the best cosine must reach this for any result: below it the
/// query is about nothing in the catalog ("zzzqqq" still has a nearest tool).
pub const MIN_COSINE: f32 = 0.3;

/// A fused search's answer.
#[derive(Debug)]
pub struct Fused<'a> {
    pub hits: Vec<Hit<'a>>,
    /// Tools in scope that have no vector yet (ranked lexically).
    pub pending: usize,
}

/// Rank the catalog for `query` with lexical relevance and the tier's cosine fused. Falls back
/// to lexical search while the model is not loaded (every tool then counts as pending).
#[must_use]
pub fn search_fused<'a>(catalog: &'a IndexedCatalog, query: &Query<'_>, tier: &Tier) -> Fused<'a> {
    let Some(model) = tier.model() else {
        return Fused {
            hits: super::search(catalog, query),
            pending: in_scope(catalog, query).count(),
        };
    };
    let Opening {
        filter,
        text,
        exact,
        mut hits,
    } = open(catalog, query);
    let room = query.limit - hits.len();
    if room == 0 {
        return Fused { hits, pending: 0 };
    }
    let dense = catalog.dense_vectors(tier, model.id(), model.dimensions());
    let dense = dense.as_ref().expect("dense_vectors always makes the matrix");
    // Lexical relevance by row; 0 for the tools it did not match.
    let mut lexical = vec![0.0f64; dense.len()];
    let mut confidence: Option<f64> = None;
    for (doc, relevance) in rank_with(catalog.index(), text, filter, LEXICAL_POOL, 0.0) {
        if let Some(first) = dense.first_row(doc.server) {
            lexical[first + doc.position] = relevance;
        }
        confidence = Some(confidence.unwrap_or(0.0).max(relevance));
    }
    let weight = fusion_weight(text, confidence.unwrap_or(0.0));
    let cosines = dense.cosines(&tier.embed_query(model, text));
    let mut pending = 0;
    let mut best_cosine = f32::MIN;
    let mut scored: Vec<Hit<'a>> = Vec::new();
    // Server by server (not `in_scope`): one row lookup per server, not per tool.
    for server in servers_in_scope(catalog, query) {
        let (Some(first), Some(tools)) = (dense.first_row(server), catalog.server_tools(server)) else {
            continue;
        };
        for (position, entry) in tools.iter().enumerate() {
            if !sees(catalog, query, server, position, entry)
                || exact.iter().any(|&(s, _, p)| s == server && p == position)
            {
                continue;
            }
            let row = first + position;
            let score = if dense.has(row) {
                best_cosine = best_cosine.max(cosines[row]);
                weight * f64::from(cosines[row].max(0.0)) + (1.0 - weight) * lexical[row]
            } else {
                pending += 1;
                lexical[row]
            };
            if score > 0.0 {
                scored.push(Hit {
                    entry,
                    relevance: score,
                });
            }
        }
    }
    if pending > 0 {
        tier.wake();
    }
    if confidence.is_none() && best_cosine < MIN_COSINE {
        return Fused { hits, pending };
    }
    let top = scored.iter().map(|h| h.relevance).fold(0.0, f64::max);
    let floor = (top * f64::from(RELATIVE_FLOOR)).max(MIN_RELEVANCE);
    scored.retain(|h| h.relevance >= floor);
    let order = |a: &Hit<'_>, b: &Hit<'_>| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| a.entry.server.cmp(&b.entry.server))
            .then_with(|| a.entry.name().cmp(b.entry.name()))
    };
    // Deprecation is read from descriptions: only for the few that can make the answer.
    let wanted = room + super::DEPRECATION_LOOKAHEAD;
    if scored.len() > wanted {
        scored.select_nth_unstable_by(wanted - 1, order);
        scored.truncate(wanted);
    }
    for hit in &mut scored {
        if super::is_deprecated(hit.entry.description()) {
            hit.relevance *= DEPRECATED_FACTOR;
        }
    }
    scored.sort_unstable_by(order);
    scored.truncate(room);
    for hit in &mut scored {
        hit.relevance = hit.relevance.min(0.99);
    }
    hits.extend(scored);
    Fused { hits, pending }
}

/// The tools a query may return: its server (or every server), enabled ones unless asked.
fn in_scope<'a, 'q>(
    catalog: &'a IndexedCatalog,
    query: &Query<'q>,
) -> impl Iterator<Item = (&'a str, usize, &'a ToolEntry)> + use<'a, 'q> {
    let query = *query;
    servers_in_scope(catalog, &query).flat_map(move |server| {
        catalog
            .server_tools(server)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(move |&(position, entry)| sees(catalog, &query, server, position, entry))
            .map(move |(position, entry)| (server, position, entry))
    })
}

/// The servers a query searches: its server, or every server.
fn servers_in_scope<'a>(catalog: &'a IndexedCatalog, query: &Query<'_>) -> impl Iterator<Item = &'a str> + use<'a> {
    let only = query.server.map(str::to_owned);
    catalog
        .server_names()
        .filter(move |server| only.as_deref().is_none_or(|only| only == *server))
}

/// Whether a query may return `entry` (`server`'s tool at `position`): a tool enabled for the
/// caller, or a disabled one when disabled ones are asked for; never one hidden from the caller.
fn sees(catalog: &IndexedCatalog, query: &Query<'_>, server: &str, position: usize, entry: &ToolEntry) -> bool {
    let sight = match query.view {
        None => Sight::of_enabled(entry.enabled),
        Some(_) => catalog.sight(query.view, server, position),
    };
    sight == Sight::Enabled || (query.include_disabled && sight == Sight::Disabled)
}

/// The cosine weight for `text` whose best lexical hit has relevance `confidence`.
///
/// It grows from [`WEIGHT_MIN`] to [`WEIGHT_MAX`] as the lexical match explains less of the
/// query (`1 − confidence/CONFIDENT`, floored at 0) and shrinks back as more of the query is
/// literal (identifiers, paths, quoted names: words a lexical match gets right and a sentence
/// model blurs).
#[must_use]
pub fn fusion_weight(text: &str, confidence: f64) -> f64 {
    let (min, max, confident) = tuning();
    let doubt = (1.0 - confidence / confident).clamp(0.0, 1.0);
    min + (max - min) * doubt * (1.0 - literal_share(text))
}

/// The three constants above, or `ANYGPT_FUSION_SWEEP="min,max,confident"`: a development
/// knob for re-running the table that chose them (BENCHMARKS.md), not a setting.
fn tuning() -> (f64, f64, f64) {
    static TUNING: std::sync::OnceLock<(f64, f64, f64)> = std::sync::OnceLock::new();
    *TUNING.get_or_init(|| {
        std::env::var("ANYGPT_FUSION_SWEEP")
            .ok()
            .and_then(|v| {
                let parts: Vec<f64> = v.split(',').filter_map(|p| p.parse().ok()).collect();
                (parts.len() == 3).then(|| (parts[0], parts[1], parts[2]))
            })
            .unwrap_or((WEIGHT_MIN, WEIGHT_MAX, CONFIDENT))
    })
}

/// Share of the query's words that are literal: contain `_`, `/`, `\`, `::`, `@`, `=`, a dot
/// or digit inside letters, a lower-to-upper case change (`camelCase`), or sit in quotes.
#[must_use]
pub fn literal_share(text: &str) -> f64 {
    let mut words = 0u32;
    let mut literal = 0u32;
    let mut quoted = false;
    for word in text.split_whitespace() {
        let opens = word.starts_with(['"', '\'', '`']);
        let closes = word.len() > 1 && word.ends_with(['"', '\'', '`']);
        let in_quotes = quoted || opens;
        if opens && !closes {
            quoted = true;
        } else if quoted && closes {
            quoted = false;
        }
        let core = word.trim_matches(|c: char| !c.is_alphanumeric());
        if core.is_empty() {
            continue;
        }
        words += 1;
        if in_quotes || is_literal(core) {
            literal += 1;
        }
    }
    if words == 0 {
        0.0
    } else {
        f64::from(literal) / f64::from(words)
    }
}

fn is_literal(word: &str) -> bool {
    let chars: Vec<char> = word.chars().collect();
    let camel = chars.windows(2).any(|w| w[0].is_lowercase() && w[1].is_uppercase());
    let inner_dot = chars
        .windows(3)
        .any(|w| w[0].is_alphanumeric() && w[1] == '.' && w[2].is_alphanumeric());
    let mixed_digits = chars.iter().any(char::is_ascii_digit) && chars.iter().any(|c| c.is_alphabetic());
    camel || inner_dot || mixed_digits || word.contains(['_', '/', '\\', '@', '=']) || word.contains("::")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_words_are_identifiers_paths_and_quotes() {
        assert!((literal_share("what time is it in Tokyo") - 0.0).abs() < 1e-9);
        assert!((literal_share("read /etc/hosts") - 0.5).abs() < 1e-9);
        assert!((literal_share("call get_current_time now") - 1.0 / 3.0).abs() < 1e-9);
        assert!((literal_share("search for \"hello world\" please") - 0.4).abs() < 1e-9);
        assert!((literal_share("open index.html and fooBar") - 0.5).abs() < 1e-9);
        assert!((literal_share("") - 0.0).abs() < 1e-9);
    }

    #[test]
    fn the_weight_grows_with_doubt_and_shrinks_with_literals() {
        let sure = fusion_weight("what time is it", 0.9);
        let unsure = fusion_weight("what time is it", 0.0);
        let literal = fusion_weight("get_current_time", 0.0);
        assert!((sure - WEIGHT_MIN).abs() < 1e-9, "{sure}");
        assert!((unsure - WEIGHT_MAX).abs() < 1e-9, "{unsure}");
        assert!((literal - WEIGHT_MIN).abs() < 1e-9, "{literal}");
    }
}
