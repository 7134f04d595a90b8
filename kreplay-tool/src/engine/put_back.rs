//! After a failed pass or restore: every byte of the snapshot written back (retried), so the
//! caller can run the dispatch once from the application's own memory; and the restore
//! record both the passes and the recovery write.

use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::{Record, Restore, snapshot_mode};

use super::backend::Backend;
use super::inventory::Inventory;
use super::request::{Outcome, Request};
use super::restore::restore_all;
use super::restore_stats::RestoreStats;
use super::snapshot::Snapshot;

/// Full write-backs tried after a failed pass or restore before the memory is reported as not
/// restored.
pub const RECOVERY_ATTEMPTS: u32 = 3;

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
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
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
