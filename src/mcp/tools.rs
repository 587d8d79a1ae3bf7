//! The tool table: one row per tool (name, title, description for an agent, access,
//! parameter and answer types), and the dispatch from a tool name to the function that
//! `/v1` calls for the same answer.

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;
use crate::mcp::schema;
use crate::state::State;
use crate::surface::attachments::{
    self, AttachmentLinkParams, AttachmentList, ListAttachmentsParams, PresignResponse,
};
use crate::surface::folders::{self, ListFoldersParams};
use crate::surface::grep::{self, GrepParams, GrepResponse};
use crate::surface::input::parse_as;
use crate::surface::notes::{self, ListNotesParams, NoteLinks, NoteParam, ReadNoteParams};
use crate::surface::properties::{self, AggregateRequest, PropertyAggregate};
use crate::surface::revisions::{self, ListRevisionsParams, RevisionList};
use crate::surface::search::{self, SearchParams, SearchResponse};
use crate::surface::tags::{self, TagList, TagsParams};
use crate::surface::vault::{self, NoParams, VaultSummary};
use crate::surface::wire::{FolderList, NoteList, NoteRead, Receipt};
use crate::surface::writes::{self, EditNoteParams, WriteNoteParams};

/// What a tool may do to the vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only; listed to everyone.
    Read,
    /// Goes through the write pipeline; listed only when `auth::mcp_write_tools` allows.
    Write,
}

/// One tool as `tools/list` shows it.
pub struct ToolSpec {
    pub name: &'static str,
    /// The `/v1` route that answers the same (`METHOD /path template`, as the route table
    /// and error hints name it): a hint naming that route names this tool over MCP.
    pub twin: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub access: Access,
    input: fn() -> JsonObject,
    output: fn() -> JsonObject,
}

