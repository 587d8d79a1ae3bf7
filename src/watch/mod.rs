//! The live watcher: notify events → debounced batches → reconcile (`record::reconcile`).

pub mod live;
