//! The MCP write tools, `write_note` and `edit_note`: each builds the validated request
//! its `/v1` twin builds and runs it through the same pipeline and rendering, so the
//! tool answers the receipt the route answers (queued under a reviewing policy).
//! The idempotency key is an argument, or derived from the call (the tool and its
//! arguments), so a client that retries a call gets the first call's receipt.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::*;

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
    let args = serde_json::to_string(args).map_err(Error::internal)?;
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