/// Every tool the server knows, in the order `tools/list` answers them.
pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "search",
        twin: "GET /v1/search",
        title: "Search notes",
        description: "Ask in words: `q` is read as a question (plain words ranked, more matches \
first, stop words dropped, `synced` finds `sync`; `match: \"all\"` requires every word), and \
`\"a phrase\"`, `+must`, `-not`, `prefix*`, `a OR b`, `title:word` are precise; the answer's \
`query` says how `q` was read. BM25 over title and aliases (boosted most), the note's lead \
(its description or first paragraph), headings, tags, path, frontmatter properties and body, \
CJK text included. Returns, best first, note handles \
with why they matched: `score`, `matched_fields`, `lines` (the first matching line numbers, \
numbered as `read_note` numbers them), `line_count` and a short `snippet`; never a body: read \
the text around a hit with `read_note` (`offset` a little before a listed line). `filter` \
takes AIP-160 like `list_notes`. Every answer carries `coverage`: notes searched of notes \
total, what was left out and why (private, too large, not yet indexed), `indexed_seq` against \
`committed_seq` (how fresh the index is; pass a write's `committed_seq` as `min_seq` to \
wait for it) and `truncated` (more pages: pass `next_page_token` as `page_token`). Zero \
results with coverage is a valid answer. `mode: \"hybrid\"` also ranks notes by meaning when the \
server has a local embedding model (`coverage.retrievers` says whether it ran). For exact \
strings or patterns use `grep`.",
        access: Access::Read,
        input: schema::of::<SearchParams>,
        output: schema::of::<SearchResponse>,
    },
    ToolSpec {
        name: "grep",
        twin: "GET /v1/grep",
        title: "Grep note lines",
        description: "Find the lines matching a regex (the Rust `regex` crate's syntax) or, \
with `literal: true`, a plain string, in the current text of every note: the lines `rg -n` \
finds in the markdown files (`case`: sensitive, insensitive or smart; `word` for whole \
words). Returns, note by note, the note handle and its matching lines `{n, text}` (text cut \
at 400 characters, `truncated` then set); read around a hit with `read_note` and `offset` \
near `n`. A page holds up to `page_size` lines and a note may continue on the next page \
(`next_page_token`). `coverage` says how many notes were searched, which were left out and \
why, and whether the grep stopped early (10 s). Use `search` for words and topics, `grep` \
for exact strings, code, TODO markers and patterns.",
        access: Access::Read,
        input: schema::of::<GrepParams>,
        output: schema::of::<GrepResponse>,
    },
    ToolSpec {
        name: "list_notes",
        twin: "GET /v1/notes",
        title: "List notes",
        description: "List the notes of the vault by path prefix and/or an AIP-160 filter \
(fields: tags, folder, path, slug, title, status, visibility, created_at, updated_at, \
frontmatter.<key>, links_to, linked_from, orphan; e.g. `tags:idea AND status != \"done\"`). \
Use it to browse a folder, to find notes by tag, status or frontmatter property, or to walk \
the whole vault. Returns note handles (slug, note_id, title, path, tags, status, version_id, \
content_hash), never note bodies: read a body with `read_note`. Every answer carries \
`coverage`; read it before treating the list as complete: `coverage.notes_matched` counts \
the matches over all pages, `coverage.truncated` (with `next_page_token`) means more pages \
follow (call again with `page_token`), and `coverage.excluded` names files the daemon could \
not serve. Zero notes with coverage is a valid answer.",
        access: Access::Read,
        input: schema::of::<ListNotesParams>,
        output: schema::of::<NoteList>,
    },
    ToolSpec {
        name: "read_note",
        twin: "GET /v1/notes/{note}",
        title: "Read a note by line slices",
        description: "Read the text of one note, by line slices. This is the only tool that \
returns note bodies; the list tools return handles only. `note` takes a slug (the \
vault-relative path without `.md`, e.g. `projects/roadmap`) or a note_id. Returns the note \
handle (slug, note_id, title, tags, version_id, content_hash) plus `lines`: `offset`, \
`limit`, `total` (lines in the whole note), `next_offset` and `items` ({n, text}, numbered \
from 1). A slice is 200 lines by default and at most 2000; when `lines.next_offset` is not \
null the note goes on: call again with `offset` set to it. Quote line numbers from `n`.",
        access: Access::Read,
        input: schema::of::<ReadNoteParams>,
        output: schema::of::<NoteRead>,
    },
    ToolSpec {
        name: "list_folders",
        twin: "GET /v1/folders",
        title: "List folders",
        description: "List the folders of the vault with how many notes each holds, directly \
(`notes`) and at any depth below (`notes_total`); `prefix` narrows the list (e.g. \
`projects`). Every folder holding a note at any depth is listed, and folders without notes at the \
top two levels. To list a folder's notes, call `list_notes` with `prefix` set to the \
folder's `path` plus `/`, or with the filter `folder = \"<path>\"`. Returns `coverage` like \
`list_notes`; page with `next_page_token`.",
        access: Access::Read,
        input: schema::of::<ListFoldersParams>,
        output: schema::of::<FolderList>,
    },
    ToolSpec {
        name: "list_attachments",
        twin: "GET /v1/attachments",
        title: "List attachments",
        description: "List the vault's attachments (every file that is not a markdown note: images, PDFs, audio, ...) with `file_name`, `path`, `folder`, `size`, `sha256`, `content_type`, `modified_at` and `referenced_by` (how many notes embed or link it). `filter` is AIP-160 over `folder`, `path`, `file_name`, `content_type`, `size`, `modified_at`, `referenced` and `sha256` (e.g. `content_type = \"application/pdf\"`, `referenced = false`); `order_by` e.g. `size desc`. Returns `coverage`; page with `next_page_token`. The bytes are not returned: download them over HTTP at `GET /v1/attachments/{path}`, or hand out a link from `POST /v1/attachments:presign`.",
        access: Access::Read,
        input: schema::of::<ListAttachmentsParams>,
        output: schema::of::<AttachmentList>,
    },
    ToolSpec {
        name: "attachment_link",
        twin: "POST /v1/attachments:presign",
        title: "Link to an attachment",
        description: "A presigned download link to one attachment (by `file_name`, or `path`; `sha256` picks one of several files of that name): `url` works without a bearer until `expires_at` (`expires_in` seconds, 10..86400, default 300), for you to fetch or to hand to a person. The bytes themselves are never a tool answer.",
        access: Access::Read,
        input: schema::of::<AttachmentLinkParams>,
        output: schema::of::<PresignResponse>,
    },
    ToolSpec {
        name: "list_revisions",
        twin: "GET /v1/notes/{note}:listRevisions",
        title: "List a note's revisions",
        description: "List the revisions of one note, newest first: each with `revision_id` \
(= `version_id`), `created_at`, `actor` (`filesystem` for edits made on disk by an editor, \
`agent:<agent_id>` for API writes), `kind` (create, update, move, delete), `content_hash` \
and `path`. Also works for a deleted note, by its slug or note_id. Filter with AIP-160 over \
`actor`, `kind`, `created_at`; page with `next_page_token`. Returns no note text: read the \
current text with `read_note`.",
        access: Access::Read,
        input: schema::of::<ListRevisionsParams>,
        output: schema::of::<RevisionList>,
    },
    ToolSpec {
        name: "note_links",
        twin: "GET /v1/notes/{note}:links",
        title: "A note's links and backlinks",
        description: "The links of one note: `outgoing` (every wikilink, embed and relative \
markdown link, with its line and the note it resolves to, the way Obsidian resolves them), \
`unresolved` (links naming no note) and `backlinks` (notes linking to this one, with the \
lines of their links). Handles only, never bodies: read a linked note with `read_note`. \
`coverage.notes_searched` says how many notes were searched for backlinks.",
        access: Access::Read,
        input: schema::of::<NoteParam>,
        output: schema::of::<NoteLinks>,
    },
    ToolSpec {
        name: "list_tags",
        twin: "GET /v1/tags",
        title: "List tags",
        description: "The frontmatter tags of the vault with how many notes carry each: \
`count` (a nested tag `a/b` also counts for `a`) and `direct_count`; only over the notes an \
AIP-160 `filter` keeps, if given; ordered by `tag` (default) or `count desc` (most used \
first). Body `#hashtags` are not tags. Find a tag's notes with `list_notes` and the filter \
`tags:<tag>`. Carries `coverage`; page with `next_page_token`.",
        access: Access::Read,
        input: schema::of::<TagsParams>,
        output: schema::of::<TagList>,
    },
    ToolSpec {
        name: "aggregate_properties",
        twin: "POST /v1/properties:aggregate",
        title: "Group notes by a frontmatter property",
        description: "Group the notes (those an AIP-160 `filter` keeps, if given) by the \
value of one top-level frontmatter `key` (e.g. `status`, `rating`, `author`): each value \
with its count, most frequent first (up to `limit` groups; each item of a list counts on \
its own), how many notes have the key and how many do not, and the range of the values \
when they are numbers or dates. Carries `coverage`.",
        access: Access::Read,
        input: schema::of::<AggregateRequest>,
        output: schema::of::<PropertyAggregate>,
    },
    ToolSpec {
        name: "vault_summary",
        twin: "GET /v1/vault",
        title: "Vault summary",
        description: "A summary of the vault: how many notes, excluded files, private notes, \
folders and distinct tags it has, its size in bytes, notes by `status`, the write policy \
and budget, and how fresh the search index is (`indexed_seq` against `committed_seq`). \
Call it first to learn the size and shape of the vault. Takes no arguments.",
        access: Access::Read,
        input: schema::of::<NoParams>,
        output: schema::of::<VaultSummary>,
    },
    ToolSpec {
        name: "write_note",
        twin: "POST /v1/notes",
        title: "Write a note",
        description: "Create a note, or replace the body of one that exists. `note` is a slug \
(`projects/roadmap`, no `.md`) or a note id; a slug no note has is created there with \
`content` as its whole text. For a note that exists, `content` replaces the body after its \
frontmatter (the frontmatter is kept; change keys with the HTTP API) and `version_id` (from \
`read_note`) guards against overwriting a change made since you read it (`VERSION_MOVED`: \
read it again). Goes through the vault's write pipeline: the answer is the receipt \
(`status` `applied` with the new `version_id`, or `queued` with a `pending_id` when the \
vault's policy holds writes for a person's review: the note is then unchanged until \
approved). Retrying the same call replays its first answer (`idempotency_key` is derived \
from the arguments unless given). For a small change inside a note prefer `edit_note`.",
        access: Access::Write,
        input: schema::of::<WriteNoteParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "edit_note",
        twin: "POST /v1/notes/{note}:edit",
        title: "Edit a note",
        description: "Replace one exact piece of a note's text: `old_string` must occur \
exactly once in the current text (read it with `read_note` first, and copy the text \
exactly, whitespace included) and becomes `new_string`; `version_id` is the version you \
read, and the edit is refused with `VERSION_MOVED` if the note changed since (read it again \
and retry). Nothing else in the file changes. The answer is the receipt: `applied` with the \
new `version_id`, or `queued` with a `pending_id` when the vault holds writes for review. \
Retrying the same call replays its first answer (`idempotency_key` is derived from the \
arguments unless given).",
        access: Access::Write,
        input: schema::of::<EditNoteParams>,
        output: schema::of::<Receipt>,
    },
];

