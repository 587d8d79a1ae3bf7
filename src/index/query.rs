//! The search query language, parsed into a tantivy query over the boosted fields.
//!
//! ```text
//! query   = clause { clause }
//! clause  = [ "+" | "-" | "NOT" ] alt         "+" requires, "-" or NOT excludes
//! alt     = unit { "OR" unit }                one of the units
//! unit    = [ field ":" ] ( word [ "*" ] | '"' phrase '"' [ "*" ] )
//! field   = title | aliases | headings | lead | tags | path | properties | body | links
//! ```
//!
//! How a query is read depends on its [`Match`] mode. With `any` (the default: questions
//! and keyword lists alike), plain words are ranked, not all required: a note matches
//! when it has at least one of them, and ranks higher the more distinct words it has
//! (each word's BM25 in its best field, summed over the words, times the square of the
//! number of words matched: a coordination factor; words in most notes of a large vault
//! are left out when rarer ones are asked, see `SearchIndex::prepare`). English stop
//! words (`how`, `do`, `I`, `the`, ...: [`STOP_WORDS`]) are left out, unless the query
//! has nothing else. Explicit syntax keeps its meaning: a
//! `"phrase"`, a `field:word`, a `prefix*` and a `+word` must match; `-word` must not;
//! `a OR b` is one clause that either word satisfies (required with `+`). With `all`,
//! every clause must match, stop words included (the behaviour before questions).
//!
//! A word is tokenized like the indexed text (so `snake_case` or `日本語` become a phrase
//! of their tokens); a trailing `*` makes the last token a prefix; a phrase matches its
//! tokens in order. Without a field, a unit is searched in every field, the title counting
//! most (BM25 per field, boosted); a one-token word is also searched by its English stem
//! in the fields of words (the stem as a token and as the marked form the index holds
//! beside each word, see `tokenizer.rs`; weighted below the exact forms, and an exact
//! match scores both, so it ranks first).
//! Every error carries the byte position of its cause; what was left out and why is in
//! [`Reading`].

use super::tokenizer::stem;

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Ranked (optional) clauses used from one query; further words are listed as ignored.
pub const MAX_RANKED_CLAUSES: usize = 24;

/// The searchable fields and their boosts; the first name is the one a query uses.
pub const FIELDS: &[(&str, f32)] = &[
    ("title", 2.0),
    ("aliases", 2.0),
    ("headings", 1.0),
    ("lead", 1.5),
    ("tags", 2.0),
    ("path", 1.0),
    ("properties", 1.0),
    ("body", 1.0),
    // What links to the note say of it: between title and body.
    ("links", 1.5),
];

/// The fields of words, searched by a word's stem too: (name, boost of the stem). An
/// exact match scores its exact form and its stem, a match by word form only the stem,
/// so exact forms rank first.
pub const STEM_FIELDS: &[(&str, f32)] = &[
    ("title", 1.0),
    ("aliases", 1.0),
    ("headings", 0.5),
    ("lead", 0.75),
    ("body", 0.5),
    ("links", 0.75),
];

/// With several words, each scores its best field plus this share of its other fields.
pub const TIE_BREAKER: f32 = 0.1;
/// A name's whole form (`.gitignore`) found whole, against each field's split tokens ...
pub const NAME_BOOST: f32 = 3.0;
/// ... which weigh this share of a word's when some note holds the name whole.
pub const SPLIT_SHARE: f32 = 0.3;
/// Two ranked words written side by side and found side by side (title or body).
pub const PAIR_BOOST: f32 = 4.0;

/// English words that carry little meaning in a question. They are neither required nor
/// scored in `any` mode (kept when a query has nothing else). Words that are also
/// commands or options (`up`, `all`, `no`, `not`, `out`, `make`, `get`) are not here.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "been", "being", "but", "by", "can",
    "could", "d", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "having",
    "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "itself", "just", "ll", "m", "me", "my", "myself", "of", "on", "onto", "or", "our", "ours",
    "re", "s", "she", "should", "so", "t", "than", "that", "the", "their", "theirs", "them",
    "then", "there", "these", "they", "this", "those", "to", "ve", "very", "was", "we", "were",
    "what", "whats", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your", "yours",
];

