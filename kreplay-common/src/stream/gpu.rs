//! The GPU records besides `Dispatch`: copies and memsets as the GPU ran them, and the
//! description of a GPU the tool's records name (its runtime, how its queues are identified,
//! its ordinal and name), which tells the merge how to name the GPU's tracks.

/// One copy or memset as the GPU (or its copy engine) ran it (tag 17, version 6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuCopy {
    /// Process id.
    pub pid: u32,
    /// Submitting thread id.
    pub tid: u32,
    /// The device (HSA agent, CUDA device) whose track group shows it.
    pub device: u64,
    /// The queue, stream or engine it ran on (0: the device's copy engine, not named).
    pub engine: u64,
    /// kreplay's correlation id of the call that submitted it.
    pub correlation: u64,
    /// What it was: a [`copy_kind`] code.
    pub kind: u8,
    /// Bytes copied or set.
    pub bytes: u64,
    /// When it was submitted.
    pub submit_ns: u64,
    /// When it started.
    pub start_ns: u64,
    /// When it ended.
    pub end_ns: u64,
}

/// The codes of [`GpuCopy::kind`] and their names.
pub mod copy_kind {
    /// Direction not known.
    pub const UNKNOWN: u8 = 0;
    /// Host to device.
    pub const HOST_TO_DEVICE: u8 = 1;
    /// Device to host.
    pub const DEVICE_TO_HOST: u8 = 2;
    /// Device to device (the same or another device).
    pub const DEVICE_TO_DEVICE: u8 = 3;
    /// Host to host.
    pub const HOST_TO_HOST: u8 = 4;
    /// A memset (fill) of device memory.
    pub const MEMSET: u8 = 5;

    /// The short name the trace uses (`HtoD`, as Nsight Systems writes it).
    pub fn name(code: u8) -> &'static str {
        match code {
            HOST_TO_DEVICE => "HtoD",
            DEVICE_TO_HOST => "DtoH",
            DEVICE_TO_DEVICE => "DtoD",
            HOST_TO_HOST => "HtoH",
            MEMSET => "memset",
            _ => "copy",
        }
    }
}

/// What the tool knows of a GPU that its `Dispatch` (`agent`) and `GpuCopy` (`device`) records
/// name (tag 18, version 7). Timeless like the name records ([`super::Record::timestamp`] 0):
/// the tool writes it before the device's first work record, and again at the start of each new
/// stream file, and a merge names the device's tracks by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDevice {
    /// Process id.
    pub pid: u32,
    /// The device as the work records name it (an HSA agent handle, a CUDA device ordinal).
    pub device: u64,
    /// Which runtime runs it: a [`gpu_runtime`] code.
    pub runtime: u8,
    /// What the work records' queue (`Dispatch::queue`, `GpuCopy::engine`) holds: a
    /// [`queue_ids`] code.
    pub queues: u8,
    /// Its index among the runtime's GPUs (CUDA's device ordinal; on HSA, among the GPU agents
    /// in `hsa_iterate_agents` order); [`UNKNOWN_ORDINAL`] when not known.
    pub ordinal: u32,
    /// Its name as the runtime gives it (`NVIDIA H200`; on HSA the product name and the
    /// `gfx` target, `AMD Instinct MI300X (gfx942)`); empty when not known.
    pub name: String,
}

/// [`GpuDevice::ordinal`] when the tool could not tell.
pub const UNKNOWN_ORDINAL: u32 = u32::MAX;

/// The codes of [`GpuDevice::runtime`].
pub mod gpu_runtime {
    /// Not known.
    pub const UNKNOWN: u8 = 0;
    /// ROCm's HSA runtime.
    pub const HSA: u8 = 1;
    /// The CUDA driver.
    pub const CUDA: u8 = 2;
}

/// The codes of [`GpuDevice::queues`]: what the queue of a device's work records holds.
pub mod queue_ids {
    /// Not known.
    pub const UNKNOWN: u8 = 0;
    /// A handle: an HSA queue's address, a CUDA stream (`CUstream`, 0 for the default stream).
    pub const HANDLE: u8 = 1;
    /// CUPTI's stream id (the number Nsight Systems shows as `Stream N`).
    pub const STREAM_ID: u8 = 2;
}
