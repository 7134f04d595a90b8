//! The record types a stream carries, and the timestamp each one sorts by.
//!
//! Times are CLOCK_MONOTONIC nanoseconds (`bpf_ktime_get_ns`'s clock), so the tool's and the
//! probes' streams of one run share a time axis.

pub use super::gpu::{GpuCopy, GpuDevice};

/// A thread's name (`comm`), announced once per stream before or among its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadName {
    /// Kernel thread id.
    pub tid: u32,
    /// The name.
    pub name: String,
}

/// A process's name, announced once per stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessName {
    /// Process id.
    pub pid: u32,
    /// The name.
    pub name: String,
}

/// One completed runtime API call: the CLI writes one per BPF call record, the tool one per
/// call it intercepts and, with `--cupti-launches`, one per CUDA launch CUPTI reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiCall {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Which API (`kreplay_common::api::ApiId`).
    pub api: u16,
    /// Entry time.
    pub enter_ns: u64,
    /// Return time.
    pub exit_ns: u64,
    /// Return value.
    pub ret: u64,
    /// The first six argument words.
    pub args: [u64; 6],
    /// API-specific extra words (stack arguments, dereferenced values).
    pub extra: [u64; 5],
    /// The value an out-pointer received (e.g. the allocated address).
    pub out: u64,
}

impl ApiCall {
    /// Argument word `i`, as an `ApiSpec` numbers them: the six register arguments, then the
    /// extra words (0 past them).
    pub fn word(&self, i: u8) -> u64 {
        let i = usize::from(i);
        if i < 6 {
            self.args[i]
        } else {
            self.extra.get(i - 6).copied().unwrap_or(0)
        }
    }
}

/// One kernel dispatch and when the GPU ran it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Process id.
    pub pid: u32,
    /// Submitting thread id.
    pub tid: u32,
    /// The agent (device) handle.
    pub agent: u64,
    /// The queue (stream) handle.
    pub queue: u64,
    /// Kernel name.
    pub kernel: String,
    /// kreplay's correlation id of the launch.
    pub correlation: u64,
    /// The kernel object (code handle).
    pub kernel_object: u64,
    /// Grid size in work-items per dimension.
    pub grid: [u32; 3],
    /// Workgroup size per dimension.
    pub workgroup: [u32; 3],
    /// When the packet was submitted.
    pub submit_ns: u64,
    /// When the GPU started it.
    pub start_ns: u64,
    /// When the GPU finished it.
    pub end_ns: u64,
    /// Group segment (LDS, shared memory) bytes per workgroup: static plus dynamic (version 6;
    /// 0 in older streams).
    pub group_segment: u32,
    /// Private segment (scratch) bytes per work-item, where known (version 6; 0 in older
    /// streams or when unknown).
    pub private_segment: u32,
}

/// One replay pass of a dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPass {
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// Pass number, from 0.
    pub pass: u32,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// Process that ran the pass (0 in version-1 streams: not recorded).
    pub pid: u32,
    /// Thread that submitted the pass and waited for it (0 in version-1 streams).
    pub tid: u32,
    /// The GPU's own time for the pass's kernel (CUDA events around it, HSA profiling), in ns;
    /// 0 when it was not measured (and in streams before version 8).
    pub gpu_ns: u64,
}

/// The memory snapshot taken before a replayed dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// Bytes saved.
    pub bytes: u64,
    /// Memory regions saved.
    pub regions: u64,
    /// Where the copies live ([`snapshot_mode`] placement code; 0 from writers before it).
    pub placement: u8,
    /// How restores find changed chunks ([`snapshot_mode`] check code; 0: unknown).
    pub check: u8,
    /// Chunk size of the dirty check in bytes (0: none).
    pub chunk_size: u64,
    /// Bytes hashed while taking the snapshot.
    pub bytes_hashed: u64,
    /// Process that took it (0 in version-1 streams: not recorded).
    pub pid: u32,
    /// Thread that took it (0 in version-1 streams).
    pub tid: u32,
}

/// A restore of the snapshot before a replay pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restore {
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// The pass it prepared.
    pub pass: u32,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// Bytes copied back.
    pub bytes: u64,
    /// Regions copied back (at least one byte written).
    pub regions: u64,
    /// Regions skipped: freed or reallocated since the snapshot.
    pub skipped: u64,
    /// Where the snapshot's copies live ([`snapshot_mode`] placement code; 0: unknown).
    pub placement: u8,
    /// How changed chunks were found ([`snapshot_mode`] check code; 0: unknown).
    pub check: u8,
    /// Device bytes read and hashed or compared to find the changed chunks.
    pub bytes_checked: u64,
    /// Chunks found changed (and written back).
    pub dirty_chunks: u64,
    /// Time spent finding changed chunks (the rest of the span is copying back).
    pub check_ns: u64,
    /// Process that restored (0 in version-1 streams: not recorded).
    pub pid: u32,
    /// Thread that restored (0 in version-1 streams).
    pub tid: u32,
    /// Regions whose write-back failed (new in version 3; 0 in older streams, which counted
    /// them as skipped).
    pub failed: u64,
}

