//! Attachments as every surface lists and links them: the listing (`GET
//! /v1/attachments`, the MCP `list_attachments` tool), presigned links (`POST
//! /v1/attachments:presign`, the MCP `attachment_link` tool), and where an attachment a
//! client names goes (an upload's or a PUT link's folder and name, checked).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Reason};
use crate::state::State;
use crate::surface::blocking;
use crate::surface::notes::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::surface::params::{self, PageTokens};
use crate::surface::wire::ExcludedNote;
use crate::vault::attachments as domain;

/// An attachment: a file of the vault that is not a note.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attachment {
    pub file_name: String,
    /// Vault-relative path.
    pub path: String,
    /// The folder holding it (`""`: the vault root).
    pub folder: String,
    pub size: u64,
    /// Lower-case hex SHA-256 of the bytes (also the download's `ETag`).
    pub sha256: String,
    /// Sniffed from the bytes, else from the extension.
    pub content_type: String,
    pub modified_at: String,
    /// How many notes embed or link it.
    pub referenced_by: usize,
}

impl Attachment {
    pub(crate) fn of(a: &domain::Attachment, referenced_by: usize) -> Self {
        Self {
            file_name: a.file_name().to_string(),
            path: a.path.clone(),
            folder: a.folder().to_string(),
            size: a.size,
            sha256: a.sha256.clone(),
            content_type: a.content_type.clone(),
            modified_at: crate::clock::timestamp(a.modified_at),
            referenced_by,
        }
    }
}

/// What an attachment listing covered.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentCoverage {
    pub attachments_total: usize,
    pub attachments_matched: usize,
    pub attachments_returned: usize,
    pub truncated: bool,
    pub excluded_count: usize,
    pub excluded: Vec<ExcludedNote>,
    pub committed_seq: i64,
}

/// A page of attachments.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentList {
    pub attachments: Vec<Attachment>,
    pub coverage: AttachmentCoverage,
    pub next_page_token: Option<String>,
}

/// What an attachment listing takes: `GET /v1/attachments` and the MCP
/// `list_attachments` tool.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAttachmentsParams {
    /// AIP-160 filter over `folder`, `path`, `file_name`, `content_type`, `size`,
    /// `modified_at`, `referenced` and `sha256`, e.g. `content_type = "image/png" AND
    /// size > 1000`, `referenced = false`.
    pub filter: Option<String>,
    /// AIP-132 order: `path` (default), `file_name`, `size`, `modified_at` or
    /// `content_type`, with `asc` or `desc`.
    pub order_by: Option<String>,
    /// Attachments per page, 1..500 (default 50).
    #[schema(minimum = 1, maximum = 500)]
    pub page_size: Option<usize>,
    /// The `next_page_token` of the previous page; repeat the other parameters unchanged.
    pub page_token: Option<String>,
}

/// List attachments with coverage (both surfaces).
pub async fn list_attachments(
    state: Arc<State>,
    p: ListAttachmentsParams,
) -> Result<AttachmentList, Error> {
    let filter = params::filter_text(
        params::non_empty("filter", p.filter.as_deref())?,
        crate::queries::attachments::FILTER_FIELDS,
    )?;
    let order = params::parse_order(
        params::non_empty("order_by", p.order_by.as_deref())?,
        crate::queries::attachments::ORDER_FIELDS,
        crate::queries::notes::Order::asc("path"),
    )?;
    let page_size = params::in_range(
        "page_size",
        p.page_size,
        DEFAULT_PAGE_SIZE,
        1,
        MAX_PAGE_SIZE,
    )?;
    let filter_text = p.filter.clone().unwrap_or_default();
    let order_text = p.order_by.clone().unwrap_or_default();
    let fingerprint = [
        ("route", "attachments"),
        ("filter", filter_text.as_str()),
        ("order_by", order_text.as_str()),
    ];
    let tokens = PageTokens {
        key: &state.token_key,
    };
    let offset = match params::non_empty("page_token", p.page_token.as_deref())? {
        Some(t) => tokens.open_offset(&fingerprint, t)?,
        None => 0,
    };
    let state2 = state.clone();
    let page = blocking(move || {
        Ok(crate::queries::attachments::list(
            &state2,
            filter.as_ref(),
            (order.field.as_str(), order.desc),
            offset,
            page_size,
        ))
    })
    .await?;
    let next_page_token = page
        .next_offset
        .map(|o| tokens.issue(&fingerprint, &o.to_string()));
    Ok(AttachmentList {
        coverage: AttachmentCoverage {
            attachments_total: page.total,
            attachments_matched: page.matched,
            attachments_returned: page.items.len(),
            truncated: next_page_token.is_some(),
            excluded_count: page.excluded.len(),
            excluded: page
                .excluded
                .iter()
                .take(100)
                .map(ExcludedNote::from)
                .collect(),
            committed_seq: page.committed_seq,
        },
        attachments: page
            .items
            .iter()
            .map(|(a, refs)| Attachment::of(a, *refs))
            .collect(),
        next_page_token,
    })
}

/// What the MCP `attachment_link` tool takes: which attachment, and for how long.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentLinkParams {
    /// A file name found anywhere in the vault.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name.
    pub sha256: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned GET link to an attachment (the MCP `attachment_link` tool): the bytes stay
