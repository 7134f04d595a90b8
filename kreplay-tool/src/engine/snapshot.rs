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
use super::chunks::{Hash128, chunk_count, hash_into, read_in_pieces};
use super::config::SnapshotPolicy;
use super::inventory::Inventory;
use super::placement::{Check, Placement, Store};
use super::snapshot_plan::{allocate, choose_check, wanted};
use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::replay_step;

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
    backend: &'b B,
    /// Where the buffers go when the snapshot is dropped (else they are freed).
    arena: Option<&'b SnapshotArena>,
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

/// Captures `agent`'s tracked allocations and module variables under `policy`, in fresh
/// buffers freed when the snapshot is dropped.
pub fn snap<'b, B: Backend>(
    backend: &'b B,
    inv: &Inventory,
    agent: u64,
    policy: &SnapshotPolicy,
) -> Snapshot<'b, B> {
    snap_in(backend, inv, agent, policy, None)
}

/// [`snap`], reusing the buffers `arena` keeps when they fit exactly and giving them back
/// when the snapshot is dropped.
pub fn snap_in<'b, B: Backend>(
    backend: &'b B,
    inv: &Inventory,
    agent: u64,
    policy: &SnapshotPolicy,
    arena: Option<&'b SnapshotArena>,
) -> Snapshot<'b, B> {
    let mut s = Snapshot {
        backend,
        arena,
        regions: Vec::new(),
        failure: None,
        oversized_vars: 0,
        placement: Placement::Pageable,
        check: Check::Full,
        chunk: policy.chunk,
        bytes_hashed: 0,
        copy_ns: 0,
        copied: 0,
        adaptive: policy.adaptive,
        hash_ns: 0,
        skip_check: std::cell::Cell::new(false),
        sampled: std::cell::Cell::new(false),
        scratch: None,
        check_buf: Default::default(),
        dev_hash_buf: 0,
        dev_hash_used: 0,
        seen_buf: 0,
        hash_buf_len: 0,
        steps: Vec::new(),
        write_set: Default::default(),
        last_dirty: Default::default(),
        sample_dirty: Default::default(),
    };
    let wanted = match wanted(backend, inv, agent, &mut s.oversized_vars) {
        Ok(w) => w,
        Err(f) => {
            s.failure = Some(f);
            return s;
        }
    };
    let footprint: u64 = wanted.iter().map(|w| w.1).sum();
    if footprint > policy.budget {
        let f = SnapFailure::OverBudget {
            footprint,
            budget: policy.budget,
        };
        tracing::warn!("kreplay: replay declined: {f}");
        s.failure = Some(f);
        return s;
    }
    if s.regions.try_reserve(wanted.len()).is_err() {
        s.failure = Some(SnapFailure::Metadata);
        return s;
    }
    let mut sizes = Vec::new();
    if sizes.try_reserve(wanted.len()).is_err() {
        s.failure = Some(SnapFailure::Metadata);
        return s;
    }
    sizes.extend(wanted.iter().map(|w| w.1 as usize));
    let order = Placement::order(policy.placement);
    let alloc_start = now_ns();
    let reused = arena.and_then(|a| a.take_all(order, &sizes));
    let allocated = match reused {
        Some(v) => Ok(v),
        None => {
            // Nothing kept fits: free it before allocating (the footprint is held once).
            if let Some(a) = arena {
                a.clear_copies(backend);
            }
            allocate(backend, policy, &wanted)
        }
    };
    let (placement, stores) = match allocated {
        Ok(v) => v,
        Err(f) => {
            s.failure = Some(f);
            return s;
        }
    };
    s.placement = placement;
    s.check = choose_check(backend, policy, placement);
    let biggest = wanted.iter().map(|w| w.1 as usize).max().unwrap_or(0);
    if s.check == Check::HostHash {
        let len = biggest.min(HASH_BATCH.max(policy.chunk));
        let scratch = arena
            .and_then(|a| a.take_host(len))
            .or_else(|| Store::alloc(backend, Placement::Pinned, len))
            .or_else(|| Store::alloc(backend, Placement::Pageable, len));
        match scratch {
            Some(st) => s.scratch = Some((st, len)),
            None => {
                tracing::warn!("kreplay: no {len}-byte hash scratch; restores write every byte");
                s.check = Check::Full;
            }
        }
    }
    if s.check == Check::DeviceHash {
        warm_device_hash(&s, &wanted);
        let chunks: usize = wanted.iter().map(|w| chunk_count(w.1, s.chunk)).sum();
        let len = chunks * 16;
        s.hash_buf_len = len;
        if let Some(a) = arena {
            a.retain_hash_bufs(len, backend);
        }
        let take = || {
            arena
                .and_then(|a| a.take_hash_buf(len))
                .or_else(|| backend.device_alloc(len))
        };
        s.dev_hash_buf = take().unwrap_or(0);
        // Pass hashes serve the determinism check on the device, which also compares there.
        let compares = || backend.compare_chunks_on_device(0, 0, 0, 16, &mut []) == Ok(true);
        if policy.pass_hashes && s.dev_hash_buf != 0 && compares() {
            s.seen_buf = take().unwrap_or(0);
        }
    }
    if let Some(a) = arena {
        a.clear_copies(backend);
    }
    s.steps.push((
        replay_step::SNAPSHOT_ALLOCATE,
        alloc_start,
        now_ns(),
        footprint,
    ));
    let mut stores = stores.into_iter();
    // Device-resident copies are taken all at once after every region is listed.
    let at_once = super::device_capture::applies(&s);
    let copy_start = now_ns();
    for (addr, size, kind) in wanted {
        let Some(store) = stores.next() else { break };
        // Pushed first so a failure below still frees it with the snapshot.
        s.regions.push(Region {
            addr,
            size,
            kind,
            store,
            hashes: Vec::new(),
            dev_hashes: 0,
        });
        if at_once {
            continue;
        }
        let last = s.regions.len() - 1;
        if let Err(f) = capture(&mut s, last) {
            tracing::warn!("kreplay: snapshot declined: {f}");
            s.failure = Some(f);
            stores.for_each(|st| st.free(backend));
            return s;
        }
    }
    if at_once && let Err(f) = super::device_capture::capture_all(&mut s) {
        tracing::warn!("kreplay: snapshot declined: {f}");
        s.failure = Some(f);
        return s;
    }
    if !at_once {
        // Copied (and hashed, per the check) region by region.
        s.steps
            .push((replay_step::SNAPSHOT_COPY, copy_start, now_ns(), s.copied));
    }
    // A device-resident copy whose hashing pass already cost as much as copying the whole
    // footprint: every restore would pay that pass, and writing every byte back costs about
    // one such copy, so checking cannot pay (measured on the H200: hashing 1 GiB took 1.4 ms,
    // the device-to-device copy 0.5 ms). Decide now, before the first restore pays it.
    if s.adaptive
        && s.check == Check::DeviceHash
        && s.placement == Placement::Device
        && s.copied >= super::restore::MEASURE_MIN
        && s.hash_ns >= s.copy_ns
    {
        tracing::debug!(
            "kreplay: hashing the snapshot ({} ns) cost more than copying it ({} ns); restores write every byte",
            s.hash_ns,
            s.copy_ns
        );
        s.skip_check.set(true);
    }
    // Ready the one-pass restore (and the first restore's sample) now, so the first restore's
    // time (which decides whether checking pays) holds no one-time setup.
    if s.check == Check::DeviceHash && !s.skip_check.get() {
        let prepare_start = now_ns();
        let all = vec![true; s.regions.len()];
        let jobs: Vec<_> = super::restore::one_pass_jobs(&s, &all)
            .into_iter()
            .map(|(_, j)| j)
            .collect();
        if super::sample::wants_sample(&s, &jobs) {
            backend.prepare_restore_on_device(&super::sample::sample_jobs(&jobs, s.chunk), s.chunk);
        }
        if !jobs.is_empty() {
            // In the pieces the first restore's table has.
            let pieces: Vec<_> = super::restore_device::one_pass_pieces(&s, &all)
                .into_iter()
                .map(|(_, j)| j)
                .collect();
            backend.prepare_restore_on_device(&pieces, s.chunk);
        }
        let table = 48 * jobs.len() as u64;
        s.steps.push((
            replay_step::SNAPSHOT_PREPARE,
            prepare_start,
            now_ns(),
            table,
        ));
    }
    s
}

