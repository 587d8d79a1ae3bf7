//! The search-side domain calls every surface shares (`/v1` and MCP): search and grep,
//! each with its coverage (the tag and property rollups: `rollups.rs`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::notes::{select, sort_notes, Order};
use crate::error::{Error, Result};
use crate::filter::Expr;
pub use crate::index::coverage::{CoverageFacts, Retriever, MAX_EXCLUDED, PRIVATE_REMARK};
use crate::index::embed::fuse::by_confidence;
use crate::index::embed::VECTOR_DEPTH;
use crate::index::grep::{GrepPage, Pattern};
use crate::index::language::{reader_page, READER_DEPTH};
use crate::index::provenance::{Matcher, Provenance};
use crate::index::{query, searchable};
use crate::state::State;
use crate::vault::note::{Note, Visibility};
use crate::vault::observe::Excluded;

/// Greps whose first pass is kept for their next pages.
const GREP_CACHE: usize = 8;

/// Notes and their scores, in answer order.
type Scored = Vec<(Arc<Note>, f32)>;

/// Lexical hits ranked in a hybrid search's fusion; those beyond follow in their order.
pub const HYBRID_LEXICAL_DEPTH: usize = 1000;

/// Which retrievers a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// BM25 only.
    #[default]
    Lexical,
    /// BM25 and the note vectors, fused by score (`index::embed::fuse`).
    Hybrid,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Lexical => "lexical",
            Mode::Hybrid => "hybrid",
        }
    }

    /// `lexical` or `hybrid`; another value is `VALIDATION_FAILED` on `mode`.
    pub fn parse(raw: Option<&str>) -> Result<Mode> {
        match raw.map(str::trim) {
            None | Some("lexical") => Ok(Mode::Lexical),
            Some("hybrid") => Ok(Mode::Hybrid),
            Some(other) => Err(Error::invalid_field(
                "mode",
                format!(
                    "must be `lexical` (BM25, the default) or `hybrid` (BM25 fused with the embedding model's vectors; needs NOTEVAULT_EMBED_MODEL), got {other:?}"
                ),
            )),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The query, parsed once (see [`parse_query`]).
    pub query: query::Parsed,
    /// The query as written (what the embedding model reads in hybrid mode).
    pub text: String,
    pub mode: Mode,
    pub filter: Option<Expr>,
    pub order: Order,
    pub offset: usize,
    pub page_size: usize,
}

impl SearchRequest {
    /// Light enough to run on the async worker that received it: a light query, ranked,
    /// unfiltered, near the first page. Handing it to the blocking pool costs about as
    /// much CPU again as the search (thread wake-ups on every request).
    pub fn is_light(&self) -> bool {
        self.filter.is_none()
            && self.mode == Mode::Lexical
            && self.order.field == "score"
            && self.offset < 1000
            && self.query.is_light()
    }
}

/// Parse the `q` of a search read in `mode`: a mistake is `VALIDATION_FAILED` on `q`
/// with its position.
pub fn parse_query(q: &str, mode: query::Match) -> Result<query::Parsed> {
    query::parse(q, mode).map_err(|e| {
        Error::invalid_field("q", format!("{} (at position {})", e.message, e.position))
            .with_meta("position", e.position.to_string())
    })
}

#[derive(Debug, Clone)]
pub struct SearchHit {
    pub note: Arc<Note>,
    pub score: f32,
    pub provenance: Provenance,
}

#[derive(Debug, Clone)]
pub struct SearchAnswer {
    /// The query as searched (see `SearchIndex::prepare`).
    pub query: query::Parsed,
    pub hits: Vec<SearchHit>,
    /// The offset of the next page, when there is one.
    pub next_offset: Option<usize>,
    pub coverage: CoverageFacts,
}

#[derive(Debug, Clone)]
pub struct GrepRequest {
    pub pattern: Pattern,
    pub filter: Option<Expr>,
    /// A slug and the line after which to go on.
    pub cursor: Option<(String, usize)>,
    pub page_size: usize,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct GrepAnswer {
    pub page: GrepPage,
    pub coverage: CoverageFacts,
}

/// Coverage of the whole vault as the catalog sees it, before matching. Counting
/// walks every note, so it is kept until the catalog changes.
pub(super) fn scope_coverage(state: &State, indexed_seq: Option<i64>) -> CoverageFacts {
    let catalog = state.catalog.read();
    let key = (state.committed_seq(), catalog.len(), catalog.excluded.len());
    let mut cache = state.index.coverage_cache.lock();
    let mut c = match cache.as_ref() {
        Some((k, c)) if *k == key => c.clone(),
        _ => {
            let mut c = CoverageFacts {
                total: catalog.len(),
                committed_seq: key.0,
                unreadable: catalog.excluded.len(),
                excluded_count: catalog.excluded.len(),
                excluded: catalog
                    .excluded
                    .iter()
                    .take(MAX_EXCLUDED)
                    .cloned()
                    .collect(),
                ..CoverageFacts::default()
            };
            for note in catalog.iter() {
                if note.visibility == Visibility::Private {
                    c.private += 1;
                } else if note.searched_bytes().is_none() && !note.unread() {
                    c.too_large += 1;
                    c.excluded_count += 1;
                    if c.excluded.len() < MAX_EXCLUDED {
                        c.excluded.push(Excluded {
                            path: note.path.clone(),
                            reason: format!(
                                "too large: {} bytes (search and grep cover notes up to {} bytes)",
                                note.size,
                                crate::vault::observe::MAX_CONTENT_BYTES
                            ),
                        });
                    }
                }
            }
            c.searched = c.total - c.private - c.too_large;
            // Private notes are `.nvpriv` files of ciphertext (kept with the
            // attachments): counted, never searched.
            let private_files = super::private::private_note_count(state);
            c.total += private_files;
            c.private += private_files;
            c.remarks.push(PRIVATE_REMARK.to_string());
            *cache = Some((key, c.clone()));
            c
        }
    };
    c.indexed_seq = indexed_seq.unwrap_or(c.committed_seq);
    c
}

/// Lexical search (BM25 over title, aliases, headings, lead, tags, path, properties and
/// body, and the English stems of the fields of words), read as [`query`] says.
pub fn search(state: &State, req: &SearchRequest) -> Result<SearchAnswer> {
    let parsed = &state.index.prepare(&req.query);
    let mut coverage = scope_coverage(state, Some(state.index.indexed_seq()));
    coverage.not_yet_indexed = state.index.not_yet_indexed().min(coverage.searched);
    coverage.searched -= coverage.not_yet_indexed;
    if coverage.not_yet_indexed > 0 {
        coverage.remarks.push(format!(
            "{} notes changed since the index caught up (indexed_seq {} < committed_seq {}); their newest versions were not searched",
            coverage.not_yet_indexed, coverage.indexed_seq, coverage.committed_seq
        ));
    }
    coverage
        .remarks
        .extend(parsed.reading.remarks.iter().cloned());
    let stop: Vec<&str> = parsed
        .reading
        .ignored
        .iter()
        .filter(|i| i.reason == "stop word")
        .map(|i| i.text.as_str())
        .collect();
    if !stop.is_empty() {
        coverage
            .remarks
            .push(format!("stop words were not searched: {}", stop.join(", ")));
    }
    let common: Vec<String> = parsed
        .frequent
        .iter()
        .flatten()
        .map(|u| u.display())
        .collect();
    if !common.is_empty() {
        coverage.remarks.push(format!(
            "words in most notes were not needed to match (rarer words decide): {}",
            common.join(", ")
        ));
    }
    let other = parsed.reading.ignored.len() - stop.len() - common.len();
    if other > 0 {
        coverage.remarks.push(format!(
            "{other} part(s) of the query were not searched; `query.ignored` says why"
        ));
    }
    let allowed: Option<Arc<HashSet<u64>>> = req
        .filter
        .as_ref()
        .map(|f| Arc::new(select(state, Some(f)).iter().map(|n| n.key()).collect()));
    coverage.retrievers.push(Retriever {
        name: "lexical",
        ran: true,
        notes: coverage.searched,
        ..Retriever::default()
    });
    if req.mode == Mode::Hybrid {
        match nearest(state, req, allowed.as_ref()) {
            Ok(near) => {
                let (found, matched) = hybrid(state, req, parsed, allowed, near, &mut coverage)?;
                return Ok(answer(state, req, parsed, found, matched, coverage));
            }
            // No usable model: the lexical answer, saying why.
            Err(why) => {
                coverage.remarks.push(format!(
                    "mode=hybrid: the vector retriever did not run ({why}); results are lexical only"
                ));
                coverage.retrievers.push(Retriever {
                    name: "vector",
                    ran: false,
                    reason: Some(why),
                    ..Retriever::default()
                });
            }
        }
    }
    let (found, matched): (Vec<(Arc<Note>, f32)>, usize) = if req.order.field == "score" {
        // With copies of a page in the vault, the first `READER_DEPTH` are fetched whole,
        // so that the reader's order of a page's copies is the same on every page.
        let reader = state.index.has_copies().then_some(req.text.as_str());
        let depth = if reader.is_some() { READER_DEPTH } else { 0 };
        let from = if req.offset < depth { 0 } else { req.offset };
        let end = (req.offset + req.page_size).max(depth);
        let hits = state.index.search(parsed, allowed, from, end - from)?;
        let catalog = state.catalog.read();
        let mut found: Vec<(Arc<Note>, f32)> = hits
            .hits
            .into_iter()
            .filter_map(|h| catalog.get_by_key(h.key).map(|n| (n.clone(), h.score)))
            .collect();
        drop(catalog);
        (
            reader_page(&mut found, from, req.offset, req.page_size, reader),
            hits.matched,
        )
    } else {
        let all = state.index.matching(parsed)?;
        let catalog = state.catalog.read();
        let mut scored: Vec<(Arc<Note>, f32)> = all
            .into_iter()
            .filter(|(key, _)| allowed.as_ref().is_none_or(|a| a.contains(key)))
            .filter_map(|(key, s)| catalog.get_by_key(key).map(|n| (n.clone(), s)))
            .collect();
        drop(catalog);
        let mut notes: Vec<Arc<Note>> = scored.iter().map(|(n, _)| n.clone()).collect();
        sort_notes(&mut notes, &req.order);
        let scores: std::collections::HashMap<String, f32> = scored
            .drain(..)
            .map(|(n, s)| (n.note_id.clone(), s))
            .collect();
        let matched = notes.len();
        let page = notes
            .into_iter()
            .skip(req.offset)
            .take(req.page_size)
            .map(|n| {
                let s = scores.get(&n.note_id).copied().unwrap_or(0.0);
                (n, s)
            })
            .collect();
        (page, matched)
    };
    coverage.retrievers[0].matched = matched;
    Ok(answer(state, req, parsed, found, matched, coverage))
}

/// The answer of a search: the page's notes with their provenance, and the counts.
fn answer(
    state: &State,
    req: &SearchRequest,
    parsed: &query::Parsed,
    found: Vec<(Arc<Note>, f32)>,
    matched: usize,
    mut coverage: CoverageFacts,
) -> SearchAnswer {
    let matcher = Matcher::new(parsed.highlight_terms()).with_stems(parsed.stem_terms());
    let keys: Vec<u64> = found.iter().map(|(n, _)| n.key()).collect();
    // Where the words were is read from the note; what links to it say, from the index.
    let linked = state.index.linked(parsed, &keys).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot tell which results their links found");
        HashSet::new()
    });
    let hits: Vec<SearchHit> = found
        .into_iter()
        .map(|(note, score)| {
            let mut provenance = matcher.provenance(&with_bytes(state, &note));
            if linked.contains(&note.key()) {
                provenance.fields.push("links");
            }
            SearchHit {
                provenance,
                note,
                score,
            }
        })
        .collect();
    let end = req.offset + hits.len();
    coverage.matched = matched;
    coverage.returned = hits.len();
    coverage.truncated = end < matched;
    SearchAnswer {
        next_offset: coverage.truncated.then_some(end),
        hits,
        coverage,
        query: parsed.clone(),
    }
}

