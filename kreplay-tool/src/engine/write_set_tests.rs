//! Restores limited to the write set: after the first restore, later restores look only at
//! the regions pass 0 changed, and a pass that writes elsewhere is caught by the last pass's
//! hash of every region.

use std::sync::atomic::{AtomicU32, Ordering};

use kreplay_common::stream::{Record, replay_step, snapshot_mode};

use super::config::PlacementPref;
use super::fake::{FakeBackend, FakeDispatch};
use super::replay::Outcome;
use super::restore_tests::{B, B_LEN, CHUNK, FOOTPRINT, policy, restores, snapshot_rec, with_b};
use super::tests::{X, Y, run_with};

/// A device with room, device hashing and comparison, and batched calls (one-pass restores).
fn device() -> (FakeBackend, std::sync::Arc<super::inventory::Inventory>) {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, true);
    fake.device_batch.store(true, Ordering::SeqCst);
    (fake, inv)
}

/// Writes byte 0 of chunk 2 of B with 1 on every call; on call `odd` also writes 0xAB at `at`.
fn writes_b_and_once(odd: u32, at: u64) -> FakeDispatch {
    let n = AtomicU32::new(0);
    Box::new(move |f: &FakeBackend| {
        let call = n.fetch_add(1, Ordering::SeqCst);
        f.write(B + 2 * CHUNK as u64, &[1]);
        if call == odd {
            f.write(at, &[0xAB]);
        }
    })
}

fn checked(recs: &[Record]) -> Vec<u64> {
    restores(recs).iter().map(|r| r.bytes_checked).collect()
}

fn steps(recs: &[Record], code: u8) -> Vec<u32> {
    recs.iter()
        .filter_map(|r| match r {
            Record::ReplayStep(s) if s.step == code => Some(s.pass),
            _ => None,
        })
        .collect()
}

#[test]
fn restores_after_the_first_look_only_at_what_pass_0_wrote() {
    let (fake, inv) = device();
    let before = fake.read(B, B_LEN);
    let d = writes_b_and_once(u32::MAX, 0);
    let (out, recs) = run_with(&fake, &inv, &d, 5, policy(PlacementPref::Device));
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 5,
            nondeterministic: false
        }
    );
    // The first restore checks the whole footprint; the next three only B, the region pass 0
    // wrote. Each writes back the one chunk the pass changed.
    let b = B_LEN as u64;
    assert_eq!(checked(&recs), [FOOTPRINT, b, b, b]);
    assert!(restores(&recs).iter().all(|r| r.dirty_chunks == 1));
    let mut after = before.clone();
    after[2 * CHUNK] = 1;
    assert_eq!(fake.read(B, B_LEN), after);
    // Pass 0's hashes are adopted from the first restore and the last pass is hashed by
    // itself, every region. The passes between are hashed by the restores that follow them,
    // which compare each piece with pass 0's as they hash it: pass 1's restore is the first
    // limited to the write set, so only pass 4 has a comparison of its own.
    assert_eq!(steps(&recs, replay_step::HASH_PASS), [0, 4]);
    assert_eq!(steps(&recs, replay_step::COMPARE_PASS), [4]);
    assert_eq!(steps(&recs, replay_step::RELEASE), [0]);
}

