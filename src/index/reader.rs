//! Searching: the disk index without the notes the overlay (changes not yet on disk)
//! holds, then each of the overlay's parts; their hits are scored with the disk index's
//! statistics, so the lists merge by score. Also the document and segment counts of the disk index.

use std::collections::HashSet;
use std::sync::Arc;

use tantivy::collector::{Collector, Count, FilterCollector, TopDocs};
use tantivy::query::Query;
use tantivy::{DocAddress, Term};

use super::{query, SearchIndex};
use crate::error::{Error, Result};

/// A filter over note keys.
type KeyFilter = Arc<dyn Fn(u64) -> bool + Send + Sync>;

/// One ranked hit: a note key and its score.
#[derive(Debug, Clone)]
pub struct Hit {
    pub key: u64,
    pub score: f32,
}

/// A page of ranked hits.
#[derive(Debug, Clone)]
pub struct Hits {
    pub hits: Vec<Hit>,
    /// Documents that matched (all pages).
    pub matched: usize,
}

impl SearchIndex {
    /// Search: the hits of `query` ranked by score, `offset..offset + limit`, among the
    /// notes whose key is in `allowed` when given.
    pub fn search(
        &self,
        parsed: &query::Parsed,
        allowed: Option<Arc<HashSet<u64>>>,
        offset: usize,
        limit: usize,
    ) -> Result<Hits> {
        self.ranked(self.query(parsed).as_ref(), allowed, offset, limit)
    }

    /// Which of the notes `keys` the words of `parsed` find by what links to them say
    /// (the `links` field: `matched_fields` says `links`): each word, phrase or prefix
    /// as the query looks for it there. Each note's current document (in an overlay part
    /// or on disk) is looked up by key, and each of these is sought to it: a few lookups
    /// a note, not a query over the index.
    pub fn linked(&self, parsed: &query::Parsed, keys: &[u64]) -> Result<HashSet<u64>> {
        let units: Vec<Box<dyn Query>> = parsed
            .units_in("links")
            .map(|u| query::unit_in(u, self.fields.links))
            .collect();
        let mut out = HashSet::new();
        if units.is_empty() {
            return Ok(out);
        }
        let overlay = self.overlay.read().clone();
        let disk = self.reader.searcher();
        let parts = overlay.parts.iter().map(|(id, part)| (Some(*id), part));
        for (part, searcher) in std::iter::once((None, &disk)).chain(parts) {
            let here: Vec<u64> = keys
                .iter()
                .copied()
                .filter(|&k| overlay.holds(part, k))
                .collect();
            if !here.is_empty() {
                said_of(searcher, &self.fields, &here, &units, &mut out).map_err(internal)?;
            }
        }
        Ok(out)
    }

    /// The query `parsed` asks, over the fields of [`query::FIELDS`].
    fn query(&self, parsed: &query::Parsed) -> Box<dyn Query> {
        let f = &self.fields;
        let field_of = |name: &str| match name {
            "title" => f.title,
            "aliases" => f.aliases,
            "headings" => f.headings,
            "lead" => f.lead,
            "tags" => f.tags,
            "path" => f.path,
            "properties" => f.properties,
            "links" => f.links,
            _ => f.body,
        };
        let fields: Vec<query::QueryField<'_>> = query::FIELDS
            .iter()
            .map(|(name, boost)| (*name, field_of(name), *boost))
            .collect();
        let stem_fields: Vec<query::QueryField<'_>> = query::STEM_FIELDS
            .iter()
            .map(|(name, boost)| (*name, field_of(name), *boost))
            .collect();
        query::to_tantivy(parsed, &fields, &stem_fields, f.names)
    }