/// The rmcp definition of every tool, built once.
fn definitions() -> &'static [(Access, Tool)] {
    static DEFS: OnceLock<Vec<(Access, Tool)>> = OnceLock::new();
    DEFS.get_or_init(|| {
        TOOLS
            .iter()
            .map(|spec| {
                let annotations = match spec.access {
                    Access::Read => ToolAnnotations::with_title(spec.title)
                        .read_only(true)
                        .destructive(false)
                        .idempotent(true)
                        .open_world(false),
                    Access::Write => ToolAnnotations::with_title(spec.title)
                        .read_only(false)
                        .destructive(false)
                        .idempotent(true)
                        .open_world(false),
                };
                let tool = Tool::new(spec.name, spec.description, Arc::new((spec.input)()))
                    .with_title(spec.title)
                    .with_raw_output_schema(Arc::new((spec.output)()))
                    .with_annotations(annotations);
                (spec.access, tool)
            })
            .collect()
    })
}

/// The tools listed to a caller: the read-only set, plus the write tools when
/// `with_writes` (see `auth::mcp_write_tools`).
pub fn listed(with_writes: bool) -> Vec<Tool> {
    definitions()
        .iter()
        .filter(|(access, _)| *access == Access::Read || with_writes)
        .map(|(_, tool)| tool.clone())
        .collect()
}

