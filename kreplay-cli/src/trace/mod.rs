//! `kreplay trace`'s machinery: library discovery, attaching, capture to per-thread streams,
//! kernel names, and the end-of-run summary.
pub mod attach;
pub mod capture;
pub mod discover;
pub mod ending;
pub mod histogram;
pub mod kernels;
pub mod nesting;
pub mod session;
pub mod static_cudart;
pub mod summary;
