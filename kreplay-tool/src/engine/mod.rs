//! The replay engine, independent of the GPU runtime: the allocation inventory, snapshot, restore, the per-agent replay gate and the replay loop, all
//! restoring only the chunks a pass changed, all driven through the narrow
//! [`backend::Backend`] trait (the HSA and CUDA backends, and a fake one in tests).

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