    /// The hits of `q`, `offset..offset + limit`, among the notes `allowed` (all: `None`).
    fn ranked(
        &self,
        q: &dyn Query,
        allowed: Option<Arc<HashSet<u64>>>,
        offset: usize,
        limit: usize,
    ) -> Result<Hits> {
        // The overlay first, then the disk index (see `flush`, in writer/retry.rs).
        let overlay = self.overlay.read().clone();
        let searcher = self.reader.searcher();
        let want = offset + limit;
        // On disk: every note but those the overlay holds newer (or no) versions of.
        // (The overlay itself, shared: not a copy of its keys per search.)
        let stale = (!overlay.current.is_empty()).then(|| overlay.clone());
        let keep_disk: Option<KeyFilter> = match (&allowed, stale) {
            (None, None) => None,
            (allowed, stale) => {
                let allowed = allowed.clone();
                Some(Arc::new(move |k: u64| {
                    stale.as_ref().is_none_or(|s| s.holds(None, k))
                        && allowed.as_ref().is_none_or(|a| a.contains(&k))
                }))
            }
        };
        // One weight, of the statistics of the disk index and the parts together, scores
        // them all, so scores compare (a weight reads statistics, not the documents of a
        // segment); the parts count too: a vault's disk index may be empty for a while
        // (hosted mode writes it a minute after writes pause), and BM25 of no documents
        // is no score.
        let all = Everywhere {
            disk: &searcher,
            parts: &overlay.parts,
        };
        let scoring =
            tantivy::query::EnableScoring::enabled_from_statistics_provider(&all, &searcher);
        let weight = q.weight(scoring).map_err(internal)?;
        let (mut hits, mut matched) =
            collect(&searcher, weight.as_ref(), keep_disk, want).map_err(internal)?;
        // In memory, oldest part first: each keeps the notes whose current version it
        // holds.
        for (id, part) in &overlay.parts {
            let (id, holds, allowed) = (*id, overlay.clone(), allowed.clone());
            let keep: KeyFilter = Arc::new(move |k: u64| {
                holds.holds(Some(id), k) && allowed.as_ref().is_none_or(|a| a.contains(&k))
            });
            let (more, n) = collect(part, weight.as_ref(), Some(keep), want).map_err(internal)?;
            hits = merged(hits, more);
            matched += n;
        }
        let hits = hits.into_iter().skip(offset).take(limit).collect();
        Ok(Hits { hits, matched })
    }

    /// Whether some note's path marks a language (on disk or in the overlay): only then
    /// can a page's copies be in the reader's order (`index::language`).
    pub fn has_copies(&self) -> bool {
        self.held(&[Term::from_field_text(
            self.fields.copies,
            super::schema::MARKED,
        )])[0]
    }

    /// Whether some note holds each of `terms`, on disk or in the overlay (the parts hold
    /// notes not yet on disk: a search of them reads the same index).
    fn held(&self, terms: &[Term]) -> Vec<bool> {
        if terms.is_empty() {
            return Vec::new();
        }
        let overlay = self.overlay.read().clone();
        let searchers: Vec<tantivy::Searcher> = std::iter::once(self.reader.searcher())
            .chain(overlay.parts.iter().map(|(_, s)| s.clone()))
            .collect();
        terms
            .iter()
            .map(|t| searchers.iter().any(|s| s.doc_freq(t).unwrap_or(0) > 0))
            .collect()
    }

    /// Leave out the whole forms of names no note holds (on disk or in the overlay): a
    /// name found whole outweighs its parts (see `query::build`), which only holds when
    /// some note has it.
    pub(super) fn known_names(&self, parsed: &mut query::Parsed) {
        let mut units: Vec<&mut query::Unit> = parsed
            .required
            .iter_mut()
            .chain(parsed.ranked.iter_mut())
            .chain(parsed.excluded.iter_mut())
            .flatten()
            .filter(|u| u.whole.is_some())
            .collect();
        let terms: Vec<Term> = units
            .iter()
            .map(|u| Term::from_field_text(self.fields.names, u.whole.as_deref().unwrap_or("")))
            .collect();
        for (unit, held) in units.iter_mut().zip(self.held(&terms)) {
            if !held {
                unit.whole = None;
            }
        }
    }

    /// The key and score of every note matching `parsed` (for orders other than relevance).
    pub fn matching(&self, parsed: &query::Parsed) -> Result<Vec<(u64, f32)>> {
        let all = self.search(parsed, None, 0, 0)?;
        if all.matched == 0 {
            return Ok(Vec::new());
        }
        let page = self.search(parsed, None, 0, all.matched)?;
        Ok(page.hits.into_iter().map(|h| (h.key, h.score)).collect())
    }

