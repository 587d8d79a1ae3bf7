//! The device sync plane over HTTP: `GET /v1/sync/ops`, `GET /v1/sync/snapshot`,
//! `POST /v1/sync/ops`, `POST /v1/sync/checkpoint` and `POST /v1/sync:compact` (the key
//! routes are `api::sync_keys`). Wire types live here and are converted from `sync`'s
//! domain types at the edge.

use std::sync::Arc;

use crate::api::wire::Json;
use axum::body::Bytes;
use axum::http::request::Parts;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::{ApiResult, ErrorEnvelope};
use crate::api::params::{page_size, PageTokens, Query};
use crate::error::Error;
use crate::state::State;
use crate::surface::blocking;
use crate::sync::{self as domain, Cursor};

/// One op of the sync log.
#[derive(Debug, Serialize, ToSchema)]
pub struct SyncOp {
    /// The change's `committed_seq`.
    pub seq: i64,
    /// `upsert`, `delete`, `move`, `attachment_upsert`, `attachment_delete`, or
    /// `e2ee_key` (the wrapped key of private notes changed: `version_id` is the new
    /// `keyVersion`; read `GET /v1/sync/e2ee`).
    pub kind: String,
    /// The note's id (`null` for an attachment op).
    pub note_id: Option<String>,
    /// The note's slug (path without `.md`; `null` for an attachment op).
    pub slug: Option<String>,
    /// Vault-relative path after the op (for a delete: where it was).
    pub path: String,
    /// Where a moved note was.
    pub from_path: Option<String>,
    pub version_id: Option<String>,
    pub prev_version_id: Option<String>,
    /// `blake3:<hex>` of a note's bytes, `sha256:<hex>` of an attachment's; `null` for a
    /// delete.
    pub content_hash: Option<String>,
    /// `standard` or `private`.
    pub visibility: String,
    pub actor: String,
    pub created_at: String,
    /// The note's bytes at this version, base64 (standard notes whose version is still
    /// current). Attachments are read with `GET /v1/attachments/{file_name}?sha256=`.
    pub content_base64: Option<String>,
    /// A later op of this note exists: the bytes are not carried; apply only the path
    /// change, the later op brings the content.
    pub superseded: bool,
}

/// A note's slug: its path without `.md` (a private note's: without `.nvpriv`).
fn slug_of(path: &str) -> String {
    path.strip_suffix(".md")
        .or_else(|| path.strip_suffix(crate::vault::PRIVATE_SUFFIX))
        .unwrap_or(path)
        .to_string()
}

fn wire_op(o: domain::Op) -> SyncOp {
    let r = o.row;
    SyncOp {
        seq: r.seq,
        slug: (r.note_id.is_some() || r.visibility == "private").then(|| slug_of(&r.path)),
        kind: r.kind,
        note_id: r.note_id,
        path: r.path,
        from_path: r.from_path,
        version_id: r.version_id,
        prev_version_id: r.prev_version_id,
        content_hash: r.content_hash,
        visibility: r.visibility,
        actor: r.actor,
        created_at: r.created_at,
        content_base64: o.content.map(|b| STANDARD.encode(b)),
        superseded: o.superseded,
    }
}

/// A page of ops.
#[derive(Debug, Serialize, ToSchema)]
pub struct SyncOpsPage {
    pub ops: Vec<SyncOp>,
    /// Read the next page with `after_seq` set to this.
    pub next_after_seq: i64,
    /// More ops wait up to `committed_seq`.
    pub has_more: bool,
    pub committed_seq: i64,
    /// Ops at or below this seq may have been compacted; reading after a lower seq
    /// answers `SYNC_COMPACTED`.
    pub compacted_through_seq: i64,
}