/// Whether a token is a stop word.
pub fn is_stop_word(token: &str) -> bool {
    STOP_WORDS.binary_search(&token).is_ok()
}

/// How plain words combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Match {
    /// Ranked: at least one, more is better; stop words left out.
    #[default]
    Any,
    /// Every word must match.
    All,
}

impl Match {
    pub fn name(self) -> &'static str {
        match self {
            Match::Any => "any",
            Match::All => "all",
        }
    }
}

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
    /// Written in quotes.
    pub quoted: bool,
    /// A plain word that is a name (`.gitignore`, `v1.4.2`): its whole form, searched in
    /// the `names` field beside its tokens (see `tokenizer::names`).
    pub whole: Option<String>,
}

impl Unit {
    /// The unit as a query would write it, from its tokens (`title:"pull request"`, `kube*`).
    pub fn display(&self) -> String {
        let field = self
            .field
            .as_deref()
            .map(|f| format!("{f}:"))
            .unwrap_or_default();
        let text = self.tokens.join(" ");
        let star = if self.prefix { "*" } else { "" };
        if self.tokens.len() > 1 || self.quoted {
            format!("{field}\"{text}\"{star}")
        } else {
            format!("{field}{text}{star}")
        }
    }

    /// A plain word: no field, no quotes, no prefix.
    fn is_plain(&self) -> bool {
        self.field.is_none() && !self.quoted && !self.prefix
    }

    /// Every token a stop word (`the`, `it's`).
    fn is_stop(&self) -> bool {
        self.tokens.iter().all(|t| is_stop_word(t))
    }

    /// The English stem of a one-token word, when it differs from the token.
    pub fn stem(&self) -> Option<String> {
        match self.tokens.as_slice() {
            [t] if !self.prefix => match stem(t) {
                std::borrow::Cow::Owned(s) => Some(s),
                std::borrow::Cow::Borrowed(_) => None,
            },
            _ => None,
        }
    }
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

/// Something the query held that was not searched, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignored {
    pub text: String,
    pub reason: String,
}

/// How a query was read: what [`Parsed`] searches, what it left out, and remarks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    pub mode: Match,
    pub ignored: Vec<Ignored>,
    /// Plain-language remarks (only stop words searched, unknown field names).
    pub remarks: Vec<String>,
}

/// A parsed query: clauses that must match, clauses ranked (at least one must match when
/// nothing is required), clauses that must not match; each a choice of units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub required: Vec<Vec<Unit>>,
    pub ranked: Vec<Vec<Unit>>,
    pub excluded: Vec<Vec<Unit>>,
    /// Ranked words written next to each other (`disk space`): a note with them side by
    /// side scores higher.
    pub pairs: Vec<(String, String)>,
    /// Ranked words left out because they are in a large share of the notes while the
    /// query has rarer ones (see `SearchIndex::prepare`).
    pub frequent: Vec<Vec<Unit>>,
    pub reading: Reading,
}

impl Parsed {
    fn positive(&self) -> impl Iterator<Item = &Unit> {
        self.required.iter().chain(&self.ranked).flatten()
    }