/// Readies the device hash before the snapshot times it: hashes the first chunk of the biggest
/// region with the output sized for that whole region, so the backend's one-time costs (the
/// kernel's first launch, its output buffers) are not counted as hashing cost.
fn warm_device_hash<B: Backend>(s: &Snapshot<'_, B>, wanted: &[(u64, u64, RegionKind)]) {
    let Some(&(addr, size, _)) = wanted.iter().max_by_key(|w| w.1) else {
        return;
    };
    // Zeroed by the allocator (pages not touched): only its length matters to the backend,
    // which writes the first chunk's hash.
    let mut sizing = vec![[0u64; 2]; chunk_count(size, s.chunk)];
    let first = (size as usize).min(s.chunk);
    if let Err(e) = s
        .backend
        .hash_chunks_on_device(addr, first, s.chunk, &mut sizing)
    {
        tracing::debug!(
            "kreplay: warming the device hash failed ({e}); the snapshot's pass will say"
        );
    }
}

/// Hashes region `i` of `s` on the device once its copy is taken, into `slot` when given (see
/// [`hash_on_device`]), timing it; a failure makes every restore of `s` write every byte.
pub(super) fn hash_captured<B: Backend>(s: &mut Snapshot<'_, B>, i: usize, slot: Option<u64>) {
    let (backend, chunk) = (s.backend, s.chunk);
    let r = &mut s.regions[i];
    let (addr, size) = (r.addr, r.size);
    let t = now_ns();
    let hashed = hash_on_device(backend, r, chunk, slot);
    s.hash_ns += now_ns() - t;
    match hashed {
        Ok(true) => s.bytes_hashed += size,
        other => {
            tracing::warn!(
                "kreplay: device hashing of {addr:#x} failed ({other:?}); restores write every byte"
            );
            s.check = Check::Full;
            s.regions.iter_mut().for_each(|r| r.hashes = Vec::new());
        }
    }
}

