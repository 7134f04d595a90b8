//! `snap(agent)`: a copy of every tracked allocation the agent owns plus the module-scope
//! variables loaded for it, discovered now (constant memory may be populated after load),
//! with a 128-bit hash per chunk when restores will look for changed chunks.
//!
//! Admission: the footprint (tracked allocations + writable module variables) is summed
//! before anything is allocated; over the policy's budget the snapshot is declined with the
//! numbers. Placement and check are chosen as `engine::placement` describes. Host memory held:
//! the footprint once (host placements) plus, on the host-hash path, one scratch buffer of
//! min(largest region, max(chunk, 1 MiB)) bytes reused by every restore, plus 16 bytes of
//! hash per chunk (0.1% of the footprint at the default 16 KiB chunks; on the device-hash path
//! those hashes live in one device buffer per snapshot when the backend can keep them there).
//! With an arena (`engine::arena`) the buffers outlive the snapshot and are reused by the next
//! one of the same shape; the bound is the same.
//!
//! Constant variables are skipped: kernels cannot write them, so a pass cannot change them
//! and restoring them would only cost bandwidth. Variables with a zero address or size are
//! skipped; anything over 1 GiB is skipped with a warning (a sanity cap). A snapshot that
//! cannot be completed — over budget, allocation failure, failed copy, failed symbol
//! enumeration, metadata allocation failure — has `ok == false` and says which in `failure`.

use super::arena::SnapshotArena;
use super::backend::{Backend, BackendError, DeviceRestore};
use super::chunks::Hash128;
use super::placement::{Check, Placement, Store};

/// Module variables larger than this are not captured.
pub const MODULE_VAR_CAP: u64 = 1 << 30;
/// Bytes read per device-to-host call on the host-hash path (at least one chunk): large
/// enough that per-call cost is small, small enough to stay in cache while it is hashed.
pub const HASH_BATCH: usize = 1 << 20;

/// What a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// A tracked allocation, with the generation it had when captured.
    Tracked {
        /// Inventory generation stamp.
        generation: u64,
    },
    /// A module-scope variable (always present while its executable is loaded).
    ModuleVar,
}

/// One captured region and its copy.
#[derive(Debug)]
pub struct Region {
    /// Device address.
    pub addr: u64,
    /// Bytes captured.
    pub size: u64,
    /// What it is.
    pub kind: RegionKind,
    /// The copy (`size` bytes).
    pub store: Store,
    /// One hash per chunk (host or device hashes per the snapshot's check; empty otherwise).
    pub hashes: Vec<Hash128>,
    /// Device address of the region's device hashes, in the snapshot's hash buffer, instead of
    /// `hashes` (0: none); the check then compares on the device.
    pub dev_hashes: u64,
}

/// Why a snapshot is incomplete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapFailure {
    /// The footprint exceeds the configured budget.
    #[error(
        "snapshot over budget: footprint {} ({footprint} bytes) exceeds --snapshot-budget {}",
        kreplay_common::size::label(*footprint),
        kreplay_common::size::label(*budget)
    )]
    OverBudget {
        /// Bytes the snapshot would hold.
        footprint: u64,
        /// The budget.
        budget: u64,
    },
    /// Memory for a region's copy could not be allocated in any allowed placement.
    #[error("host allocation of {size} bytes for region {addr:#x} failed")]
    HostAlloc {
        /// Region address.
        addr: u64,
        /// Region size.
        size: u64,
    },
    /// Device memory for the regions' copies could not be allocated (placement `device`).
    #[error("device allocation of {bytes} bytes for {regions} region copies failed")]
    DeviceAlloc {
        /// Regions to copy.
        regions: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// A device-to-host copy failed.
    #[error("device-to-host copy of region {addr:#x} failed: {source}")]
    CopyD2H {
        /// Region address.
        addr: u64,
        /// The failing call.
        source: BackendError,
    },
    /// A device-to-device copy failed.
    #[error("device-to-device copy of region {addr:#x} failed: {source}")]
    CopyD2D {
        /// Region address.
        addr: u64,
        /// The failing call.
        source: BackendError,
    },
    /// The module-scope variables could not be enumerated.
    #[error("module variable enumeration failed: {0}")]
    SymbolIteration(BackendError),
    /// The snapshot's own metadata could not be allocated.
    #[error("snapshot metadata allocation failed")]
    Metadata,
}

