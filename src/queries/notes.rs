//! Note listings, line reads, folders and links: the read calls both surfaces share.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::record::refresh::{find, read, read_kept};
use crate::state::State;
use crate::vault::markdown;
use crate::vault::note::{Note, Visibility};
use crate::vault::observe::Excluded;

/// Largest `limit` of a line-sliced read.
pub const MAX_LINES: usize = 2000;
/// Default `limit` of a line-sliced read.
pub const DEFAULT_LINES: usize = 200;

/// An AIP-132 order: a field, ascending or descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// `score` (relevance), `slug`, `title`, `created_at`, `updated_at`, ...
    pub field: String,
    pub desc: bool,
}

impl Order {
    pub fn relevance() -> Self {
        Self {
            field: "score".into(),
            desc: true,
        }
    }

    pub fn asc(field: &str) -> Self {
        Self {
            field: field.into(),
            desc: false,
        }
    }
}

/// One page of a line-sliced read: the note's bytes and where each line of the page lies
/// in them. A line's text is taken from the bytes when the page is written out, not
/// copied line by line.
#[derive(Debug, Clone)]
pub struct LinePage {
    pub offset: usize,
    pub limit: usize,
    pub total: usize,
    pub next_offset: Option<usize>,
    /// The note's bytes.
    pub bytes: Arc<[u8]>,
    /// Each line of the page: its number and its byte range in `bytes`, without the line
    /// ending.
    pub items: Vec<(usize, std::ops::Range<usize>)>,
}

impl LinePage {
    /// The page's lines, numbered. Bytes that are not UTF-8 read as U+FFFD, as the whole
    /// note decoded lossily would (line endings are ASCII, so lines decode alike alone).
    /// The page is checked as UTF-8 once, not line by line.
    pub fn lines(&self) -> impl ExactSizeIterator<Item = (usize, std::borrow::Cow<'_, str>)> {
        let span = match (self.items.first(), self.items.last()) {
            (Some((_, first)), Some((_, last))) => first.start..last.end,
            _ => 0..0,
        };
        let page = std::str::from_utf8(&self.bytes[span.clone()]).ok();
        self.items.iter().map(move |(n, range)| {
            // A line starts at the note's start or after a line end, and ends before a line
            // end or at the note's end: on char boundaries of a page that is UTF-8.
            let line = page.map(|p| p.get(range.start - span.start..range.end - span.start));
            debug_assert!(
                line.is_none_or(|l| l.is_some()),
                "a line off a char boundary"
            );
            let text = match line.flatten() {
                Some(line) => std::borrow::Cow::Borrowed(line),
                None => String::from_utf8_lossy(&self.bytes[range.clone()]),
            };
            (*n, text)
        })
    }
}

/// The links of one note.
#[derive(Debug, Clone)]
pub struct LinkReport {
    pub note: Arc<Note>,
    /// Every link as written, with the note it resolves to (`None`: unresolved).
    pub outgoing: Vec<(crate::vault::links::RawLink, Option<Arc<Note>>)>,
    /// Notes linking to this one, with the lines of their links.
    pub backlinks: Vec<(Arc<Note>, Vec<usize>)>,
    /// Notes whose links were searched.
    pub total: usize,
    pub committed_seq: i64,
}

/// A page of the note listing.
#[derive(Debug, Clone)]
pub struct NoteList {
    pub notes: Vec<Arc<Note>>,
    /// Slug of the last note when more follow.
    pub next_after: Option<String>,
    /// Notes under the prefix (the whole listing, not the page).
    pub matched: usize,
    pub total: usize,
    pub excluded: Vec<Excluded>,
    pub committed_seq: i64,
}

/// One folder of the vault, as the notes in it show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderEntry {
    /// Vault-relative, `/`-separated, no trailing slash.
    pub path: String,
    /// Notes directly in it.
    pub notes: usize,
    /// Notes in it and in every folder below it.
    pub notes_total: usize,
}