    /// The positive units that may be found in the field `name`.
    pub fn units_in<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Unit> + 'a {
        self.positive()
            .filter(move |u| u.field.as_deref().is_none_or(|f| f == name))
    }

    /// Tokens to mark in results: every positive unit's tokens, with their prefix flag.
    pub fn highlight_terms(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        for unit in self.positive() {
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

    /// (word, stem) of every positive one-token word searched by its stem too.
    pub fn stems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for unit in self.positive() {
            if let Some(s) = unit.stem() {
                let pair = (unit.tokens[0].clone(), s);
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
        }
        out
    }

    /// (word, stem) of every positive one-token word of plain letters, the stem equal to
    /// the word or not: what provenance looks for by word form.
    pub fn stem_terms(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for unit in self.positive() {
            if let ([t], false) = (unit.tokens.as_slice(), unit.prefix) {
                if t.len() >= 3 && t.bytes().all(|b| b.is_ascii_lowercase()) {
                    let pair = (t.clone(), stem(t).into_owned());
                    if !out.contains(&pair) {
                        out.push(pair);
                    }
                }
            }
        }
        out
    }

    /// Cheap to run: a few units and no short prefix (whose expansion can reach thousands
    /// of terms). Such a query ranks the 44k-note corpus in about a tenth of a millisecond.
    pub fn is_light(&self) -> bool {
        let units = self
            .required
            .iter()
            .chain(&self.ranked)
            .chain(&self.excluded)
            .flatten();
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

/// How a clause was written.
#[derive(Clone, Copy, PartialEq)]
enum Sign {
    Plain,
    Plus,
    Minus,
}

/// Parse `input` read in `mode`. An empty query, one of only exclusions, or one with no
/// word to search for is an error.
pub fn parse(input: &str, mode: Match) -> Result<Parsed, QueryError> {
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
    let mut reading = Reading {
        mode,
        ..Reading::default()
    };
    // (sign, units) in the order written; roles are decided once everything is read.
    let mut clauses: Vec<(Sign, Vec<Unit>)> = Vec::new();
    let mut lexer = Lexer {
        input,
        pos: 0,
        reading: &mut reading,
    };
    let mut pending_or = false;
    loop {
        lexer.skip_space();
        if lexer.pos >= input.len() {
            break;
        }
        let start = lexer.pos;
        // A lone `-` or `+` (followed by a space or the end) is punctuation, not syntax.
        if let Some(lone) = lexer.lone_sign() {
            lexer.reading.ignored.push(Ignored {
                text: lone.to_string(),
                reason: format!(
                    "a lone `{lone}` is not an operator; write `{lone}word` to {} a word",
                    if lone == '-' { "exclude" } else { "require" }
                ),
            });
            continue;
        }
        let sign = if lexer.eat("-") || lexer.eat_keyword("NOT") {
            lexer.skip_space();
            Sign::Minus
        } else if lexer.eat("+") {
            Sign::Plus
        } else {
            Sign::Plain
        };
        if lexer.pos >= input.len() {
            return Err(QueryError {
                position: start,
                message: "nothing follows the exclusion".into(),
            });
        }
        let unit = lexer.unit()?;
        lexer.skip_space();
        let or_here = lexer.eat_keyword("OR");
        if (pending_or || or_here) && sign == Sign::Minus {
            return Err(QueryError {
                position: start,
                message: "OR cannot join an exclusion; write the exclusion on its own".into(),
            });
        }
        match unit {
            Some(unit) if pending_or => match clauses.last_mut() {
                Some((_, alt)) => alt.push(unit),
                None => clauses.push((sign, vec![unit])),
            },
            Some(unit) => clauses.push((sign, vec![unit])),
            None => {
                // Only punctuation: nothing to search for.
                let text = input[start..lexer.pos].trim_end();
                let text = text.strip_suffix("OR").unwrap_or(text).trim_end();
                lexer.reading.ignored.push(Ignored {
                    text: text.to_string(),
                    reason: "no letters or digits".into(),
                });
            }
        }
        if or_here {
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
    let mut parsed = Parsed::default();
    if mode == Match::Any {
        let word = |(sign, alt): &(Sign, Vec<Unit>)| match (sign, alt.as_slice()) {
            (Sign::Plain, [u]) if u.is_plain() && u.tokens.len() == 1 && !u.is_stop() => {
                Some(u.tokens[0].clone())
            }
            _ => None,
        };
        for w in clauses.windows(2) {
            if let (Some(a), Some(b)) = (word(&w[0]), word(&w[1])) {
                if a != b && !parsed.pairs.contains(&(a.clone(), b.clone())) {
                    parsed.pairs.push((a, b));
                }
            }
        }
    }
    let mut plain: Vec<Vec<Unit>> = Vec::new();
    for (sign, alt) in clauses {
        match (sign, mode) {
            (Sign::Minus, _) => parsed.excluded.push(alt),
            (Sign::Plus, _) | (Sign::Plain, Match::All) => parsed.required.push(alt),
            (Sign::Plain, Match::Any) => {
                if alt.len() == 1 && !alt[0].is_plain() {
                    // A phrase, a field or a prefix: asked for explicitly.
                    parsed.required.push(alt);
                } else if !plain.contains(&alt) {
                    plain.push(alt);
                }
            }
        }
    }
    // Stop words: left out of a question, unless nothing else is asked.
    let is_stop = |alt: &Vec<Unit>| alt.len() == 1 && alt[0].is_plain() && alt[0].is_stop();
    let has_other = !parsed.required.is_empty() || plain.iter().any(|alt| !is_stop(alt));
    for alt in plain {
        if has_other && is_stop(&alt) {
            let text = alt[0].display();
            if !reading.ignored.iter().any(|i| i.text == text) {
                reading.ignored.push(Ignored {
                    text,
                    reason: "stop word".into(),
                });
            }
        } else if parsed.ranked.len() == MAX_RANKED_CLAUSES {
            reading.ignored.push(Ignored {
                text: alt
                    .iter()
                    .map(Unit::display)
                    .collect::<Vec<_>>()
                    .join(" OR "),
                reason: format!("beyond the first {MAX_RANKED_CLAUSES} words"),
            });
        } else {
            parsed.ranked.push(alt);
        }
    }
    if !has_other && !parsed.ranked.is_empty() {
        reading
            .remarks
            .push("the query has only stop words; they were searched as words".to_string());
    }
    parsed.reading = reading;
    if parsed.required.is_empty() && parsed.ranked.is_empty() {
        if parsed.excluded.is_empty() {
            return Err(QueryError {
                position: 0,
                message: "the query has no letters or digits to search for".into(),
            });
        }
        return Err(QueryError {
            position: 0,
            message: "the query only excludes; add a word to search for".into(),
        });
    }
    Ok(parsed)
}

struct Lexer<'a, 'r> {
    input: &'a str,
    pos: usize,
    reading: &'r mut Reading,
}

impl Lexer<'_, '_> {
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

    /// `-` or `+` followed by a space or the end: eaten and returned.
    fn lone_sign(&mut self) -> Option<char> {
        let mut chars = self.rest().chars();
        let c = chars.next().filter(|c| matches!(c, '-' | '+'))?;
        if chars.next().is_none_or(char::is_whitespace) {
            self.pos += 1;
            Some(c)
        } else {
            None
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
            let after = &self.input[word_end + 1..];
            if FIELDS.iter().any(|(f, _)| *f == name) {
                field = Some(name.to_string());
                self.pos = word_end + 1;
            } else if name
                .chars()
                .all(|c| c.is_ascii_alphabetic() || c == '_' || c == '.')
                && !after.is_empty()
                && !after.starts_with(char::is_whitespace)
                && !after.starts_with("//")
            {
                // Not a field: searched as text, and said so (`https://...`, `12:30` are
                // plainly text and pass without a remark).
                let fields: Vec<&str> = FIELDS.iter().map(|(f, _)| *f).collect();
                let remark = format!(
                    "`{name}:` is not a field, so it was searched as words; the fields are {}",
                    fields.join(", ")
                );
                if !self.reading.remarks.contains(&remark) {
                    self.reading.remarks.push(remark);
                }
            }
        }
        let text;
        let quoted = self.eat("\"");
        if quoted {
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
        let whole = (field.is_none() && !quoted && !prefix)
            .then(|| super::tokenizer::names::whole(&text))
            .flatten();
        Ok(Some(Unit {
            field,
            tokens,
            positions,
            prefix,
            quoted,
            whole,
        }))
    }
}

mod build;
pub use build::{to_tantivy, unit_in, QueryField};

#[cfg(test)]
mod tests;