/// Read the op log after `after_seq`, by seq.
#[utoipa::path(
    get,
    path = "/v1/sync/ops",
    tag = "Sync",
    params(
        ("after_seq" = i64, Query, minimum = 0, description = "The last seq the device applied (0: from the start)."),
        ("page_size" = Option<usize>, Query, minimum = 1, maximum = 500),
    ),
    responses(
        (status = 200, description = "A page of ops.", body = SyncOpsPage),
        (status = 400, description = "`after_seq` missing, negative, not a number or beyond `committed_seq`.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The credential may not read this vault.", body = ErrorEnvelope),
        (status = 410, description = "`SYNC_COMPACTED`: read the snapshot, then ops after `compacted_through_seq`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn ops_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<SyncOpsPage>> {
    let q = Query::parse(parts.uri.query(), &["after_seq", "page_size"])?;
    let raw = q.str("after_seq").ok_or_else(|| {
        Error::invalid_field("after_seq", "is required (0 to read from the start)")
    })?;
    let after: i64 = raw.trim().parse().map_err(|_| {
        Error::invalid_field("after_seq", format!("must be an integer, got {raw:?}"))
    })?;
    let size = page_size(
        q.opt_int("page_size", 1, domain::MAX_PAGE)?,
        (domain::DEFAULT_PAGE, domain::MAX_PAGE),
    )?;
    let page = blocking(move || domain::ops(&state, after, size)).await?;
    Ok(Json(SyncOpsPage {
        next_after_seq: page.next_after_seq,
        has_more: page.has_more,
        committed_seq: page.committed_seq,
        compacted_through_seq: page.compacted_through_seq,
        ops: page.ops.into_iter().map(wire_op).collect(),
    }))
}

/// One live note or attachment of a snapshot.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotEntry {
    /// `note` or `attachment`.
    pub kind: String,
    pub note_id: Option<String>,
    pub slug: Option<String>,
    pub path: String,
    pub version_id: Option<String>,
    /// `blake3:<hex>` of a note, `sha256:<hex>` of an attachment.
    pub content_hash: Option<String>,
    pub visibility: String,
    /// The seq of the op that made this state.
    pub seq: i64,
    /// A standard note's bytes at the cut, base64; a private note's ciphertext as the
    /// daemon holds it now (changed after the cut: the newer one, with its
    /// `content_hash`); `null` for attachments and a private note deleted since.
    pub content_base64: Option<String>,
}

/// A page of the snapshot.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotPage {
    /// The cut: every page shows the vault at this seq; continue with
    /// `GET /v1/sync/ops?after_seq=<seq>` once every page is read.
    pub seq: i64,
    pub entries: Vec<SnapshotEntry>,
    /// The next page (`null`: this was the last).
    pub next_page_token: Option<String>,
}

const SNAPSHOT_TOKEN_QUERY: &[(&str, &str)] = &[("route", "GET /v1/sync/snapshot")];

fn cursor_text(c: &Cursor) -> String {
    format!("{}\n{}\n{}", c.at, c.horizon, c.after_path)
}

fn cursor_of(text: &str) -> Result<Cursor, Error> {
    let bad = || Error::invalid_field("page_token", "is not a page token of this route");
    let mut parts = text.splitn(3, '\n');
    let mut number =
        || -> Result<i64, Error> { parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad) };
    let (at, horizon) = (number()?, number()?);
    Ok(Cursor {
        at,
        horizon,
        after_path: parts.next().ok_or_else(bad)?.to_string(),
    })
}