/// The folders of the vault whose path starts with a prefix.
#[derive(Debug, Clone)]
pub struct FolderListing {
    /// In path order.
    pub folders: Vec<FolderEntry>,
    /// Notes in the vault.
    pub total: usize,
    pub excluded: Vec<Excluded>,
    pub committed_seq: i64,
}

/// A line-sliced read: 1-based `offset`, `limit` lines (1..=2000).
pub fn read_lines(
    state: &State,
    key: &str,
    offset: usize,
    limit: usize,
) -> Result<(Arc<Note>, LinePage)> {
    check_window(offset, limit)?;
    let (note, bytes) = read(state, key)?;
    let page = line_page(bytes, offset, limit)?;
    Ok((note, page))
}

/// [`read_lines`] without touching the file: `None` unless the catalog keeps the note's
/// bytes, is not large, and the file's stamp is still theirs ([`read_kept`]). Cheap
/// enough for an async worker; on `None` the caller takes [`read_lines`] on a blocking
/// thread.
pub fn read_lines_kept(
    state: &State,
    key: &str,
    offset: usize,
    limit: usize,
) -> Option<Result<(Arc<Note>, LinePage)>> {
    let (note, bytes) = read_kept(state, key)?;
    Some(
        check_window(offset, limit)
            .and_then(|()| line_page(bytes, offset, limit))
            .map(|page| (note, page)),
    )
}

fn check_window(offset: usize, limit: usize) -> Result<()> {
    if offset < 1 {
        return Err(Error::invalid_field(
            "offset",
            "must be 1 or more (lines are numbered from 1)",
        ));
    }
    if !(1..=MAX_LINES).contains(&limit) {
        return Err(Error::invalid_field(
            "limit",
            format!("must be between 1 and {MAX_LINES}"),
        ));
    }
    Ok(())
}

/// Lines `offset..offset + limit` of a note's bytes, and how many it has: the lines of
/// [`markdown::lines`] (split at `\n`, a last `\n` ends the last line, a `\r` before it
/// is not part of the line, an empty note has none), found with `memchr`.
fn line_page(bytes: Arc<[u8]>, offset: usize, limit: usize) -> Result<LinePage> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    // One pass over the line ends: the page's lines, and how many there are.
    let mut items = Vec::with_capacity(limit.min(256));
    let mut total = 0;
    if !bytes.is_empty() {
        let ends = memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len()));
        let mut start = 0;
        for end in ends {
            total += 1;
            if total >= offset && items.len() < limit {
                let line = &body[start..end];
                let len = line.strip_suffix(b"\r").unwrap_or(line).len();
                items.push((total, start..start + len));
            }
            start = end + 1;
        }
    }
    if offset > total.max(1) {
        return Err(Error::invalid_field(
            "offset",
            format!("line {offset} is past the end of the note ({total} lines); use an offset from 1 to {}", total.max(1)),
        ));
    }
    let end = offset - 1 + items.len();
    Ok(LinePage {
        offset,
        limit,
        total,
        next_offset: (end < total).then_some(end + 1),
        bytes,
        items,
    })
}

/// The folders holding notes (at any depth), derived from the catalog: a folder is
/// listed when a note is in it or below it; only those whose path starts with
/// `prefix` are kept.
pub fn folders(state: &State, prefix: &str) -> FolderListing {
    let catalog = state.catalog.read();
    let mut counts: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for note in catalog.iter() {
        let mut holding = crate::vault::path::ancestors(note.slug()).peekable();
        let Some(&dir) = holding.peek() else {
            continue;
        };
        counts.entry(dir).or_default().0 += 1;
        for folder in holding {
            counts.entry(folder).or_default().1 += 1;
        }
    }
    // Folders without a note at any depth exist too (one the API just made): the top two
    // levels of the disk are looked at for them.
    let on_disk = empty_folders(state);
    for path in &on_disk {
        counts.entry(path.as_str()).or_default();
    }
    FolderListing {
        folders: counts
            .into_iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .map(|(path, (notes, notes_total))| FolderEntry {
                path: path.to_string(),
                notes,
                notes_total,
            })
            .collect(),
        total: catalog.len(),
        excluded: catalog.excluded.clone(),
        committed_seq: state.committed_seq(),
    }
}