/// A span during which kreplay itself called the GPU runtime on one thread: the whole replay
/// of a dispatch (snapshot, passes, hashing, restores, freeing its copies). Every runtime call
/// that thread made inside `[start_ns, end_ns]` was kreplay's, not the application's; the
/// merge uses it to keep kreplay's calls apart from the application's (new in version 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolWindow {
    /// Process id.
    pub pid: u32,
    /// The thread that was inside kreplay.
    pub tid: u32,
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
}

/// One step of a replay that is not a snapshot, a pass or a restore (or a part of the
/// snapshot), so that every nanosecond of the replay's [`ToolWindow`] shows as a slice with its
/// bytes: the determinism check's hashing and comparing of a pass, the snapshot's allocation,
/// copy, hashing and readying of the restore, and the release of its buffers (tag 14; older
/// readers skip it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayStep {
    /// Process id.
    pub pid: u32,
    /// The thread that did it.
    pub tid: u32,
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// What it was: a [`replay_step`] code.
    pub step: u8,
    /// The pass it concerns (0 when none).
    pub pass: u32,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// Bytes it read, wrote or held.
    pub bytes: u64,
}

/// The codes of [`ReplayStep::step`] and their slice names.
pub mod replay_step {
    /// The snapshot's copies (and hash buffers) allocated or taken from the kept ones.
    pub const SNAPSHOT_ALLOCATE: u8 = 1;
    /// The snapshot's copies taken.
    pub const SNAPSHOT_COPY: u8 = 2;
    /// The snapshot hashed per chunk.
    pub const SNAPSHOT_HASH: u8 = 3;
    /// The device restore readied (region table, counters, captured graph).
    pub const SNAPSHOT_PREPARE: u8 = 4;
    /// A pass's output hashed for the determinism check.
    pub const HASH_PASS: u8 = 5;
    /// A pass's hashes compared with pass 0's.
    pub const COMPARE_PASS: u8 = 6;
    /// The snapshot's and the check's buffers released (kept for the next replay or freed).
    pub const RELEASE: u8 = 7;

    /// The slice name of a step.
    pub fn name(code: u8) -> &'static str {
        match code {
            SNAPSHOT_ALLOCATE => "snapshot: allocate",
            SNAPSHOT_COPY => "snapshot: copy",
            SNAPSHOT_HASH => "snapshot: hash",
            SNAPSHOT_PREPARE => "snapshot: ready restore",
            HASH_PASS => "hash pass",
            COMPARE_PASS => "compare pass",
            RELEASE => "release",
            _ => "replay step",
        }
    }
}

/// The codes of [`Snapshot::placement`]/[`Snapshot::check`] (and [`Restore`]'s) and their names.
pub mod snapshot_mode {
    /// Written by a tool that did not record it.
    pub const UNKNOWN: u8 = 0;
    /// Placement: copies in device memory.
    pub const DEVICE: u8 = 1;
    /// Placement: copies in pinned host memory.
    pub const PINNED: u8 = 2;
    /// Placement: copies in pageable host memory.
    pub const PAGEABLE: u8 = 3;
    /// Check: none, every byte is restored.
    pub const FULL: u8 = 1;
    /// Check: device-to-host read, 128-bit xxh3 per chunk on the host.
    pub const HOST_HASH: u8 = 2;
    /// Check: 128-bit hash per chunk computed on the device.
    pub const DEVICE_HASH: u8 = 3;
    /// Check: exact byte comparison on the device against a device-resident copy.
    pub const DEVICE_COMPARE: u8 = 4;

    /// The placement's name.
    pub fn placement_name(code: u8) -> &'static str {
        match code {
            DEVICE => "device",
            PINNED => "pinned",
            PAGEABLE => "pageable",
            _ => "?",
        }
    }

    /// The check's name.
    pub fn check_name(code: u8) -> &'static str {
        match code {
            FULL => "full",
            HOST_HASH => "host-hash",
            DEVICE_HASH => "device-hash",
            DEVICE_COMPARE => "device-compare",
            _ => "?",
        }
    }

    /// `placement/check`, e.g. `pinned/host-hash`.
    pub fn label(placement: u8, check: u8) -> String {
        format!("{}/{}", placement_name(placement), check_name(check))
    }
}