/// A hybrid search's page and match count: BM25 hits and the nearest notes by vector,
/// fused by score, weighted by the lexical winner's lead (`fuse::by_confidence`: the
/// first [`HYBRID_LEXICAL_DEPTH`] lexical hits and
/// the [`VECTOR_DEPTH`] nearest notes; lexical hits beyond follow in their order). The
/// vector side sees the notes the lexical side may return: in the catalog at the version
/// its vectors were computed from, searchable, allowed by the filter; with required or
/// excluded clauses in `q` (`+word`, `"phrase"`, `field:word`, `-word`, `match=all`) it
/// only re-ranks notes the lexical side matched, so the syntax keeps its meaning. (Without
/// a usable model, [`search`] answers the lexical results and says why.)
fn hybrid(
    state: &State,
    req: &SearchRequest,
    parsed: &query::Parsed,
    allowed: Option<Arc<HashSet<u64>>>,
    near: crate::index::embed::Nearest,
    coverage: &mut CoverageFacts,
) -> Result<(Scored, usize)> {
    // The lexical ranking: by score, deep enough for the page and the fusion.
    let by_score = req.order.field == "score";
    let (lexical, lexical_matched): (Vec<(u64, f32)>, usize) = if by_score {
        let depth = HYBRID_LEXICAL_DEPTH.max(req.offset + req.page_size + VECTOR_DEPTH);
        let hits = state.index.search(parsed, allowed.clone(), 0, depth)?;
        (
            hits.hits.into_iter().map(|h| (h.key, h.score)).collect(),
            hits.matched,
        )
    } else {
        let all: Vec<(u64, f32)> = state
            .index
            .matching(parsed)?
            .into_iter()
            .filter(|(key, _)| allowed.as_ref().is_none_or(|a| a.contains(key)))
            .collect();
        let n = all.len();
        (all, n)
    };
    coverage.retrievers[0].matched = lexical_matched;
    let lexical_keys: Vec<u64> = lexical.iter().map(|(k, _)| *k).collect();
    let lexical_set: HashSet<u64> = lexical_keys.iter().copied().collect();
    let constrained = !parsed.required.is_empty() || !parsed.excluded.is_empty();
    let n = &near;
    let vector_keys: Vec<u64> = n
        .hits
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !constrained || lexical_set.contains(k))
        .collect();
    coverage.retrievers.push(Retriever {
        name: "vector",
        ran: true,
        notes: n.covered,
        matched: vector_keys.len(),
        reason: None,
    });
    if !n.query_known {
        coverage.remarks.push(
            "the embedding model knows no word of `q`: the vector retriever found nothing"
                .to_string(),
        );
    }
    if n.covered < coverage.searched {
        coverage.remarks.push(format!(
            "{} of {} searched notes have current vectors; the others were searched by words only",
            n.covered, coverage.searched
        ));
    }
    if constrained {
        coverage.remarks.push(
            "required or excluded clauses in `q`: the vector side only re-ranks notes the words matched"
                .to_string(),
        );
    }
    let head = &lexical[..lexical.len().min(HYBRID_LEXICAL_DEPTH)];
    let vector_hits: Vec<(u64, f32)> = n
        .hits
        .iter()
        .filter(|(k, _)| !constrained || lexical_set.contains(k))
        .copied()
        .collect();
    let fused = by_confidence(head, &vector_hits);
    let in_fused: HashSet<u64> = fused.iter().map(|(k, _)| *k).collect();
    // Past the fused depth, lexical hits follow in their order, below every fused one.
    let tail = lexical_keys
        .iter()
        .skip(head.len())
        .filter(|k| !in_fused.contains(k))
        .map(|k| (*k, 0.0));
    let order: Vec<(u64, f32)> = fused.iter().copied().chain(tail).collect();
    // The notes only the vector side found: past the lexical hits fetched, some of them
    // are word matches too, already in `lexical_matched` (asked of the index, for them
    // alone).
    let vector_only: HashSet<u64> = vector_keys
        .iter()
        .filter(|k| !lexical_set.contains(k))
        .copied()
        .collect();
    let also_lexical = if lexical_matched > lexical_keys.len() && !vector_only.is_empty() {
        state
            .index
            .search(parsed, Some(Arc::new(vector_only.clone())), 0, 0)?
            .matched
    } else {
        0
    };
    let matched = lexical_matched + vector_only.len() - also_lexical;
    // Asked before the catalog is held: no other lock is taken under it.
    let reader = (by_score && state.index.has_copies()).then_some(req.text.as_str());
    let catalog = state.catalog.read();
    let resolved = order
        .into_iter()
        .filter_map(|(key, s)| catalog.get_by_key(key).map(|n| (n.clone(), s)));
    if by_score {
        let depth = if reader.is_some() { READER_DEPTH } else { 0 };
        let end = (req.offset + req.page_size).max(depth);
        let mut head: Vec<(Arc<Note>, f32)> = resolved.take(end).collect();
        return Ok((
            reader_page(&mut head, 0, req.offset, req.page_size, reader),
            matched,
        ));
    }
    let mut scored: Vec<(Arc<Note>, f32)> = resolved.collect();
    drop(catalog);
    let scores: std::collections::HashMap<String, f32> = scored
        .iter()
        .map(|(n, s)| (n.note_id.clone(), *s))
        .collect();
    let mut notes: Vec<Arc<Note>> = scored.drain(..).map(|(n, _)| n).collect();
    sort_notes(&mut notes, &req.order);
    let matched = notes.len();
    let page = notes
        .into_iter()
        .skip(req.offset)
        .take(req.page_size)
        .map(|n| {
            let s = scores.get(&n.note_id).copied().unwrap_or(0.0);
            (n, s)
        })
        .collect();
    Ok((page, matched))
}