/// The tool whose `/v1` twin is `route` (`GET /v1/notes` → `list_notes`).
pub fn twin_of(route: &str) -> Option<&'static str> {
    TOOLS.iter().find(|t| t.twin == route).map(|t| t.name)
}

/// One tool's definition and access, by name.
pub fn find(name: &str) -> Option<(Access, &'static Tool)> {
    definitions()
        .iter()
        .find(|(_, tool)| tool.name == name)
        .map(|(access, tool)| (*access, tool))
}

/// Run the tool `name` with `arguments`: the JSON of the same answer `/v1` gives, in
/// `form`, or the domain error (`VALIDATION_FAILED` naming the argument when they do not
/// fit the tool's parameters). `None` for a name no tool has.
pub async fn call(
    state: Arc<State>,
    name: &str,
    arguments: Option<JsonObject>,
    client: Option<String>,
    base: String,
    form: Form,
) -> Option<Result<Answer, Error>> {
    let args = Value::Object(arguments.unwrap_or_default());
    Some(match name {
        "search" => run(args, form, |p| search::search(state, p)).await,
        "grep" => run(args, form, |p| grep::grep(state, p)).await,
        "list_tags" => run(args, form, |p| tags::tags(state, p)).await,
        "aggregate_properties" => run(args, form, |p| properties::aggregate(state, p)).await,
        "vault_summary" => run(args, form, |_: NoParams| vault::vault(state)).await,
        "list_notes" => run(args, form, |p| notes::list_notes(state, p)).await,
        "read_note" => run(args, form, |p| notes::read_note(state, p)).await,
        "list_folders" => run(args, form, |p| folders::list_folders(state, p)).await,
        "list_attachments" => run(args, form, |p| attachments::list_attachments(state, p)).await,
        "attachment_link" => {
            run(args, form, |p| attachments::attachment_link(state, p, base)).await
        }
        "list_revisions" => run(args, form, |p| revisions::list_note_revisions(state, p)).await,
        "note_links" => run(args, form, |p| notes::note_links(state, p)).await,
        "write_note" => run(args, form, |p| writes::write_note(state, p, client)).await,
        "edit_note" => run(args, form, |p| writes::edit_note(state, p, client)).await,
        _ => return None,
    })
}

/// What a caller needs of an answer besides its JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The text alone, serialized once from the answer: the direct path writes it as the
    /// text content and splices the same bytes in as `structuredContent`.
    Text,
    /// Also as a value, for rmcp's `CallToolResult` (whose `structuredContent` is a
    /// `Value`): the value is built from the answer and the text from the value.
    Value,
}

/// A tool's answer: the JSON text `/v1` sends (byte for byte: fields keep their order,
/// `preserve_order`, and scores their digits) and, when asked for ([`Form::Value`]), the
/// same as a value.
#[derive(Debug)]
pub struct Answer {
    pub text: String,
    pub json: Option<Value>,
}

async fn run<P, T, F>(args: Value, form: Form, f: impl FnOnce(P) -> F) -> Result<Answer, Error>
where
    P: DeserializeOwned,
    T: Serialize,
    F: std::future::Future<Output = Result<T, Error>>,
{
    let params: P = parse_as(&args)?;
    let answer = f(params).await?;
    match form {
        Form::Text => Ok(Answer {
            text: serde_json::to_string(&answer).map_err(Error::internal)?,
            json: None,
        }),
        Form::Value => {
            let json = serde_json::to_value(&answer).map_err(Error::internal)?;
            let text = serde_json::to_string(&json).map_err(Error::internal)?;
            Ok(Answer {
                text,
                json: Some(json),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_described_and_listed_by_its_access() {
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "tool names are unique");
        let reads = TOOLS.iter().filter(|t| t.access == Access::Read).count();
        assert_eq!(listed(false).len(), reads);
        assert_eq!(listed(true).len(), TOOLS.len());
        for tool in listed(true) {
            let (access, _) = find(&tool.name).unwrap();
            let annotations = tool.annotations.as_ref().unwrap();
            let read_only = annotations.read_only_hint == Some(true);
            assert_eq!(read_only, access == Access::Read, "{}", tool.name);
            assert_eq!(tool.input_schema["type"], "object");
            assert_eq!(tool.output_schema.as_ref().unwrap()["type"], "object");
            assert!(tool.description.as_ref().unwrap().len() > 200);
        }
        assert!(listed(false).iter().all(|t| t.name != "write_note"));
    }
}