/// The folders of the top two levels of the vault on disk (not the ignored ones), which
/// `folders` lists even when no note is in them.
fn empty_folders(state: &State) -> Vec<String> {
    let dirs = |abs: &std::path::Path| -> Vec<(String, std::path::PathBuf)> {
        let Ok(entries) = std::fs::read_dir(abs) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| !state.paths.is_ignored(&e.path()))
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .collect()
    };
    let mut out = Vec::new();
    for (name, abs) in dirs(&state.paths.root) {
        for (inner, _) in dirs(&abs) {
            out.push(format!("{name}/{inner}"));
        }
        out.push(name);
    }
    out
}

/// List notes whose slug starts with `prefix` and that match `filter`, in slug order,
/// after `after`.
pub fn list(
    state: &State,
    prefix: &str,
    filter: Option<&crate::filter::Expr>,
    after: Option<&str>,
    page_size: usize,
) -> NoteList {
    // Private notes (handles of their files) are merged in slug order; taken before the
    // catalog's lock, never under it.
    let privates = super::private::handles(state, prefix);
    let private_total = super::private::private_note_count(state);
    let catalog = state.catalog.read();
    let mut notes = Vec::with_capacity(page_size.min(catalog.len()));
    let mut next_after = None;
    let after = after.filter(|a| *a >= prefix);
    let start = after.or(None);
    let uses_links = filter.is_some_and(|f| {
        f.fields()
            .iter()
            .any(|(name, _)| matches!(*name, "links_to" | "linked_from" | "orphan"))
    });
    let graph = uses_links.then(|| crate::vault::graph::Graph::build(&catalog));
    let links = graph.as_ref().map(LinkSets::new);
    let keep = |n: &&Arc<Note>| {
        filter.is_none_or(|f| f.matches(&|field| note_field(n, field, links.as_ref())))
    };
    // A filter over tags, folder, path or slug walks only its candidates.
    let scope = catalog.scope(filter);
    let private_matches: Vec<&Arc<Note>> = privates.iter().filter(keep).collect();
    let mut iter = scope.walk(prefix, start).filter(keep).peekable();
    let mut private = private_matches
        .iter()
        .copied()
        .filter(|n| start.is_none_or(|s| n.slug() > s))
        .peekable();
    loop {
        let note = match (iter.peek(), private.peek()) {
            (Some(a), Some(b)) if b.slug() < a.slug() => private.next(),
            (Some(_), _) => iter.next(),
            (None, _) => private.next(),
        };
        let Some(note) = note else { break };
        if notes.len() == page_size {
            next_after = notes.last().map(|n: &Arc<Note>| n.slug().to_string());
            break;
        }
        notes.push(note.clone());
    }
    let matched = if prefix.is_empty() && filter.is_none() {
        catalog.len() + privates.len()
    } else if start.is_none() && next_after.is_none() {
        // The page holds every match already: no second pass of the filter.
        notes.len()
    } else {
        scope.walk(prefix, None).filter(keep).count() + private_matches.len()
    };
    let total = catalog.len() + private_total;
    NoteList {
        notes,
        next_after,
        matched,
        total,
        excluded: catalog.excluded.clone(),
        committed_seq: state.committed_seq(),
    }
}

