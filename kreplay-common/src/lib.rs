//! Types shared by kreplay's BPF programs (`kreplay-ebpf`), the injected tool and the CLI.
//!
//! Everything here is `#[repr(C)]` plain data with fixed sizes (asserted at compile time), so
//! the BPF side and userspace agree on every byte. With the `user` feature the map and
//! ring-buffer types implement `aya::Pod`; with `std` the stream-file module is available.
#![cfg_attr(not(feature = "std"), no_std)]

pub mod api;
pub mod audit;
#[cfg(feature = "std")]
pub mod cause;
#[cfg(feature = "std")]
pub mod color;
#[cfg(feature = "std")]
pub mod control;
pub mod probe;
pub mod progress;
#[cfg(feature = "std")]
pub mod replay_config;
#[cfg(feature = "std")]
pub mod size;
#[cfg(feature = "std")]
pub mod stream;
