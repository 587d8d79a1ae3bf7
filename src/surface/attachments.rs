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
    settle_quietly(&state).await;
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
        size: None,
        content_type: None,
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
    /// With `file_name`, which of several files of that name (GET). A PUT link the blob
    /// store serves: the SHA-256 (hex) of the bytes, required; the store refuses others.
    pub sha256: Option<String>,
    /// `GET` (default; reusable until it expires) or `PUT` (needs `notes.write`; once,
    /// or, served by the blob store, until it expires, each time the same bytes).
    pub method: Option<String>,
    /// Seconds, clamped to 10..86400 (default 300).
    pub expires_in: Option<i64>,
    /// A PUT link the blob store serves: the body's size in bytes, required (signed as
    /// `Content-Length`). Ignored by the instance's own links.
    pub size: Option<u64>,
    /// A PUT link the blob store serves: the body's media type, required (signed as
    /// `Content-Type`). Ignored by the instance's own links.
    pub content_type: Option<String>,
}

/// A presigned link. With `blob_public_endpoint` set (hosted mode), the blob store's own
/// SigV4 URL: the bytes go between the client and the store; a PUT's object becomes the
/// attachment at `path` at the vault's next attachment listing or presign call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PresignResponse {
    pub url: String,
    pub method: String,
    pub expires_at: String,
    /// The vault-relative path the link reads or creates.
    pub path: String,
    /// A PUT link the blob store serves: the headers the request must send as given
    /// (they are signed). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
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
    if let Some(links) = state.shared.as_ref().and_then(|s| s.links.clone()) {
        let link = StoreLink {
            method,
            ttl,
            name,
            can_write,
        };
        return store_link(state, links, req, link).await;
    }
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
    // Hosted: any instance serves the link, and finds its vault by it.
    if state.shared.is_some() {
        url.push_str(&format!("&vault={}", state.vault_id));
    }
    Ok(PresignResponse {
        url,
        method,
        expires_at: crate::clock::timestamp(
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        ),
        path,
        headers: None,
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

/// Whether an upload of type `effective` is allowed here (`upload_types`), else
/// `UNSUPPORTED_MEDIA_TYPE`.
pub fn allowed_type(state: &State, effective: &str) -> Result<(), Error> {
    let allowed = state.config.upload_types.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        match a.strip_suffix("/*") {
            Some(family) => effective.split('/').next() == Some(family),
            None => a == effective,
        }
    });
    if !allowed {
        return Err(Error::new(
            Reason::UNSUPPORTED_MEDIA_TYPE,
            format!("uploads of type {effective} are not allowed here"),
        )
        .with_meta("content_type", effective.to_string())
        .with_meta("allowed", state.config.upload_types.join(" ")));
    }
    Ok(())
}

/// Whether a browser may show `content_type` inline: raster images, audio, video and
/// plain text, which cannot run script. SVG, HTML, XML, PDF and everything unknown are
/// downloaded instead.
pub fn inline(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "image/png"
            | "image/jpeg"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "image/bmp"
            | "image/x-icon"
            | "image/vnd.microsoft.icon"
            | "text/plain"
    ) || (essence.starts_with("audio/") || essence.starts_with("video/"))
        && !essence.contains("xml")
}

/// The `Content-Disposition` of an attachment named `file_name` of `content_type`.
pub fn disposition(content_type: &str, file_name: &str) -> String {
    let how = if inline(content_type) {
        "inline"
    } else {
        "attachment"
    };
    format!(
        "{how}; filename*=UTF-8''{}",
        percent_encoding::utf8_percent_encode(file_name, percent_encoding::NON_ALPHANUMERIC)
    )
}

/// What `presign_link` checked of a link before it went to the blob store.
struct StoreLink {
    method: String,
    ttl: i64,
    name: String,
    can_write: bool,
}