#[test]
fn a_pass_that_writes_outside_the_write_set_is_found_and_the_dispatch_runs_again() {
    let (fake, inv) = device();
    let x_before = fake.read(X, 16);
    // Call 2 (pass 2) also writes X, which pass 0 did not: the restore after it looks only at
    // B, so passes 3 and 4 run with X changed, and the last pass's hash of every region finds
    // it.
    let d = writes_b_and_once(2, X + 5);
    let (out, recs) = run_with(&fake, &inv, &d, 5, policy(PlacementPref::Device));
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 6,
            nondeterministic: true
        }
    );
    let diffs: Vec<(u32, u64)> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Nondeterministic(n) => Some((n.pass, n.region)),
            _ => None,
        })
        .collect();
    assert_eq!(diffs, [(4, X)]);
    // A full restore, then pass 5 from it: X is the snapshot's again, B has the one write.
    let b = B_LEN as u64;
    assert_eq!(checked(&recs), [FOOTPRINT, b, b, b, FOOTPRINT]);
    assert_eq!(fake.read(X, 16), x_before);
    assert_eq!(fake.read(B + 2 * CHUNK as u64, 1), [1]);
    let passes: Vec<u32> = recs
        .iter()
        .filter_map(|r| match r {
            Record::ReplayPass(p) => Some(p.pass),
            _ => None,
        })
        .collect();
    assert_eq!(passes, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_difference_inside_the_write_set_turns_restores_back_to_every_region() {
    let (fake, inv) = device();
    let y_before = fake.read(Y, 16);
    // Call 1 writes a different byte in B's chunk 2 and Y: found by the comparison after the
    // restore that follows pass 1, which then restores every region before pass 2.
    let n = AtomicU32::new(0);
    let d: FakeDispatch = Box::new(move |f: &FakeBackend| {
        let call = n.fetch_add(1, Ordering::SeqCst);
        let v = if call == 1 { 2 } else { 1 };
        f.write(B + 2 * CHUNK as u64, &[v]);
        if call == 1 {
            f.write(Y, &[0xCD]);
        }
    });
    let (out, recs) = run_with(&fake, &inv, &d, 4, policy(PlacementPref::Device));
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 4,
            nondeterministic: true
        }
    );
    let b = B_LEN as u64;
    // Restore after pass 0: everything; after pass 1: B, then everything (Y put back); after
    // pass 2: everything.
    assert_eq!(checked(&recs), [FOOTPRINT, b, FOOTPRINT, FOOTPRINT]);
    // The restore after pass 1 found B's chunk different from pass 0's as it hashed it; the
    // comparison of every hash that follows names the chunk.
    assert_eq!(steps(&recs, replay_step::COMPARE_PASS), [1]);
    assert_eq!(fake.read(Y, 16), y_before);
    assert_eq!(fake.read(B + 2 * CHUNK as u64, 1), [1]);
}

/// A replay of `d` over `passes` with the determinism check off.
fn run_unchecked(
    fake: &FakeBackend,
    inv: &super::inventory::Inventory,
    d: &FakeDispatch,
    passes: u32,
) -> (Outcome, Vec<Record>) {
    let pol = policy(PlacementPref::Device);
    super::tests::run_checking(fake, inv, d, passes, pol, None, false)
}

#[test]
fn without_the_determinism_check_restores_still_look_only_at_the_write_set() {
    let (fake, inv) = device();
    let d = writes_b_and_once(u32::MAX, 0);
    let (out, recs) = run_unchecked(&fake, &inv, &d, 4);
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 4,
            nondeterministic: false
        }
    );
    // The passes are hashed on the device all the same (the last one over every region),
    // which is what limits the restores after the first to B.
    let b = B_LEN as u64;
    assert_eq!(checked(&recs), [FOOTPRINT, b, b]);
    assert_eq!(steps(&recs, replay_step::HASH_PASS), [0, 3]);
}

#[test]
fn without_the_determinism_check_a_stray_write_is_put_right_and_not_reported() {
    let (fake, inv) = device();
    let x_before = fake.read(X, 16);
    // Pass 2 also writes X, outside the write set: found by the last pass's hash, the
    // dispatch runs once more from a full restore, and nothing is reported.
    let d = writes_b_and_once(2, X + 5);
    let (out, recs) = run_unchecked(&fake, &inv, &d, 5);
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 6,
            nondeterministic: false
        }
    );
    assert!(
        !recs
            .iter()
            .any(|r| matches!(r, Record::Nondeterministic(_))),
        "nothing reported"
    );
    assert_eq!(fake.read(X, 16), x_before);
    assert_eq!(fake.read(B + 2 * CHUNK as u64, 1), [1]);
}

