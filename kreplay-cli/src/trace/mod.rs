//! `kreplay trace`'s machinery: library discovery, attaching, capture to per-thread streams,
//! kernel names, NVTX injection for a started command, roctx calls as annotations, and the end-of-run summary.
pub mod attach;
pub mod capture;
pub mod discover;
pub mod ending;
pub mod histogram;
pub mod kernels;
pub mod nvtx;
pub mod roctx;
pub mod session;
pub mod summary;
