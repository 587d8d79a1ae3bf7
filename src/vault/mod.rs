//! Domain core: the note model, markdown facts, safe paths. No HTTP, no JSON.

pub mod catalog;
pub mod markdown;
pub mod path;
