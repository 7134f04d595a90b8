//! The GPUs the tool's work records name, each described once (`GpuDevice`): recorded when the
//! tool first meets the device, before its first `Dispatch` or `GpuCopy`, and written again at
//! the start of every stream file the process opens later (a `kreplay -p PID` session's), so
//! that each file describes every device its records name.

use std::sync::Mutex;

use kreplay_common::stream::GpuDevice;

use super::lock;

/// The descriptions recorded so far in this process.
static KNOWN: Mutex<Vec<GpuDevice>> = Mutex::new(Vec::new());

/// Records `describe()`'s description of `device` unless one was recorded already. Held under
/// one lock while it is made and recorded: a work record of the device that another thread
/// records after this returns is recorded after the description.
pub fn describe_device_once(device: u64, describe: impl FnOnce() -> GpuDevice) {
    // Off in a forked child, which records nothing (and whose copy of the lock another
    // thread of the parent may have held at the fork).
    if !super::global().is_enabled() {
        return;
    }
    let mut known = lock(&KNOWN);
    let pid = super::current_pid();
    if known.iter().any(|d| d.device == device && d.pid == pid) {
        return;
    }
    let d = describe();
    known.push(d.clone());
    super::global().record(d.into());
}

/// The descriptions of this process's devices, for a stream file being opened.
pub(super) fn known() -> Vec<GpuDevice> {
    let pid = super::current_pid();
    lock(&KNOWN)
        .iter()
        .filter(|d| d.pid == pid)
        .cloned()
        .collect()
}
