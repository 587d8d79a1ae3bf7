//! What the index holds: the schema and its fields, the schema version kept beside the
//! index on disk (an index of another version is rebuilt), which notes go in
//! ([`searchable`]), and the document of a note, with its stamp (content hash and path),
//! which tells at start whether the indexed note is current.

use std::path::Path;
use std::sync::Arc;

use tantivy::schema::{
    DateOptions, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED,
};
use tantivy::{Index, TantivyDocument};

use super::{provenance, tokenizer};
use crate::vault::note::{Note, Visibility};

/// Bump when the schema or the tokenizer changes: an index of another version is rebuilt.
pub const SCHEMA_VERSION: u32 = 9;
pub(super) const VERSION_FILE: &str = "notevault-schema-version";

/// The token of the `copies` field every copy holds (beside its language's code).
pub(super) const MARKED: &str = "marked";

/// The token every document's `links` field holds (see `schema`): never a query's (a
/// query's tokens are letters and digits, its forms a stem after the mark).
const LINKS_FLOOR: &str = "~";

/// The fields of a document.
#[derive(Clone, Copy)]
pub(super) struct Fields {
    /// The note's key (a hash of its id): deletes by term, maps hits back to the
    /// catalog, and filters evaluated on the catalog.
    pub(super) key: Field,
    /// `content_hash path`: tells at start whether the indexed note is current.
    pub(super) stamp: Field,
    /// The fields of words (title, aliases, headings, lead, body) hold each token and,
    /// where it differs, its marked English stem at the same position (see
    /// `tokenizer.rs`): exact and stemmed matches come from one field.
    pub(super) title: Field,
    /// Frontmatter `aliases`: other names of the note, weighted like the title.
    pub(super) aliases: Field,
    pub(super) headings: Field,
    /// What the note says it is about: its frontmatter `description` (or `summary`), else
    /// its first paragraph (see [`provenance::lead`]); also part of the body.
    pub(super) lead: Field,
    pub(super) tags: Field,
    pub(super) path: Field,
    pub(super) properties: Field,
    pub(super) body: Field,
    /// What the links pointing at the note say of it (`vault::link_text`).
    pub(super) links: Field,
    /// [`MARKED`] and the copy's language code (`de`) when the note's path marks a
    /// language (`index::language`): a vault without such a note skips the reader's
    /// order; the codes tell the vault's largest language (`index::common`).
    pub(super) copies: Field,
    /// Dotted, slashed and versioned words of the title and body, whole
    /// (`tokenizer::names`): searched only by a query word of that shape.
    pub(super) names: Field,
    pub(super) created: Field,
    pub(super) updated: Field,
}

pub(super) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let indexed = |tokenizer: &str, option: IndexRecordOption, norms: bool| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(option)
                .set_fieldnorms(norms),
        )
    };
    let text = |tokenizer: &str| indexed(tokenizer, IndexRecordOption::WithFreqsAndPositions, true);
    let words = text(tokenizer::FORMS_NAME);
    let plain = text(tokenizer::NAME);
    let date = DateOptions::from(INDEXED).set_fast();
    let fields = Fields {
        key: b.add_u64_field("key", INDEXED | FAST),
        stamp: b.add_text_field("stamp", FAST),
        title: b.add_text_field("title", words.clone()),
        aliases: b.add_text_field("aliases", words.clone()),
        headings: b.add_text_field("headings", words.clone()),
        lead: b.add_text_field("lead", words.clone()),
        tags: b.add_text_field("tags", plain.clone()),
        path: b.add_text_field("path", plain.clone()),
        properties: b.add_text_field("properties", plain),
        body: b.add_text_field("body", words.clone()),
        // Pre-tokenized (`tokenizer::said_of`, the forms analyzer's tokens). Scored by
        // presence and count, not length: few notes have link text, so its
        // average length over every note is near nothing, and each note that has any
        // would be scored as a long one. No field norms (each counts as one token), and
        // each document holds one [`LINKS_FLOOR`] token, so the average is one or more.
        links: b.add_text_field(
            "links",
            indexed(
                tokenizer::FORMS_NAME,
                IndexRecordOption::WithFreqsAndPositions,
                false,
            ),
        ),
        copies: b.add_text_field("copies", indexed("raw", IndexRecordOption::Basic, false)),
        names: b.add_text_field("names", indexed("raw", IndexRecordOption::WithFreqs, true)),
        created: b.add_date_field("created_at", date.clone()),
        updated: b.add_date_field("updated_at", date),
    };
    (b.build(), fields)
}

