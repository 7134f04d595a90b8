//! Restore-only-what-changed tests on the fake backend: every placement and check, exact
//! dirty bytes, unchanged writes, a one-byte change in a short last chunk, the forced-collision
//! hook, admission control and the host memory a snapshot holds.

use std::sync::atomic::Ordering;

use kreplay_common::stream::{Record, Restore, Snapshot as SnapRec, snapshot_mode as m};

use super::arena::SnapshotArena;
use super::capture::snap;
use super::chunks::chunk_count;
use super::config::{PlacementPref, SnapshotPolicy};
use super::fake::{FakeBackend, FakeDispatch};
use super::inventory::Inventory;
use super::replay::Outcome;
use super::restore::restore;
use super::tests::{COUNTER, GPU, N, X, Y, run_in, run_with, saxpy, setup};

/// A 1 MiB buffer (16 chunks of 64 KiB) next to setup()'s x, y and counter.
pub(super) const B: u64 = 0x50_0000;
pub(super) const B_LEN: usize = 1 << 20;
pub(super) const CHUNK: usize = 64 << 10;
/// Bytes of setup()'s footprint plus B.
pub(super) const FOOTPRINT: u64 = (2 * N * 4 + 4 + B_LEN) as u64;

pub(super) fn with_b() -> (FakeBackend, std::sync::Arc<Inventory>) {
    let (fake, inv) = setup();
    fake.add_alloc(B, B_LEN, GPU, Some(4));
    let pattern: Vec<u8> = (0..B_LEN).map(|i| (i * 7 % 251) as u8).collect();
    fake.write(B, &pattern);
    inv.record_alloc(B, B_LEN as u64, GPU);
    (fake, inv)
}

/// `placement`, checking every restore (no adaptive switch: exact counts do not depend on
/// how fast this machine is).
pub(super) fn policy(placement: PlacementPref) -> SnapshotPolicy {
    SnapshotPolicy {
        placement,
        adaptive: false,
        chunk: CHUNK,
        ..SnapshotPolicy::default()
    }
}

/// Flips one byte in chunk 3 and writes 8 bytes across the chunk 9/10 boundary of B.
pub(super) fn scattered() -> FakeDispatch {
    Box::new(|f: &FakeBackend| {
        let at = B + 3 * CHUNK as u64 + 17;
        let v = f.read(at, 1)[0];
        f.write(at, &[v ^ 1]);
        f.write(B + 10 * CHUNK as u64 - 4, &[0xEE; 8]);
    })
}

