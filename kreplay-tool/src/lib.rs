//! kreplay-tool: the library injected into GPU applications.
//!
//! It records the application's runtime calls in per-thread buffers ([`record`]) and, in later
//! layers, tracks device allocations and replays kernels. The HSA ABI it binds to is in
//! [`hsa`].
pub mod hsa;
pub mod record;
