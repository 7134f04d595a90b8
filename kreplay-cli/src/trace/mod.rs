//! `kreplay trace`'s machinery: library discovery, attaching, capture to per-thread streams,
//! and the end-of-run summary.
pub mod attach;
pub mod capture;
pub mod discover;
pub mod histogram;
pub mod summary;