pub(super) fn restores(recs: &[Record]) -> Vec<Restore> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Restore(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn snapshot_rec(recs: &[Record]) -> SnapRec {
    recs.iter()
        .find_map(|r| match r {
            Record::Snapshot(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a snapshot record")
}

/// The one-pass result of `scattered` on B.
pub(super) fn scattered_once(before: &[u8]) -> Vec<u8> {
    let mut want = before.to_vec();
    want[3 * CHUNK + 17] ^= 1;
    want[10 * CHUNK - 4..10 * CHUNK + 4].fill(0xEE);
    want
}

#[test]
fn every_placement_restores_exactly_the_dirty_chunks() {
    // (device room, device hash, device compare, preference, placement, check, bytes checked)
    let cases = [
        (
            0,
            false,
            false,
            PlacementPref::Pinned,
            m::PINNED,
            m::HOST_HASH,
            FOOTPRINT,
        ),
        (
            0,
            false,
            false,
            PlacementPref::Pageable,
            m::PAGEABLE,
            m::HOST_HASH,
            FOOTPRINT,
        ),
        (
            0,
            false,
            false,
            PlacementPref::Auto,
            m::PINNED,
            m::HOST_HASH,
            FOOTPRINT,
        ),
        (
            0,
            true,
            true,
            PlacementPref::Auto,
            m::PINNED,
            m::DEVICE_HASH,
            FOOTPRINT,
        ),
        (
            1 << 30,
            false,
            false,
            PlacementPref::Auto,
            m::DEVICE,
            m::HOST_HASH,
            FOOTPRINT,
        ),
        (
            1 << 30,
            true,
            false,
            PlacementPref::Auto,
            m::DEVICE,
            m::DEVICE_HASH,
            FOOTPRINT,
        ),
        (
            1 << 30,
            true,
            true,
            PlacementPref::Device,
            m::DEVICE,
            m::DEVICE_COMPARE,
            2 * FOOTPRINT,
        ),
        // The default for a device-resident copy when the device hashes: one read, not two.
        (
            1 << 30,
            true,
            true,
            PlacementPref::Device,
            m::DEVICE,
            m::DEVICE_HASH,
            FOOTPRINT,
        ),
    ];
    for (room, hash, compare, pref, placement, check, checked) in cases {
        let label = m::label(placement, check);
        let (fake, inv) = with_b();
        fake.enable_device(room, hash, compare);
        let before = fake.read(B, B_LEN);
        // KREPLAY_DEVICE_CHECK=compare where the case expects the exact comparison.
        let pol = SnapshotPolicy {
            exact_device_check: check == m::DEVICE_COMPARE,
            ..policy(pref)
        };
        let (out, recs) = run_with(&fake, &inv, &scattered(), 3, pol);
        assert_eq!(
            out,
            Outcome::Replayed {
                passes: 3,
                nondeterministic: false
            },
            "{label}"
        );
        assert_eq!(fake.read(B, B_LEN), scattered_once(&before), "{label}");
        let s = snapshot_rec(&recs);
        assert_eq!(
            (s.placement, s.check, s.chunk_size, s.bytes),
            (placement, check, CHUNK as u64, FOOTPRINT),
            "{label}"
        );
        let hashed = if check == m::DEVICE_COMPARE {
            0
        } else {
            FOOTPRINT
        };
        assert_eq!(s.bytes_hashed, hashed, "{label}");
        let rs = restores(&recs);
        assert_eq!(rs.len(), 2, "{label}");
        for (i, r) in rs.iter().enumerate() {
            // Chunks 3, 9 and 10 of B; nothing else was written.
            assert_eq!(
                (r.bytes, r.dirty_chunks, r.regions, r.skipped),
                (3 * CHUNK as u64, 3, 1, 0),
                "{label}"
            );
            // After the first one-pass restore, restores look only at the region pass 0
            // wrote (B), when the determinism check hashes the last pass over everything on
            // the device (it compares there too).
            let limited = i > 0 && placement == m::DEVICE && check == m::DEVICE_HASH && compare;
            let checked = if limited { B_LEN as u64 } else { checked };
            assert_eq!(
                (r.placement, r.check, r.bytes_checked),
                (placement, check, checked),
                "{label}, restore {i}"
            );
        }
        // Device copies are taken and written back device-to-device; where the determinism
        // check runs on the device, the first restore's hashes of pass 0 (16 bytes for each of
        // the 19 chunks) are copied to be its reference.
        let d2d = if placement == m::DEVICE {
            let adopted = if check == m::DEVICE_HASH && compare {
                16 * 19
            } else {
                0
            };
            FOOTPRINT + 2 * 3 * CHUNK as u64 + adopted
        } else {
            0
        };
        assert_eq!(fake.d2d_bytes.load(Ordering::SeqCst), d2d, "{label}");
        assert_eq!(fake.host_bytes_live(), 0, "{label}: host copies freed");
        assert_eq!(fake.device_bytes_live(), 0, "{label}: device copies freed");
    }
}

#[test]
fn a_device_resident_restore_writes_all_its_dirty_runs_in_one_batch() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, true);
    fake.device_batch.store(true, Ordering::SeqCst);
    // The path of a backend that checks and writes in separate calls.
    fake.no_one_pass_restore.store(true, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let (out, recs) = run_with(&fake, &inv, &scattered(), 3, policy(PlacementPref::Device));
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
    // The snapshot's copies in one batch and its hashes in one more; two runs (chunk 3; chunks
    // 9 and 10) per restore, one batch each, two restores.
    assert_eq!(fake.d2d_batches.load(Ordering::SeqCst), 3);
    // One more per pass: the determinism check hashes every region at once on the device.
    assert_eq!(fake.hash_batches.load(Ordering::SeqCst), 1 + 3);
    let snap = recs
        .iter()
        .find_map(|r| match r {
            Record::Snapshot(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (snap.regions, snap.bytes, snap.bytes_hashed),
        (4, FOOTPRINT, FOOTPRINT)
    );
    for r in restores(&recs) {
        assert_eq!((r.bytes, r.dirty_chunks), (3 * CHUNK as u64, 3));
    }
    assert_eq!(
        fake.d2d_bytes.load(Ordering::SeqCst),
        FOOTPRINT + 2 * 3 * CHUNK as u64
    );

    // A pinned copy's dirty runs go up in one batch too.
    let (fake, inv) = with_b();
    fake.enable_device(0, true, false);
    fake.device_batch.store(true, Ordering::SeqCst);
    let (out, recs) = run_with(&fake, &inv, &scattered(), 3, policy(PlacementPref::Pinned));
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
    assert_eq!(fake.h2d_batches.load(Ordering::SeqCst), 2);
    for r in restores(&recs) {
        assert_eq!(
            (r.placement, r.bytes, r.dirty_chunks),
            (m::PINNED, 3 * CHUNK as u64, 3)
        );
    }
}

/// A chunk size that gives B 256 chunks.
pub(super) const SMALL_CHUNK: usize = B_LEN / 256;

#[test]
fn a_kernel_that_writes_what_the_buffer_held_restores_nothing() {
    for (room, compare) in [(0, false), (1 << 30, true)] {
        let (fake, inv) = with_b();
        fake.enable_device(room, compare, compare);
        let same: FakeDispatch = Box::new(|f: &FakeBackend| {
            let all = f.read(B, B_LEN);
            f.write(B, &all);
            let y = f.read(Y, N * 4);
            f.write(Y, &y);
        });
        let (_, recs) = run_with(&fake, &inv, &same, 4, policy(PlacementPref::Auto));
        let rs = restores(&recs);
        assert_eq!(rs.len(), 3);
        assert!(
            rs.iter()
                .all(|r| (r.bytes, r.regions, r.dirty_chunks, r.skipped) == (0, 0, 0, 0)),
            "{rs:?}"
        );
    }
}

#[test]
fn one_changed_byte_in_a_short_last_chunk_restores_that_chunk_only() {
    let (fake, inv) = setup();
    const C: u64 = 0x60_0000;
    let len = 2 * CHUNK + 100;
    fake.add_alloc(C, len, GPU, Some(4));
    inv.record_alloc(C, len as u64, GPU);
    let d: FakeDispatch = Box::new(move |f: &FakeBackend| f.write(C + len as u64 - 1, &[9]));
    let (_, recs) = run_with(&fake, &inv, &d, 2, policy(PlacementPref::Auto));
    let r = &restores(&recs)[0];
    assert_eq!((r.bytes, r.dirty_chunks, r.regions), (100, 1, 1));
    assert_eq!(
        fake.read(C + len as u64 - 1, 1),
        [9],
        "the last pass's write stays"
    );
}

#[test]
fn a_forced_hash_collision_is_still_restored_on_the_byte_compare_path() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, true);
    fake.force_collision_at
        .store(B + 3 * CHUNK as u64 + 17, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let exact = SnapshotPolicy {
        exact_device_check: true,
        ..policy(PlacementPref::Auto)
    };
    let (_, recs) = run_with(&fake, &inv, &scattered(), 3, exact);
    let r = &restores(&recs)[0];
    assert_eq!(
        r.check,
        m::DEVICE_COMPARE,
        "device-resident, KREPLAY_DEVICE_CHECK=compare: bytes compared"
    );
    assert_eq!((r.bytes, r.dirty_chunks), (3 * CHUNK as u64, 3));
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));

    // The hook is real: where only hashes are compared, the forced chunk looks clean. That
    // path relies on the 128-bit hash's collision bound (engine::chunks), not on the hook.
    let (fake, inv) = with_b();
    fake.enable_device(0, true, false);
    fake.force_collision_at
        .store(B + 3 * CHUNK as u64 + 17, Ordering::SeqCst);
    let (_, recs) = run_with(&fake, &inv, &scattered(), 2, policy(PlacementPref::Auto));
    let r = &restores(&recs)[0];
    assert_eq!((r.check, r.dirty_chunks), (m::DEVICE_HASH, 2));
}

#[test]
fn over_the_budget_the_replay_is_declined_before_anything_is_allocated() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, true);
    let before = fake.read(B, B_LEN);
    let tight = SnapshotPolicy {
        budget: FOOTPRINT - 1,
        ..policy(PlacementPref::Auto)
    };
    let (out, recs) = run_with(&fake, &inv, &scattered(), 3, tight);
    assert_eq!(
        out,
        Outcome::Declined(format!(
            "snapshot over budget: footprint {} ({FOOTPRINT} bytes) exceeds --snapshot-budget {}",
            kreplay_common::size::label(FOOTPRINT),
            kreplay_common::size::label(FOOTPRINT - 1)
        ))
    );
    // Nothing but the window around the snapshot attempt.
    assert!(
        matches!(recs.as_slice(), [Record::ToolWindow(_)]),
        "{recs:?}"
    );
    assert_eq!(fake.read(B, B_LEN), before, "the dispatch did not run");
    assert_eq!((fake.host_bytes_peak(), fake.device_bytes_live()), (0, 0));
    let exact = SnapshotPolicy {
        budget: FOOTPRINT,
        ..policy(PlacementPref::Auto)
    };
    let (out, _) = run_with(&fake, &inv, &scattered(), 2, exact);
    assert!(matches!(out, Outcome::Replayed { passes: 2, .. }));
}