/// Every live note and attachment at one seq, paged with a consistent cut.
#[utoipa::path(
    get,
    path = "/v1/sync/snapshot",
    tag = "Sync",
    params(
        ("page_size" = Option<usize>, Query, minimum = 1, maximum = 500),
        ("page_token" = Option<String>, Query, min_length = 1),
    ),
    responses(
        (status = 200, description = "A page of the snapshot.", body = SnapshotPage),
        (status = 400, description = "A bad `page_size` or `page_token`.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The credential may not read this vault.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 503, description = "History has not recorded a version yet (`HISTORY_BEHIND`).", body = ErrorEnvelope),
    )
)]
pub async fn snapshot_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<SnapshotPage>> {
    let q = Query::parse(parts.uri.query(), &["page_size", "page_token"])?;
    let size = page_size(
        q.opt_int("page_size", 1, domain::MAX_PAGE)?,
        (domain::DEFAULT_PAGE, domain::MAX_PAGE),
    )?;
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let cursor = match q.non_empty("page_token")? {
        Some(token) => Some(cursor_of(&tokens.open(SNAPSHOT_TOKEN_QUERY, token)?)?),
        None => None,
    };
    let key = state.token_key;
    let page = blocking(move || domain::snapshot(&state, cursor, size)).await?;
    let tokens = PageTokens { key: &key };
    Ok(Json(SnapshotPage {
        seq: page.seq,
        next_page_token: page
            .next
            .map(|c| tokens.issue(SNAPSHOT_TOKEN_QUERY, &cursor_text(&c))),
        entries: page
            .entries
            .into_iter()
            .map(|e| {
                let r = e.row;
                let note = r.note_id.is_some() || r.visibility == "private";
                SnapshotEntry {
                    kind: if note { "note" } else { "attachment" }.to_string(),
                    slug: note.then(|| slug_of(&r.path)),
                    note_id: r.note_id,
                    path: r.path,
                    version_id: r.version_id,
                    content_hash: r.content_hash,
                    visibility: r.visibility,
                    seq: r.seq,
                    content_base64: e.content.map(|b| STANDARD.encode(b)),
                }
            })
            .collect(),
    }))
}

/// `POST /v1/sync/checkpoint`.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// The device's own id (1..100 characters).
    pub device_id: String,
    /// The last seq the device has applied.
    pub seq: i64,
}

/// The recorded checkpoint.
#[derive(Debug, Serialize, ToSchema)]
pub struct Checkpoint {
    pub device_id: String,
    pub seq: i64,
    pub committed_seq: i64,
}

/// Record the seq a device has applied; compaction keeps what the oldest live
/// checkpoint still needs.
#[utoipa::path(
    post,
    path = "/v1/sync/checkpoint",
    tag = "Sync",
    request_body = CheckpointRequest,
    responses(
        (status = 200, description = "Recorded.", body = Checkpoint),
        (status = 400, description = "A bad field.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The token lacks `notes.write`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn checkpoint_route(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<Checkpoint>> {
    Query::parse(parts.uri.query(), &[])?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let req: CheckpointRequest = crate::api::writes::parse_as(&raw)?;
    let len = req.device_id.chars().count();
    if !(1..=100).contains(&len) {
        return Err(Error::invalid_field("device_id", "must be 1 to 100 characters").into());
    }
    if req.seq < 0 {
        return Err(Error::invalid_field("seq", "must be 0 or more").into());
    }
    let CheckpointRequest { device_id, seq } = req;
    let id = device_id.clone();
    let committed = blocking(move || domain::checkpoint(&state, &id, seq)).await?;
    Ok(Json(Checkpoint {
        device_id,
        seq,
        committed_seq: committed,
    }))
}

/// What a compaction did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Compaction {
    pub compacted_through_seq: i64,
    pub dropped: usize,
}

/// Compact the op log now (it is also compacted hourly): ops older than
/// `sync_retention_days` that every live checkpoint has passed are dropped, except the
/// latest op of each note and delete tombstones.
#[utoipa::path(
    post,
    path = "/v1/sync:compact",
    tag = "Sync",
    responses(
        (status = 200, description = "Compacted.", body = Compaction),
        (status = 400, description = "A bad parameter.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The token lacks `notes.review`.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
    )
)]
pub async fn compact_route(state: Arc<State>, parts: Parts) -> ApiResult<Json<Compaction>> {
    Query::parse(parts.uri.query(), &[])?;
    let done = blocking(move || domain::compact(&state, chrono::Utc::now())).await?;
    Ok(Json(Compaction {
        compacted_through_seq: done.compacted_through_seq,
        dropped: done.dropped,
    }))
}