/// A link the blob store serves: a GET of the attachment's blob, or a PUT of exactly the
/// declared bytes to a staging object, with its pending row.
async fn store_link(
    state: Arc<State>,
    links: Arc<crate::storage::presign::StoreLinks>,
    req: PresignRequest,
    link: StoreLink,
) -> Result<PresignResponse, Error> {
    // A finished PUT is an attachment before anything is looked up.
    settle_quietly(&state).await;
    let ttl = std::time::Duration::from_secs(link.ttl as u64);
    let expires = chrono::Utc::now().timestamp() + link.ttl;
    let expires_at =
        crate::clock::timestamp(chrono::DateTime::from_timestamp(expires, 0).unwrap_or_default());
    let state2 = state.clone();
    if link.method == "GET" {
        let (name, sha) = (link.name, req.sha256.clone());
        let a = blocking(move || crate::queries::attachments::find(&state2, &name, sha.as_deref()))
            .await?;
        let url = links.get_url(
            &state.vault_id,
            &a.sha256,
            ttl,
            &a.content_type,
            &disposition(&a.content_type, a.file_name()),
        )?;
        return Ok(PresignResponse {
            url,
            method: link.method,
            expires_at,
            path: a.path.clone(),
            headers: None,
        });
    }
    if !link.can_write {
        return Err(Error::new(
            Reason::PERMISSION_MISSING,
            "a presigned PUT link needs the notes.write permission",
        )
        .with_meta("scope", "notes.write"));
    }
    let size = req.size.ok_or_else(|| {
        Error::invalid_field("size", "a PUT link of the blob store needs the body's size")
    })?;
    let cap = state.config.max_upload_bytes;
    if size == 0 {
        return Err(Error::invalid_field(
            "size",
            "is 0: an attachment has at least one byte",
        ));
    }
    if size > cap {
        return Err(Error::new(
            Reason::PAYLOAD_TOO_LARGE,
            format!("the upload is over the byte cap of {cap} bytes"),
        )
        .with_meta("max_upload_bytes", cap.to_string()));
    }
    let content_type = req
        .content_type
        .as_deref()
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|t| t.contains('/') && !t.chars().any(|c| c.is_whitespace() || c.is_control()))
        .ok_or_else(|| {
            Error::invalid_field(
                "content_type",
                "a PUT link of the blob store needs the body's media type (type/subtype)",
            )
        })?;
    allowed_type(&state, &content_type)?;
    let sha256 = req
        .sha256
        .as_deref()
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| {
            Error::invalid_field(
                "sha256",
                "a PUT link of the blob store needs the body's SHA-256",
            )
        })?;
    crate::storage::presign::sha256_base64(&sha256)?;
    let (folder, file) = match link.name.rsplit_once('/') {
        Some((f, n)) => (f.to_string(), n.to_string()),
        None => (default_folder(&state), link.name.clone()),
    };
    let path = target_path(&state, &folder, &file)?;
    if state.attachments.read().get(&path).is_some() {
        return Err(Error::new(
            Reason::NAME_COLLISION,
            format!("{path:?} already exists"),
        ));
    }
    let pending = crate::storage::presign::Pending {
        id: uuid::Uuid::now_v7().simple().to_string(),
        path: path.clone(),
        sha256,
        size,
        content_type,
        agent_id: "presigned-link".into(),
        // The row outlives the link a little: an upload started in time may end late.
        expires_at: expires,
    };
    let (url, headers) = links.put_url(&state.vault_id, &pending, ttl)?;
    let links2 = links.clone();
    let vault = state.vault_id.clone();
    blocking(move || links2.pending.add(&vault, &pending)).await?;
    Ok(PresignResponse {
        url,
        method: link.method,
        expires_at,
        path,
        headers: Some(
            headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        ),
    })
}

/// [`settle_store_uploads`], its failure logged: a listing or a link does not wait on
/// uploads the store cannot tell about now (the next call tries again).
async fn settle_quietly(state: &Arc<State>) {
    if let Err(e) = settle_store_uploads(state).await {
        tracing::warn!(vault = %state.vault_id, error = %e.message, "presigned uploads not settled");
    }
}

/// Turn the vault's finished PUT links of the blob store into attachments: each staging
/// object of the declared size and SHA-256 (the store's checksum) is copied to its blob
/// by the store and recorded through the write pipeline (its link's id is the
/// `Idempotency-Key`, so instances settling at once record it once); an object that
/// does not match is removed; a link expired unused (after [`PUT_GRACE_SECS`]) leaves
/// nothing.
///
/// [`PUT_GRACE_SECS`]: crate::storage::presign::PUT_GRACE_SECS
pub async fn settle_store_uploads(state: &Arc<State>) -> Result<(), Error> {
    let Some(links) = state.shared.as_ref().and_then(|s| s.links.clone()) else {
        return Ok(());
    };
    let vault = state.vault_id.clone();
    let (links2, vault2) = (links.clone(), vault.clone());
    let pending = blocking(move || links2.pending.list(&vault2)).await?;
    let now = chrono::Utc::now().timestamp();
    for p in pending {
        let over = now > p.expires_at + crate::storage::presign::PUT_GRACE_SECS;
        let want = crate::storage::presign::sha256_base64(&p.sha256)?;
        match links.staged(&vault, &p.id).await? {
            Some(s) if s.size == p.size && s.sha256_base64.as_deref() == Some(want.as_str()) => {}
            found => {
                // Bytes the store took against its checksum (some stores keep them) go;
                // the link may still be used with the right ones until it expires.
                if found.is_some() {
                    links.discard(&vault, &p.id).await?;
                }
                if over {
                    forget(&links, &vault, &p.id).await?;
                }
                continue;
            }
        }
        links.adopt(&vault, &p.id, &p.sha256).await?;
        let request = crate::writes::Request::put_attachment(
            p.path.clone(),
            String::new(),
            p.sha256.clone(),
            p.size,
            p.content_type.clone(),
            Some(p.agent_id.clone()),
        )?;
        let key = format!("presigned-put:{}", p.id);
        let state2 = state.clone();
        let recorded = blocking(move || {
            crate::writes::submit(
                &state2,
                request,
                crate::writes::Idempotency {
                    key: &key,
                    legacy: None,
                },
            )
        })
        .await;
        match recorded {
            Ok(_) => {}
            // The store or the database did not answer: the next call tries again.
            Err(e) if e.retry_after.is_some() || e.reason.status() >= 500 => return Err(e),
            // Refused (a file took the path meanwhile): the blob stays for the collector.
            Err(e) => {
                tracing::warn!(vault = %vault, path = %p.path, error = %e.message, "a presigned upload was refused");
            }
        }
        forget(&links, &vault, &p.id).await?;
        links.discard(&vault, &p.id).await?;
    }
    Ok(())
}

async fn forget(
    links: &Arc<crate::storage::presign::StoreLinks>,
    vault: &str,
    id: &str,
) -> Result<(), Error> {
    let (links, vault, id) = (links.clone(), vault.to_string(), id.to_string());
    blocking(move || links.pending.remove(&vault, &id)).await
}
