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
use crate::surface::writes::{
    self, AppendNoteParams, DeleteNoteParams, EditNoteParams, MoveNoteParams, ReplaceSectionParams,
    SetFrontmatterParams, WriteNoteParams,
};

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
        description: "Rank notes by words: plain words (`match: \"all\"` needs every one), `\"a phrase\"`, `+must`, `-not`, `prefix*`, `a OR b`, `title:word`; `filter` is AIP-160 as in `list_notes`. Answers handles best first with `score`, `lines` (matching line numbers) and a `snippet`, never a body. Read `coverage`; `truncated`: more pages. For exact strings use `grep`.",
        access: Access::Read,
        input: schema::of::<SearchParams>,
        output: schema::of::<SearchResponse>,
    },
    ToolSpec {
        name: "grep",
        twin: "GET /v1/grep",
        title: "Grep note lines",
        description: "Find lines matching a regex (Rust syntax) or, with `literal: true`, a string, in every note's text, as `rg -n` would (`case`, `word`). Answers, note by note, the handle and its lines `{n, text}`; read around a hit with `read_note` at `offset` near `n`. `coverage` says what was searched; page with `page_token`.",
        access: Access::Read,
        input: schema::of::<GrepParams>,
        output: schema::of::<GrepResponse>,
    },
    ToolSpec {
        name: "list_notes",
        twin: "GET /v1/notes",
        title: "List notes",
        description: "List note handles (slug, note_id, title, path, tags, status, version_id), never bodies, by path `prefix` and/or an AIP-160 `filter` over tags, folder, path, title, status, created_at, updated_at, frontmatter.<key>, links_to, linked_from, orphan (e.g. `tags:idea AND status != \"done\"`). `coverage.truncated`: more pages (`page_token`).",
        access: Access::Read,
        input: schema::of::<ListNotesParams>,
        output: schema::of::<NoteList>,
    },
    ToolSpec {
        name: "read_note",
        twin: "GET /v1/notes/{note}",
        title: "Read a note by line slices",
        description: "Read one note's text by line slices; the only tool returning bodies. `note` is a slug (path without `.md`) or a note_id. Answers the handle (`version_id` is what writes need) and `lines`: `offset`, `total`, `next_offset` (call again with it while not null) and `items` `{n, text}`, or with `format: \"text\"` one `text` string. 200 lines by default.",
        access: Access::Read,
        input: read_note_input,
        output: schema::of::<NoteRead>,
    },
    ToolSpec {
        name: "list_folders",
        twin: "GET /v1/folders",
        title: "List folders",
        description: "List the vault's folders with their note counts, direct (`notes`) and at any depth (`notes_total`); `prefix` narrows it. List a folder's notes with `list_notes` and `prefix` set to the folder's `path` plus `/`. Carries `coverage`; page with `page_token`.",
        access: Access::Read,
        input: schema::of::<ListFoldersParams>,
        output: schema::of::<FolderList>,
    },
    ToolSpec {
        name: "list_attachments",
        twin: "GET /v1/attachments",
        title: "List attachments",
        description: "List the vault's attachments (every file that is not a note) with `path`, `size`, `sha256`, `content_type`, `modified_at`, `referenced_by`. `filter` is AIP-160 over folder, path, file_name, content_type, size, modified_at, referenced; `order_by` e.g. `size desc`. For the bytes: `attachment_link`.",
        access: Access::Read,
        input: schema::of::<ListAttachmentsParams>,
        output: schema::of::<AttachmentList>,
    },
    ToolSpec {
        name: "attachment_link",
        twin: "POST /v1/attachments:presign",
        title: "Link to an attachment",
        description: "A presigned download link to one attachment (by `file_name` or `path`; `sha256` picks among files of one name): `url` works without a bearer until `expires_at` (`expires_in` 10..86400 s, default 300), to fetch or to hand to a person.",
        access: Access::Read,
        input: schema::of::<AttachmentLinkParams>,
        output: schema::of::<PresignResponse>,
    },
    ToolSpec {
        name: "list_revisions",
        twin: "GET /v1/notes/{note}:listRevisions",
        title: "List a note's revisions",
        description: "List one note's revisions, newest first: `revision_id` (a `version_id`), `created_at`, `actor` (`filesystem` for an editor, `agent:<id>` for API writes), `kind` (create, update, move, delete), `path`. Works for a deleted note too. AIP-160 `filter` over actor, kind, created_at.",
        access: Access::Read,
        input: schema::of::<ListRevisionsParams>,
        output: schema::of::<RevisionList>,
    },
    ToolSpec {
        name: "note_links",
        twin: "GET /v1/notes/{note}:links",
        title: "A note's links and backlinks",
        description: "One note's links: `outgoing` (wikilinks, embeds and markdown links, each with its line and the note it resolves to, as Obsidian resolves them), `unresolved` (naming no note) and `backlinks` (notes linking here, with their lines). Handles only: read a linked note with `read_note`.",
        access: Access::Read,
        input: schema::of::<NoteParam>,
        output: schema::of::<NoteLinks>,
    },
    ToolSpec {
        name: "list_tags",
        twin: "GET /v1/tags",
        title: "List tags",
        description: "The frontmatter tags with how many notes carry each (`count`, nested `a/b` counting for `a`; `direct_count`), over the notes an AIP-160 `filter` keeps; `order_by` `tag` or `count desc`. Body `#hashtags` are not tags. A tag's notes: `list_notes` with `tags:<tag>`. Page with `page_token`.",
        access: Access::Read,
        input: schema::of::<TagsParams>,
        output: schema::of::<TagList>,
    },
    ToolSpec {
        name: "aggregate_properties",
        twin: "POST /v1/properties:aggregate",
        title: "Group notes by a frontmatter property",
        description: "Group notes (those an AIP-160 `filter` keeps) by one top-level frontmatter `key` (e.g. `status`, `rating`): each value with its count, most frequent first (up to `limit`), how many notes have the key or not, and the range of numeric or date values.",
        access: Access::Read,
        input: schema::of::<AggregateRequest>,
        output: schema::of::<PropertyAggregate>,
    },
    ToolSpec {
        name: "vault_summary",
        twin: "GET /v1/vault",
        title: "Vault summary",
        description: "The vault at a glance: notes, excluded files, private notes, folders, distinct tags, bytes, notes by `status`, the write policy and budget, and index freshness (`indexed_seq` against `committed_seq`). Call it first. Takes no arguments.",
        access: Access::Read,
        input: schema::of::<NoParams>,
        output: schema::of::<VaultSummary>,
    },
    ToolSpec {
        name: "write_note",
        twin: "POST /v1/notes",
        title: "Write a note",
        description: "Create a note at a slug (`content` is its whole text), or replace an existing note's body after its frontmatter (`version_id` from `read_note`; `VERSION_MOVED`: read again). Answers the receipt: `applied` with the new `version_id`, or `queued` with a `pending_id` when writes wait for review. A retried call replays its first answer.",
        access: Access::Write,
        input: schema::of::<WriteNoteParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "edit_note",
        twin: "POST /v1/notes/{note}:edit",
        title: "Edit a note",
        description: "Replace one exact piece of a note's text: `old_string` (copied from `read_note`) must occur exactly once and becomes `new_string`; `version_id` is the version read (`VERSION_MOVED` if it changed). Answers the receipt (`applied`, or `queued` for review); a retried call replays its first answer.",
        access: Access::Write,
        input: schema::of::<EditNoteParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "append_note",
        twin: "POST /v1/notes/{note}:append",
        title: "Append to a note",
        description: "Add lines at the end of a note, or with `heading` (`Tasks` or `## Tasks`, \
once in the note) at the end of that heading's section. `version_id` is optional: an \
append needs no read first. Answers the receipt (`applied`, or `queued` for review); a \
retried call replays its first answer.",
        access: Access::Write,
        input: schema::of::<AppendNoteParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "replace_section",
        twin: "POST /v1/notes/{note}:replaceSection",
        title: "Replace a section",
        description: "Replace what a heading's section holds (up to the next heading of the \
same or a higher level) with `content`; the heading line stays. `version_id` is the \
version read (`VERSION_MOVED` if it changed). Answers the receipt (`applied`, or \
`queued` for review).",
        access: Access::Write,
        input: schema::of::<ReplaceSectionParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "set_frontmatter",
        twin: "PATCH /v1/notes/{note}",
        title: "Set a frontmatter key",
        description: "Set one top-level frontmatter `key` of a note to `value` (string, number, \
boolean or list; null removes it); the rest of the file is kept byte for byte. \
`version_id` optional. Answers the receipt (`applied`, or `queued` for review).",
        access: Access::Write,
        input: set_frontmatter_input,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "move_note",
        twin: "POST /v1/notes/{note}:move",
        title: "Move a note",
        description: "Move a note into `folder` (`\"\"` for the vault's top; made if \
missing, one level at most), keeping its note_id; links to it are rewritten. \
`version_id` optional. Answers the receipt (`applied`, or `queued` for review).",
        access: Access::Write,
        input: schema::of::<MoveNoteParams>,
        output: schema::of::<Receipt>,
    },
    ToolSpec {
        name: "delete_note",
        twin: "DELETE /v1/notes/{note}",
        title: "Delete a note",
        description: "Delete a note: its file moves to the vault's `.trash/` and its revisions \
stay listed (`list_revisions`), so it can be rolled back. `version_id` optional. Answers \
the receipt (`applied`, or `queued` for review).",
        access: Access::Write,
        input: schema::of::<DeleteNoteParams>,
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
                    // A deleted note stays in `.trash/` and its history, yet it is gone
                    // from the vault: a client may want to ask first.
                    Access::Write => ToolAnnotations::with_title(spec.title)
                        .read_only(false)
                        .destructive(spec.name == "delete_note")
                        .idempotent(true)
                        .open_world(false),
                };
                let input = schema::lean_input((spec.input)());
                let tool = Tool::new(spec.name, spec.description, Arc::new(input))
                    .with_title(spec.title)
                    .with_raw_output_schema(Arc::new(schema::lean_output((spec.output)())))
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
        "read_note" => read_note(state, args, form).await,
        "list_folders" => run(args, form, |p| folders::list_folders(state, p)).await,
        "list_attachments" => run(args, form, |p| attachments::list_attachments(state, p)).await,
        "attachment_link" => {
            run(args, form, |p| attachments::attachment_link(state, p, base)).await
        }
        "list_revisions" => run(args, form, |p| revisions::list_note_revisions(state, p)).await,
        "note_links" => run(args, form, |p| notes::note_links(state, p)).await,
        "write_note" => run(args, form, |p| writes::write_note(state, p, client)).await,
        "edit_note" => run(args, form, |p| writes::edit_note(state, p, client)).await,
        "append_note" => run(args, form, |p| writes::append_note(state, p, client)).await,
        "replace_section" => run(args, form, |p| writes::replace_section(state, p, client)).await,
        "set_frontmatter" => run(args, form, |p| writes::set_frontmatter(state, p, client)).await,
        "move_note" => run(args, form, |p| writes::move_note(state, p, client)).await,
        "delete_note" => run(args, form, |p| writes::delete_note(state, p, client)).await,
        _ => return None,
    })
}