    /// Count the documents and segments of the disk index into the state.
    pub(super) fn refresh_counts(&self) {
        let searcher = self.reader.searcher();
        let mut st = self.state.lock();
        st.docs = searcher.num_docs();
        st.segments = searcher.segment_readers().len();
    }
}

/// The hits of the disk index and of the overlay as one ranking: by score, and on a tie
/// the disk's first, each side in its own order (tantivy's: the lower document address
/// first). Each side's first `k` hits are then the first `k` of that side in the whole
/// ranking, so the first `k` of the merge of each side's first `k` are the first `k` of
/// the merge of all: a page does not depend on how many hits were asked for. (Ties broken
/// by the note's key, as before, reordered what each side had cut at `k` by another rule:
/// a page of 3 and a page of 6 could each keep another of two tied notes, and paging
/// showed one twice and the other never.)
fn merged(mut disk: Vec<Hit>, overlay: Vec<Hit>) -> Vec<Hit> {
    disk.extend(overlay);
    // Stable: equal scores keep the disk's hits first and each side's order.
    disk.sort_by(|a, b| b.score.total_cmp(&a.score));
    disk
}

/// The best `want` hits of `query` in `searcher` (by key) and how many matched, among the
/// notes `keep` allows (all when `None`), in one pass that scores and counts every match
/// (with `want` 0, a count that scores nothing).
///
/// Not a pruned top-k (block-max WAND) and a count beside it: the count walks every
/// match's postings anyway, so scoring them on the way costs less than a second, pruned
/// walk (0.83x the instructions of a keyword search). And a note's score is then the
/// same whatever `want` is: the pruned walk sums a note's field scores in another order
/// than the full one, so two near-equal notes could swap places between a page of 3 and
/// a page of 6, and paging showed one of them twice and the other never. A question's
/// top-k could not be pruned anyway (see `query::Coordinated`).
fn collect(
    searcher: &tantivy::Searcher,
    weight: &dyn tantivy::query::Weight,
    keep: Option<KeyFilter>,
    want: usize,
) -> tantivy::Result<(Vec<Hit>, usize)> {
    if want == 0 {
        let matched = match keep {
            Some(keep) => over_segments(
                searcher,
                weight,
                &FilterCollector::new("key".to_string(), move |k: u64| keep(k), Count),
            )?,
            None => {
                let mut matched = 0;
                for segment in searcher.segment_readers() {
                    matched += weight.count(segment)? as usize;
                }
                matched
            }
        };
        return Ok((Vec::new(), matched));
    }
    let top_and_count = (TopDocs::with_limit(want).order_by_score(), Count);
    let (docs, matched): (Vec<(f32, DocAddress)>, usize) = match keep {
        Some(keep) => over_segments(
            searcher,
            weight,
            &FilterCollector::new("key".to_string(), move |k: u64| keep(k), top_and_count),
        )?,
        None => over_segments(searcher, weight, &top_and_count)?,
    };
    let mut hits = Vec::with_capacity(docs.len());
    // Each segment's `key` column is opened once, not once per hit.
    let mut keys: Vec<Option<tantivy::columnar::Column<u64>>> =
        vec![None; searcher.segment_readers().len()];
    for (score, addr) in docs {
        let column = match &mut keys[addr.segment_ord as usize] {
            Some(column) => column,
            slot => slot.insert(
                searcher
                    .segment_reader(addr.segment_ord)
                    .fast_fields()
                    .u64("key")?,
            ),
        };
        if let Some(key) = column.first(addr.doc_id) {
            hits.push(Hit { key, score });
        }
    }
    Ok((hits, matched))
}

/// `collector`'s answer over every segment of `searcher`, with one `weight`.
fn over_segments<C: Collector>(
    searcher: &tantivy::Searcher,
    weight: &dyn tantivy::query::Weight,
    collector: &C,
) -> tantivy::Result<C::Fruit> {
    let mut fruits = Vec::with_capacity(searcher.segment_readers().len());
    for (ord, segment) in searcher.segment_readers().iter().enumerate() {
        fruits.push(collector.collect_segment(weight, ord as u32, segment)?);
    }
    collector.merge_fruits(fruits)
}

/// A search the index could not answer.
fn internal(e: tantivy::TantivyError) -> Error {
    Error::internal(format!("search failed: {e}")).with_cause(e)
}

