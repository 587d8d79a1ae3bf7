//! The search query language, parsed into a tantivy query over the boosted fields.
//!
//! ```text
//! query   = clause { clause }                 clauses are ANDed
//! clause  = [ "-" | "NOT" ] alt               "-" or NOT excludes
//! alt     = unit { "OR" unit }                one of the units
//! unit    = [ field ":" ] ( word [ "*" ] | '"' phrase '"' [ "*" ] )
//! field   = title | headings | tags | path | properties | body
//! ```
//!
//! A word is tokenized like the indexed text (so `snake_case` or `日本語` become a phrase
//! of their tokens); a trailing `*` makes the last token a prefix; a phrase matches its
//! tokens in order. Without a field, a unit is searched in every field, the title counting
//! most (BM25 per field, boosted). Every error carries the byte position of its cause.

use tantivy::query::{
    BooleanQuery, BoostQuery, EmptyQuery, Occur, PhrasePrefixQuery, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::Term;

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;

/// The searchable fields and their boosts; the first name is the one a query uses.
pub const FIELDS: &[(&str, f32)] = &[
    ("title", 4.0),
    ("headings", 2.0),
    ("tags", 2.0),
    ("path", 2.0),
    ("properties", 1.0),
    ("body", 1.0),
];

/// Why a query did not parse, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    pub position: usize,
    pub message: String,
}

/// One searchable unit: its tokens in a field (or all fields), phrase or word, prefix or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub field: Option<String>,
    pub tokens: Vec<String>,
    /// Each token's position, relative to the first.
    pub positions: Vec<usize>,
    pub prefix: bool,
}

/// The tokens of query text with their positions. Where unspaced characters gave both
/// unigrams and bigrams, only the bigrams are kept (`東京` is the one token `東京`, `日本語`
/// the phrase `日本` `本語`): the index holds both, and the bigrams are the stricter match.
pub fn query_tokens(text: &str) -> Vec<(String, usize)> {
    use super::tokenizer::is_unspaced;
    let all = super::tokenizer::tokens(text);
    let is_unigram = |t: &str| {
        let mut chars = t.chars();
        matches!((chars.next(), chars.next()), (Some(c), None) if is_unspaced(c))
    };
    let is_bigram = |t: &str| t.chars().count() == 2 && t.chars().all(is_unspaced);
    let bigram_at = |p: usize| all.iter().any(|(t, q)| *q == p && is_bigram(t));
    all.iter()
        .filter(|(t, p)| !is_unigram(t) || !(bigram_at(*p) || (*p > 0 && bigram_at(p - 1))))
        .cloned()
        .collect()
}

/// A parsed query: clauses that must match (each a choice of units), clauses that must not.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub must: Vec<Vec<Unit>>,
    pub must_not: Vec<Vec<Unit>>,
}

impl Parsed {
    /// Tokens to mark in results: every positive unit's tokens, with their prefix flag.
    pub fn highlight_terms(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        for unit in self.must.iter().flatten() {
            let last = unit.tokens.len().saturating_sub(1);
            for (i, t) in unit.tokens.iter().enumerate() {
                let term = (t.clone(), unit.prefix && i == last);
                if !out.contains(&term) {
                    out.push(term);
                }
            }
        }
        out
    }

    /// Cheap to run: a few units and no short prefix (whose expansion can reach thousands
    /// of terms). Such a query ranks the 44k-note corpus in about a tenth of a millisecond.
    pub fn is_light(&self) -> bool {
        let units = self.must.iter().chain(&self.must_not).flatten();
        let mut count = 0;
        for unit in units {
            count += 1;
            let short_prefix =
                unit.prefix && unit.tokens.last().is_none_or(|t| t.chars().count() < 3);
            if count > 8 || short_prefix {
                return false;
            }
        }
        true
    }
}

