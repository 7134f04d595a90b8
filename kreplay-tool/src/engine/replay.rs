//! The replay loop of one dispatch: snap; on an incomplete snapshot decline (the caller then
//! runs the dispatch once with its original completion signal); else per pass submit, wait,
//! hash what the pass wrote, restore (none after the last pass). When a pass or a restore
//! fails, no further pass runs: every byte of the snapshot is written back (retried up to
//! [`RECOVERY_ATTEMPTS`] times) and the caller runs the dispatch once from that state, so the
//! application sees what it would have computed without kreplay. Records go to `emit`; each
//! names the process and thread that did the work, and a `ToolWindow` record closes the
//! replay: every runtime call that thread made inside it was kreplay's own.

use super::chunks::HASH_CHUNK;
use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::{
    Nondeterministic, Record, ReplayStep, Restore, Snapshot as SnapRec, ToolWindow, replay_step,
    snapshot_mode,
};

use xxhash_rust::xxh3::xxh3_64;

use super::arena::SnapshotArena;
use super::backend::{Backend, BackendError};
use super::chunks::chunk_count;
use super::config::SnapshotPolicy;
use super::determinism::DeviceCheck;
use super::inventory::Inventory;
use super::passes::Passes;
use super::placement::Check;
use super::restore::{RestoreStats, restore_all};
use super::snapshot::{SnapFailure, Snapshot, snap_in};

/// Full write-backs tried after a failed pass or restore before the memory is reported as not
/// restored.
pub const RECOVERY_ATTEMPTS: u32 = 3;

/// Records in the tool's stream that the dispatch or launch `corr` was not replayed, and why
/// (both backends' wrappers call this when they run it once instead).
pub fn decline(corr: u64, reason: String) {
    tracing::debug!("kreplay: dispatch {corr} not replayed: {reason}");
    crate::record::global().record(
        kreplay_common::stream::Decline {
            correlation: corr,
            ts_ns: now_ns(),
            reason,
        }
        .into(),
    );
}

/// Records that the calling thread was inside kreplay from `start_ns` until now, for work a
/// backend's wrapper does around [`replay`] (e.g. draining the device before the snapshot):
/// the merge then attributes the runtime calls it made to kreplay.
pub fn own_window(correlation: u64, start_ns: u64) {
    crate::record::global().record(
        ToolWindow {
            pid: crate::record::current_pid(),
            tid: crate::record::current_tid(),
            correlation,
            start_ns,
            end_ns: now_ns(),
        }
        .into(),
    );
}

/// How a replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every pass ran.
    Replayed {
        /// Passes run.
        passes: u32,
        /// Whether any pass differed from the first.
        nondeterministic: bool,
    },
    /// Not replayed (the caller runs the dispatch once, normally).
    Declined(String),
    /// Stopped early: a pass or the restore before one failed. Every byte of the snapshot was
    /// written back where the runtime allowed (a region it refused is named in the reason and
    /// logged as an error); the caller runs the dispatch once, normally, from that state.
    Failed(String),
}

/// One replay request.
pub struct Request<'a, B: Backend> {
    /// The agent the dispatch runs on.
    pub agent: u64,
    /// The dispatch (submitted with the engine's own completion signal).
    pub dispatch: &'a B::Dispatch,
    /// Passes (>= 1).
    pub passes: u32,
    /// Hash each pass's output.
    pub check_determinism: bool,
    /// Correlation id for the records.
    pub correlation: u64,
    /// Snapshot placement, chunking and budget.
    pub policy: SnapshotPolicy,
    /// Buffers kept between replays (`None`: allocate and free per replay).
    pub arena: Option<&'a SnapshotArena>,
}

/// Per-4-KiB hashes of every region of `snap` as the device holds it now.
pub(super) fn hash_regions<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
) -> Option<Vec<Vec<u64>>> {
    // The host-hash check means the device cannot hash; every other check (full restores
    // included) tries the device first.
    if snap.check != Check::HostHash {
        match device_block_hashes(backend, snap) {
            Ok(Some(h)) => return Some(h),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("kreplay: hashing a pass's output on the device failed: {e}");
                return None;
            }
        }
    }
    let biggest = snap
        .regions
        .iter()
        .map(|r| r.size as usize)
        .max()
        .unwrap_or(0);
    // The snapshot's hash scratch when it has one (no allocation per pass), else our own.
    let mut own = None;
    let (ptr, scratch_len) = match snap.scratch_host() {
        Some(s) => s,
        None => {
            let len = biggest.min(1 << 20);
            if len == 0 {
                return Some(Vec::new());
            }
            let b = backend.host_alloc(len)?;
            let ptr = b.ptr;
            own = Some(b);
            (ptr, len)
        }
    };
    let mut out = Vec::with_capacity(snap.regions.len());
    let mut failed = false;
    'regions: for r in &snap.regions {
        let mut hashes = Vec::with_capacity((r.size as usize).div_ceil(HASH_CHUNK));
        let mut off = 0usize;
        while off < r.size as usize {
            let n = (r.size as usize - off).min(scratch_len);
            if backend.copy_d2h(ptr, r.addr + off as u64, n).is_err() {
                failed = true;
                break 'regions;
            }
            // SAFETY: scratch holds scratch_len >= n bytes, just written by the copy.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, n) };
            hashes.extend(bytes.chunks(HASH_CHUNK).map(xxh3_64));
            off += n;
        }
        out.push(hashes);
    }
    if let Some(b) = own {
        backend.host_free(b);
    }
    (!failed).then_some(out)
}

