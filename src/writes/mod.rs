//! The one write pipeline. Today it holds `reconcile`, which takes changes found on disk
//! into the catalog, the metadata store and the history.

pub mod reconcile;
