//! The tokenizer of every text field: words for scripts that separate words with spaces,
//! overlapping character unigrams and bigrams for scripts that do not (Han, Kana, Hangul,
//! Thai, Lao, Khmer, Myanmar), so that a word inside a Japanese or Chinese sentence is
//! found without a dictionary. A query is tokenized the same way, and a run of several
//! such characters becomes a phrase of bigrams (`日本語` → `日本` `本語` at consecutive
//! positions), which matches exactly that run.
//!
//! After splitting: tokens of [`MAX_TOKEN_BYTES`] or more are dropped, the rest are
//! lower-cased and folded to ASCII where a folding exists (`Café` → `cafe`).
//!
//! Word forms: the fields of words (title, aliases, headings, lead, body) hold, beside each
//! token, its English stem marked with [`FORM_MARK`] (`~sync` for `synced`) at the same
//! position, where stemming is safe and the stem differs from the token ([`forms_analyzer`]);
//! one field, one pass of the analyzer, one set of postings, instead of a stemmed twin of
//! each field. Safe means: the note does not declare another language (frontmatter `lang`
//! or `language` absent or `en…`, see [`stems_english`]; such a note's fields hold its
//! tokens only, [`plain`]), and the token is a word of ASCII letters of 3 or more (after
//! folding), so numbers, identifiers with digits, CJK bigrams and words of other scripts
//! (Cyrillic, Greek, Arabic, ...) are never stemmed. A query is stemmed the same way and
//! searches the stem in both forms (`sync` and `~sync`), so `cursors` meets `cursor` and
//! `synced` meets `sync`, while an exact form also matches its own term and ranks first.
//! A marked form never collides with a token (tokens are letters and digits only) and no
//! prefix of letters reaches it.

use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RawTokenizer, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// The name the analyzer is registered under in the index.
pub const NAME: &str = "notevault";
/// Tokens of this many bytes or more (base64 blobs, hashes in URLs) are not indexed.
pub const MAX_TOKEN_BYTES: usize = 40;

/// The analyzer: split, drop long tokens, lower-case, fold to ASCII.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::from(NoteTokenizer::default())
}

/// Register both analyzers with `index`.
pub fn register(index: &tantivy::Index) {
    index.tokenizers().register(NAME, analyzer());
    index.tokenizers().register(FORMS_NAME, forms_analyzer());
}

/// The name the analyzer of the fields of words is registered under.
pub const FORMS_NAME: &str = "notevault_forms";

/// Marks an indexed stem (`~sync`): a token is letters and digits only, so a marked form
/// never equals a token, and a prefix of letters never reaches one.
pub const FORM_MARK: char = '~';

/// The term a stem is indexed as beside the token it comes from.
pub fn form_term(stem: &str) -> String {
    let mut out = String::with_capacity(stem.len() + 1);
    out.push(FORM_MARK);
    out.push_str(stem);
    out
}

/// The analyzer of the fields of words: [`analyzer`], then each token's marked stem at
/// the token's position where it differs from the token ([`StemForms`]).
pub fn forms_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(NoteTokenizer::default())
        .filter(StemForms)
        .build()
}

thread_local! {
    static STEMMER: frostem::Stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
    /// Stems already computed on this thread (`None`: the word is its own stem): a
    /// vault's vocabulary is far smaller than its words, and Snowball was most of the
    /// cost of indexing the forms.
    static STEMS: std::cell::RefCell<StemCache> = Default::default();
}

type StemCache =
    std::collections::HashMap<String, Option<String>, std::hash::BuildHasherDefault<FxHasher>>;

/// The multiply-rotate hash of rustc (FxHash): the stem cache is looked up once per
/// token of every note, and short words need no DoS-resistant hash (the vault is the
/// user's own, and a collision costs a comparison, not correctness).
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(26) ^ u64::from_le_bytes(b)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(26) ^ u64::from(i)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Entries [`STEMS`] holds before it starts again.
const STEM_CACHE: usize = 50_000;