/// A note's stamp: its content hash and path (what says an indexed version is current).
pub fn stamp_of(note: &Note) -> String {
    format!("{} {}", note.content_hash, note.path)
}

/// Whether a note goes into the index (and grep): not private, content kept.
pub fn searchable(note: &Note) -> bool {
    note.visibility != Visibility::Private && note.searched_bytes().is_some()
}

/// A note's document for the index, built by the indexing thread that takes it rather
/// than by the thread that queues it: tantivy queues up to 10,000 documents between the
/// two, and a built one holds a copy of the note's text (its tokens, for a note not in
/// English), while this holds the note. One pointer wide: each writer's queue is an array
/// of 10,000 slots of four documents each, allocated whole when the writer is made (and
/// again at each commit), so a wider document costs memory whether or not it is used.
pub(super) struct NoteDoc(Box<Pending>);

struct Pending {
    fields: Fields,
    note: Arc<Note>,
    links: Arc<dyn LinkText>,
    built: std::sync::OnceLock<TantivyDocument>,
}

impl NoteDoc {
    /// The document of `note`, with what `links` says the links to it say.
    pub(super) fn new(fields: Fields, note: Arc<Note>, links: Arc<dyn LinkText>) -> Self {
        NoteDoc(Box::new(Pending {
            fields,
            note,
            links,
            built: std::sync::OnceLock::new(),
        }))
    }
}

/// Where a note's document gets the text of the links pointing at it: the vault's
/// catalog as it is now, or what the start-up sync gathered of every note at once.
pub trait LinkText: Send + Sync {
    fn of(&self, note: &Note) -> String;
}

/// Link text read already (the start-up sync compares it with the indexed stamp first).
pub(super) struct Said(pub(super) String);

impl LinkText for Said {
    fn of(&self, _: &Note) -> String {
        self.0.clone()
    }
}

/// The link text the start-up sync gathered, by note key.
impl LinkText for std::collections::HashMap<u64, String> {
    fn of(&self, note: &Note) -> String {
        self.get(&note.key()).cloned().unwrap_or_default()
    }
}

/// The stamp of a note's document: [`stamp_of`], and a hash of the text of the links to
/// it when there is any (so a start that finds it changed indexes the note again).
pub fn indexed_stamp(note: &Note, link_text: &str) -> String {
    if link_text.is_empty() {
        return stamp_of(note);
    }
    // Kept in the index across builds: a hash that does not change with the toolchain.
    let h = blake3::hash(link_text.as_bytes());
    format!("{}\n{}", stamp_of(note), &h.to_hex()[..16])
}

impl tantivy::schema::document::Document for NoteDoc {
    type Value<'a> = <TantivyDocument as tantivy::schema::document::Document>::Value<'a>;
    type FieldsValuesIter<'a> =
        <TantivyDocument as tantivy::schema::document::Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        let Pending {
            fields,
            note,
            links,
            built,
        } = &*self.0;
        built
            .get_or_init(|| document(fields, note, &links.of(note)))
            .iter_fields_and_values()
    }
}