/// Into `out`, the notes of `keys` whose document in `searcher` (the one alive) one of
/// `units` finds: each unit's matches walked once, sought to the notes' documents in order.
fn said_of(
    searcher: &tantivy::Searcher,
    f: &super::schema::Fields,
    keys: &[u64],
    units: &[Box<dyn Query>],
    out: &mut HashSet<u64>,
) -> tantivy::Result<()> {
    use tantivy::{DocSet, TERMINATED};
    let scoring = tantivy::query::EnableScoring::disabled_from_searcher(searcher);
    let weights = units
        .iter()
        .map(|q| q.weight(scoring))
        .collect::<tantivy::Result<Vec<_>>>()?;
    let basic = tantivy::schema::IndexRecordOption::Basic;
    for segment in searcher.segment_readers() {
        let mut found = Vec::with_capacity(weights.len());
        for weight in &weights {
            let scorer = weight.scorer(segment, 1.0)?;
            if scorer.doc() != TERMINATED {
                found.push(scorer);
            }
        }
        if found.is_empty() {
            continue;
        }
        let index = segment.inverted_index(f.key)?;
        let mut docs: Vec<(u32, u64)> = Vec::with_capacity(keys.len());
        for &key in keys {
            let term = Term::from_field_u64(f.key, key);
            let Some(mut postings) = index.read_postings(&term, basic)? else {
                continue;
            };
            while postings.doc() != TERMINATED {
                let doc = postings.doc();
                if segment.alive_bitset().is_none_or(|a| a.is_alive(doc)) {
                    docs.push((doc, key));
                }
                postings.advance();
            }
        }
        docs.sort_unstable();
        for mut scorer in found {
            for &(doc, key) in &docs {
                // `seek` goes forward only.
                if scorer.doc() <= doc && scorer.seek(doc) == doc {
                    out.insert(key);
                }
            }
        }
    }
    Ok(())
}

/// BM25's statistics over the disk index and the overlay's parts: a note in both (a
/// newer version in memory) counts twice, a small error beside leaving the parts out.
struct Everywhere<'a> {
    disk: &'a tantivy::Searcher,
    parts: &'a [(u32, tantivy::Searcher)],
}

impl Everywhere<'_> {
    fn sum(&self, of: impl Fn(&tantivy::Searcher) -> tantivy::Result<u64>) -> tantivy::Result<u64> {
        let mut total = of(self.disk)?;
        for (_, part) in self.parts {
            total += of(part)?;
        }
        Ok(total)
    }
}

impl tantivy::query::Bm25StatisticsProvider for Everywhere<'_> {
    fn total_num_tokens(&self, field: tantivy::schema::Field) -> tantivy::Result<u64> {
        self.sum(|s| tantivy::query::Bm25StatisticsProvider::total_num_tokens(s, field))
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.sum(tantivy::query::Bm25StatisticsProvider::total_num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.sum(|s| s.doc_freq(term))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One side's hits as tantivy answers them: by score, ties in document order (here the
    /// order generated); keys in no particular order.
    fn side(scored: &[(u8, u64)]) -> Vec<Hit> {
        let mut hits: Vec<Hit> = scored
            .iter()
            .map(|&(score, key)| Hit {
                key,
                score: f32::from(score),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits
    }

    fn keys(hits: &[Hit]) -> Vec<u64> {
        hits.iter().map(|h| h.key).collect()
    }

    proptest::proptest! {
        /// The first `k` of the merge of each side's first `k` hits are the first `k` of
        /// the merge of all: a page is the same whatever number of hits was asked for.
        #[test]
        fn a_merged_page_does_not_depend_on_how_many_hits_were_asked(
            disk in proptest::collection::vec((0u8..3, proptest::num::u64::ANY), 0..10),
            overlay in proptest::collection::vec((0u8..3, proptest::num::u64::ANY), 0..10),
        ) {
            let all = merged(side(&disk), side(&overlay));
            for k in 0..=all.len() {
                let first = |hits: Vec<Hit>| hits.into_iter().take(k).collect::<Vec<_>>();
                let page = merged(first(side(&disk)), first(side(&overlay)));
                proptest::prop_assert_eq!(keys(&page[..k]), keys(&all[..k]), "k = {}", k);
            }
        }
    }
}