/// The links of a note: outgoing (resolved or not) and backlinks with their lines.
pub fn links(state: &State, key: &str) -> Result<LinkReport> {
    let note = find(state, key)?;
    let catalog = state.catalog.read();
    let graph = crate::vault::graph::Graph::build(&catalog);
    let outgoing = note
        .links
        .iter()
        .filter(|l| !crate::vault::graph::Graph::is_attachment(l))
        .map(|l| (l.clone(), graph.resolve(&note, l).cloned()))
        .collect();
    let backlinks = graph
        .backlinks(&note)
        .into_iter()
        .map(|(n, lines)| (n.clone(), lines))
        .collect();
    Ok(LinkReport {
        total: catalog.len(),
        committed_seq: state.committed_seq(),
        note,
        outgoing,
        backlinks,
    })
}

/// The filter fields of a note listing.
pub const NOTE_FILTER_FIELDS: &[&str] = &[
    "tags",
    "folder",
    "path",
    "slug",
    "title",
    "status",
    "visibility",
    "created_at",
    "updated_at",
    "links_to",
    "linked_from",
    "orphan",
    "frontmatter.",
];

/// Resolved links of every note, for the link filter fields.
pub struct LinkSets<'a> {
    outgoing: HashMap<&'a str, HashSet<&'a str>>,
    incoming: HashMap<&'a str, HashSet<&'a str>>,
}

impl<'a> LinkSets<'a> {
    pub fn new(graph: &crate::vault::graph::Graph<'a>) -> Self {
        let outgoing = graph.edges();
        let mut incoming: HashMap<&str, HashSet<&str>> = HashMap::new();
        for (from, targets) in &outgoing {
            for to in targets {
                incoming.entry(*to).or_default().insert(*from);
            }
        }
        Self { outgoing, incoming }
    }
}

/// A note's value for a filter field. `links_to` lists the slugs it links to,
/// `linked_from` the slugs linking to it, `orphan` is `true` when nothing links to it.
pub fn note_field(note: &Note, field: &str, links: Option<&LinkSets<'_>>) -> crate::filter::Value {
    use crate::filter::Value;
    let slugs = |m: Option<&HashSet<&str>>| {
        let mut v: Vec<String> = m.into_iter().flatten().map(|s| s.to_string()).collect();
        v.sort();
        Value::List(v)
    };
    match field {
        "links_to" => slugs(links.and_then(|l| l.outgoing.get(note.slug()))),
        "linked_from" => slugs(links.and_then(|l| l.incoming.get(note.slug()))),
        "orphan" => Value::Text(
            links
                .is_some_and(|l| l.incoming.get(note.slug()).is_none_or(|s| s.is_empty()))
                .to_string(),
        ),
        "tags" => Value::List(note.tags.clone()),
        "folder" => Value::Text(crate::vault::path::folder_of(note.slug()).to_string()),
        "path" => Value::Text(note.path.clone()),
        "slug" => Value::Text(note.slug().to_string()),
        "title" => Value::Text(note.title.clone()),
        "status" => Value::Text(note.status.clone()),
        "visibility" => Value::Text(note.visibility.as_str().to_string()),
        "created_at" => Value::Time(note.created_at),
        "updated_at" => Value::Time(note.updated_at),
        other => {
            let Some(key) = other.strip_prefix("frontmatter.") else {
                return Value::Missing;
            };
            match note.frontmatter.as_ref().and_then(|m| m.get(key)) {
                Some(serde_norway::Value::Sequence(items)) => {
                    Value::List(items.iter().filter_map(markdown::scalar_string).collect())
                }
                Some(serde_norway::Value::Number(n)) => {
                    n.as_f64().map_or(Value::Missing, Value::Number)
                }
                Some(v) => markdown::scalar_string(v).map_or(Value::Missing, Value::Text),
                None => Value::Missing,
            }
        }
    }
}