pub(super) fn document(f: &Fields, note: &Note, link_text: &str) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    let english = tokenizer::stems_english(note.frontmatter.as_deref());
    // A field of words: its tokens and their stems (the analyzer's), or, in a note of
    // another language, its tokens only.
    let words = |doc: &mut TantivyDocument, field: Field, text: &str| {
        if english {
            doc.add_text(field, text);
        } else {
            doc.add_pre_tokenized_text(field, tokenizer::plain(text));
        }
    };
    doc.add_u64(f.key, note.key());
    doc.add_text(f.stamp, indexed_stamp(note, link_text));
    words(&mut doc, f.title, &note.title);
    doc.add_pre_tokenized_text(
        f.links,
        tantivy::tokenizer::PreTokenizedString {
            text: String::new(),
            tokens: vec![tantivy::tokenizer::Token {
                text: LINKS_FLOOR.to_string(),
                position: 0,
                position_length: 1,
                ..Default::default()
            }],
        },
    );
    if !link_text.is_empty() {
        let said = tokenizer::said_of(link_text, &note.title, english);
        if !said.tokens.is_empty() {
            doc.add_pre_tokenized_text(f.links, said);
        }
    }
    for alias in &note.aliases {
        words(&mut doc, f.aliases, alias);
    }
    doc.add_text(f.path, note.slug());
    if let Some(lang) = super::language::copy_language(note) {
        doc.add_text(f.copies, MARKED);
        doc.add_text(f.copies, lang);
    }
    for tag in &note.tags {
        doc.add_text(f.tags, tag);
    }
    doc.add_date(
        f.created,
        tantivy::DateTime::from_timestamp_millis(note.created_at.timestamp_millis()),
    );
    doc.add_date(
        f.updated,
        tantivy::DateTime::from_timestamp_millis(note.updated_at.timestamp_millis()),
    );
    if let Some(map) = note.frontmatter.as_deref() {
        let mut props = String::new();
        for (k, v) in map {
            let key = crate::vault::markdown::scalar_string(k).unwrap_or_default();
            if matches!(key.as_str(), "title" | "tags" | "tag" | "aliases" | "alias") {
                continue;
            }
            props.push_str(&key);
            props.push(' ');
            flatten_yaml(v, &mut props);
            props.push('\n');
        }
        if !props.is_empty() {
            doc.add_text(f.properties, props);
        }
    }
    if let Some(bytes) = note.searched_bytes() {
        let bytes = bytes.bytes();
        let (text, _) = crate::vault::markdown::decode(&bytes);
        let body_start = crate::vault::markdown::frontmatter_span(&text).map_or(0, |(_, b)| b);
        let body = &text[body_start..];
        let mut headings = provenance::headings(body);
        // The heading the title came from is the title already.
        if headings
            .first()
            .is_some_and(|h| h.eq_ignore_ascii_case(note.title.trim()))
        {
            headings.remove(0);
        }
        if !headings.is_empty() {
            words(&mut doc, f.headings, &headings.join("\n"));
        }
        let described = note.frontmatter.as_ref().and_then(|map| {
            ["description", "summary"].iter().find_map(|k| {
                map.get(*k)
                    .and_then(crate::vault::markdown::scalar_string)
                    .filter(|s| !s.trim().is_empty())
            })
        });
        let lead = described.unwrap_or_else(|| provenance::lead(body).to_string());
        if !lead.is_empty() {
            words(&mut doc, f.lead, &lead);
        }
        words(&mut doc, f.body, body);
        names(&mut doc, f.names, body);
    }
    names(&mut doc, f.names, &note.title);
    doc
}

/// The whole names of `text` into `field`, when it has any.
fn names(doc: &mut TantivyDocument, field: Field, text: &str) {
    let tokens = tokenizer::names::tokens(text);
    if !tokens.is_empty() {
        doc.add_pre_tokenized_text(
            field,
            tantivy::tokenizer::PreTokenizedString {
                text: String::new(),
                tokens,
            },
        );
    }
}

fn flatten_yaml(v: &serde_norway::Value, out: &mut String) {
    match v {
        serde_norway::Value::Sequence(items) => {
            for item in items {
                flatten_yaml(item, out);
                out.push(' ');
            }
        }
        serde_norway::Value::Mapping(map) => {
            for (k, v) in map {
                flatten_yaml(k, out);
                out.push(' ');
                flatten_yaml(v, out);
                out.push(' ');
            }
        }
        serde_norway::Value::Tagged(t) => flatten_yaml(&t.value, out),
        other => {
            if let Some(s) = crate::vault::markdown::scalar_string(other) {
                out.push_str(&s);
            }
        }
    }
}

