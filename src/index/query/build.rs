//! A parsed query built as a tantivy query: each unit over its fields (and by its stem),
//! alternatives as one clause, and the coordination factor that ranks a note by how many
//! distinct words it has.

use tantivy::query::{
    BooleanQuery, BooleanWeight, BoostQuery, EmptyQuery, EnableScoring, Occur, PhrasePrefixQuery,
    PhraseQuery, Query, ScoreCombiner, Scorer, TermQuery, Weight,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{Score, Term};

use super::*;
use crate::index::tokenizer::{form_term, stem, stemmable};

/// A field of the index as a query sees it: (name, field, boost).
pub type QueryField<'a> = (&'a str, Field, f32);

/// The tantivy query of `parsed` over the exact `fields`, by a word's stem the
/// `stem_fields` (name, field, boost of the stem), and by a name's whole form the `names`
/// field.
pub fn to_tantivy(
    parsed: &Parsed,
    fields: &[QueryField<'_>],
    stem_fields: &[QueryField<'_>],
    names: Field,
) -> Box<dyn Query> {
    // One word alone: BM25 summed over its fields; several: each word scores its best
    // field (plus a tenth of the others), coordinated. Either is ranked and counted in
    // one pass (see `reader::collect`).
    let single = parsed.ranked.len() + parsed.required.len() == 1;
    let alt = |units: &[Unit]| alternatives(units, fields, stem_fields, names, !single);
    let ranked: Option<Box<dyn Query>> = match parsed.ranked.as_slice() {
        [] => None,
        [one] => Some(alt(one)),
        many => Some(Box::new(Coordinated {
            clauses: many.iter().map(|u| alt(u)).collect(),
        })),
    };
    // One clause needs no conjunction around it.
    if parsed.required.is_empty() && parsed.excluded.is_empty() && parsed.pairs.is_empty() {
        if let Some(q) = ranked {
            return q;
        }
    }
    if let ([one], None, [], []) = (
        parsed.required.as_slice(),
        &ranked,
        parsed.excluded.as_slice(),
        parsed.pairs.as_slice(),
    ) {
        return alt(one);
    }
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for units in &parsed.required {
        clauses.push((Occur::Must, alt(units)));
    }
    if let Some(q) = ranked {
        // Required clauses decide what matches; ranked words only add to the score.
        let occur = if parsed.required.is_empty() {
            Occur::Must
        } else {
            Occur::Should
        };
        clauses.push((occur, q));
    }
    for units in &parsed.excluded {
        clauses.push((Occur::MustNot, alt(units)));
    }
    for (a, b) in &parsed.pairs {
        for (name, field, _) in fields {
            let boost = match *name {
                "title" => PAIR_BOOST,
                "body" => PAIR_BOOST,
                _ => continue,
            };
            let q = PhraseQuery::new(vec![
                Term::from_field_text(*field, a),
                Term::from_field_text(*field, b),
            ]);
            clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
        }
    }
    Box::new(BooleanQuery::new(clauses))
}

fn alternatives(
    units: &[Unit],
    fields: &[QueryField<'_>],
    stem_fields: &[QueryField<'_>],
    names: Field,
    dismax: bool,
) -> Box<dyn Query> {
    let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let in_scope = |unit: &Unit, name: &str| unit.field.as_deref().is_none_or(|f| f == name);
    for unit in units {
        let mut per_field: Vec<Box<dyn Query>> = Vec::new();
        let word = match (unit.tokens.as_slice(), unit.prefix) {
            ([token], false) => Some((token, stem(token))),
            _ => None,
        };
        // One word alone, its own stem (`sync`): its term in a field of words scores once
        // at the exact boost plus the stem's, the same sum as a second query of the term,
        // for one term to look up and walk.
        let own_stem = !dismax && word.as_ref().is_some_and(|(t, s)| t.as_str() == s);
        // A name some note holds whole (`.github`) outweighs its parts (`github`).
        let share = if unit.whole.is_some() {
            SPLIT_SHARE
        } else {
            1.0
        };
        for (name, field, boost) in fields {
            if in_scope(unit, name) {
                let mut boost = *boost * share;
                if own_stem {
                    if let Some((_, _, b)) = stem_fields.iter().find(|(n, _, _)| n == name) {
                        boost += b * share;
                    }
                }
                per_field.push(Box::new(BoostQuery::new(unit_query(unit, *field), boost)));
            }
        }
        // A one-token word is also searched by its stem (which may equal the word), as a
        // token (`sync`) and as the marked form beside other forms (`~sync` beside
        // `synced`): together what a stemmed field would hold.
        if let Some((_, stemmed)) = &word {
            let form = stemmable(stemmed).then(|| form_term(stemmed));
            let token = (!own_stem).then_some(stemmed.as_ref());
            for (name, field, boost) in stem_fields {
                if !in_scope(unit, name) {
                    continue;
                }
                let mut forms: Vec<Box<dyn Query>> = Vec::with_capacity(2);
                for text in token.into_iter().chain(form.as_deref()) {
                    let term = Term::from_field_text(*field, text);
                    forms.push(Box::new(BoostQuery::new(
                        Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                        *boost * share,
                    )));
                }
                // Several words score each word's best field: the two forms of a field
                // are one entry there (their sum), as one stemmed field was.
                if dismax && forms.len() > 1 {
                    per_field.push(Box::new(BooleanQuery::new(
                        forms.into_iter().map(|q| (Occur::Should, q)).collect(),
                    )));
                } else {
                    per_field.extend(forms);
                }
            }
        }
        if let Some(name) = &unit.whole {
            let term = Term::from_field_text(names, name);
            per_field.push(Box::new(BoostQuery::new(
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                NAME_BOOST,
            )));
        }
        if dismax && per_field.len() > 1 {
            should.push((
                Occur::Should,
                Box::new(tantivy::query::DisjunctionMaxQuery::with_tie_breaker(
                    per_field,
                    TIE_BREAKER,
                )),
            ));
        } else {
            should.extend(per_field.into_iter().map(|q| (Occur::Should, q)));
        }
    }
    if should.is_empty() {
        return Box::new(EmptyQuery);
    }
    if should.len() == 1 {
        return should.pop().expect("one").1;
    }
    Box::new(BooleanQuery::new(should))
}

/// What finds `unit` in `field` alone, for telling whether it matched there: its word,
/// phrase or prefix, and a one-token word by its stem forms too, as [`to_tantivy`] asks.
pub fn unit_in(unit: &Unit, field: Field) -> Box<dyn Query> {
    let exact = unit_query(unit, field);
    let ([token], false) = (unit.tokens.as_slice(), unit.prefix) else {
        return exact;
    };
    let stemmed = stem(token);
    let form = stemmable(&stemmed).then(|| form_term(&stemmed));
    let mut forms: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Should, exact)];
    for text in std::iter::once(stemmed.as_ref()).chain(form.as_deref()) {
        if text != token {
            let term = Term::from_field_text(field, text);
            let q = TermQuery::new(term, IndexRecordOption::Basic);
            forms.push((Occur::Should, Box::new(q)));
        }
    }
    Box::new(BooleanQuery::new(forms))
}

fn unit_query(unit: &Unit, field: Field) -> Box<dyn Query> {
    let first = unit.positions.first().copied().unwrap_or(0);
    let terms: Vec<(usize, Term)> = unit
        .tokens
        .iter()
        .zip(&unit.positions)
        .map(|(t, p)| (p - first, Term::from_field_text(field, t)))
        .collect();
    if unit.prefix {
        let mut q = PhrasePrefixQuery::new_with_offset(terms);
        q.set_max_expansions(200);
        return Box::new(q);
    }
    if terms.len() == 1 {
        let (_, term) = terms.into_iter().next().expect("one term");
        return Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
    }
    Box::new(PhraseQuery::new_with_offset(terms))
}

/// Ranked clauses: a note matches when it matches one of them; its score is the sum of
/// the clauses' scores times the square of the number of clauses it matches (a
/// coordination factor), so a note with more of the query's distinct words ranks above one
/// with fewer. (No block-max WAND here: the combined score is not a sum.)
#[derive(Debug)]
struct Coordinated {
    clauses: Vec<Box<dyn Query>>,
}

impl Clone for Coordinated {
    fn clone(&self) -> Self {
        Self {
            clauses: self.clauses.iter().map(|q| q.box_clone()).collect(),
        }
    }
}

impl Query for Coordinated {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let weights = self
            .clauses
            .iter()
            .map(|q| Ok((Occur::Should, q.weight(scoring)?)))
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(Box::new(BooleanWeight::with_minimum_number_should_match(
            weights,
            1,
            scoring.is_scoring_enabled(),
            Box::new(CoordCombiner::default),
        )))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        for q in &self.clauses {
            q.query_terms(visitor);
        }
    }
}

/// Sums the matching clauses' scores and multiplies by the square of how many matched.
#[derive(Default, Clone, Copy)]
struct CoordCombiner {
    score: Score,
    matched: u32,
}

impl ScoreCombiner for CoordCombiner {
    fn update<S: Scorer>(&mut self, scorer: &mut S) {
        self.score += scorer.score();
        self.matched += 1;
    }

    fn clear(&mut self) {
        self.score = 0.0;
        self.matched = 0;
    }

    fn score(&self) -> Score {
        let matched = self.matched as Score;
        self.score * matched * matched
    }
}
