//! Writes as the surfaces share them: a validated request run through the one pipeline
//! ([`run`]), a receipt's wire form ([`wire`]; `api` adds the status), and the MCP write
//! tools, `write_note` and `edit_note`: each builds the validated request its `/v1` twin
//! builds, so the tool answers the receipt the route answers (queued under a reviewing
//! policy).
//! The idempotency key is an argument, or derived from the call (the tool and its
//! arguments), so a client that retries a call gets the first call's receipt.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;
use crate::surface::wire::{NoteHandle, Receipt};
use crate::writes::{self, Idempotency, ReceiptStatus, Subject};

/// `write_note`: create a note, or replace the body of one that exists.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteNoteParams {
    /// The note: a slug (`projects/roadmap`, no `.md`) or a note id. A slug no note has
    /// is created there (folders at most one level deep).
    #[schema(min_length = 1)]
    pub note: String,
    /// For a new note, its whole text (frontmatter included, if any). For a note that
    /// exists, the new body after its frontmatter: the frontmatter is kept.
    pub content: String,
    /// For a note that exists: the version read (`version_id` of `read_note`); the
    /// write is refused with `VERSION_MOVED` if the note changed since.
    pub version_id: Option<String>,
    /// Who asks (1..100 characters); default: the client's name. It grants nothing.
    pub agent_id: Option<String>,
    /// Unique per distinct write; default: derived from the tool and its arguments, so
    /// a retried call replays the first answer.
    pub idempotency_key: Option<String>,
}

/// `edit_note`: the `:edit` contract.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditNoteParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// The version read (`version_id` of `read_note`).
    pub version_id: String,
    /// Text that occurs exactly once in the note.
    pub old_string: String,
    /// What replaces it.
    pub new_string: String,
    /// Who asks (1..100 characters); default: the client's name. It grants nothing.
    pub agent_id: Option<String>,
    /// Unique per distinct write; default: derived from the tool and its arguments.
    pub idempotency_key: Option<String>,
}

/// `append_note`: the `:append` contract.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendNoteParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// The lines to add.
    pub content: String,
    /// A heading's text (`Tasks` or `## Tasks`): add at the end of its section, not of the note.
    pub heading: Option<String>,
    /// The version read; when given, a note changed since is `VERSION_MOVED`.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `replace_section`: the `:replaceSection` contract.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceSectionParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// The heading's text (`Tasks` or `## Tasks`), once in the note.
    pub heading: String,
    /// What the section holds after its heading line.
    pub content: String,
    /// The version read (`version_id` of `read_note`).
    pub version_id: String,
    pub agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `set_frontmatter`: `PATCH /v1/notes/{note}` with one `frontmatter.<key>`.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetFrontmatterParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// A top-level frontmatter key (e.g. `status`, `tags`, `due`).
    #[schema(min_length = 1)]
    pub key: String,
    /// Its new value (a string, number, boolean or list), or null to remove the key.
    #[schema(value_type = Object)]
    pub value: Value,
    /// The version read; when given, a note changed since is `VERSION_MOVED`.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `move_note`: the `:move` contract.
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveNoteParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// The folder to move it into (`\"\"`: the vault's top); links to it are rewritten.
    pub folder: String,
    /// The version read; when given, a note changed since is `VERSION_MOVED`.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `delete_note`: `DELETE /v1/notes/{note}` (the file goes to `.trash/`).
#[derive(Debug, Clone, Deserialize, serde::Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteNoteParams {
    /// The note: a slug or a note id.
    #[schema(min_length = 1)]
    pub note: String,
    /// The version read; when given, a note changed since is `VERSION_MOVED`.
    pub version_id: Option<String>,
    pub agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `append_note` (twin of `POST /v1/notes/{note}:append`).
pub async fn append_note(
    state: Arc<State>,
    p: AppendNoteParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("append_note", &p, p.idempotency_key.as_deref())?;
    let agent = p.agent_id.or(client);
    let request =
        writes::Request::section(p.note, p.version_id, p.heading, p.content, false, agent)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, false)
}

/// `replace_section` (twin of `POST /v1/notes/{note}:replaceSection`).
pub async fn replace_section(
    state: Arc<State>,
    p: ReplaceSectionParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("replace_section", &p, p.idempotency_key.as_deref())?;
    let agent = p.agent_id.or(client);
    let request = writes::Request::section(
        p.note,
        Some(p.version_id),
        Some(p.heading),
        p.content,
        true,
        agent,
    )?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, false)
}

/// `set_frontmatter` (twin of `PATCH /v1/notes/{note}` with `frontmatter.<key>`).
pub async fn set_frontmatter(
    state: Arc<State>,
    p: SetFrontmatterParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("set_frontmatter", &p, p.idempotency_key.as_deref())?;
    let mut frontmatter = serde_json::Map::new();
    frontmatter.insert(p.key.clone(), p.value);
    let patch = writes::NotePatch {
        frontmatter: Some(frontmatter),
        version_id: p.version_id,
        agent_id: p.agent_id.or(client),
        ..Default::default()
    };
    let request = writes::Request::patch(p.note, &format!("frontmatter.{}", p.key), patch)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, true)
}

/// `move_note` (twin of `POST /v1/notes/{note}:move`).
pub async fn move_note(
    state: Arc<State>,
    p: MoveNoteParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("move_note", &p, p.idempotency_key.as_deref())?;
    let agent = p.agent_id.or(client);
    let request = writes::Request::move_note(p.note, p.folder, p.version_id, agent)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, false)
}