/// Whether a token is stemmed where its note is: ASCII letters only, 3 or more.
pub fn stemmable(token: &str) -> bool {
    token.len() >= 3 && token.bytes().all(|b| b.is_ascii_lowercase())
}

/// Look `token` up in the cache, stemming it on a miss; `f` sees the stem (`None`: the
/// token itself).
fn with_stem<R>(token: &str, f: impl FnOnce(Option<&str>) -> R) -> R {
    STEMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        // One lookup for a word seen before (most of them).
        if let Some(stem) = cache.get(token) {
            return f(stem.as_deref());
        }
        let stem = STEMMER.with(|s| match s.stem(token) {
            std::borrow::Cow::Borrowed(b) if b == token => None,
            other => Some(other.into_owned()),
        });
        let out = f(stem.as_deref());
        if cache.len() >= STEM_CACHE {
            cache.clear();
        }
        cache.insert(token.to_string(), stem);
        out
    })
}

/// The English stem of a lower-cased, folded token where stemming is safe (ASCII letters
/// only, 3 or more); the token itself otherwise.
pub fn stem(token: &str) -> std::borrow::Cow<'_, str> {
    if !stemmable(token) {
        return std::borrow::Cow::Borrowed(token);
    }
    with_stem(token, |s| match s {
        Some(s) => std::borrow::Cow::Owned(s.to_string()),
        None => std::borrow::Cow::Borrowed(token),
    })
}

/// Whether `token`'s English stem is `want` ([`stem`] without a copy of the stem).
pub fn stem_is(token: &str, want: &str) -> bool {
    if !stemmable(token) {
        return token == want;
    }
    with_stem(token, |s| s.unwrap_or(token) == want)
}

/// Whether a note's words are stemmed as English: its frontmatter declares no other
/// language (`lang` or `language` absent, or starting with `en`).
pub fn stems_english(frontmatter: Option<&serde_norway::Mapping>) -> bool {
    let Some(map) = frontmatter else {
        return true;
    };
    for key in ["lang", "language"] {
        if let Some(v) = map.get(key) {
            return crate::vault::markdown::scalar_string(v).is_none_or(|l| {
                let l = l.trim().to_ascii_lowercase();
                l.is_empty()
                    || l == "en"
                    || l.starts_with("en-")
                    || l.starts_with("en_")
                    || l == "english"
            });
        }
    }
    true
}

/// The tokens of `text` as the fields of words hold them for a note that is not stemmed
/// (its tokens only, no forms).
pub fn plain(text: &str) -> tantivy::tokenizer::PreTokenizedString {
    ANALYZER.with(|a| {
        let mut analyzer = a.borrow_mut();
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while stream.advance() {
            tokens.push(stream.token().clone());
        }
        tantivy::tokenizer::PreTokenizedString {
            text: String::new(),
            tokens,
        }
    })
}

/// The tokens of what links say of a note (`text`) that its title does not say already,
/// as the fields of words hold them (with their forms where `english`): an index page
/// listing every note by its title adds nothing to the title's own weight.
pub fn said_of(text: &str, title: &str, english: bool) -> tantivy::tokenizer::PreTokenizedString {
    let title: std::collections::HashSet<String> =
        tokens(title).into_iter().map(|(t, _)| t).collect();
    let mut out = Vec::new();
    let mut analyzer = if english {
        forms_analyzer()
    } else {
        analyzer()
    };
    let mut stream = analyzer.token_stream(text);
    // A form is dropped with its word.
    let mut dropped_at = None;
    while stream.advance() {
        let token = stream.token();
        let form = token.text.starts_with(FORM_MARK);
        if title.contains(&token.text) || (form && dropped_at == Some(token.position)) {
            dropped_at = Some(token.position);
            continue;
        }
        out.push(token.clone());
    }
    tantivy::tokenizer::PreTokenizedString {
        text: String::new(),
        tokens: out,
    }
}