#[test]
fn without_the_determinism_check_two_passes_hash_nothing() {
    let (fake, inv) = device();
    let d = writes_b_and_once(u32::MAX, 0);
    let (_, recs) = run_unchecked(&fake, &inv, &d, 2);
    // One restore, of everything; no pass hashed (no later restore to limit).
    assert_eq!(checked(&recs), [FOOTPRINT]);
    assert!(steps(&recs, replay_step::HASH_PASS).is_empty());
}

#[test]
fn an_arena_keeps_the_copies_and_the_hash_buffers_between_replays() {
    let (fake, inv) = device();
    let arena = super::arena::SnapshotArena::new();
    let d = writes_b_and_once(u32::MAX, 0);
    // X, Y and the counter take a chunk each, B 16: 19 chunks, 16 bytes of hash each, in
    // three buffers (the snapshot's hashes, the restores' pass hashes, pass 0's hashes).
    let kept = FOOTPRINT as usize + 3 * 19 * 16;
    let mut first_tables = Vec::new();
    for _ in 0..2 {
        let prepares = fake.one_pass_prepares.load(Ordering::SeqCst);
        let (out, _) = super::tests::run_in(
            &fake,
            &inv,
            &d,
            3,
            policy(PlacementPref::Device),
            Some(&arena),
        );
        assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
        assert_eq!(arena.bytes(), kept);
        assert_eq!(fake.device_bytes_live(), kept as u64, "nothing else held");
        // The table readied for the first restore (the one the snapshot prepared: the
        // backend keeps it with its captured launch) names the same buffers in the same roles
        // in both replays, so the second readies nothing new.
        assert_eq!(fake.one_pass_prepares.load(Ordering::SeqCst), prepares + 1);
        let tables = fake.prepared_tables();
        let readied = tables
            .iter()
            .find(|t| t.len() > 1)
            .cloned()
            .expect("the first restore's table");
        first_tables.push(readied);
    }
    assert_eq!(first_tables[0], first_tables[1]);
    arena.clear(&fake);
    assert_eq!((arena.bytes(), fake.device_bytes_live()), (0, 0));
}

#[test]
fn a_large_region_is_looked_at_only_in_the_pieces_pass_0_changed() {
    use super::restore_device::PIECE_MIN;
    const BIG: u64 = 0x100_0000_0000;
    const BIG_LEN: usize = 8 * PIECE_MIN;
    let (fake, inv) = device();
    fake.add_alloc(BIG, BIG_LEN, super::tests::GPU, Some(4));
    inv.record_alloc(BIG, BIG_LEN as u64, super::tests::GPU);
    let before = fake.read(BIG, BIG_LEN);
    // One byte in piece 5 of 8.
    let at = BIG + 5 * PIECE_MIN as u64 + 7;
    let d: FakeDispatch = Box::new(move |f: &FakeBackend| {
        let v = f.read(at, 1)[0];
        f.write(at, &[v.wrapping_add(1)]);
    });
    let (out, recs) = run_with(&fake, &inv, &d, 4, policy(PlacementPref::Device));
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 4,
            nondeterministic: false
        }
    );
    let piece = PIECE_MIN as u64;
    assert_eq!(
        checked(&recs),
        [FOOTPRINT + BIG_LEN as u64, piece, piece],
        "the first restore reads everything, the later ones one piece"
    );
    let mut after = before;
    after[5 * PIECE_MIN + 7] = after[5 * PIECE_MIN + 7].wrapping_add(1);
    assert_eq!(
        fake.read(BIG, BIG_LEN),
        after,
        "one increment: every pass saw the snapshot"
    );
}