/// A dispatch kreplay declined to replay, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decline {
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// When it was declined.
    pub ts_ns: u64,
    /// Why.
    pub reason: String,
}

/// A replay pass whose output differed from the first pass's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nondeterministic {
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// The pass that differed.
    pub pass: u32,
    /// When it was found.
    pub ts_ns: u64,
    /// Base address of the region that differed.
    pub region: u64,
    /// First differing byte offset inside it.
    pub offset: u64,
}

/// An external correlation id (e.g. a framework's op id) pushed by a thread, tied to kreplay's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Correlation {
    /// Thread id.
    pub tid: u32,
    /// When it was recorded.
    pub ts_ns: u64,
    /// The external id.
    pub external_id: u64,
    /// kreplay's correlation id.
    pub correlation: u64,
}

/// Records a producer dropped (buffer cap, full ring buffer): every drop is counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drops {
    /// When the count was taken.
    pub ts_ns: u64,
    /// Which buffer dropped them.
    pub source: String,
    /// How many records were dropped since the previous `Drops` of this source.
    pub count: u64,
}

/// The name of a kernel handle of a process (a host stub address or a module function
/// handle), from a naming call or the process's symbols; launches name their kernel by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelName {
    /// Process id.
    pub pid: u32,
    /// From when the name holds (the naming call's return).
    pub ts_ns: u64,
    /// The handle.
    pub handle: u64,
    /// The kernel's name (demangled where it was mangled).
    pub name: String,
}

/// A user annotation: a range pushed or popped, a mark, a start/end range's ends, or a
/// category's name, made by the application through roctx (probed) or NVTX (the tool as NVTX's
/// injection library). New in version 5 (tag 16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    /// Process id.
    pub pid: u32,
    /// The calling thread.
    pub tid: u32,
    /// When: a push's or start's beginning, a pop's or end's end, a mark's instant.
    pub ts_ns: u64,
    /// What happened: an [`annotation`] kind code.
    pub kind: u8,
    /// Who reported it: an [`annotation`] source code.
    pub source: u8,
    /// The event's category (0: none); for [`annotation::NAME_CATEGORY`], the one named.
    pub category: u32,
    /// A start/end range's id (its start and end carry the same); 0 for the other kinds.
    pub id: u64,
    /// The domain's name; empty for the default domain.
    pub domain: String,
    /// The message (range or mark name, or category name); empty for a pop or an end.
    pub name: String,
}

/// The codes of [`Annotation::kind`] and [`Annotation::source`].
pub mod annotation {
    /// A range pushed on the calling thread (`roctxRangePushA`, `nvtxRangePush*`).
    pub const PUSH: u8 = 1;
    /// The calling thread's innermost pushed range ends (`roctxRangePop`, `nvtxRangePop`).
    pub const POP: u8 = 2;
    /// An instant (`roctxMarkA`, `nvtxMark*`).
    pub const MARK: u8 = 3;
    /// A start/end range begins (`roctxRangeStartA`, `nvtxRangeStart*`); it may end on
    /// another thread.
    pub const START: u8 = 4;
    /// The start/end range with this id ends (`roctxRangeStop`, `nvtxRangeEnd`).
    pub const END: u8 = 5;
    /// A category of the domain is named (`nvtxNameCategory*`, `nvtxDomainNameCategory*`).
    pub const NAME_CATEGORY: u8 = 6;
    /// Source: roctx, read by the probes.
    pub const ROCTX: u8 = 1;
    /// Source: NVTX, through kreplay-tool as the injection library.
    pub const NVTX: u8 = 2;

    /// The name of a source, as the trace's track and argument names use it.
    pub fn source_name(code: u8) -> &'static str {
        match code {
            ROCTX => "roctx",
            NVTX => "NVTX",
            _ => "annotation",
        }
    }
}