/// Per-4-KiB hashes of every region of `snap` taken on the device (the backend's 128-bit
/// chunk hash folded to 64 bits), so a pass's output is not read to the host: that read costs
/// about 40 ms per GiB per pass over PCIe, hashing in place well under a millisecond
/// (docs/gpu/h200-restore.md). `Ok(None)`:
/// the backend cannot hash on the device (the caller reads to the host), decided by the first
/// region, so every pass of a replay is hashed the same way.
fn device_block_hashes<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
) -> Result<Option<Vec<Vec<u64>>>, BackendError> {
    let mut out = Vec::with_capacity(snap.regions.len());
    let mut wide = Vec::new();
    for r in &snap.regions {
        wide.clear();
        wide.resize(chunk_count(r.size, HASH_CHUNK), [0u64; 2]);
        if !backend.hash_chunks_on_device(r.addr, r.size as usize, HASH_CHUNK, &mut wide)? {
            return Ok(None);
        }
        out.push(wide.iter().map(|h| h[0] ^ h[1].rotate_left(29)).collect());
    }
    Ok(Some(out))
}

/// The first region (address) and byte offset where `b` differs from `a`.
fn first_difference<B: Backend>(
    snap: &Snapshot<'_, B>,
    a: &[Vec<u64>],
    b: &[Vec<u64>],
) -> Option<(u64, u64)> {
    for ((r, ha), hb) in snap.regions.iter().zip(a).zip(b) {
        if let Some(i) = ha.iter().zip(hb).position(|(x, y)| x != y) {
            return Some((r.addr, (i * HASH_CHUNK) as u64));
        }
    }
    None
}

/// Compares pass `pass`'s block hashes with pass 0's (keeping pass 0's); on a difference
/// reports it and returns true.
pub(super) fn judge<B: Backend>(
    snap: &Snapshot<'_, B>,
    pass: u32,
    hashes: Option<Vec<Vec<u64>>>,
    first: &mut Option<Vec<Vec<u64>>>,
    correlation: u64,
    emit: &mut dyn FnMut(Record),
) -> bool {
    let Some(h) = hashes else {
        tracing::warn!("kreplay: hashing pass {pass} failed; determinism not checked");
        return false;
    };
    let Some(f) = first else {
        *first = Some(h);
        return false;
    };
    match first_difference(snap, f, &h) {
        Some(at) => report_difference(pass, at, correlation, emit),
        None => false,
    }
}

/// Reports that pass `pass` differs from pass 0 in `(region, offset)`; returns true.
pub(super) fn report_difference(
    pass: u32,
    (region, offset): (u64, u64),
    correlation: u64,
    emit: &mut dyn FnMut(Record),
) -> bool {
    tracing::warn!(
        "kreplay: pass {pass} differs from pass 0 in region {region:#x} at offset {offset}"
    );
    emit(
        Nondeterministic {
            correlation,
            pass,
            ts_ns: now_ns(),
            region,
            offset,
        }
        .into(),
    );
    true
}

/// Replays one dispatch; the caller holds the agent's replay window. Ends with a
/// [`ToolWindow`] record spanning everything it did on this thread, the snapshot's buffers
/// freed included (a declined replay too: taking the snapshot called the runtime).
pub fn replay<B: Backend>(
    backend: &B,
    inv: &Inventory,
    req: &Request<'_, B>,
    emit: &mut dyn FnMut(Record),
) -> Outcome {
    let start_ns = now_ns();
    let (pid, tid) = (crate::record::current_pid(), crate::record::current_tid());
    // The snapshot (and every buffer it holds) is dropped inside: the window covers the frees.
    let outcome = replay_snapshotted(backend, inv, req, (pid, tid), emit);
    let end_ns = now_ns();
    emit(
        ToolWindow {
            pid,
            tid,
            correlation: req.correlation,
            start_ns,
            end_ns,
        }
        .into(),
    );
    let passes = match outcome {
        Outcome::Replayed { passes, .. } => Some(passes),
        _ => None,
    };
    crate::progress::note(passes, end_ns - start_ns);
    outcome
}