/// an HTTP download, for the agent or for a person it hands the link to.
pub async fn attachment_link(
    state: Arc<State>,
    p: AttachmentLinkParams,
    base: String,
) -> Result<PresignResponse, Error> {
    let req = PresignRequest {
        file_name: p.file_name,
        path: p.path,
        sha256: p.sha256,
        method: Some("GET".into()),
        expires_in: p.expires_in,
    };
    presign_link(state, req, base, false).await
}

/// A presigned link's request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PresignRequest {
    /// A file name found anywhere in the vault (GET), or the name a PUT creates in the
    /// attachment folder.
    pub file_name: Option<String>,
    /// A vault-relative path (instead of `file_name`).
    pub path: Option<String>,
    /// With `file_name`, which of several files of that name (GET).
    pub sha256: Option<String>,
    /// `GET` (default; reusable until it expires) or `PUT` (once; needs `notes.write`).
    pub method: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
}

/// A presigned link.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PresignResponse {
    pub url: String,
    pub method: String,
    pub expires_at: String,
    /// The vault-relative path the link reads or creates.
    pub path: String,
}

/// What a path segment of a link escapes.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\');

/// Shortest and longest life of a presigned link, and its default.
pub const PRESIGN_MIN_SECS: i64 = 10;
pub const PRESIGN_MAX_SECS: i64 = 24 * 3600;
pub const PRESIGN_DEFAULT_SECS: i64 = 300;

/// Make a presigned link (both surfaces). `can_write`: the caller holds `notes.write`.
pub async fn presign_link(
    state: Arc<State>,
    req: PresignRequest,
    base: String,
    can_write: bool,
) -> Result<PresignResponse, Error> {
    let method = req.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    if method != "GET" && method != "PUT" {
        return Err(Error::invalid_field("method", "must be GET or PUT"));
    }
    let ttl = req
        .expires_in
        .unwrap_or(PRESIGN_DEFAULT_SECS)
        .clamp(PRESIGN_MIN_SECS, PRESIGN_MAX_SECS);
    let name = match (&req.file_name, &req.path) {
        (Some(n), None) | (None, Some(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(Error::invalid_field(
                "file_name",
                "give exactly one of `file_name` and `path`",
            ))
        }
    };
    let state2 = state.clone();
    let path = if method == "GET" {
        let sha = req.sha256.clone();
        blocking(move || crate::queries::attachments::find(&state2, &name, sha.as_deref()))
            .await?
            .path
            .clone()
    } else {
        if !can_write {
            return Err(Error::new(
                Reason::PERMISSION_MISSING,
                "a presigned PUT link needs the notes.write permission",
            )
            .with_meta("scope", "notes.write"));
        }
        let (folder, file) = match name.rsplit_once('/') {
            Some((f, n)) => (f.to_string(), n.to_string()),
            None => (default_folder(&state), name.clone()),
        };
        let path = target_path(&state, &folder, &file)?;
        if state.paths.root.join(&path).exists() {
            return Err(Error::new(
                Reason::NAME_COLLISION,
                format!("{path:?} already exists"),
            ));
        }
        path
    };
    let expires = chrono::Utc::now().timestamp() + ttl;
    let nonce = if method == "PUT" {
        uuid::Uuid::new_v4().simple().to_string()
    } else {
        String::new()
    };
    let sig =
        crate::auth::presigned::signature(&state.presign_key, &method, &path, expires, &nonce);
    let encoded: Vec<String> = path
        .split('/')
        .map(|p| percent_encoding::utf8_percent_encode(p, SEGMENT).to_string())
        .collect();
    let mut url = format!(
        "{base}/v1/attachments/{}?expires={expires}&signature={sig}",
        encoded.join("/")
    );
    if !nonce.is_empty() {
        url.push_str(&format!("&nonce={nonce}"));
    }
    Ok(PresignResponse {
        url,
        method,
        expires_at: crate::clock::timestamp(
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        ),
        path,
    })
}

/// The folder an upload goes to when none is given: Obsidian's `attachmentFolderPath`
/// (`.obsidian/app.json`), read as a vault folder (`./x` has no note to be relative to
/// here, so it is `x`); the vault root otherwise.
pub fn default_folder(state: &State) -> String {
    let Ok(text) = std::fs::read_to_string(state.paths.root.join(".obsidian/app.json")) else {
        return String::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return String::new();
    };
    let raw = v
        .get("attachmentFolderPath")
        .and_then(|f| f.as_str())
        .unwrap_or("");
    raw.trim_start_matches("./")
        .trim_matches('/')
        .trim()
        .to_string()
}

/// Check an upload's folder (`""`: the vault root) and file name, and join them.
pub fn target_path(state: &State, folder: &str, name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::invalid_field("file", "has no file name"));
    }
    if name.contains('/') || name.contains('\\') || name.contains('\0') || name == ".." {
        return Err(Error::unsafe_path(format!(
            "the file name {name:?} is not a plain name"
        )));
    }
    if !crate::vault::path::is_attachment_name(name) {
        return Err(Error::invalid_field(
            "file",
            "a markdown file is a note: create it with `POST /v1/notes`",
        ));
    }
    let folder = folder.trim_end_matches('/');
    if !folder.is_empty() {
        let safe = state.paths.resolve_new(folder)?;
        if safe.abs.exists() && !safe.abs.is_dir() {
            return Err(Error::invalid_field("folder", "is a file, not a folder"));
        }
    }
    let path = if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    };
    let rel = state.paths.resolve_new(&path)?.rel;
    // The API makes folders one level deep, for attachments as for notes.
    crate::writes::folder_creatable(state, &rel)?;
    Ok(rel)
}
