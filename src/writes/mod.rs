//! The one write pipeline: validate → idempotency → (policy, the queuing branch, arrives
//! with the review issue) → apply (file, history, metadata, catalog) → receipt.
//!
//! HTTP, MCP and device pushes (`POST /v1/sync/ops`) call the same [`submit`]. `reconcile` takes
//! changes found on disk through the same stores.
//!
//! Ordering and durability: one group of writes applies at a time (the service's write
//! lock; writes that arrive together form a group, see `group`), so `committed_seq` and
//! the history commits advance together. A change is on disk (temp file fsynced, atomic
//! rename, folder fsynced) and committed to `history.git` before its revision is
//! recorded, and its idempotency record is stored before the receipt leaves the daemon.

mod apply;
pub mod attachments;
pub mod folders;
mod group;
pub mod links;
mod op;
mod plan;
pub mod receipt;
pub mod recover;
pub mod request;
pub mod review;
mod sections;
mod submit;

pub(crate) use apply::{
    apply, commit_change, linking_to, record_change, rewrite_links, settlement, Change, Identity,
    Keep, Recorded,
};
pub use group::Job;
pub use op::{Op, PatchChange, Request};
pub use plan::{folder_creatable, plan, Plan};
pub use receipt::{
    AttachmentFacts, FolderFacts, FolderIntent, Intent, NoteFacts, Receipt, ReceiptStatus, Subject,
};
pub use request::{is_spec_uuid, NewNote, NotePatch, MAX_BODY};
pub(crate) use submit::{apply_now, store_receipt, Applied};
pub use submit::{submit, submit_call, Idempotency, IntentKey};