/// [`replay`] without the closing window; `(pid, tid)` name this thread in the records.
fn replay_snapshotted<B: Backend>(
    backend: &B,
    inv: &Inventory,
    req: &Request<'_, B>,
    (pid, tid): (u32, u32),
    emit: &mut dyn FnMut(Record),
) -> Outcome {
    if let Some(why) = crate::fault::stopped() {
        return Outcome::Declined(why.into());
    }
    let t0 = now_ns();
    let hash_passes = req.check_determinism && req.passes > 1;
    // Restores keep the hashes of the pass they follow, for the determinism check.
    let policy = SnapshotPolicy {
        pass_hashes: hash_passes,
        ..req.policy
    };
    let snapshot = snap_in(backend, inv, req.agent, &policy, req.arena);
    let t1 = now_ns();
    let step = |step: u8, pass: u32, start_ns: u64, end_ns: u64, bytes: u64| -> Record {
        ReplayStep {
            pid,
            tid,
            correlation: req.correlation,
            step,
            pass,
            start_ns,
            end_ns,
            bytes,
        }
        .into()
    };
    let outcome = match &snapshot.failure {
        Some(f @ SnapFailure::OverBudget { .. }) => Outcome::Declined(f.to_string()),
        Some(f) => Outcome::Declined(format!("snapshot incomplete: {f}")),
        None => {
            emit(
                SnapRec {
                    correlation: req.correlation,
                    start_ns: t0,
                    end_ns: t1,
                    bytes: snapshot.bytes(),
                    regions: snapshot.regions.len() as u64,
                    chunk_size: snapshot.chunk as u64,
                    bytes_hashed: snapshot.bytes_hashed,
                    pid,
                    tid,
                    placement: snapshot.placement.code(),
                    check: snapshot.check.code(),
                }
                .into(),
            );
            for &(code, start, end, bytes) in &snapshot.steps {
                emit(step(code, 0, start, end, bytes));
            }
            // Kept on the device where the backend can: one hash and one comparison per pass.
            let mut on_device = hash_passes
                .then(|| DeviceCheck::new(backend, &snapshot))
                .flatten();
            let mut run = Passes {
                backend,
                inv,
                req,
                snap: &snapshot,
                thread: (pid, tid),
                hash_passes,
                step: &step,
            };
            let outcome = run.all(&mut on_device, emit);
            let (release, held) = (now_ns(), snapshot.bytes());
            drop(on_device);
            drop(snapshot);
            emit(step(replay_step::RELEASE, 0, release, now_ns(), held));
            return outcome;
        }
    };
    // A declined snapshot's buffers go inside the closing window alone.
    drop(snapshot);
    outcome
}

/// The record of one restore of `snap` that prepared `pass`, started at `start_ns`.
pub(super) fn restore_record<B: Backend>(
    req: &Request<'_, B>,
    snap: &Snapshot<'_, B>,
    pass: u32,
    start_ns: u64,
    st: &RestoreStats,
    (pid, tid): (u32, u32),
) -> Record {
    Restore {
        correlation: req.correlation,
        pass,
        start_ns,
        end_ns: now_ns(),
        bytes: st.bytes,
        regions: st.regions,
        skipped: st.skipped,
        placement: snap.placement.code(),
        check: if st.check_skipped {
            snapshot_mode::FULL
        } else {
            snap.check.code()
        },
        bytes_checked: st.bytes_checked,
        dirty_chunks: st.dirty_chunks,
        check_ns: st.check_ns,
        pid,
        tid,
        failed: st.failed,
    }
    .into()
}

/// After `why` (a failed pass, or a failed restore before `pass`): writes every byte of the
/// snapshot back, up to [`RECOVERY_ATTEMPTS`] times until no region fails, recording each
/// attempt as a restore preparing `pass`. A region still refused is logged as an error by
/// address: the dispatch the caller then runs starts from memory kreplay could not put back.
#[allow(clippy::too_many_arguments)]
pub(super) fn put_back<B: Backend>(
    backend: &B,
    inv: &Inventory,
    snap: &Snapshot<'_, B>,
    req: &Request<'_, B>,
    pass: u32,
    thread: (u32, u32),
    why: String,
    emit: &mut dyn FnMut(Record),
) -> Outcome {
    tracing::warn!(
        "kreplay: dispatch {}: {why}; no further pass runs, the snapshot is written back and the dispatch runs once",
        req.correlation
    );
    let mut first_failed = 0;
    for _ in 0..RECOVERY_ATTEMPTS {
        let start = now_ns();
        let st = restore_all(backend, inv, snap);
        emit(restore_record(req, snap, pass, start, &st, thread));
        if st.failed == 0 {
            return Outcome::Failed(why);
        }
        first_failed = st.first_failed;
    }
    tracing::error!(
        "kreplay: dispatch {}: the memory at {first_failed:#x} could not be restored after {RECOVERY_ATTEMPTS} attempts; the application's results may differ from a run without kreplay",
        req.correlation
    );
    Outcome::Failed(format!(
        "{why}; the memory at {first_failed:#x} could not be restored"
    ))
}