/// Parse `input`. An empty query, or one of only exclusions, is an error.
pub fn parse(input: &str) -> Result<Parsed, QueryError> {
    if input.trim().is_empty() {
        return Err(QueryError {
            position: 0,
            message: "the query is empty; give at least one word".into(),
        });
    }
    if input.chars().count() > MAX_QUERY_CHARS {
        return Err(QueryError {
            position: MAX_QUERY_CHARS,
            message: format!("the query is longer than {MAX_QUERY_CHARS} characters"),
        });
    }
    let mut parsed = Parsed::default();
    let mut lexer = Lexer { input, pos: 0 };
    let mut pending_or = false;
    loop {
        lexer.skip_space();
        if lexer.pos >= input.len() {
            break;
        }
        let start = lexer.pos;
        let negated = if lexer.eat("-") {
            true
        } else {
            lexer.eat_keyword("NOT")
        };
        if negated {
            lexer.skip_space();
        }
        if lexer.pos >= input.len() {
            return Err(QueryError {
                position: start,
                message: "nothing follows the exclusion".into(),
            });
        }
        let unit = lexer.unit()?;
        lexer.skip_space();
        let or_here = lexer.eat_keyword("OR");
        let is_or_continuation = pending_or && !negated;
        if pending_or && negated {
            return Err(QueryError {
                position: start,
                message: "OR cannot join an exclusion; write the exclusion on its own".into(),
            });
        }
        if let Some(unit) = unit {
            let target = if negated {
                &mut parsed.must_not
            } else {
                &mut parsed.must
            };
            if is_or_continuation {
                if let Some(last) = target.last_mut() {
                    last.push(unit);
                }
            } else {
                target.push(vec![unit]);
            }
        } else if is_or_continuation {
            // A unit without tokens (only punctuation) drops out of the choice.
        } else if !negated {
            // Keep the clause count honest: an all-punctuation word matches nothing.
            parsed.must.push(Vec::new());
        }
        if or_here {
            if negated {
                return Err(QueryError {
                    position: start,
                    message: "OR cannot join an exclusion; write the exclusion on its own".into(),
                });
            }
            lexer.skip_space();
            if lexer.pos >= input.len() {
                return Err(QueryError {
                    position: lexer.pos,
                    message: "OR needs a word after it".into(),
                });
            }
        }
        pending_or = or_here;
    }
    if parsed.must.is_empty() {
        return Err(QueryError {
            position: 0,
            message: "the query only excludes; add a word to search for".into(),
        });
    }
    Ok(parsed)
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.input.len() - trimmed.len();
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// An upper-case keyword followed by a space or the end.
    fn eat_keyword(&mut self, kw: &str) -> bool {
        let rest = self.rest();
        // `get`: a keyword's length can fall inside a multi-byte character of `rest`.
        let after = rest.get(kw.len()..).unwrap_or("");
        if rest.starts_with(kw) && (after.is_empty() || after.starts_with(char::is_whitespace)) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    /// `[field:] (word[*] | "phrase"[*])`; `None` when it holds no token.
    fn unit(&mut self) -> Result<Option<Unit>, QueryError> {
        let mut field = None;
        let word_end = self
            .rest()
            .find(|c: char| c.is_whitespace() || c == '"' || c == ':')
            .map_or(self.input.len(), |i| self.pos + i);
        if self.input[word_end..].starts_with(':') && word_end > self.pos {
            let name = &self.input[self.pos..word_end];
            if FIELDS.iter().any(|(f, _)| *f == name) {
                field = Some(name.to_string());
                self.pos = word_end + 1;
            }
            // Another `name:` is text (`https://...`, `12:30`).
        }
        let text;
        if self.eat("\"") {
            let open = self.pos - 1;
            let Some(close) = self.rest().find('"') else {
                return Err(QueryError {
                    position: open,
                    message: "the phrase is not closed; add a closing \"".into(),
                });
            };
            text = self.input[self.pos..self.pos + close].to_string();
            self.pos += close + 1;
        } else {
            let end = self
                .rest()
                .find(char::is_whitespace)
                .map_or(self.input.len(), |i| self.pos + i);
            text = self.input[self.pos..end].to_string();
            self.pos = end;
        }
        let (text, prefix) = match text.strip_suffix('*') {
            Some(t) => (t.to_string(), true),
            None => (text, self.eat("*")),
        };
        let (tokens, positions) = query_tokens(&text)
            .into_iter()
            .unzip::<_, _, Vec<_>, Vec<_>>();
        if tokens.is_empty() {
            return Ok(None);
        }
        Ok(Some(Unit {
            field,
            tokens,
            positions,
            prefix,
        }))
    }
}

/// The tantivy query of `parsed` over `fields` (name, field, boost, has positions).
pub fn to_tantivy(parsed: &Parsed, fields: &[(&str, Field, f32)]) -> Box<dyn Query> {
    // One clause needs no conjunction around it.
    if let ([alt], []) = (parsed.must.as_slice(), parsed.must_not.as_slice()) {
        return alternatives(alt, fields);
    }
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for alt in &parsed.must {
        clauses.push((Occur::Must, alternatives(alt, fields)));
    }
    for alt in &parsed.must_not {
        clauses.push((Occur::MustNot, alternatives(alt, fields)));
    }
    Box::new(BooleanQuery::new(clauses))
}

fn alternatives(units: &[Unit], fields: &[(&str, Field, f32)]) -> Box<dyn Query> {
    let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for unit in units {
        for (name, field, boost) in fields {
            if unit.field.as_deref().is_some_and(|f| f != *name) {
                continue;
            }
            should.push((
                Occur::Should,
                Box::new(BoostQuery::new(unit_query(unit, *field), *boost)),
            ));
        }
    }
    if should.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(should))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn light_queries_are_few_units_without_short_prefixes() {
        for (q, light) in [
            ("git", true),
            ("kube* \"pull request\" title:docker", true),
            ("a b c d e f g h", true),
            ("a b c d e f g h i", false),
            ("kub*", true),
            ("ku*", false),
            ("k*", false),
            ("git OR k*", false),
            ("git -ab*", false),
        ] {
            assert_eq!(parse(q).unwrap().is_light(), light, "{q}");
        }
    }

    fn show(p: &Parsed) -> String {
        let alt = |a: &Vec<Unit>| {
            a.iter()
                .map(|u| {
                    format!(
                        "{}{}{}",
                        u.field
                            .as_deref()
                            .map(|f| format!("{f}:"))
                            .unwrap_or_default(),
                        u.tokens.join("_"),
                        if u.prefix { "*" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join("|")
        };
        let mut out: Vec<String> = p.must.iter().map(|a| format!("+({})", alt(a))).collect();
        out.extend(p.must_not.iter().map(|a| format!("-({})", alt(a))));
        out.join(" ")
    }

    #[test]
    fn grammar_table() {
        let cases: &[(&str, &str)] = &[
            ("roadmap", "+(roadmap)"),
            ("Roadmap 2027", "+(roadmap) +(2027)"),
            ("\"quarterly planning\"", "+(quarterly_planning)"),
            ("road*", "+(road*)"),
            ("\"big bad wo\"*", "+(big_bad_wo*)"),
            ("title:roadmap body", "+(title:roadmap) +(body)"),
            ("a OR b c", "+(a|b) +(c)"),
            ("a OR b OR c", "+(a|b|c)"),
            ("idea -draft", "+(idea) -(draft)"),
            ("idea NOT draft", "+(idea) -(draft)"),
            ("日本語", "+(日本_本語)"),
            ("東京", "+(東京)"),
            ("猫", "+(猫)"),
            ("猫 cat", "+(猫) +(cat)"),
            ("snake_case", "+(snake_case)"),
            ("C++ tips", "+(c) +(tips)"),
            ("tags:project/active", "+(tags:project_active)"),
            ("https://example.com", "+(https_example_com)"),
            // Regression: the keyword check sliced inside `ð` (schemathesis found it).
            ("öðÓ", "+(odo)"),
        ];
        for (input, want) in cases {
            let got = parse(input).unwrap_or_else(|e| panic!("{input:?}: {e:?}"));
            assert_eq!(show(&got), *want, "{input:?}");
        }
    }

    #[test]
    fn errors_have_positions() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "empty"),
            ("   ", 0, "empty"),
            ("-draft", 0, "only excludes"),
            ("idea \"open", 5, "not closed"),
            ("idea -", 5, "nothing follows"),
            ("a OR", 4, "OR needs"),
            ("a OR -b", 5, "OR cannot join"),
        ];
        for (input, pos, msg) in cases {
            let e = parse(input).expect_err(input);
            assert_eq!(e.position, *pos, "{input:?}: {e:?}");
            assert!(e.message.contains(msg), "{input:?}: {e:?}");
        }
        let long = "a ".repeat(MAX_QUERY_CHARS);
        assert!(parse(&long).unwrap_err().message.contains("longer"));
    }
}
