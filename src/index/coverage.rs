//! How complete an answer is: the facts every search-side answer's `coverage` is made of.

use crate::vault::observe::Excluded;

/// Excluded files listed in an answer (all are counted).
pub const MAX_EXCLUDED: usize = 100;

/// The remark every search and grep answer carries.
pub const PRIVATE_REMARK: &str = "Private notes were not searched";

/// How complete an answer is, before it becomes the wire `coverage`.
#[derive(Debug, Clone, Default)]
pub struct CoverageFacts {
    /// Notes in the vault.
    pub total: usize,
    /// Notes the answer considered.
    pub searched: usize,
    /// Notes that matched (all pages).
    pub matched: usize,
    pub returned: usize,
    /// More results follow.
    pub truncated: bool,
    /// Files and notes left out, with why (unreadable files, notes too large): the
    /// first [`MAX_EXCLUDED`].
    pub excluded: Vec<Excluded>,
    /// All of them.
    pub excluded_count: usize,
    pub private: usize,
    pub too_large: usize,
    pub not_yet_indexed: usize,
    pub unreadable: usize,
    pub indexed_seq: i64,
    pub committed_seq: i64,
    pub remarks: Vec<String>,
    /// The retrievers of a search (lexical, and vector with `mode=hybrid`); empty for
    /// other answers.
    pub retrievers: Vec<Retriever>,
}

/// One retriever of a search: whether it ran, the notes it covered, what it found.
#[derive(Debug, Clone, Default)]
pub struct Retriever {
    /// `lexical` (BM25) or `vector` (the embedding model).
    pub name: &'static str,
    pub ran: bool,
    /// Notes it could find: indexed (lexical) or with current vectors (vector).
    pub notes: usize,
    /// Notes it returned to the fusion (lexical: every match).
    pub matched: usize,
    /// Why it did not run.
    pub reason: Option<String>,
}