/// Hashes region `r` on the device: into `slot` (its place in the snapshot's device hash
/// buffer, when there is one) when the backend can keep hashes there (the check then compares
/// on the device and only a flag per chunk comes back, or restores in one pass), else into
/// `r.hashes`.
fn hash_on_device<B: Backend>(
    backend: &B,
    r: &mut Region,
    chunk: usize,
    slot: Option<u64>,
) -> Result<bool, BackendError> {
    let (addr, size) = (r.addr, r.size as usize);
    if let Some(dst) = slot {
        match backend.hash_chunks_into_device(addr, size, chunk, dst) {
            Ok(true) => {
                r.dev_hashes = dst;
                return Ok(true);
            }
            other => tracing::debug!(
                "kreplay: device-resident hashes of {addr:#x}: {other:?}; keeping them on the host"
            ),
        }
    }
    r.hashes.resize(chunk_count(r.size, chunk), [0; 2]);
    backend.hash_chunks_on_device(addr, size, chunk, &mut r.hashes)
}

/// Copies (and hashes, per the check) region `i` of `s`; regions are captured in order (each
/// takes the next chunks of the device hash buffer).
pub(super) fn capture<B: Backend>(s: &mut Snapshot<'_, B>, i: usize) -> Result<(), SnapFailure> {
    let backend = s.backend;
    let (chunk, check) = (s.chunk, s.check);
    let scratch = s
        .scratch
        .as_ref()
        .and_then(|(st, n)| Some((st.host_ptr()?, *n)));
    let slot = (s.dev_hash_buf != 0).then(|| s.dev_hash_buf + 16 * s.dev_hash_used as u64);
    let Some(r) = s.regions.get_mut(i) else {
        return Ok(());
    };
    s.dev_hash_used += chunk_count(r.size, chunk);
    let (addr, size) = (r.addr, r.size as usize);
    let want_hashes = matches!(check, Check::HostHash | Check::DeviceHash);
    if want_hashes
        && r.hashes
            .try_reserve_exact(chunk_count(r.size, chunk))
            .is_err()
    {
        return Err(SnapFailure::Metadata);
    }
    let t = now_ns();
    match (&r.store, r.store.host_ptr()) {
        (Store::Device(dev), _) => backend
            .copy_d2d(*dev, addr, size)
            .map_err(|source| SnapFailure::CopyD2D { addr, source })?,
        (_, None) => return Err(SnapFailure::Metadata),
        (_, Some(ptr)) if check == Check::HostHash => {
            // Copy in batches and hash each while it is still in cache.
            let hashes = &mut r.hashes;
            // SAFETY: the store holds `size` bytes, so ptr + off is valid for every piece.
            let copy_ns = unsafe {
                read_in_pieces(
                    backend,
                    addr,
                    size,
                    HASH_BATCH.max(chunk),
                    |off| ptr.add(off),
                    |_, bytes| hash_into(bytes, chunk, hashes),
                )
            }
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?;
            s.bytes_hashed += size as u64;
            s.copy_ns += copy_ns;
            s.copied += size as u64;
            return Ok(());
        }
        (_, Some(ptr)) => backend
            .copy_d2h(ptr, addr, size)
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?,
    }
    s.copy_ns += now_ns() - t;
    s.copied += size as u64;
    match check {
        Check::DeviceHash => hash_captured(s, i, slot),
        Check::HostHash => {
            // A device-resident copy: read the original through the scratch to hash it.
            let Some((buf, len)) = scratch else {
                return Ok(());
            };
            let hashes = &mut r.hashes;
            // SAFETY: the scratch holds `len` bytes, reused for every piece.
            unsafe {
                read_in_pieces(
                    backend,
                    addr,
                    size,
                    len,
                    |_| buf,
                    |_, bytes| hash_into(bytes, chunk, hashes),
                )
            }
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?;
            s.bytes_hashed += size as u64;
        }
        Check::Full | Check::DeviceCompare => {}
    }
    Ok(())
}
