//! Finding changes in the folder: the startup scan and the live watcher, both feeding
//! `writes::reconcile`.

pub mod live;
pub mod scan;
pub mod settle;
