//! `kreplay trace`'s machinery: the checked request ([`plan`]), library discovery, choosing and
//! attaching targets, readying the probes before the target runs ([`setup`]), capture to
//! per-thread streams ([`collect`], [`capture`]), kernel names, NVTX injection for a started
//! command, roctx calls as annotations, the recording loop ([`record`], driven by
//! [`session`]), and the end of a run ([`finish`], with what it says from [`ending`]).
pub mod attach;
pub mod capture;
pub mod collect;
pub mod discover;
pub mod driver_names;
pub mod ending;
pub mod finish;
pub mod gpu_attach;
pub mod gpu_env;
pub mod guardian;
pub mod histogram;
pub mod holds;
pub mod kernels;
pub mod launch_requests;
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