/// One op a device pushes.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushOpRequest {
    /// `upsert` (create without a base, else replace the whole file), `delete` or
    /// `move` (a new folder or a new name, one of the two).
    pub kind: String,
    /// The note's id when the device knows it (else `path` names the note).
    pub note_id: Option<String>,
    /// The note's vault-relative path (with `.md`) as the device knows it.
    pub path: String,
    /// Where a `move` puts the note.
    pub to_path: Option<String>,
    /// The version the device's change is based on: required but for a create. A note
    /// changed since answers `VERSION_MOVED` for this op, and nothing changes.
    pub base_version_id: Option<String>,
    /// The note's whole new file, base64 of UTF-8 (for `upsert`).
    pub content_base64: Option<String>,
    /// `standard` (default) or `private`: a private note's `path` ends in `.nvpriv`,
    /// its `content_base64` is the device's ciphertext envelope and its base is the
    /// file's `content_hash` (`sha256:<hex>`).
    pub visibility: Option<String>,
    /// The op's own Idempotency-Key (1..255 visible ASCII characters), kept by the
    /// device with the op until it is settled: a retry of the op in any later batch
    /// replays its receipt (a queued op is never queued twice). Without it the op's key
    /// is the batch's `Idempotency-Key` and its index.
    pub idempotency_key: Option<String>,
}

/// `POST /v1/sync/ops`.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The pushing device (1..100 characters); its writes carry the actor
    /// `device:<device_id>`.
    pub device_id: String,
    /// 1..500 ops, at most one per note.
    pub ops: Vec<PushOpRequest>,
}

/// What became of one pushed op.
#[derive(Debug, Serialize, ToSchema)]
pub struct PushResult {
    pub index: usize,
    /// `applied`, `queued` or `failed`.
    pub status: String,
    /// The write receipt (applied or queued).
    #[schema(value_type = Option<Object>)]
    pub receipt: Option<Value>,
    /// Why the op failed (`VERSION_MOVED`: the note changed since the base; keep the
    /// device's edit as a conflicted copy).
    pub error: Option<ErrorEnvelope>,
}

/// The results of a push, one per op in order.
#[derive(Debug, Serialize, ToSchema)]
pub struct PushResults {
    pub results: Vec<PushResult>,
    pub committed_seq: i64,
}

/// An op's own Idempotency-Key, held to the header's rule.
fn op_key(i: usize, key: Option<&str>) -> Result<Option<String>, Error> {
    match key {
        None => Ok(None),
        Some(k) if (1..=255).contains(&k.len()) && k.chars().all(|c| c.is_ascii_graphic()) => {
            Ok(Some(k.to_string()))
        }
        Some(_) => Err(Error::invalid_field(
            format!("ops[{i}].idempotency_key"),
            "must be 1 to 255 visible ASCII characters",
        )),
    }
}

fn push_op(i: usize, o: PushOpRequest) -> Result<domain::push::PushOp, Error> {
    use domain::push::PushOp;
    let at = |f: &str| format!("ops[{i}].{f}");
    match o.visibility.as_deref() {
        None | Some("standard") => {}
        Some("private") => return private_push_op(i, o),
        Some(v) => {
            return Err(Error::invalid_field(
                at("visibility"),
                format!("{v:?} is not a visibility; use standard or private"),
            ))
        }
    }
    let base = || {
        o.base_version_id
            .clone()
            .ok_or_else(|| Error::invalid_field(at("base_version_id"), "is required for this kind"))
    };
    let note = || {
        o.note_id
            .clone()
            .unwrap_or_else(|| o.path.strip_suffix(".md").unwrap_or(&o.path).to_string())
    };
    let refuse = |field: &str, why: &str| Err(Error::invalid_field(at(field), why));
    match o.kind.as_str() {
        "upsert" => {
            if o.to_path.is_some() {
                return refuse("to_path", "is only for a move");
            }
            let b64 = match &o.content_base64 {
                Some(b) => b,
                None => return refuse("content_base64", "is required for an upsert"),
            };
            let bytes = STANDARD.decode(b64).map_err(|_| {
                Error::invalid_field(at("content_base64"), "is not valid standard base64")
            })?;
            let content = String::from_utf8(bytes).map_err(|_| {
                Error::invalid_field(at("content_base64"), "does not decode to UTF-8 text")
            })?;
            Ok(PushOp::Upsert {
                note: o.note_id.clone(),
                path: o.path.clone(),
                base_version_id: o.base_version_id.clone(),
                content,
            })
        }
        "delete" => {
            if o.content_base64.is_some() || o.to_path.is_some() {
                return refuse("kind", "a delete carries no content and no to_path");
            }
            Ok(PushOp::Delete {
                note: note(),
                base_version_id: base()?,
            })
        }
        "move" => {
            if o.content_base64.is_some() {
                return refuse(
                    "content_base64",
                    "a move carries no content; push an upsert after it",
                );
            }
            let to_path = match &o.to_path {
                Some(t) => t.clone(),
                None => return refuse("to_path", "is required for a move"),
            };
            Ok(PushOp::Move {
                note: o.note_id.clone(),
                path: o.path.clone(),
                to_path,
                base_version_id: base()?,
            })
        }
        other => Err(Error::invalid_field(
            at("kind"),
            format!("{other:?} is not a kind; use upsert, delete or move"),
        )),
    }
}