#[test]
fn a_restore_limited_to_the_write_set_never_turns_later_restores_into_full_ones() {
    let (fake, inv) = device();
    let pol = super::config::SnapshotPolicy {
        adaptive: true,
        ..policy(PlacementPref::Device)
    };
    let mut snap = super::capture::snap_in(&fake, &inv, super::tests::GPU, &pol, None);
    assert!(snap.ok());
    // Copying is made to look free, so checking never pays by the adaptive rule.
    snap.copy_ns = 1;
    snap.copied = 1 << 30;
    snap.skip_check.set(false);
    snap.sampled.set(true);
    let all = vec![true; snap.regions.len()];
    let b_pieces: Vec<_> = super::restore_device::one_pass_pieces(&snap, &all)
        .into_iter()
        .filter(|(_, j)| j.live == B)
        .collect();
    fake.write(B, &[9]);
    *snap.write_set.borrow_mut() = Some(b_pieces);
    let st = super::restore::restore(&fake, &inv, &snap);
    assert_eq!((st.bytes_checked, st.dirty_chunks), (B_LEN as u64, 1));
    assert!(
        !snap.skip_check.get(),
        "no adaptive decision with a write set"
    );
    // Without one, the same restore decides that checking does not pay.
    *snap.write_set.borrow_mut() = None;
    fake.write(B, &[9]);
    super::restore::restore(&fake, &inv, &snap);
    assert!(snap.skip_check.get());
}

#[test]
fn a_slow_first_restore_that_keeps_the_pass_hashes_leaves_checking_on() {
    let (fake, inv) = device();
    // Each of the snapshot's four copies takes 5 ms, so a full restore is estimated at about
    // 20 ms (and hashing the snapshot costs less than copying it: checking starts on). Every
    // one-pass restore takes 60 ms. The first one's read is also pass 0's hash for the
    // determinism check: writing every byte instead would not spare it (the pass would be
    // hashed on its own), so checking stays on and the later restores look only at the write
    // set.
    fake.d2d_delay_us.store(5_000, Ordering::SeqCst);
    fake.one_pass_delay_us.store(60_000, Ordering::SeqCst);
    let pol = super::config::SnapshotPolicy {
        adaptive: true,
        ..policy(PlacementPref::Device)
    };
    let d = writes_b_and_once(u32::MAX, 0);
    let (out, recs) = run_with(&fake, &inv, &d, 4, pol);
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 4,
            nondeterministic: false
        }
    );
    let b = B_LEN as u64;
    assert_eq!(checked(&recs), [FOOTPRINT, b, b]);
    let checks: Vec<u8> = restores(&recs).iter().map(|r| r.check).collect();
    assert_eq!(checks, [snapshot_mode::DEVICE_HASH; 3]);
    assert_eq!(steps(&recs, replay_step::HASH_PASS), [0, 3]);
}

#[test]
fn a_snapshot_copied_and_hashed_in_one_call_restores_exactly_what_changed() {
    let (fake, inv) = device();
    fake.copy_and_hash.store(true, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let d = writes_b_and_once(u32::MAX, 0);
    let (out, recs) = run_with(&fake, &inv, &d, 4, policy(PlacementPref::Device));
    assert_eq!(
        out,
        Outcome::Replayed {
            passes: 4,
            nondeterministic: false
        }
    );
    assert_eq!(fake.copy_and_hash_calls.load(Ordering::SeqCst), 1);
    // Nothing else hashed the snapshot; the restores found the one chunk each pass wrote.
    assert_eq!(
        fake.hash_batches.load(Ordering::SeqCst),
        1,
        "the last pass's"
    );
    assert!(restores(&recs).iter().all(|r| r.dirty_chunks == 1));
    let snap = snapshot_rec(&recs);
    assert_eq!((snap.bytes, snap.bytes_hashed), (FOOTPRINT, FOOTPRINT));
    let mut after = before;
    after[2 * CHUNK] = 1;
    assert_eq!(fake.read(B, B_LEN), after);
}