/// Any record of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// See [`ThreadName`].
    ThreadName(ThreadName),
    /// See [`ProcessName`].
    ProcessName(ProcessName),
    /// See [`ApiCall`].
    ApiCall(ApiCall),
    /// See [`Dispatch`].
    Dispatch(Dispatch),
    /// See [`ReplayPass`].
    ReplayPass(ReplayPass),
    /// See [`Snapshot`].
    Snapshot(Snapshot),
    /// See [`Restore`].
    Restore(Restore),
    /// See [`Decline`].
    Decline(Decline),
    /// See [`Nondeterministic`].
    Nondeterministic(Nondeterministic),
    /// See [`Correlation`].
    Correlation(Correlation),
    /// See [`Drops`].
    Drops(Drops),
    /// See [`KernelName`].
    KernelName(KernelName),
    /// See [`ToolWindow`].
    ToolWindow(ToolWindow),
    /// See [`ReplayStep`].
    ReplayStep(ReplayStep),
    /// See [`Annotation`].
    Annotation(Annotation),
    /// See [`GpuCopy`].
    GpuCopy(GpuCopy),
    /// See [`GpuDevice`].
    GpuDevice(GpuDevice),
}

impl Record {
    /// The time this record sorts by in a merge: the start of a span (`enter_ns`, `submit_ns`,
    /// `start_ns`) or the instant of an event; 0 for the timeless name and device records, which
    /// a merge emits as soon as it sees them.
    pub fn timestamp(&self) -> u64 {
        match self {
            Self::ThreadName(_) | Self::ProcessName(_) | Self::GpuDevice(_) => 0,
            Self::ApiCall(r) => r.enter_ns,
            Self::Dispatch(r) => r.submit_ns,
            Self::ReplayPass(r) => r.start_ns,
            Self::Snapshot(r) => r.start_ns,
            Self::Restore(r) => r.start_ns,
            Self::Decline(r) => r.ts_ns,
            Self::Nondeterministic(r) => r.ts_ns,
            Self::Correlation(r) => r.ts_ns,
            Self::Drops(r) => r.ts_ns,
            Self::KernelName(r) => r.ts_ns,
            Self::ToolWindow(r) => r.start_ns,
            Self::ReplayStep(r) => r.start_ns,
            Self::Annotation(r) => r.ts_ns,
            Self::GpuCopy(r) => r.submit_ns,
        }
    }
}

impl Record {
    /// Where a host-side span ends ([`Record::timestamp`] is where it begins); `None` for
    /// instants, names, dispatches and copies (whose GPU times may be unknown: 0).
    pub fn end_ns(&self) -> Option<u64> {
        match self {
            Self::ApiCall(r) => Some(r.exit_ns),
            Self::ReplayPass(r) => Some(r.end_ns),
            Self::Snapshot(r) => Some(r.end_ns),
            Self::Restore(r) => Some(r.end_ns),
            Self::ToolWindow(r) => Some(r.end_ns),
            Self::ReplayStep(r) => Some(r.end_ns),
            _ => None,
        }
    }

    /// The record's kind, as the stream format names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ThreadName(_) => "ThreadName",
            Self::ProcessName(_) => "ProcessName",
            Self::ApiCall(_) => "ApiCall",
            Self::Dispatch(_) => "Dispatch",
            Self::ReplayPass(_) => "ReplayPass",
            Self::Snapshot(_) => "Snapshot",
            Self::Restore(_) => "Restore",
            Self::Decline(_) => "Decline",
            Self::Nondeterministic(_) => "Nondeterministic",
            Self::Correlation(_) => "Correlation",
            Self::Drops(_) => "Drops",
            Self::KernelName(_) => "KernelName",
            Self::ToolWindow(_) => "ToolWindow",
            Self::ReplayStep(_) => "ReplayStep",
            Self::Annotation(_) => "Annotation",
            Self::GpuCopy(_) => "GpuCopy",
            Self::GpuDevice(_) => "GpuDevice",
        }
    }

    /// Breaks timestamp ties in a merge: 0 for the tool's spans of its own work (`ToolWindow`,
    /// `Snapshot`, `ReplayPass`, `Restore`), 1 for everything else. A call entered at the very
    /// nanosecond a window starts then comes after the window, which says whose it is.
    pub fn tie_rank(&self) -> u8 {
        match self {
            Self::ToolWindow(_)
            | Self::Snapshot(_)
            | Self::ReplayPass(_)
            | Self::Restore(_)
            | Self::ReplayStep(_) => 0,
            _ => 1,
        }
    }
}

macro_rules! impl_from {
    ($($ty:ident),*) => {
        $(impl From<$ty> for Record {
            fn from(r: $ty) -> Self {
                Self::$ty(r)
            }
        })*
    };
}

impl_from!(
    ThreadName,
    ProcessName,
    ApiCall,
    Dispatch,
    ReplayPass,
    Snapshot,
    Restore,
    Decline,
    Nondeterministic,
    Correlation,
    Drops,
    KernelName,
    ToolWindow,
    ReplayStep,
    Annotation,
    GpuCopy,
    GpuDevice
);