/// Sort notes by `order` (slug breaks ties).
pub fn sort_notes(notes: &mut [Arc<Note>], order: &Order) {
    notes.sort_by(|a, b| {
        let o = match order.field.as_str() {
            "title" => a.title.to_lowercase().cmp(&b.title.to_lowercase()),
            "created_at" => a.created_at.cmp(&b.created_at),
            "updated_at" => a.updated_at.cmp(&b.updated_at),
            _ => std::cmp::Ordering::Equal,
        };
        let o = if order.desc { o.reverse() } else { o };
        let slug = a.slug().cmp(b.slug());
        o.then(if order.desc && order.field == "slug" {
            slug.reverse()
        } else {
            slug
        })
    });
}

/// The notes at `offset..offset + len` of `notes` in `order` (as [`sort_notes`] orders
/// them), without sorting the others: each note's sort key is taken once, side by side,
/// and only the notes up to the page's end are put in order. Ordering every note of a
/// large vault compared keys through two pointers per comparison (tens of milliseconds).
pub fn page_sorted(
    notes: &[&Arc<Note>],
    order: &Order,
    offset: usize,
    len: usize,
) -> Vec<Arc<Note>> {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Title(String),
        Time(chrono::DateTime<chrono::Utc>),
        Slug,
    }
    let mut keyed: Vec<(Key, &str, usize)> = notes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let key = match order.field.as_str() {
                "title" => Key::Title(n.title.to_lowercase()),
                "created_at" => Key::Time(n.created_at),
                "updated_at" => Key::Time(n.updated_at),
                _ => Key::Slug,
            };
            (key, n.slug(), i)
        })
        .collect();
    let slug_desc = order.desc && order.field == "slug";
    let cmp = |a: &(Key, &str, usize), b: &(Key, &str, usize)| {
        let o = a.0.cmp(&b.0);
        let o = if order.desc { o.reverse() } else { o };
        o.then_with(|| {
            let s = a.1.cmp(b.1);
            if slug_desc {
                s.reverse()
            } else {
                s
            }
        })
    };
    let end = offset.saturating_add(len).min(keyed.len());
    if end == 0 {
        return Vec::new();
    }
    if end < keyed.len() {
        keyed.select_nth_unstable_by(end - 1, cmp);
        keyed.truncate(end);
    }
    // Slugs are unique: the order is total, an unstable sort is exact.
    keyed.sort_unstable_by(cmp);
    keyed[offset.min(end)..]
        .iter()
        .map(|(_, _, i)| notes[*i].clone())
        .collect()
}

/// A page of the note listing in another order than by slug (`offset` into it):
/// the matching notes are gathered by reference under the catalog's read lock and
/// only the page is kept, so nothing is copied for the notes around it.
pub fn list_ordered(
    state: &State,
    prefix: &str,
    filter: Option<&Expr>,
    order: &Order,
    offset: usize,
    page_size: usize,
) -> NoteList {
    let uses_links = filter.is_some_and(|f| {
        f.fields()
            .iter()
            .any(|(name, _)| matches!(*name, "links_to" | "linked_from" | "orphan"))
    });
    let (notes, matched, total, excluded) = if uses_links {
        let all = list(state, prefix, filter, None, usize::MAX);
        let refs: Vec<&Arc<Note>> = all.notes.iter().collect();
        let page = page_sorted(&refs, order, offset, page_size);
        (page, all.notes.len(), all.total, all.excluded)
    } else {
        // Taken before the catalog's lock, never under it.
        let privates = super::private::handles(state, prefix);
        let private_total = super::private::private_note_count(state);
        let catalog = state.catalog.read();
        let scope = catalog.scope(filter);
        let matching: Vec<&Arc<Note>> = scope
            .walk(prefix, None)
            .chain(&privates)
            .filter(|n| filter.is_none_or(|f| f.matches(&|field| note_field(n, field, None))))
            .collect();
        let page = page_sorted(&matching, order, offset, page_size);
        (
            page,
            matching.len(),
            catalog.len() + private_total,
            catalog.excluded.clone(),
        )
    };
    let end = offset.saturating_add(page_size).min(matched);
    NoteList {
        notes,
        next_after: (end < matched).then(|| end.to_string()),
        matched,
        total,
        excluded,
        committed_seq: state.committed_seq(),
    }
}

