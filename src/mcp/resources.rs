//! MCP resources and prompts. Every note is a resource, `note://<slug>` (a template for
//! any slug, a paged list, a read answering its markdown); a session may subscribe to a
//! note and hears `notifications/resources/updated` once it changes, whoever changed it
//! (the catalog is what the pipeline and the watcher both record into). The prompts
//! start common work with the tools.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    GetPromptResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, Role, SubscriptionFilter,
};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};

use crate::error::Error;
use crate::state::State;
use crate::surface::notes::{self, ListNotesParams};

const SCHEME: &str = "note://";
const MARKDOWN: &str = "text/markdown";
/// How often a subscription looks at its note's version.
const POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The one template: any note by its slug.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![ResourceTemplate::new(
        "note://{+slug}",
        "note",
    )
    .with_title("A note")
    .with_description("A note by its slug (its vault path without `.md`), as markdown.")
    .with_mime_type(MARKDOWN)])
}

/// The URI of the note `slug`: its path, `/` kept, other reserved bytes escaped.
fn uri_of(slug: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'/')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    format!(
        "{SCHEME}{}",
        percent_encoding::utf8_percent_encode(slug, KEEP)
    )
}

/// The slug a `note://` URI names (`/` raw or as `%2F`).
fn slug_of(uri: &str) -> Result<String, McpError> {
    let rest = uri.strip_prefix(SCHEME).ok_or_else(|| {
        McpError::invalid_params(
            format!("`{uri}` is not a note:// URI; list them with resources/list"),
            Some(serde_json::json!({"uri": uri})),
        )
    })?;
    let slug = percent_encoding::percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| McpError::invalid_params(format!("`{uri}` is not UTF-8"), None))?;
    let slug = slug.strip_suffix(".md").unwrap_or(&slug);
    if slug.is_empty() {
        return Err(McpError::invalid_params("a note:// URI names a slug", None));
    }
    Ok(slug.to_string())
}

/// A domain error as the JSON-RPC error of a resource request, with the URI and the
/// reason in `data`: an unknown note is `-32602` invalid params (SEP-2164), a failure of
/// the server an internal error.
fn rpc_error(uri: &str, err: &Error) -> McpError {
    let data = serde_json::json!({"uri": uri, "reason": err.reason.as_str()});
    match err.reason.status() {
        500.. => McpError::internal_error(err.message.clone(), Some(data)),
        _ => McpError::invalid_params(err.message.clone(), Some(data)),
    }
}

/// A page of the notes as resources (the cursor is `list_notes`' page token).
pub async fn list(
    state: Arc<State>,
    cursor: Option<String>,
) -> Result<ListResourcesResult, McpError> {
    let params = ListNotesParams {
        page_token: cursor,
        page_size: Some(200),
        ..Default::default()
    };
    let page = notes::list_notes(state, params)
        .await
        .map_err(|e| rpc_error("note://", &e))?;
    let resources = page
        .notes
        .iter()
        .map(|note| {
            Resource::new(uri_of(&note.slug), note.slug.clone())
                .with_title(note.title.clone())
                .with_mime_type(MARKDOWN)
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = page.next_page_token.clone();
    Ok(result)
}

/// A note's markdown, as on disk.
pub async fn read(state: Arc<State>, uri: String) -> Result<ReadResourceResult, McpError> {
    let slug = slug_of(&uri)?;
    let text = notes::markdown(state, slug)
        .await
        .map_err(|e| rpc_error(&uri, &e))?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )
    .with_mime_type(MARKDOWN)]))
}

/// A session's subscriptions: a watch per URI, ended by an unsubscribe, the session's
/// end (the last handle dropped, or its peer gone) or the daemon's stop.
#[derive(Clone, Default)]
pub struct Subscriptions(Arc<Mutex<Watches>>);

/// The watch tasks by URI; dropped with the session, they stop (a dropped `JoinHandle`
/// would let its task run on).
#[derive(Default)]
struct Watches(HashMap<String, tokio::task::JoinHandle<()>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}

impl Subscriptions {
    pub fn subscribe(
        &self,
        state: Arc<State>,
        uri: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        let slug = slug_of(&uri)?;
        let missing = format!("no note {slug}");
        let version = move |state: &State| {
            state
                .catalog
                .read()
                .find(&slug)
                .map(|n| n.version_id.clone())
        };
        if version(&state).is_none() {
            return Err(McpError::invalid_params(
                missing,
                Some(serde_json::json!({"uri": uri, "reason": "NOTE_NOT_FOUND"})),
            ));
        }
        let watched = uri.clone();
        let task = tokio::spawn(async move {
            let mut last = version(&state);
            loop {
                tokio::time::sleep(POLL).await;
                if state.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let now = version(&state);
                if now == last {
                    continue;
                }
                last = now;
                let updated = ResourceUpdatedNotificationParam::new(watched.clone());
                if peer.notify_resource_updated(updated).await.is_err() {
                    return;
                }
            }
        });
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = all.0.insert(uri, task) {
            old.abort();
        }
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = all.0.remove(uri) {
            task.abort();
        }
    }
}

