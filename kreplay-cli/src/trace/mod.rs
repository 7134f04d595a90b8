//! `kreplay trace`'s machinery: the checked request, library discovery, choosing and attaching
//! targets, capture to per-thread streams, kernel names, the recording loop, and what the run
//! says as it ends.
pub mod attach;
pub mod capture;
pub mod discover;
pub mod ending;
pub mod histogram;
pub mod holds;
pub mod kernels;
pub mod nesting;
pub mod plan;
pub mod registrations;
pub mod session;
pub mod static_cudart;
pub mod summary;
pub mod targets;