/// The vector retriever's nearest notes for `req` among those the filter allows and the
/// catalog holds at the version their vectors were computed from; `Err`: why it cannot
/// run. Store before catalog: the only order these two locks are taken in.
fn nearest(
    state: &State,
    req: &SearchRequest,
    allowed: Option<&Arc<HashSet<u64>>>,
) -> std::result::Result<crate::index::embed::Nearest, String> {
    if let Some(why) = state.index.vectors.unavailable() {
        return Err(why);
    }
    // The catalog is asked of the best few only, after the scan: no lock held over it.
    let in_scope = |key: u64| allowed.as_ref().is_none_or(|a| a.contains(&key));
    let current = |key: u64, stamp: &str| {
        state.catalog.read().get_by_key(key).is_some_and(|n| {
            searchable(n)
                && stamp
                    .strip_prefix(n.content_hash.as_str())
                    .and_then(|rest| rest.strip_prefix(' '))
                    == Some(n.path.as_str())
        })
    };
    state
        .index
        .vectors
        .nearest(&meaning_text(&req.text), in_scope, current, VECTOR_DEPTH)
}

/// What the embedding model reads of `q`: its words, without the search syntax
/// (operators, excluded words, field names, quotes).
pub fn meaning_text(q: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut skip_next = false;
    for word in q.split_whitespace() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        match word {
            "NOT" => {
                skip_next = true;
                continue;
            }
            "OR" | "AND" => continue,
            _ => {}
        }
        if word.starts_with('-') {
            continue;
        }
        let word = match word.split_once(':') {
            Some((field, rest)) if query::FIELDS.iter().any(|(f, _)| *f == field) => rest,
            _ => word,
        };
        let word = word.trim_matches(|c: char| matches!(c, '"' | '+' | '*' | '(' | ')'));
        if !word.is_empty() {
            out.push(word);
        }
    }
    out.join(" ")
}