/// A private note's op: its file (`<name>.nvpriv`) and a device's ciphertext envelope;
/// the base is the file's `content_hash` (`sha256:<hex>`). Never a plaintext: content
/// that is not an envelope is refused.
fn private_push_op(i: usize, o: PushOpRequest) -> Result<domain::push::PushOp, Error> {
    use domain::push::PushOp;
    let at = |f: &str| format!("ops[{i}].{f}");
    if !crate::vault::is_private_note(&o.path) {
        return Err(Error::invalid_field(
            at("path"),
            format!(
                "a private note's file ends in {}",
                crate::vault::PRIVATE_SUFFIX
            ),
        ));
    }
    if o.note_id.is_some() || o.to_path.is_some() {
        return Err(Error::invalid_field(
            at("kind"),
            "a private note is named by its path; move it as a delete and an upsert",
        ));
    }
    match o.kind.as_str() {
        "upsert" => {
            let b64 = o.content_base64.ok_or_else(|| {
                Error::invalid_field(at("content_base64"), "is required for an upsert")
            })?;
            let bytes = STANDARD.decode(&b64).map_err(|_| {
                Error::invalid_field(at("content_base64"), "is not valid standard base64")
            })?;
            if !bytes.starts_with(crate::vault::PRIVATE_MAGIC) {
                return Err(Error::invalid_field(
                    at("content_base64"),
                    "is not a private-note envelope (it starts with `notevault-private v1`)",
                ));
            }
            Ok(PushOp::PutPrivate {
                path: o.path,
                base: o.base_version_id,
                ciphertext: b64,
            })
        }
        "delete" => Ok(PushOp::DeletePrivate {
            base: o.base_version_id.ok_or_else(|| {
                Error::invalid_field(at("base_version_id"), "is required for a delete")
            })?,
            path: o.path,
        }),
        other => Err(Error::invalid_field(
            at("kind"),
            format!("{other:?} is not a private note's kind; use upsert or delete"),
        )),
    }
}