/// The last filter of [`forms_analyzer`]: after a stemmable token whose stem differs, the
/// marked stem at the same position and offsets.
#[derive(Clone, Copy, Default)]
pub struct StemForms;

impl tantivy::tokenizer::TokenFilter for StemForms {
    type Tokenizer<T: Tokenizer> = StemFormsTokenizer<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> StemFormsTokenizer<T> {
        StemFormsTokenizer {
            inner: tokenizer,
            form: Token::default(),
        }
    }
}

#[derive(Clone)]
pub struct StemFormsTokenizer<T> {
    inner: T,
    /// The marked stem, reused from token to token.
    form: Token,
}

impl<T: Tokenizer> Tokenizer for StemFormsTokenizer<T> {
    type TokenStream<'a> = StemFormsStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        StemFormsStream {
            inner: self.inner.token_stream(text),
            form: &mut self.form,
            state: FormState::None,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum FormState {
    /// The current token is the inner stream's; it has no form.
    None,
    /// The current token is the inner stream's; its form comes next.
    Pending,
    /// The current token is the form.
    Form,
}

pub struct StemFormsStream<'a, S> {
    inner: S,
    form: &'a mut Token,
    state: FormState,
}

impl<S: TokenStream> TokenStream for StemFormsStream<'_, S> {
    fn advance(&mut self) -> bool {
        if self.state == FormState::Pending {
            self.state = FormState::Form;
            return true;
        }
        if !self.inner.advance() {
            self.state = FormState::None;
            return false;
        }
        self.state = FormState::None;
        let token = self.inner.token();
        if stemmable(&token.text) {
            let form = &mut *self.form;
            let found = with_stem(&token.text, |s| match s {
                Some(s) => {
                    form.text.clear();
                    form.text.push(FORM_MARK);
                    form.text.push_str(s);
                    true
                }
                None => false,
            });
            if found {
                form.offset_from = token.offset_from;
                form.offset_to = token.offset_to;
                form.position = token.position;
                form.position_length = token.position_length;
                self.state = FormState::Pending;
            }
        }
        true
    }

    fn token(&self) -> &Token {
        match self.state {
            FormState::Form => self.form,
            _ => self.inner.token(),
        }
    }

    fn token_mut(&mut self) -> &mut Token {
        match self.state {
            FormState::Form => self.form,
            _ => self.inner.token_mut(),
        }
    }
}

/// A character of a script written without spaces between words.
#[inline]
pub fn is_unspaced(c: char) -> bool {
    // Most text is below Thai: one comparison.
    (c as u32) >= 0x0E00 && is_unspaced_slow(c)
}

fn is_unspaced_slow(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF      // Thai, Lao
        | 0x1000..=0x109F    // Myanmar
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x1780..=0x17FF    // Khmer
        | 0x2E80..=0x2FDF    // CJK radicals
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3100..=0x312F    // Bopomofo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0x31A0..=0x31FF    // Bopomofo ext., Katakana phonetic ext.
        | 0x3400..=0x4DBF    // CJK ext. A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xA960..=0xA97F    // Hangul Jamo ext. A
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF66..=0xFF9F    // half-width Katakana
        | 0x20000..=0x3134F  // CJK ext. B..G
    )
}

/// The length of the letter key of a word that the `[` at byte `at` of `text` opens, if
/// it opens one: one to three ASCII letters in brackets followed by a letter, as command
/// summaries mark the letter an option is named after (`E[x]tract`, `[v]erbosely`,
/// `g[z]ipped`). The tokenizer leaves its brackets out of the word (`extract`), and search
/// provenance finds words as if they were not there ([`without_letter_keys`]);
/// `[x] done`, `[[link]]` and `a[i]` keep theirs.
pub fn letter_key_len(text: &[u8], at: usize) -> Option<usize> {
    let rest = text.get(at + 1..)?;
    let letters = rest
        .iter()
        .take(4)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let after = at + letters + 2;
    let next = text.get(after..after + 4.min(text.len() - after.min(text.len())))?;
    let next = (1..=next.len())
        .find_map(|n| std::str::from_utf8(&next[..n]).ok())
        .and_then(|s| s.chars().next());
    ((1..=3).contains(&letters)
        && rest.get(letters) == Some(&b']')
        && next.is_some_and(|c| c.is_alphabetic() && !is_unspaced(c)))
    .then_some(letters + 2)
}

