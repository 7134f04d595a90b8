//! The GPUs the tool's work records name, each described once (`GpuDevice`): recorded when the
//! tool first meets the device, before its first `Dispatch` or `GpuCopy`, and written again at
//! the start of every stream file the process opens later (a `kreplay -p PID` session's), so
//! that each file describes every device its records name.

use std::sync::Mutex;

use kreplay_common::stream::GpuDevice;

use super::{Recorder, lock};

/// The devices described so far.
#[derive(Default)]
pub struct Devices {
    known: Mutex<Vec<GpuDevice>>,
}

impl Devices {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            known: Mutex::new(Vec::new()),
        }
    }

    /// Records `describe()`'s description of `device` of process `pid` on `rec` unless one
    /// was recorded already. Held under one lock while it is made and recorded: a work record
    /// of the device that another thread records after this returns comes after it.
    pub fn describe_once(
        &self,
        rec: &Recorder,
        pid: u32,
        device: u64,
        describe: impl FnOnce() -> GpuDevice,
    ) {
        let mut known = lock(&self.known);
        if known.iter().any(|d| d.device == device && d.pid == pid) {
            return;
        }
        let d = describe();
        known.push(d.clone());
        rec.record(d.into());
    }

    /// The descriptions of process `pid`'s devices, for a stream file being opened.
    pub fn known(&self, pid: u32) -> Vec<GpuDevice> {
        lock(&self.known)
            .iter()
            .filter(|d| d.pid == pid)
            .cloned()
            .collect()
    }
}

/// The process's devices, described through the global recorder.
static GLOBAL: Devices = Devices::new();

/// Records `describe()`'s description of `device` on the global recorder unless this process
/// described it already ([`Devices::describe_once`]).
pub fn describe_device_once(device: u64, describe: impl FnOnce() -> GpuDevice) {
    let rec = super::global();
    // Off in a forked child, which records nothing (and whose copy of the lock another
    // thread of the parent may have held at the fork).
    if !rec.is_enabled() {
        return;
    }
    GLOBAL.describe_once(rec, super::current_pid(), device, describe);
}

/// The descriptions of this process's devices, for a stream file being opened.
pub(super) fn known() -> Vec<GpuDevice> {
    GLOBAL.known(super::current_pid())
}

#[cfg(test)]
mod tests {
    use kreplay_common::stream::{Record, UNKNOWN_ORDINAL, gpu_runtime, queue_ids};

    use super::*;
    use crate::record::RecorderConfig;

    fn gpu(pid: u32, device: u64, name: &str) -> GpuDevice {
        GpuDevice {
            pid,
            device,
            runtime: gpu_runtime::HSA,
            queues: queue_ids::HANDLE,
            ordinal: UNKNOWN_ORDINAL,
            name: name.into(),
        }
    }

    #[test]
    fn each_device_of_a_process_is_described_and_recorded_once() {
        let rec = Recorder::new(RecorderConfig::default());
        let devices = Devices::new();
        let mut asked = 0;
        for _ in 0..3 {
            devices.describe_once(&rec, 7, 0xa0, || {
                asked += 1;
                gpu(7, 0xa0, "first")
            });
        }
        devices.describe_once(&rec, 7, 0xb0, || gpu(7, 0xb0, "second"));
        // The same handle in another process (a forked child's) is another device.
        devices.describe_once(&rec, 8, 0xa0, || gpu(8, 0xa0, "child's"));
        assert_eq!(asked, 1, "described once");
        assert_eq!(
            devices.known(7),
            [gpu(7, 0xa0, "first"), gpu(7, 0xb0, "second")]
        );
        rec.merge();
        let (rows, _) = rec.take_merged();
        assert_eq!(
            rows,
            [
                Record::from(gpu(7, 0xa0, "first")),
                gpu(7, 0xb0, "second").into(),
                gpu(8, 0xa0, "child's").into(),
            ]
        );
    }
}
