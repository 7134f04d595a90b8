//! The replay loop of one dispatch: snap; on an incomplete snapshot decline (the caller then
//! runs the dispatch once with its original completion signal); else per pass submit, wait,
//! hash what the pass wrote, restore (none after the last pass, unless the request asks for
//! one: [`Request::restore_after`]). When a pass or a restore
//! fails, no further pass runs: every byte of the snapshot is written back (retried up to
//! [`super::put_back::RECOVERY_ATTEMPTS`] times) and the caller runs the dispatch once from that state, so the
//! application sees what it would have computed without kreplay. Records go to `emit`; each
//! names the process and thread that did the work, and a `ToolWindow` record closes the
//! replay: every runtime call that thread made inside it was kreplay's own.

use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::{Record, ReplayStep, Snapshot as SnapRec, ToolWindow, replay_step};

use super::backend::Backend;
use super::capture::snap_in;
use super::config::SnapshotPolicy;
use super::determinism::DeviceCheck;
use super::inventory::Inventory;
use super::passes::Passes;
pub use super::request::{Outcome, Request};
use super::snapshot::SnapFailure;

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
    // With the determinism check off, passes are still hashed on the device when there are
    // at least three: the last pass's hash of every region is what lets the restores between
    // look only at the write set (and keeps the application's memory exact), and two reads
    // of the footprint cost less than a whole one per restore. Differences are then acted on
    // but not reported.
    let write_set_only = !req.check_determinism && req.passes >= 3;
    let hash_passes = (req.check_determinism && req.passes > 1) || write_set_only;
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
            // Without the check, hashing through the host would only add reads.
            let hash_passes = hash_passes && (req.check_determinism || on_device.is_some());
            let mut run = Passes {
                backend,
                inv,
                req,
                snap: &snapshot,
                thread: (pid, tid),
                hash_passes,
                report: req.check_determinism,
                step: &step,
            };
            let mut outcome = run.all(&mut on_device, emit);
            if req.restore_after {
                outcome = run.restore_after(outcome, emit);
            }
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
