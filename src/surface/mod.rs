//! What the three surfaces (`api`, `mcp`, `console`) share: the calls they answer alike
//! (list, read, search, grep, tags, properties, vault summary, revisions, attachments,
//! folders), their typed parameters and result types (serde for the JSON, utoipa for the
//! schemas both the OpenAPI document and the MCP tool list are made of), and the error
//! envelope. A call takes typed parameters and answers a typed result; how a surface
//! gets the parameters (a query string, tool arguments, a form) stays in that surface.

pub mod attachments;
pub mod envelope;
pub mod export;
pub mod folders;
pub mod grep;
pub mod input;
pub mod notes;
pub mod origin;
pub mod params;
pub mod properties;
pub mod revisions;
pub mod search;
pub mod tags;
pub mod vault;
pub mod wire;
pub mod writes;

use crate::error::Error;

/// Run blocking domain work off the async threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let request_id = envelope::current_request_id();
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(join) => {
            tracing::error!(request_id = %request_id, error = %join, "blocking task failed");
            Err(Error::internal("the request's worker failed"))
        }
    }
}