/// The notes in scope: matching `filter`, in slug order (private notes left out: they
/// hold nothing to search or aggregate).
pub fn select(state: &State, filter: Option<&Expr>) -> Vec<Arc<Note>> {
    match filter {
        None => state.catalog.read().iter().cloned().collect(),
        Some(f) => list(state, "", Some(f), None, usize::MAX)
            .notes
            .into_iter()
            .filter(|n| n.visibility != Visibility::Private)
            .collect(),
    }
}

/// The private note a key names (its slug, or its `.nvpriv` path), when the vault holds
/// one: its file's facts. A private note is ciphertext only; a read answers its handle.
pub fn private_note(
    state: &State,
    key: &str,
) -> Option<std::sync::Arc<crate::vault::attachments::Attachment>> {
    let path = if crate::vault::is_private_note(key) {
        key.to_string()
    } else {
        format!("{key}{}", crate::vault::PRIVATE_SUFFIX)
    };
    let rel = state.paths.resolve(&path).ok()?.rel;
    state.attachments.read().get(&rel).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The page as [`markdown::lines`] of the lossily decoded note gives it.
    fn by_lines(bytes: &[u8], offset: usize, limit: usize) -> (usize, Vec<(usize, String)>) {
        let text = String::from_utf8_lossy(bytes);
        let all: Vec<&str> = markdown::lines(&text).collect();
        let page = all
            .iter()
            .enumerate()
            .skip(offset - 1)
            .take(limit)
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect();
        (all.len(), page)
    }

    fn paged(bytes: &[u8], offset: usize, limit: usize) -> Option<(usize, Vec<(usize, String)>)> {
        let page = line_page(Arc::from(bytes), offset, limit).ok()?;
        let lines = page.lines().map(|(n, t)| (n, t.into_owned())).collect();
        Some((page.total, lines))
    }

    #[test]
    fn pages_of_edge_shaped_notes() {
        for (bytes, offset, limit) in [
            (&b""[..], 1, 5),
            (b"\n", 1, 5),
            (b"a", 1, 1),
            (b"a\r\nb\r\n", 2, 5),
            (b"a\n\n", 1, 5),
            (b"a\nb\nc", 2, 1),
            (b"\xe2\x82\r\nok\n\xff", 1, 5),
            ("é\r\n€x\n😀\r\nz".as_bytes(), 2, 2),
        ] {
            assert_eq!(
                paged(bytes, offset, limit),
                Some(by_lines(bytes, offset, limit)),
                "{bytes:?}"
            );
        }
        assert!(paged(b"a\nb", 3, 1).is_none(), "past the end");
    }

    #[test]
    fn lines_that_start_and_end_in_multibyte_characters_read_whole_without_a_copy() {
        let page = line_page(Arc::from("é\r\n€x\n😀".as_bytes()), 1, 5).unwrap();
        let lines: Vec<_> = page.lines().collect();
        assert_eq!(lines.len(), 3);
        for (_, text) in &lines {
            assert!(matches!(text, std::borrow::Cow::Borrowed(_)), "{text:?}");
        }
        assert_eq!(lines[1].1, "€x");
        assert_eq!(lines[2].1, "😀");
    }

    proptest! {
        #[test]
        fn a_page_is_the_window_of_the_notes_lines(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'a'), Just(0xe2u8), Just(0x82u8), any::<u8>()],
                0..64,
            ),
            offset in 1usize..12,
            limit in 1usize..6,
        ) {
            let (total, want) = by_lines(&bytes, offset, limit);
            match paged(&bytes, offset, limit) {
                Some(got) => prop_assert_eq!(got, (total, want)),
                None => prop_assert!(offset > total.max(1)),
            }
        }
    }
}