/// `text` with the brackets of its letter keys left out ([`letter_key_len`]), and where
/// they were: the index in `text` of each bracket left out, in order; `None` when it has
/// no letter key (most text: a scan for `[`).
pub fn without_letter_keys(text: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
    let mut keys = memchr::memchr_iter(b'[', text)
        .filter_map(|at| letter_key_len(text, at).map(|len| (at, len)))
        .peekable();
    keys.peek()?;
    let mut out = Vec::with_capacity(text.len());
    let mut left_out = Vec::new();
    let mut from = 0;
    for (at, len) in keys {
        out.extend_from_slice(&text[from..at]);
        // The letters, without their brackets.
        out.extend_from_slice(&text[at + 1..at + len - 1]);
        left_out.extend([at, at + len - 1]);
        from = at + len;
    }
    out.extend_from_slice(&text[from..]);
    Some((out, left_out))
}

/// Splits a text into tokens ([module doc](self)) and normalizes each word as tantivy's
/// `RemoveLongFilter` ([`MAX_TOKEN_BYTES`]), `LowerCaser` and `AsciiFoldingFilter` would,
/// in one pass: a word of ASCII characters (most) is lower-cased as it is copied; a word
/// with another character goes through the last two of those filters; a unigram or bigram of an
/// unspaced script is its own lower case and folding (a test checks every such
/// character), so it is taken as it is.
#[derive(Clone)]
pub struct NoteTokenizer {
    token: Token,
    run: Vec<(usize, char)>,
    /// tantivy's lower-casing and folding of one word with a character outside ASCII.
    fold: TextAnalyzer,
}

impl Default for NoteTokenizer {
    fn default() -> Self {
        NoteTokenizer {
            token: Token::default(),
            run: Vec::new(),
            fold: fold_analyzer(),
        }
    }
}

/// tantivy's lower-casing and folding of a whole text as one token.
fn fold_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(RawTokenizer::default())
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

impl Tokenizer for NoteTokenizer {
    type TokenStream<'a> = NoteTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> NoteTokenStream<'a> {
        self.token.reset();
        self.run.clear();
        NoteTokenStream {
            text,
            at: 0,
            token: &mut self.token,
            run: &mut self.run,
            run_at: 0,
            bigram_next: false,
            next_position: 0,
            fold: &mut self.fold,
        }
    }
}

pub struct NoteTokenStream<'a> {
    text: &'a str,
    /// The byte where the next token is looked for (a character boundary).
    at: usize,
    token: &'a mut Token,
    /// The current run of unspaced characters, emitted as unigrams and bigrams.
    run: &'a mut Vec<(usize, char)>,
    run_at: usize,
    bigram_next: bool,
    next_position: usize,
    fold: &'a mut TextAnalyzer,
}