/// The filter a `subscriptions/listen` (2026-07-28) is granted: the resource updates it
/// asked for, nothing else this server would send.
pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    SubscriptionFilter::builder()
        .resource_subscriptions(requested.resource_subscriptions.clone().unwrap_or_default())
        .build()
}

/// One `subscriptions/listen` stream: an update for each accepted note URI once its
/// version changes, until the client cancels or the daemon stops.
pub async fn listen(state: Arc<State>, context: SubscriptionContext) -> Result<(), McpError> {
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let watched: Vec<(String, String)> = uris
        .into_iter()
        .filter_map(|uri| slug_of(&uri).ok().map(|slug| (uri, slug)))
        .collect();
    let versions = |state: &State| -> Vec<Option<String>> {
        let catalog = state.catalog.read();
        watched
            .iter()
            .map(|(_, slug)| catalog.find(slug).map(|n| n.version_id.clone()))
            .collect()
    };
    let mut last = versions(&state);
    loop {
        tokio::select! {
            () = context.cancelled() => return Ok(()),
            () = tokio::time::sleep(POLL) => {}
        }
        if state.stopped.load(Ordering::SeqCst) {
            return Ok(());
        }
        let now = versions(&state);
        for (i, (uri, _)) in watched.iter().enumerate() {
            if now[i] != last[i]
                && context
                    .sink()
                    .notify_resource_updated(uri.clone())
                    .await
                    .is_err()
            {
                return Ok(());
            }
        }
        last = now;
    }
}

/// A prompt: name, title, description, arguments (name, description).
type PromptSpec = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The prompts.
const PROMPTS: &[PromptSpec] = &[
    (
        "find_notes",
        "Find notes about a topic",
        "Search the vault for a topic and summarize what the best notes say, with their slugs.",
        &[("topic", "What to look for, in words")],
    ),
    (
        "changes_since",
        "Summarize what changed",
        "Summarize the notes changed since a time, note by note.",
        &[("since", "An RFC 3339 time or a date, e.g. 2026-11-01")],
    ),
    (
        "tidy_note",
        "Tidy a note",
        "Read one note and propose small, reviewable edits to it.",
        &[("note", "The note's slug or note_id")],
    ),
];

pub fn prompts() -> ListPromptsResult {
    ListPromptsResult::with_all_items(
        PROMPTS
            .iter()
            .map(|(name, title, description, args)| {
                let arguments = args
                    .iter()
                    .map(|(arg, what)| {
                        PromptArgument::new(*arg)
                            .with_description(*what)
                            .with_required(true)
                    })
                    .collect();
                Prompt::new(*name, Some(*description), Some(arguments)).with_title(*title)
            })
            .collect(),
    )
}

/// The messages of prompt `name` with `arguments`.
pub fn prompt(name: &str, arguments: Option<&JsonObject>) -> Result<GetPromptResult, McpError> {
    let Some((_, _, description, args)) = PROMPTS.iter().find(|(n, ..)| *n == name) else {
        return Err(McpError::invalid_params(
            format!("unknown prompt `{name}`; prompts/list names them"),
            None,
        ));
    };
    let arg = |key: &str| -> Result<String, McpError> {
        arguments
            .and_then(|a| a.get(key))
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("prompt `{name}` needs the argument `{key}`"),
                    None,
                )
            })
    };
    let text = match name {
        "find_notes" => {
            let topic = arg(args[0].0)?;
            format!(
                "Find the notes of this vault about: {topic}\n\n\
                 Call `search` with `q` set to a few words for it (and `grep` for exact \
                 strings), read the best hits around their `lines` with `read_note`, then \
                 answer with what they say, naming each note by its slug. Check `coverage` \
                 before saying nothing was found."
            )
        }
        "changes_since" => {
            let since = arg(args[0].0)?;
            let since = if since.len() == 10 {
                format!("{since}T00:00:00Z")
            } else {
                since
            };
            format!(
                "Summarize what changed in this vault since {since}.\n\n\
                 Call `list_notes` with `filter` `updated_at > \"{since}\"` and `order_by` \
                 `updated_at desc` (follow `next_page_token`); for each note, \
                 `list_revisions` with `filter` `created_at > \"{since}\"` says who changed it \
                 and how, and `read_note` what it says now. Answer note by note, newest first."
            )
        }
        _ => {
            let note = arg(args[0].0)?;
            format!(
                "Tidy the note {note}.\n\n\
                 Read it with `read_note` (all of it: follow `lines.next_offset`), then propose \
                 small fixes: typos, broken headings, missing frontmatter such as `tags` or \
                 `status`. Apply each with the smallest tool (`edit_note`, `replace_section`, \
                 `set_frontmatter`) and the `version_id` you read; say what you changed."
            )
        }
    };
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
    result.description = Some((*description).to_string());
    Ok(result)
}