/// Push a device's ops: each through the one write pipeline with its base version.
#[utoipa::path(
    post,
    path = "/v1/sync/ops",
    tag = "Sync",
    request_body = PushRequest,
    params(("Idempotency-Key" = String, Header, description = "Unique per batch; a retry with the same key and body replays each op's result.")),
    responses(
        (status = 200, description = "One result per op (an op whose base moved answers `VERSION_MOVED` in its result and changed nothing).", body = PushResults),
        (status = 400, description = "A bad batch (`VALIDATION_FAILED` naming `ops[i].field`) or no `Idempotency-Key`; nothing was applied.", body = ErrorEnvelope),
        (status = 401, description = "No or an invalid credential.", body = ErrorEnvelope),
        (status = 403, description = "The token lacks `notes.write`.", body = ErrorEnvelope),
        (status = 413, description = "The batch is over the byte cap.", body = ErrorEnvelope),
        (status = 429, description = "Rate limited.", body = ErrorEnvelope),
        (status = 503, description = "`STORAGE_UNAVAILABLE`: storage refused every op for now; nothing applied, retry after `Retry-After`.", body = ErrorEnvelope),
    )
)]
pub async fn push_route(
    state: Arc<State>,
    parts: Parts,
    body: Bytes,
) -> ApiResult<Json<PushResults>> {
    Query::parse(parts.uri.query(), &[])?;
    let key = crate::api::writes::idempotency_key(&parts.headers)?;
    let raw = crate::api::writes::json_value(&parts.headers, &body)?;
    let req: PushRequest = crate::api::writes::parse_as(&raw)?;
    let len = req.device_id.chars().count();
    if !(1..=100).contains(&len) {
        return Err(Error::invalid_field("device_id", "must be 1 to 100 characters").into());
    }
    let op_keys = req
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| op_key(i, o.idempotency_key.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let ops = req
        .ops
        .into_iter()
        .enumerate()
        .map(|(i, o)| push_op(i, o))
        .collect::<Result<Vec<_>, _>>()?;
    let device = req.device_id;
    // Each op's key by its place in the push as sent, so that a retry finds each op's
    // receipt whichever ops the blob store refused this time.
    let op_keys: Vec<Option<String>> = op_keys
        .into_iter()
        .enumerate()
        .map(|(i, own)| Some(own.unwrap_or_else(|| format!("{key}#{i}"))))
        .collect();
    let checked = state.clone();
    let prepared = blocking(move || domain::push::prepare(&checked, &ops)).await?;
    // Hosted: the checked private notes' ciphertext into the blob store first; an op
    // whose bytes the store did not take is refused alone, the others go on.
    let refused = super::sync_blobs::store_private(&state, &prepared).await;
    let (prepared, op_keys): (Vec<_>, Vec<_>) = prepared
        .into_iter()
        .zip(op_keys)
        .zip(&refused)
        .filter(|(_, r)| r.is_none())
        .map(|(kept, _)| kept)
        .unzip();
    let (applied, committed) = if prepared.is_empty() {
        (Vec::new(), state.committed_seq())
    } else {
        blocking(move || {
            let outcomes = domain::push::push(&state, &device, &key, &op_keys, prepared);
            Ok((outcomes, state.committed_seq()))
        })
        .await?
    };
    let mut applied = applied.into_iter();
    let outcomes: Vec<_> = refused
        .into_iter()
        .map(|r| match r {
            Some(e) => Err(e),
            None => applied
                .next()
                .unwrap_or_else(|| Err(Error::internal("a push op without an outcome"))),
        })
        .collect();
    // Nothing applied, each op refused by storage that is away for now (the database or
    // the blob store): the whole push is that 503 with `Retry-After`, which a client or a
    // load balancer retries. (A refusal of the ops themselves, a spent budget say, stays
    // per op.)
    let away = |e: &Error| {
        matches!(
            e.reason,
            crate::error::Reason::STORAGE_UNAVAILABLE
                | crate::error::Reason::BLOB_STORE_UNAVAILABLE
        ) && e.retry_after.is_some()
    };
    if !outcomes.is_empty() && outcomes.iter().all(|o| o.as_ref().is_err_and(away)) {
        if let Some(Err(e)) = outcomes.into_iter().next() {
            return Err(e.into());
        }
        return Err(Error::internal("a push without outcomes").into());
    }
    let results = outcomes
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| match outcome {
            Ok(receipt) => {
                let (status, body) = crate::api::writes::render(&receipt, false);
                PushResult {
                    index,
                    status: if status == 202 { "queued" } else { "applied" }.to_string(),
                    receipt: serde_json::from_str(&body).ok(),
                    error: None,
                }
            }
            Err(e) => PushResult {
                index,
                status: "failed".to_string(),
                receipt: None,
                error: Some(crate::api::error::envelope(&e)),
            },
        })
        .collect();
    Ok(Json(PushResults {
        results,
        committed_seq: committed,
    }))
}
