//! Engine tests on the fake backend: the replay loop, snapshot failures, restore validation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use kreplay_common::stream::Record;

use super::arena::SnapshotArena;
use super::config::{PlacementPref, SnapshotPolicy};
use super::fake::{FakeBackend, FakeDispatch};
use super::inventory::Inventory;
use super::replay::{Outcome, Request, replay};

pub(super) const GPU: u64 = 7;
pub(super) const X: u64 = 0x10_0000;
pub(super) const Y: u64 = 0x20_0000;
pub(super) const COUNTER: u64 = 0x30_0000;
const CONST: u64 = 0x40_0000;
pub(super) const N: usize = 3000;

pub(super) fn floats(v: &[u8]) -> Vec<f32> {
    v.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub(super) fn setup() -> (FakeBackend, Arc<Inventory>) {
    let fake = FakeBackend::new();
    let inv = Arc::new(Inventory::new());
    inv.set_recording(true);
    for (base, fill) in [(X, 1.0f32), (Y, 2.0f32)] {
        fake.add_alloc(base, N * 4, GPU, Some(4));
        let bytes: Vec<u8> = (0..N)
            .flat_map(|i| (fill + i as f32).to_le_bytes())
            .collect();
        fake.write(base, &bytes);
        inv.record_alloc(base, (N * 4) as u64, GPU);
    }
    fake.add_var(COUNTER, 4, false, "launches");
    fake.add_var(CONST, 4, true, "coeffs");
    (fake, inv)
}

/// y = 3x + y in place, and counter += 1.
pub(super) fn saxpy() -> FakeDispatch {
    Box::new(|f: &FakeBackend| {
        let x = floats(&f.read(X, N * 4));
        let y = floats(&f.read(Y, N * 4));
        let out: Vec<u8> = x
            .iter()
            .zip(&y)
            .flat_map(|(a, b)| (3.0 * a + b).to_le_bytes())
            .collect();
        f.write(Y, &out);
        let c = u32::from_le_bytes(f.read(COUNTER, 4).try_into().unwrap());
        f.write(COUNTER, &(c + 1).to_le_bytes());
    })
}

fn run(
    fake: &FakeBackend,
    inv: &Inventory,
    d: &FakeDispatch,
    passes: u32,
) -> (Outcome, Vec<Record>) {
    run_with(fake, inv, d, passes, SnapshotPolicy::default())
}

/// Replays `d` for `passes` passes under `policy` (correlation 9), collecting the records.
pub(super) fn run_with(
    fake: &FakeBackend,
    inv: &Inventory,
    d: &FakeDispatch,
    passes: u32,
    policy: SnapshotPolicy,
) -> (Outcome, Vec<Record>) {
    run_in(fake, inv, d, passes, policy, None)
}

/// [`run_with`], keeping snapshot buffers in `arena`.
pub(super) fn run_in(
    fake: &FakeBackend,
    inv: &Inventory,
    d: &FakeDispatch,
    passes: u32,
    policy: SnapshotPolicy,
    arena: Option<&SnapshotArena>,
) -> (Outcome, Vec<Record>) {
    run_checking(fake, inv, d, passes, policy, arena, true)
}

/// [`run_in`], with the determinism check on or off.
pub(super) fn run_checking(
    fake: &FakeBackend,
    inv: &Inventory,
    d: &FakeDispatch,
    passes: u32,
    policy: SnapshotPolicy,
    arena: Option<&SnapshotArena>,
    check_determinism: bool,
) -> (Outcome, Vec<Record>) {
    run_request(
        fake,
        inv,
        d,
        passes,
        policy,
        arena,
        check_determinism,
        false,
    )
}

/// [`run_checking`], with [`Request::restore_after`] as given.
#[expect(clippy::too_many_arguments, reason = "every knob of one test replay")]
fn run_request(
    fake: &FakeBackend,
    inv: &Inventory,
    d: &FakeDispatch,
    passes: u32,
    policy: SnapshotPolicy,
    arena: Option<&SnapshotArena>,
    check_determinism: bool,
    restore_after: bool,
) -> (Outcome, Vec<Record>) {
    let mut recs = Vec::new();
    let req = Request {
        agent: GPU,
        dispatch: d,
        passes,
        check_determinism,
        correlation: 9,
        policy,
        arena,
        restore_after,
    };
    let out = replay(fake, inv, &req, &mut |r| recs.push(r));
    (out, recs)
}

#[test]
fn five_passes_leave_memory_and_the_counter_at_their_one_pass_values() {
    let (fake, inv) = setup();
    let d = saxpy();
    let (out, recs) = run(&fake, &inv, &d, 5);
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 5,
            nondeterministic: false
        }
    );
    let y = floats(&fake.read(Y, N * 4));
    assert_eq!(y[0], 3.0 * 1.0 + 2.0);
    assert_eq!(
        y[N - 1],
        3.0 * (1.0 + (N - 1) as f32) + 2.0 + (N - 1) as f32
    );
    assert_eq!(fake.read(COUNTER, 4), 1u32.to_le_bytes());
    let snaps: Vec<_> = recs
        .iter()
        .filter_map(|r| {
            if let Record::Snapshot(s) = r {
                Some(s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(snaps.len(), 1);
    assert_eq!(
        (snaps[0].bytes, snaps[0].regions),
        ((2 * N * 4 + 4) as u64, 3),
        "x, y, counter; not the constant"
    );
    let passes = recs
        .iter()
        .filter(|r| matches!(r, Record::ReplayPass(_)))
        .count();
    let restores: Vec<_> = recs
        .iter()
        .filter_map(|r| {
            if let Record::Restore(s) = r {
                Some(s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!((passes, restores.len()), (5, 4));
    // x is never written; y (12000 bytes: one chunk) and the counter are.
    assert!(
        restores
            .iter()
            .all(|r| r.regions == 2 && r.skipped == 0 && r.bytes == (N * 4 + 4) as u64),
        "{restores:?}"
    );
    assert_eq!(
        fake.host_bytes_live(),
        0,
        "every host copy freed after the replay"
    );
}

#[test]
fn each_snapshot_failure_declines_without_running_the_dispatch() {
    type Knob = fn(&FakeBackend);
    let knobs: [(Knob, &str); 3] = [
        (
            |f| f.fail_d2h_nth.store(2, Ordering::SeqCst),
            "device-to-host copy",
        ),
        (
            |f| f.fail_symbols.store(true, Ordering::SeqCst),
            "module variable enumeration",
        ),
        (
            |f| f.fail_host_alloc_above.store(1024, Ordering::SeqCst),
            "host allocation",
        ),
    ];
    for (knob, why) in knobs {
        let (fake, inv) = setup();
        knob(&fake);
        let before = fake.read(Y, N * 4);
        // Pinned only: in auto placement a refused pinned allocation falls back to pageable.
        let policy = SnapshotPolicy {
            placement: PlacementPref::Pinned,
            ..SnapshotPolicy::default()
        };
        let (out, recs) = run_with(&fake, &inv, &saxpy(), 5, policy);
        match out {
            Outcome::Declined(reason) => {
                assert!(reason.contains(why), "{reason} should name {why}")
            }
            other => panic!("expected a decline for {why}, got {other:?}"),
        }
        // Nothing but the window around the snapshot attempt.
        assert!(
            matches!(recs.as_slice(), [Record::ToolWindow(_)]),
            "{recs:?}"
        );
        assert_eq!(fake.read(Y, N * 4), before, "the dispatch did not run");
        assert_eq!(fake.host_bytes_live(), 0);
    }
}

#[test]
fn a_region_freed_before_restore_is_skipped_and_a_reallocation_is_not_written() {
    let (fake, inv) = setup();
    let inv2 = inv.clone();
    let pass = AtomicU32::new(0);
    let d: FakeDispatch = Box::new(move |f: &FakeBackend| {
        if pass.fetch_add(1, Ordering::SeqCst) == 0 {
            // X freed; Y freed and reallocated at the same address with new contents.
            inv2.record_free(X);
            f.remove_alloc(X);
            inv2.record_free(Y);
            inv2.record_alloc(Y, (N * 4) as u64, GPU);
            f.write(Y, &vec![0xAB; N * 4]);
        }
    });
    let (out, recs) = run(&fake, &inv, &d, 2);
    assert!(matches!(out, Outcome::Replayed { passes: 2, .. }));
    let r = recs
        .iter()
        .find_map(|r| {
            if let Record::Restore(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!(
        (r.regions, r.skipped, r.bytes),
        (0, 2, 0),
        "x and y skipped; the counter is valid but unchanged, so nothing is written"
    );
    assert_eq!(
        fake.read(Y, N * 4),
        vec![0xAB; N * 4],
        "the new allocation was not overwritten"
    );
}

#[test]
fn a_pass_that_writes_differently_is_reported_with_its_region_and_offset() {
    let (fake, inv) = setup();
    let (out, recs) = run(&fake, &inv, &differing_writes(), 3);
    assert_first_difference(out, &recs);
}

#[test]
fn a_device_resident_replay_checks_determinism_on_the_device() {
    // Restoring changed chunks, and restoring every byte (`--restore full`).
    for dirty_only in [true, false] {
        let (fake, inv) = setup();
        fake.enable_device(1 << 30, true, false);
        let device = SnapshotPolicy {
            placement: PlacementPref::Device,
            dirty_only,
            ..SnapshotPolicy::default()
        };
        let (out, recs) = run_with(&fake, &inv, &differing_writes(), 3, device);
        // Found at the same 4 KiB block as on the host path, and no byte of any pass's
        // output (nor of the snapshot) was read to the host.
        assert_first_difference(out, &recs);
        assert_eq!(fake.d2h_bytes.load(Ordering::SeqCst), 0, "{dirty_only}");
    }
}

/// A dispatch whose passes write a different byte at Y + 5000 each time.
fn differing_writes() -> FakeDispatch {
    let calls = AtomicU32::new(0);
    Box::new(move |f: &FakeBackend| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        f.write(Y + 5000, &[n as u8 + 1]);
    })
}

/// Checks a replay of `differing_writes` over 3 passes: nondeterministic, reported once, at
/// pass 1, region Y, the 4 KiB block holding offset 5000.
fn assert_first_difference(out: Outcome, recs: &[Record]) {
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 3,
            nondeterministic: true
        }
    );
    let nd: Vec<_> = recs
        .iter()
        .filter_map(|r| {
            if let Record::Nondeterministic(n) = r {
                Some(n.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(nd.len(), 1);
    assert_eq!((nd[0].pass, nd[0].region, nd[0].offset), (1, Y, 4096));
}

/// `(start, end)` of a record that spans time, `None` for the others.
fn span(r: &Record) -> Option<(u64, u64)> {
    match r {
        Record::Snapshot(s) => Some((s.start_ns, s.end_ns)),
        Record::ReplayPass(p) => Some((p.start_ns, p.end_ns)),
        Record::Restore(s) => Some((s.start_ns, s.end_ns)),
        _ => None,
    }
}

#[test]
fn a_replay_names_its_thread_and_closes_with_a_window_over_all_its_work() {
    let (fake, inv) = setup();
    let (out, recs) = run(&fake, &inv, &saxpy(), 3);
    assert!(
        matches!(out, Outcome::Replayed { passes: 3, .. }),
        "{out:?}"
    );
    let pid = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let threads: Vec<(u32, u32)> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Snapshot(s) => Some((s.pid, s.tid)),
            Record::ReplayPass(p) => Some((p.pid, p.tid)),
            Record::Restore(s) => Some((s.pid, s.tid)),
            _ => None,
        })
        .collect();
    // One snapshot, three passes, two restores: all on this thread.
    assert_eq!(threads, vec![(pid, tid); 6]);
    let Some(Record::ToolWindow(w)) = recs.last() else {
        panic!("the last record is the window: {recs:?}");
    };
    assert_eq!((w.pid, w.tid, w.correlation), (pid, tid, 9));
    let windows = recs
        .iter()
        .filter(|r| matches!(r, Record::ToolWindow(_)))
        .count();
    assert_eq!(windows, 1);
    for (start, end) in recs.iter().filter_map(span) {
        assert!(
            w.start_ns <= start && end <= w.end_ns,
            "{w:?} {start} {end}"
        );
    }
}

#[test]
fn a_declined_replay_still_closes_its_window() {
    let (fake, inv) = setup();
    let policy = SnapshotPolicy {
        budget: 16,
        ..SnapshotPolicy::default()
    };
    let (out, recs) = run_with(&fake, &inv, &saxpy(), 3, policy);
    assert!(matches!(out, Outcome::Declined(_)), "{out:?}");
    assert!(
        matches!(recs.as_slice(), [Record::ToolWindow(w)] if w.correlation == 9 && w.start_ns <= w.end_ns),
        "{recs:?}"
    );
}

#[test]
fn restore_after_leaves_the_snapshot_so_the_launch_that_follows_computes_its_one_pass_values() {
    for (passes, check) in [(2, true), (5, false), (5, true)] {
        let (fake, inv) = setup();
        let d = saxpy();
        let before = fake.read(Y, N * 4);
        let (out, recs) = run_request(
            &fake,
            &inv,
            &d,
            passes,
            SnapshotPolicy::default(),
            None,
            check,
            true,
        );
        assert_eq!(
            out,
            Outcome::Replayed {
                passes,
                nondeterministic: false
            },
            "{passes} passes, check {check}"
        );
        // Every byte is back: y as before the passes, the counter at 0.
        assert_eq!(
            fake.read(Y, N * 4),
            before,
            "{passes} passes, check {check}"
        );
        assert_eq!(fake.read(COUNTER, 4), 0u32.to_le_bytes());
        // One restore after each pass, the last one included.
        let restores = recs
            .iter()
            .filter(|r| matches!(r, Record::Restore(_)))
            .count();
        assert_eq!(restores, passes as usize, "{passes} passes, check {check}");
        // The application's own launch then computes what it would without kreplay.
        d(&fake);
        let y = floats(&fake.read(Y, N * 4));
        assert_eq!(y[0], 3.0 * 1.0 + 2.0);
        assert_eq!(fake.read(COUNTER, 4), 1u32.to_le_bytes());
    }
}

#[test]
fn each_pass_carries_the_gpu_time_the_backend_measured_and_none_without_timers() {
    let gpu_times = |base: u64| {
        let (fake, inv) = setup();
        fake.gpu_ns_base.store(base, Ordering::SeqCst);
        let (out, recs) = run(&fake, &inv, &saxpy(), 3);
        assert!(
            matches!(out, Outcome::Replayed { passes: 3, .. }),
            "{out:?}"
        );
        recs.iter()
            .filter_map(|r| match r {
                Record::ReplayPass(p) => Some((p.pass, p.gpu_ns)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // The fake times its nth submission at base + n: the three passes are submissions 1-3.
    assert_eq!(gpu_times(5000), [(0, 5001), (1, 5002), (2, 5003)]);
    assert_eq!(gpu_times(0), [(0, 0), (1, 0), (2, 0)]);
}
