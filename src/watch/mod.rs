//! Finding changes in the folder: the startup scan (the live watcher joins it later).

pub mod scan;
