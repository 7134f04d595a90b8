//! The replay engine, independent of the GPU runtime, driven through the narrow
//! [`backend::Backend`] trait (the HSA and CUDA backends, and a fake one in tests).
//!
//! One dispatch's replay, in the order it happens:
//! 1. A runtime binding (`hsa/intercept.rs`, `cuda/launch.rs`) sees a dispatch, names its
//!    kernel and asks [`state::EngineState::wants`] whether to replay it (`--kernel`,
//!    `--max-dispatches`). It closes the device's window ([`gate`]): earlier work drains, later
//!    work waits.
//! 2. [`state::EngineState::replay_closed`] runs [`replay::replay`] and records every step in
//!    the tool's stream.
//! 3. [`capture::snap_in`] lists what the device owns ([`snapshot_plan`], the
//!    [`inventory`] of tracked allocations and the module variables), admits it against the
//!    budget, picks where the copy lives and how restores check it ([`placement`]), and
//!    copies every region ([`device_capture`] all at once on the device, [`capture_region`]
//!    one by one), hashing chunks ([`chunks`]) when restores will look for changes. The
//!    result is a [`snapshot::Snapshot`], its buffers kept between replays by an
//!    [`arena`].
//! 4. The pass loop (`passes.rs`) runs the passes: submit and wait; between passes a restore puts back
//!    what the pass changed ([`restore`]; on the device in one pass, [`restore_device`]; the
//!    first restore may sample, [`sample`]; the adaptive rule weighs checking against writing
//!    every byte, [`restore_stats`]). After the first restore, restores look only at the
//!    pieces pass 0 wrote (the write set). The determinism check compares each pass with pass
//!    0 ([`determinism`] on the device, [`pass_check`] through the host).
//! 5. A failed pass or restore ends the replay: [`put_back`] writes the whole snapshot back
//!    and the binding runs the dispatch once, so the application computes what it would have
//!    without kreplay. Otherwise the application's memory holds the first pass's result.
//! 6. The binding opens the window. [`request::Outcome`] says how it ended; [`config`] holds
//!    the settings every step reads.

pub mod arena;
pub mod backend;
pub mod capture;
pub mod capture_region;
pub mod chunks;
pub mod config;
pub mod determinism;
pub mod device_capture;
pub mod gate;
pub mod inventory;
pub mod pass_check;
pub mod passes;
pub mod placement;
pub mod put_back;
pub mod replay;
pub mod request;
pub mod restore;
pub mod restore_device;
pub mod restore_stats;
pub mod sample;
pub mod snapshot;
pub mod snapshot_plan;
pub mod state;

#[cfg(test)]
mod device_restore_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod sample_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_set_tests;
