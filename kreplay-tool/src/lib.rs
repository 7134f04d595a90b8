//! kreplay-tool: the library injected into GPU applications.
//!
//! It records the application's runtime calls in per-thread buffers ([`record`]), tracks
//! device allocations and replays kernels ([`engine`], runtime-independent, driven through
//! [`engine::backend::Backend`]), bound to HSA by [`hsa`] and loaded through `HSA_TOOLS_LIB`
//! (the `OnLoad`/`OnUnload` exports in [`hsa::tool`]), and to CUDA by `cuda` (preloaded; it wraps
//! `dlsym`, `cuGetProcAddress` and the driver entries it needs), and records the application's
//! NVTX ranges and marks as NVTX's injection library ([`nvtx`]), and on CUDA the GPU timeline
//! through CUPTI as the driver's injection library ([`cupti`]), also in a process it was loaded
//! into while running ([`attach`]).
pub mod attach;
#[cfg(target_arch = "x86_64")]
pub mod cuda;
pub mod cupti;
pub mod engine;
pub mod fault;
pub mod hsa;
pub mod logging;
pub mod nvtx;
pub mod progress;
pub mod record;
pub mod status;
pub mod warn_once;