/// `note` with its bytes: a note recalled unread at start (see `vault::scan_cache`) is
/// read from its file when that still holds the note's version.
fn with_bytes(state: &State, note: &Arc<Note>) -> Arc<Note> {
    if !note.unread() {
        return note.clone();
    }
    // Only a file that still has the stamp it was recalled with (so no larger than it
    // was) is read.
    let read = state.paths.resolve(&note.path).ok().and_then(|safe| {
        let stamp = crate::vault::observe::FileStamp::at(&safe.abs).ok();
        (stamp.is_some() && stamp == note.stamp)
            .then(|| crate::vault::observe::read_file(&safe.abs).ok())
            .flatten()
    });
    match read {
        Some(bytes) if crate::vault::content_hash(&bytes) == note.content_hash => Arc::new(Note {
            content: Some(crate::vault::packed::Packed::plain(bytes)),
            ..note.as_ref().clone()
        }),
        _ => note.clone(),
    }
}

/// grep over the current bytes of every searchable note matching the filter.
pub fn grep(state: &State, req: &GrepRequest) -> Result<GrepAnswer> {
    let started = Instant::now();
    let matcher = req.pattern.compile()?;
    let deadline = started + req.timeout;
    // Just after a start, the notes recalled from the scan cache are still being read:
    // grep waits for their bytes (at most its own timeout).
    let all_read = state.unread.wait(deadline);
    let mut coverage = scope_coverage(state, None);
    let notes: Vec<Arc<Note>> = select(state, req.filter.as_ref())
        .into_iter()
        .filter(|n| searchable(n))
        .collect();
    let in_scope = notes.len();
    // Later pages of the same grep over the same vault reuse the first pass.
    let key = format!(
        "{:?}\u{0}{:?}\u{0}{}\u{0}{}",
        req.pattern, req.filter, coverage.committed_seq, coverage.total
    );
    let cached = state
        .index
        .grep_cache
        .lock()
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.clone());
    let (matched, searched, timed_out) = match cached {
        Some(hit) => (*hit).clone(),
        None => {
            let mut found = crate::index::grep::matching_notes(&matcher, &notes, deadline);
            // Notes still unread were not searched: an answer that is not whole.
            found.2 |= !all_read;
            if !found.2 {
                let mut cache = state.index.grep_cache.lock();
                if cache.len() == GREP_CACHE {
                    cache.pop_front();
                }
                cache.push_back((key, Arc::new(found.clone())));
            }
            found
        }
    };
    let mut page = crate::index::grep::lines_page(
        &matcher,
        &matched,
        req.cursor.as_ref().map(|(s, l)| (s.as_str(), *l)),
        req.page_size,
        deadline,
    );
    page.notes_searched = searched;
    page.timed_out |= timed_out;
    if !all_read {
        coverage.remarks.push(format!(
            "notes recalled at start are still being read; {} notes were searched; retry in a moment",
            page.notes_searched
        ));
        coverage.searched = coverage.searched.min(page.notes_searched);
    } else if page.timed_out {
        coverage.remarks.push(format!(
            "grep stopped after {} ms; {} of {} notes were searched; narrow the pattern or the filter",
            req.timeout.as_millis(),
            page.notes_searched,
            in_scope
        ));
        coverage.searched = coverage.searched.min(page.notes_searched);
    }
    coverage.matched = page.notes_matched;
    coverage.returned = page.files.len();
    coverage.truncated = page.next.is_some() || page.timed_out;
    Ok(GrepAnswer { page, coverage })
}

/// `min_seq` beyond what the vault has recorded can never be reached.
pub fn check_min_seq(min_seq: i64, committed_seq: i64) -> Result<()> {
    if min_seq > committed_seq {
        return Err(Error::invalid_field(
            "min_seq",
            format!("{min_seq} is beyond the newest change ({committed_seq}); use the committed_seq of a write receipt"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
