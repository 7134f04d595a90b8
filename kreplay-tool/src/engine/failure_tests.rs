//! Engine tests of failures after the snapshot: a failed restore or pass stops the replay,
//! the whole snapshot is written back (retried), and the records count what failed.

use std::sync::atomic::Ordering;

use kreplay_common::stream::{Record, Restore, snapshot_mode};

use super::backend::Backend;
use super::config::SnapshotPolicy;
use super::fake::FakeBackend;
use super::put_back::RECOVERY_ATTEMPTS;
use super::replay::Outcome;
use super::tests::{COUNTER, N, X, Y, floats, run_with, saxpy, setup};

fn restores(recs: &[Record]) -> Vec<Restore> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Restore(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

fn passes(recs: &[Record]) -> usize {
    recs.iter()
        .filter(|r| matches!(r, Record::ReplayPass(_)))
        .count()
}

/// Y and the counter as the fake holds them.
fn y_and_counter(fake: &FakeBackend) -> (Vec<f32>, u32) {
    let c = u32::from_le_bytes(fake.read(COUNTER, 4).try_into().unwrap());
    (floats(&fake.read(Y, N * 4)), c)
}

/// What the memory holds after one plain run of saxpy from the setup's contents.
fn one_run() -> (Vec<f32>, u32) {
    let (fake, _) = setup();
    fake.submit_wait(&saxpy()).unwrap();
    y_and_counter(&fake)
}

#[test]
fn a_failed_restore_stops_the_replay_and_puts_the_whole_snapshot_back() {
    let (fake, inv) = setup();
    let before = y_and_counter(&fake);
    // x is unchanged by the pass, so y's write-back is the first host-to-device copy.
    fake.fail_h2d_nth.store(1, Ordering::SeqCst);
    let d = saxpy();
    let (out, recs) = run_with(&fake, &inv, &d, 5, SnapshotPolicy::default());
    assert_eq!(
        out,
        Outcome::Failed(format!(
            "the restore before pass 1 failed in 1 region(s), first {Y:#x}"
        ))
    );
    assert_eq!(
        passes(&recs),
        1,
        "no pass runs on memory that was not put back"
    );
    assert!(
        !recs
            .iter()
            .any(|r| matches!(r, Record::Nondeterministic(_))),
        "a stopped replay is not called nondeterministic"
    );
    let r = restores(&recs);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!((r[0].pass, r[0].failed, r[0].regions), (1, 1, 1));
    // The recovery writes x, y and the counter whole (the constant is never captured).
    assert_eq!(
        (r[1].pass, r[1].failed, r[1].regions, r[1].bytes, r[1].check),
        (1, 0, 3, (2 * N * 4 + 4) as u64, snapshot_mode::FULL)
    );
    assert_eq!(y_and_counter(&fake), before, "memory is the snapshot's");
    // The caller runs the dispatch once: the application sees one run's result.
    fake.submit_wait(&d).unwrap();
    assert_eq!(y_and_counter(&fake), one_run());
}

#[test]
fn a_write_back_that_keeps_failing_is_retried_then_named() {
    let (fake, inv) = setup();
    fake.fail_h2d_from.store(1, Ordering::SeqCst);
    let d = saxpy();
    let (out, recs) = run_with(&fake, &inv, &d, 3, SnapshotPolicy::default());
    assert_eq!(
        out,
        Outcome::Failed(format!(
            "the restore before pass 1 failed in 2 region(s), first {Y:#x}; the memory at {X:#x} could not be restored"
        ))
    );
    let r = restores(&recs);
    assert_eq!(r.len(), 1 + RECOVERY_ATTEMPTS as usize, "{r:?}");
    assert!(
        r[1..].iter().all(|s| s.failed == 3 && s.regions == 0),
        "{r:?}"
    );
}

#[test]
fn a_failed_pass_puts_the_snapshot_back_for_one_normal_run() {
    let (fake, inv) = setup();
    let before = y_and_counter(&fake);
    // The third pass runs (writes) and then reports a failure.
    fake.fail_submit_nth.store(3, Ordering::SeqCst);
    let d = saxpy();
    let (out, recs) = run_with(&fake, &inv, &d, 5, SnapshotPolicy::default());
    assert_eq!(
        out,
        Outcome::Failed(
            "pass 2 failed: hsa_signal_wait_scacquire failed with HSA_STATUS_ERROR (0x1000)".into()
        )
    );
    assert_eq!(passes(&recs), 2, "passes 0 and 1 completed");
    let r = restores(&recs);
    assert_eq!(
        r.len(),
        3,
        "two restores between passes, one write-back: {r:?}"
    );
    assert_eq!(
        (r[2].pass, r[2].failed, r[2].check),
        (2, 0, snapshot_mode::FULL)
    );
    assert_eq!(y_and_counter(&fake), before);
}