impl NoteTokenStream<'_> {
    /// The character at byte `at` (a character boundary), if the text goes on.
    #[inline]
    fn char_at(&self, at: usize) -> Option<char> {
        let b = *self.text.as_bytes().get(at)?;
        if b < 0x80 {
            Some(char::from(b))
        } else {
            self.text[at..].chars().next()
        }
    }

    /// A unigram or bigram of a run, as it is.
    fn emit_run(&mut self, from: usize, to: usize, position: usize) -> bool {
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = position;
        self.token.position_length = 1;
        true
    }

    /// The word at `from..to` (its letter keys' brackets left out when `keys`), lower-cased
    /// and folded; false for a word of [`MAX_TOKEN_BYTES`] or more, which is dropped (its
    /// position stays taken; the token's text holds it until the next token is made).
    fn emit_word(&mut self, from: usize, to: usize, keys: bool, ascii: bool) -> bool {
        let position = self.next_position;
        self.next_position += 1;
        let word = &self.text[from..to];
        let text = &mut self.token.text;
        text.clear();
        if keys {
            text.extend(word.chars().filter(|&c| c != '[' && c != ']'));
        } else {
            text.push_str(word);
        }
        if text.len() >= MAX_TOKEN_BYTES {
            return false;
        }
        if ascii {
            text.make_ascii_lowercase();
        } else {
            // `RawTokenizer` gives the whole word as its one token.
            let word = std::mem::take(text);
            let folded = {
                let mut stream = self.fold.token_stream(&word);
                stream
                    .advance()
                    .then(|| std::mem::take(&mut stream.token_mut().text))
            };
            *text = folded.unwrap_or(word);
        }
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = position;
        self.token.position_length = 1;
        true
    }

    /// The next unigram or bigram of the current run, if any is left.
    fn advance_run(&mut self) -> bool {
        while self.run_at < self.run.len() {
            let (start, c) = self.run[self.run_at];
            let position = self.next_position;
            if !self.bigram_next {
                self.bigram_next = true;
                return self.emit_run(start, start + c.len_utf8(), position);
            }
            self.bigram_next = false;
            self.run_at += 1;
            self.next_position += 1;
            if let Some(&(next, d)) = self.run.get(self.run_at) {
                return self.emit_run(start, next + d.len_utf8(), position);
            }
        }
        false
    }
}

impl TokenStream for NoteTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if self.advance_run() {
            return true;
        }
        self.run.clear();
        self.run_at = 0;
        let bytes = self.text.as_bytes();
        while let Some(c) = self.char_at(self.at) {
            let start = self.at;
            self.at += c.len_utf8();
            if is_unspaced(c) {
                self.run.push((start, c));
                while let Some(d) = self.char_at(self.at).filter(|&d| is_unspaced(d)) {
                    self.run.push((self.at, d));
                    self.at += d.len_utf8();
                }
                return self.advance_run();
            }
            let mut keys = false;
            if c == '[' {
                match letter_key_len(bytes, start) {
                    Some(len) => {
                        keys = true;
                        self.at = start + len;
                    }
                    None => continue,
                }
            } else if !c.is_alphanumeric() {
                continue;
            }
            // A word: letters and digits (ASCII ones a byte at a time), and letter keys.
            let mut ascii = c.is_ascii();
            let mut end = self.at;
            while let Some(&b) = bytes.get(self.at) {
                if b.is_ascii_alphanumeric() {
                    self.at += 1;
                    end = self.at;
                } else if b == b'[' {
                    match letter_key_len(bytes, self.at) {
                        Some(len) => {
                            keys = true;
                            self.at += len;
                        }
                        None => break,
                    }
                } else if b < 0x80 {
                    break;
                } else {
                    match self.char_at(self.at) {
                        Some(d) if d.is_alphanumeric() && !is_unspaced(d) => {
                            ascii = false;
                            self.at += d.len_utf8();
                            end = self.at;
                        }
                        _ => break,
                    }
                }
            }
            if self.emit_word(start, end, keys, ascii) {
                return true;
            }
        }
        false
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

thread_local! {
    static ANALYZER: std::cell::RefCell<TextAnalyzer> = std::cell::RefCell::new(analyzer());
}

/// The tokens of `text` as (text, position): how a query and a title are split.
pub fn tokens(text: &str) -> Vec<(String, usize)> {
    ANALYZER.with(|a| {
        let mut analyzer = a.borrow_mut();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            let t = stream.token();
            out.push((t.text.clone(), t.position));
        }
        out
    })
}

pub mod names;

#[cfg(test)]
mod tests;