/// An agent's snapshot; frees its copies and scratch when dropped.
pub struct Snapshot<'b, B: Backend> {
    pub(super) backend: &'b B,
    /// Where the buffers go when the snapshot is dropped (else they are freed).
    pub(super) arena: Option<&'b SnapshotArena>,
    /// Captured regions, tracked allocations first.
    pub regions: Vec<Region>,
    /// Why it is incomplete, if it is.
    pub failure: Option<SnapFailure>,
    /// Variables skipped because they exceed [`MODULE_VAR_CAP`].
    pub oversized_vars: u64,
    /// Where the copies live.
    pub placement: Placement,
    /// How restores find changed chunks.
    pub check: Check,
    /// Chunk size of the check.
    pub chunk: usize,
    /// Bytes hashed while taking the snapshot.
    pub bytes_hashed: u64,
    /// Nanoseconds spent copying regions into the snapshot (not hashing): the adaptive
    /// check's estimate of a full restore's rate when a restore wrote too little to measure.
    pub copy_ns: u64,
    /// Bytes those copies moved.
    pub copied: u64,
    /// Nanoseconds the device-side hashing of the snapshot took (the same pass every
    /// device-hash restore makes before it writes anything).
    pub hash_ns: u64,
    /// Whether restores may stop checking when it does not pay (the policy's `adaptive`).
    pub adaptive: bool,
    /// Set by a restore that measured the check costing more than a full restore: later
    /// restores of this snapshot write every byte.
    pub(crate) skip_check: std::cell::Cell<bool>,
    /// Whether the first restore has sampled (or had no reason to): see `sample.rs`.
    pub(crate) sampled: std::cell::Cell<bool>,
    /// The host-hash path's read buffer (reused by every restore) and its length.
    pub(crate) scratch: Option<(Store, usize)>,
    /// Device memory holding every region's device hashes, 16 bytes per chunk (0: none; the
    /// hashes are then kept on the host). One allocation per snapshot, freed with it.
    pub(super) dev_hash_buf: u64,
    /// Chunks of `dev_hash_buf` given to regions so far.
    pub(super) dev_hash_used: usize,
    /// Device memory laid out as `dev_hash_buf`, where each one-pass restore keeps the hashes
    /// of the pass it follows (policy `pass_hashes`; 0: none). Freed with the snapshot.
    pub(crate) seen_buf: u64,
    /// The device-hash path's per-chunk hashes of the live data when they are compared on the
    /// host, grown on first use and reused by every restore (a fresh megabyte per check cost
    /// page faults).
    pub(crate) check_buf: std::cell::RefCell<Vec<[u64; 2]>>,
    /// The regions restores check and write (`None`: all). Set by the replay loop, after the
    /// first restore, to the regions that restore found changed, while the determinism check
    /// hashes the last pass over every region: a later pass that writes elsewhere is then
    /// found, and the dispatch re-run from a full restore (`replay.rs`).
    pub(crate) write_set: std::cell::RefCell<Option<Vec<(usize, DeviceRestore)>>>,
    /// The pieces (region index, job) the last one-pass restore found changed, with those
    /// holding a chunk the first restore's sample put back.
    pub(crate) last_dirty: std::cell::RefCell<Vec<(usize, DeviceRestore)>>,
    /// Live addresses of the chunks the first restore's sample found changed and put back.
    pub(crate) sample_dirty: std::cell::RefCell<Vec<u64>>,
    /// Bytes of each device hash buffer (`dev_hash_buf`, `seen_buf`): 16 per chunk.
    pub(crate) hash_buf_len: usize,
    /// The parts of taking it, for the trace: (`replay_step` code, start, end, bytes).
    pub steps: Vec<(u8, u64, u64, u64)>,
}

impl<B: Backend> Snapshot<'_, B> {
    /// Whether every region was captured.
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// Bytes captured.
    pub fn bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.size).sum()
    }

    /// The backend the snapshot belongs to.
    pub fn backend(&self) -> &B {
        self.backend
    }

    /// The scratch buffer's host address and length, when there is one.
    pub fn scratch_host(&self) -> Option<(*mut u8, usize)> {
        self.scratch
            .as_ref()
            .and_then(|(s, n)| Some((s.host_ptr()?, *n)))
    }

    /// Scratch bytes held (0 unless the check is host hashing).
    pub fn scratch_len(&self) -> usize {
        self.scratch.as_ref().map_or(0, |(_, n)| *n)
    }
}

impl<'b, B: Backend> Snapshot<'b, B> {
    /// Where buffers go when the snapshot is dropped (device hash buffers are taken from it).
    pub(crate) fn arena(&self) -> Option<&'b SnapshotArena> {
        self.arena
    }
}

impl<B: Backend> Drop for Snapshot<'_, B> {
    fn drop(&mut self) {
        for buf in [self.dev_hash_buf, self.seen_buf] {
            match (buf, self.arena) {
                (0, _) => {}
                (_, Some(a)) => a.give_hash_buf(self.hash_buf_len, buf),
                (_, None) => self.backend.device_free(buf),
            }
        }
        let bufs = self
            .regions
            .drain(..)
            .map(|r| (r.store, r.size as usize))
            .chain(self.scratch.take());
        for (store, len) in bufs {
            match self.arena {
                Some(a) => a.give(store.placement(), len, store),
                None => store.free(self.backend),
            }
        }
    }
}
