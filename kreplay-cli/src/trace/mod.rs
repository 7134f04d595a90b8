//! `kreplay trace`'s machinery: the checked request, library discovery, choosing and attaching
//! targets, capture to per-thread streams, kernel names, NVTX injection for a started command,
//! roctx calls as annotations, the recording loop, and what the run says as it ends.
pub mod attach;
pub mod capture;
pub mod collect;
pub mod discover;
pub mod driver_names;
pub mod ending;
pub mod finish;
pub mod gpu_env;
pub mod guardian;
pub mod histogram;
pub mod holds;
pub mod kernels;
pub mod live;
pub mod nesting;
pub mod nvtx;
pub mod plan;
pub mod record;
pub mod registrations;
pub mod roctx;
pub mod session;
pub mod setup;
pub mod static_cudart;
pub mod summary;
pub mod targets;