/// `set_frontmatter`'s parameters; its `value` is any JSON value.
fn set_frontmatter_input() -> JsonObject {
    let mut input = schema::of::<SetFrontmatterParams>();
    if let Some(Value::Object(value)) = input.get_mut("properties").and_then(|p| p.get_mut("value"))
    {
        value.remove("type");
    }
    input
}

/// `read_note`'s parameters: `/v1`'s, and `format`.
fn read_note_input() -> JsonObject {
    let mut input = schema::of::<ReadNoteParams>();
    if let Some(Value::Object(properties)) = input.get_mut("properties") {
        properties.insert(
            "format".into(),
            serde_json::json!({
                "type": "string",
                "enum": ["json", "text"],
                "description": "`text`: the slice as one `lines.text` string (about the note's size)."
            }),
        );
    }
    input
}

/// `read_note`: the `/v1` read, or with `format: "text"` the same answer with the slice
/// as one string (`lines.text` in place of `lines.items`): a line costs its own bytes
/// rather than a JSON object each.
async fn read_note(state: Arc<State>, mut args: Value, form: Form) -> Result<Answer, Error> {
    let format = args.as_object_mut().and_then(|m| m.remove("format"));
    let text = match &format {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "json" => false,
        Some(Value::String(f)) if f == "text" => true,
        Some(other) => {
            return Err(Error::invalid_field(
                "format",
                format!("must be \"json\" or \"text\", got {other}"),
            ))
        }
    };
    if !text {
        return run(args, form, |p| notes::read_note(state, p)).await;
    }
    let params: ReadNoteParams = parse_as(&args)?;
    let mut json =
        serde_json::to_value(notes::read_note(state, params).await?).map_err(Error::internal)?;
    if let Some(Value::Object(lines)) = json.get_mut("lines") {
        let joined = match lines.remove("items") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|line| line["text"].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        lines.insert("text".into(), Value::String(joined));
    }
    let text = serde_json::to_string(&json).map_err(Error::internal)?;
    Ok(Answer {
        text,
        json: (form == Form::Value).then_some(json),
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

    /// Every session pays for `tools/list` in context: with the write tools it stays
    /// within 24 KB, and the descriptions with the input schemas within 12 KB.
    #[test]
    fn the_tool_list_stays_lean() {
        let tools = listed(true);
        let whole = serde_json::to_string(&serde_json::json!({"tools": tools}))
            .unwrap()
            .len();
        assert!(whole <= 24_000, "tools/list is {whole} bytes");
        let said: usize = tools
            .iter()
            .map(|t| {
                t.description.as_ref().map_or(0, |d| d.len())
                    + serde_json::to_string(&t.input_schema).unwrap().len()
            })
            .sum();
        assert!(
            said <= 12_000,
            "descriptions and input schemas are {said} bytes"
        );
        for tool in &tools {
            let output = Value::Object((*tool.output_schema.clone().unwrap()).clone());
            assert!(output.to_string().len() < 1_000, "{}: {output}", tool.name);
        }
    }
}