/// Open the index in `dir`, or create it; an index that does not open, or of another
/// schema version, is removed and created again. The second value says why it was
/// (re)built.
#[allow(
    clippy::disallowed_methods,
    reason = "the search index, derived data in the state directory"
)]
pub(super) fn open_or_rebuild(
    dir: &Path,
    schema: &Schema,
) -> anyhow::Result<(Index, Option<String>)> {
    let version_file = dir.join(VERSION_FILE);
    let why = if !dir.join("meta.json").exists() {
        Some("no index yet".to_string())
    } else {
        match std::fs::read_to_string(&version_file) {
            Ok(v) if v.trim() == SCHEMA_VERSION.to_string() => {
                match Index::open_in_dir(dir) {
                    Ok(index) if index.schema() == *schema => {
                        // Reading the segment list proves the files are there.
                        match index.searchable_segment_metas() {
                            Ok(_) => return Ok((index, None)),
                            Err(e) => Some(format!("the index is corrupt ({e})")),
                        }
                    }
                    Ok(_) => Some("the index has another schema".to_string()),
                    Err(e) => Some(format!("the index is corrupt ({e})")),
                }
            }
            Ok(v) => Some(format!(
                "the index is of schema version {} (this build uses {SCHEMA_VERSION})",
                v.trim()
            )),
            Err(_) => Some("the index has no schema version".to_string()),
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let index = Index::create_in_dir(dir, schema.clone())?;
    std::fs::write(&version_file, SCHEMA_VERSION.to_string())?;
    if let Some(why) = &why {
        tracing::info!(reason = %why, "building the search index");
    }
    Ok((index, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(rel: &str, text: &str) -> Arc<Note> {
        let bytes = text.as_bytes().to_vec();
        let observed = crate::vault::observe::Observed {
            rel: rel.into(),
            size: bytes.len() as u64,
            mtime: std::time::SystemTime::UNIX_EPOCH,
            created: std::time::SystemTime::UNIX_EPOCH,
            content_hash: "hash".into(),
            facts: crate::vault::markdown::facts(&bytes),
            content: Some(crate::vault::packed::Packed::of(Arc::from(&bytes[..]))),
            stamp: None,
        };
        Arc::new(crate::vault::catalog::note_from(
            observed,
            "id-1".into(),
            "v-1".into(),
            chrono::Utc::now(),
            chrono::Utc::now(),
        ))
    }

    /// Every field and value of a document, in a comparable form.
    fn values(doc: &impl tantivy::schema::document::Document) -> Vec<String> {
        doc.iter_fields_and_values()
            .map(|(field, value)| format!("{field:?} {value:?}"))
            .collect()
    }

    #[test]
    fn a_note_doc_holds_what_its_document_holds() {
        let (_, fields) = schema();
        for (rel, text) in [
            (
                "guide/tar.md",
                "---\ntags: [archive]\naliases: [tarball]\nauthor: me\n---\n# tar\n\n## Extract\n\nExtract a `tar.gz` archive.\n",
            ),
            (
                "pages.de/tar.md",
                "---\nlang: de\n---\n# tar\n\nEin Archiv entpacken: `tar xf datei.tar`.\n",
            ),
            ("empty.md", ""),
        ] {
            let note = note(rel, text);
            let links: Arc<dyn LinkText> = Arc::new(std::collections::HashMap::from([(
                note.key(),
                "see [[tar]] to unpack".to_string(),
            )]));
            let built = document(&fields, &note, &links.of(&note));
            let lazy = NoteDoc::new(fields, note.clone(), links);
            assert!(!values(&built).is_empty());
            assert_eq!(values(&lazy), values(&built), "{rel}");
        }
        // What each of a writer's 10,000 queue slots holds four of.
        assert_eq!(std::mem::size_of::<NoteDoc>(), std::mem::size_of::<usize>());
    }
}