#[test]
fn a_snapshot_holds_the_footprint_once_plus_one_bounded_scratch() {
    let (fake, inv) = with_b();
    let s = snap(&fake, &inv, GPU, &policy(PlacementPref::Pinned));
    assert!(s.ok());
    // The scratch is min(largest region, max(chunk, 1 MiB)) = B's 1 MiB.
    assert_eq!(s.scratch_len(), B_LEN);
    assert_eq!(fake.host_bytes_live(), FOOTPRINT + B_LEN as u64);
    drop(s);
    let s = snap(&fake, &inv, GPU, &policy(PlacementPref::Pageable));
    assert_eq!(
        fake.host_bytes_live(),
        B_LEN as u64,
        "only the scratch is pinned"
    );
    drop(s);
    fake.enable_device(1 << 30, true, true);
    let s = snap(&fake, &inv, GPU, &policy(PlacementPref::Auto));
    // 16 bytes of hash per chunk: B's 16, one each for X, Y and the counter.
    assert_eq!(
        (
            fake.host_bytes_live(),
            fake.device_bytes_live(),
            s.scratch_len()
        ),
        (0, FOOTPRINT + 16 * 19, 0),
        "device-resident, hashed on the device: no host memory"
    );
    drop(s);
    // The hashes stay on the device too, 16 bytes per chunk of every region, in one buffer.
    let small = SnapshotPolicy {
        chunk: SMALL_CHUNK,
        ..policy(PlacementPref::Auto)
    };
    let s = snap(&fake, &inv, GPU, &small);
    let chunks: usize = s
        .regions
        .iter()
        .map(|r| chunk_count(r.size, SMALL_CHUNK))
        .sum();
    // B's 256, three each for X and Y (12000 bytes), one for the counter.
    assert_eq!(chunks, 256 + 2 * 3 + 1);
    assert_eq!(
        (fake.host_bytes_live(), fake.device_bytes_live()),
        (0, FOOTPRINT + 16 * chunks as u64)
    );
    drop(s);
    // Not enough device room: the partial device attempt is freed, the copies go to pinned;
    // their hashes (16 bytes per chunk) still fit on the device.
    fake.enable_device(FOOTPRINT - 1, true, true);
    let s = snap(&fake, &inv, GPU, &policy(PlacementPref::Auto));
    assert_eq!(
        (fake.device_bytes_live(), fake.host_bytes_live()),
        (16 * 19, FOOTPRINT)
    );
    assert_eq!(s.check.code(), m::DEVICE_HASH);
}

