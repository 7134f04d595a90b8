//! What kreplay's CUDA kernels keep per context between checks and restores: the loaded
//! kernels, the device and pinned host buffers they use (allocating and freeing them around
//! every call cost more than the kernels), the graphs captured for the one-pass restore and
//! the slabs snapshot copies are carved from. Plain data: the code that fills and uses it is
//! in `buffer_ops.rs`, `device_ops.rs`, `graph.rs` and `one_pass.rs`.

use std::collections::HashMap;
use std::sync::Mutex;

use super::ffi::*;

/// Buffers kreplay's kernels use in one context, kept for the process's life (a few bytes per
/// chunk of the largest region checked, 24 bytes per piece of the largest restore).
#[derive(Default)]
pub struct Scratch {
    /// The per-chunk kernels' output.
    pub out: Buffer,
    /// The run-copy kernel's table of runs.
    pub runs: Buffer,
    /// The batched hash kernel's table of regions.
    pub hash_jobs: Buffer,
    /// The one-pass restore's job tables and counters: three sets, a snapshot's table, its
    /// first restore's sample (`engine/sample.rs`) and the later restores' write set
    /// (`Snapshot::write_set`) all kept ready.
    pub one_pass: [OnePassBuffers; 3],
    /// Stamps `one_pass`'s last uses.
    pub one_pass_clock: u64,
}

impl Scratch {
    /// The one-pass buffers holding `table` (the least recently used set when neither does).
    pub fn one_pass_for(&mut self, table: &[u64]) -> &mut OnePassBuffers {
        self.one_pass_clock += 1;
        let i = match self.one_pass.iter().position(|b| b.uploaded == table) {
            Some(i) => i,
            None => (0..self.one_pass.len())
                .min_by_key(|&i| self.one_pass[i].used)
                .unwrap_or(0),
        };
        let b = &mut self.one_pass[i];
        b.used = self.one_pass_clock;
        b
    }
}

/// The one-pass restore kernel's buffers (`one_pass`).
#[derive(Default)]
pub struct OnePassBuffers {
    /// Its table of regions on the device.
    pub jobs: Buffer,
    /// The table last uploaded into `jobs` (empty: none): a replay restores the same
    /// snapshot after every pass, so the table goes up once.
    pub uploaded: Vec<u64>,
    /// Its per-region counters, which the kernel only adds to.
    pub counts: Buffer,
    /// The counters' values as last read.
    pub seen: Vec<u64>,
    /// Whether the counters on the device equal `seen` (false at first and after a failed
    /// call: they are zeroed before the next use).
    pub synced: bool,
    /// Where `kreplay_publish_counts` publishes the counters and its sequence number (when
    /// mapped memory could be had).
    pub mapped: Mapped,
    /// Publications since the counters were last zeroed: the sequence number the device
    /// holds (one word after the counters).
    pub seq: u64,
    /// The restore and the publication captured as one graph, for the current table.
    pub pair: Option<Captured>,
    /// A restore once finished without its publication: the counters are copied back from
    /// then on.
    pub mapped_broken: bool,
    /// When these buffers were last picked (`Scratch::one_pass_clock`).
    pub used: u64,
}

/// Pinned host memory mapped into the device's address space (`cuMemHostAlloc` with
/// `CU_MEMHOSTALLOC_DEVICEMAP`): a kernel writes it, the host reads it with no copy.
pub struct Mapped {
    /// The host's view, zeroed when allocated.
    pub host: *mut u64,
    /// The device's address of the same memory.
    pub dev: u64,
    /// Words it holds.
    pub words: usize,
}

impl Default for Mapped {
    fn default() -> Self {
        Self {
            host: core::ptr::null_mut(),
            dev: 0,
            words: 0,
        }
    }
}

// SAFETY: `host` is pinned memory owned by this buffer, used only under the scratch lock.
unsafe impl Send for Mapped {}

/// Device memory and a pinned host buffer of `cap` bytes each.
pub struct Buffer {
    /// Device memory.
    pub dev: u64,
    /// Pinned host memory, or null when pinning failed (copies then use pageable memory).
    pub host: *mut u8,
    /// Bytes each side holds.
    pub cap: usize,
}

impl Default for Buffer {
    fn default() -> Self {
        Self {
            dev: 0,
            host: core::ptr::null_mut(),
            cap: 0,
        }
    }
}

// SAFETY: `host` is pinned memory owned by this buffer, used only under the scratch lock.
unsafe impl Send for Buffer {}

/// An instantiated graph of kreplay's launches and the key it was captured for.
pub struct Captured {
    /// The instantiated graph.
    pub(super) exec: CUgraphExec,
    /// The graph it was instantiated from.
    pub(super) graph: CUgraph,
    /// What the launches were captured with (addresses and sizes): a different key needs a
    /// new capture.
    pub key: Vec<u64>,
}

// SAFETY: the handles are driver objects usable from any thread of the process; the value is
// only used under the scratch lock.
unsafe impl Send for Captured {}

/// The loaded kernels of one context.
#[derive(Clone, Copy)]
pub struct Kernels {
    /// The per-chunk exact comparison.
    pub compare: usize,
    /// The per-chunk hash of one region.
    pub hash: usize,
    /// The run copy.
    pub copy_runs: usize,
    /// The hash of many regions in one launch (`None`: the PTX predates it; one launch per
    /// region).
    pub hash_regions: Option<usize>,
    /// The one-pass restore (`None`: the PTX predates it; restores then check and copy in
    /// separate steps).
    pub restore: Option<usize>,
    /// The publication of the one-pass restore's counters into mapped host memory (`None`:
    /// the PTX predates it; the counters are then copied back).
    pub publish: Option<usize>,
}

/// kreplay's kernels and their output buffers, by context.
#[derive(Default)]
pub struct KernelCache {
    /// Loaded kernels (`None`: loading failed there; not retried).
    pub(super) loaded: Mutex<HashMap<usize, Option<Kernels>>>,
    /// Output buffers of the per-chunk kernels, kept between checks: allocating and freeing
    /// device memory around every check costs several times the hash kernel itself
    /// (docs/gpu/h200-restore.md). The lock also serializes the checks that use them.
    pub(super) scratch: Mutex<HashMap<usize, Scratch>>,
    /// Snapshot copies carved from one allocation ([`CudaBackend::device_alloc_pieces`]).
    pub(super) slabs: Mutex<Slabs>,
}

/// Which allocation each carved piece belongs to, and how many pieces of each are live.
#[derive(Default)]
pub(super) struct Slabs {
    /// The allocation each carved piece belongs to.
    pub(super) base_of: HashMap<u64, u64>,
    /// Live pieces per allocation.
    pub(super) live: HashMap<u64, usize>,
}
