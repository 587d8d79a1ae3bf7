//! The error envelope as `/v1` handlers return it: rendered in `surface::envelope`, the
//! one place an [`crate::error::Error`] becomes a response; named here for the handlers.

pub use crate::surface::envelope::{
    current_request_id, envelope, in_vault_terms, vault_prefix, ApiError, ErrorEnvelope, RequestId,
    DOCS_URL, REQUEST_ID, VAULT_PREFIX,
};

pub type ApiResult<T> = Result<T, ApiError>;