#[test]
fn a_refused_pinned_allocation_falls_back_to_pageable_and_replays_correctly() {
    let (fake, inv) = with_b();
    fake.fail_host_alloc_above.store(1024, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let (out, recs) = run_with(&fake, &inv, &scattered(), 3, policy(PlacementPref::Auto));
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    assert_eq!(snapshot_rec(&recs).placement, m::PAGEABLE);
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
}

#[test]
fn dirty_and_full_restores_leave_identical_memory() {
    let regions = [(X, N * 4), (Y, N * 4), (COUNTER, 4), (B, B_LEN)];
    let mut results = Vec::new();
    for dirty_only in [true, false] {
        let (fake, inv) = with_b();
        let both: FakeDispatch = Box::new(|f: &FakeBackend| {
            saxpy()(f);
            scattered()(f);
        });
        let p = SnapshotPolicy {
            dirty_only,
            ..policy(PlacementPref::Auto)
        };
        let (_, recs) = run_with(&fake, &inv, &both, 4, p);
        let r = &restores(&recs)[0];
        let want = if dirty_only {
            (N * 4 + 4 + 3 * CHUNK) as u64
        } else {
            FOOTPRINT
        };
        assert_eq!(r.bytes, want, "dirty_only {dirty_only}");
        results.push(
            regions
                .iter()
                .map(|&(a, n)| fake.read(a, n))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn an_arena_reuses_the_last_snapshots_buffers_and_holds_the_footprint_once() {
    let (fake, inv) = with_b();
    let arena = SnapshotArena::new();
    let pinned = policy(PlacementPref::Pinned);
    let before = fake.read(B, B_LEN);
    run_in(&fake, &inv, &scattered(), 2, pinned, Some(&arena));
    // Kept: the four copies and the 1 MiB scratch.
    let kept = FOOTPRINT + B_LEN as u64;
    assert_eq!((arena.bytes() as u64, fake.host_bytes_live()), (kept, kept));
    let allocs = fake.host_allocs.load(Ordering::SeqCst);
    let (out, recs) = run_in(&fake, &inv, &scattered(), 3, pinned, Some(&arena));
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    assert_eq!(
        fake.host_allocs.load(Ordering::SeqCst),
        allocs,
        "the same footprint allocates nothing"
    );
    // Two replays of the one-byte flip: the flip of the first is undone by the second.
    assert_eq!(fake.read(B, B_LEN)[3 * CHUNK + 17], before[3 * CHUNK + 17]);
    // Hashes are this snapshot's: the 0xEE bytes are already there, only the flip is dirty.
    assert_eq!(restores(&recs)[0].bytes, CHUNK as u64);
    // A new allocation changes the footprint: the kept buffers are freed, not added to.
    const D: u64 = 0x70_0000;
    fake.add_alloc(D, 8192, GPU, Some(4));
    inv.record_alloc(D, 8192, GPU);
    run_in(&fake, &inv, &scattered(), 2, pinned, Some(&arena));
    assert_eq!(fake.host_bytes_live(), kept + 8192);
    arena.clear(&fake);
    assert_eq!((arena.bytes(), fake.host_bytes_live()), (0, 0));
}

#[test]
fn a_snapshot_whose_check_did_not_pay_restores_every_byte() {
    let (fake, inv) = with_b();
    let s = snap(&fake, &inv, GPU, &policy(PlacementPref::Pinned));
    scattered()(&fake);
    s.skip_check.set(true);
    let st = restore(&fake, &inv, &s);
    assert_eq!(
        (st.check_skipped, st.bytes, st.bytes_checked, st.regions),
        (true, FOOTPRINT, 0, 4)
    );
    assert_eq!(
        fake.read(B, B_LEN)[10 * CHUNK - 4..10 * CHUNK + 4],
        (0..8)
            .map(|i| ((10 * CHUNK - 4 + i) * 7 % 251) as u8)
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_determinism_check_reuses_the_restores_read_on_the_host_hash_path() {
    let (fake, inv) = setup();
    let footprint = (2 * N * 4 + 4) as u64;
    let (out, _) = run_with(&fake, &inv, &saxpy(), 3, policy(PlacementPref::Pinned));
    assert!(matches!(
        out,
        Outcome::Replayed {
            passes: 3,
            nondeterministic: false
        }
    ));
    // Snapshot, the restores after passes 0 and 1 (each also hashing for the determinism
    // check), and the determinism read after the last pass: four reads, not six.
    assert_eq!(fake.d2h_bytes.load(Ordering::SeqCst), 4 * footprint);
}

#[test]
fn a_full_restore_of_device_copies_writes_every_region_in_one_batch() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, true);
    fake.device_batch.store(true, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let full = SnapshotPolicy {
        dirty_only: false,
        ..policy(PlacementPref::Device)
    };
    let (out, recs) = run_with(&fake, &inv, &scattered(), 3, full);
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
    // The snapshot's copies, then each of the two restores, one batch each.
    assert_eq!(fake.d2d_batches.load(Ordering::SeqCst), 3);
    for r in restores(&recs) {
        assert_eq!((r.bytes, r.regions, r.check), (FOOTPRINT, 4, m::FULL));
    }
}