/// `delete_note` (twin of `DELETE /v1/notes/{note}`).
pub async fn delete_note(
    state: Arc<State>,
    p: DeleteNoteParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("delete_note", &p, p.idempotency_key.as_deref())?;
    let agent = p.agent_id.or(client);
    let request = writes::Request::delete(p.note, p.version_id, agent)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, false)
}

/// `write_note` (twin of `POST /v1/notes`, and of `PATCH /v1/notes/{note}` with
/// `update_mask=content` for a note that exists).
pub async fn write_note(
    state: Arc<State>,
    p: WriteNoteParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("write_note", &p, p.idempotency_key.as_deref())?;
    let exists = {
        let state = state.clone();
        let note = p.note.clone();
        blocking(move || Ok(crate::queries::status::note_exists(&state, &note))).await?
    };
    if !exists && p.version_id.is_some() {
        return Err(Error::not_found(&p.note));
    }
    let agent = p.agent_id.or(client);
    let request = writes::Request::write_note(p.note, p.content, p.version_id, agent)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, true)
}

/// `edit_note` (twin of `POST /v1/notes/{note}:edit`).
pub async fn edit_note(
    state: Arc<State>,
    p: EditNoteParams,
    client: Option<String>,
) -> Result<Value, Error> {
    let (key, legacy) = tool_key("edit_note", &p, p.idempotency_key.as_deref())?;
    let agent = p.agent_id.or(client);
    let request = writes::Request::edit(p.note, p.version_id, p.old_string, p.new_string, agent)?;
    let receipt = run(state, key, request, Some(legacy)).await?;
    render_value(&receipt, false)
}

/// The idempotency key of a tool call (the caller's, checked like the header, or one
/// derived from the tool and its arguments, as before request identities) and the hash
/// an older version bound the key to (the tool and its arguments).
fn tool_key(
    tool: &str,
    args: &impl serde::Serialize,
    given: Option<&str>,
) -> Result<(String, String), Error> {
    let args = serde_json::to_string(args).map_err(Error::internal_cause)?;
    let mut h = blake3::Hasher::new();
    h.update(tool.as_bytes());
    h.update(&[0]);
    h.update(args.as_bytes());
    let meaning = h.finalize().to_hex().to_string();
    match given {
        Some(k) if (1..=255).contains(&k.len()) && k.chars().all(|c| c.is_ascii_graphic()) => {
            Ok((k.to_string(), meaning))
        }
        Some(_) => Err(Error::invalid_field(
            "idempotency_key",
            "must be 1 to 255 visible ASCII characters",
        )),
        None => Ok((format!("mcp-{}", &meaning[..32]), meaning)),
    }
}

/// Run a validated request through the pipeline under `key`: its (possibly replayed)
/// receipt. The HTTP routes and the MCP write tools both come here.
pub(crate) async fn run(
    state: Arc<State>,
    key: String,
    request: writes::Request,
    legacy: Option<String>,
) -> Result<writes::Receipt, Error> {
    blocking(move || writes::submit(&state, request, Idempotency { key: &key, legacy })).await
}

/// A receipt as MCP answers it: the JSON `render` sends.
pub(crate) fn render_value(receipt: &writes::Receipt, embed_note: bool) -> Result<Value, Error> {
    match wire(receipt, embed_note) {
        Wire::Answered(_, body) => serde_json::from_str(body).map_err(Error::internal_cause),
        Wire::Folder(w) => serde_json::to_value(w).map_err(Error::internal_cause),
        Wire::Note(w) => serde_json::to_value(w).map_err(Error::internal_cause),
    }
}

/// A receipt's wire form.
pub(crate) enum Wire<'a> {
    Note(Box<Receipt>),
    Folder(Box<crate::surface::wire::FolderReceipt>),
    Answered(u16, &'a str),
}

pub(crate) fn wire(receipt: &writes::Receipt, embed_note: bool) -> Wire<'_> {
    let status_text = match receipt.status {
        ReceiptStatus::Applied => "applied",
        ReceiptStatus::Queued => "queued",
    };
    let links_failed = || {
        receipt
            .links_failed
            .iter()
            .map(|(slug, reason)| crate::surface::wire::LinkFailure {
                slug: slug.clone(),
                reason: crate::surface::envelope::in_vault_terms(reason),
            })
            .collect()
    };
    let flow_back_error = receipt
        .flow_back_error
        .as_deref()
        .map(crate::surface::envelope::in_vault_terms);
    match &receipt.subject {
        Subject::Answered { status, body } => Wire::Answered(*status, body),
        Subject::Folder(folder) => Wire::Folder(Box::new(crate::surface::wire::FolderReceipt {
            status: status_text.into(),
            path: folder.path.clone(),
            from_path: folder.from_path.clone(),
            pending_id: receipt.pending_id.clone(),
            committed_seq: receipt.committed_seq,
            notes: folder.notes,
            trashed_to: folder.trashed_to.clone(),
            links_updated: receipt.links_updated,
            links_failed: links_failed(),
            flow_back_error,
        })),
        Subject::Note(_) | Subject::Attachment(_) => Wire::Note(Box::new(Receipt {
            status: status_text.into(),
            slug: receipt.slug.clone(),
            pending_id: receipt.pending_id.clone(),
            note_id: receipt.note_id.clone(),
            version_id: receipt.version_id.clone(),
            content_hash: receipt.content_hash.clone(),
            committed_seq: receipt.committed_seq,
            note: receipt.note().filter(|_| embed_note).map(NoteHandle::from),
            renamed: receipt.renamed,
            unchanged: receipt.unchanged,
            links_updated: receipt.links_updated,
            links_failed: links_failed(),
            flow_back_error,
        })),
    }
}
