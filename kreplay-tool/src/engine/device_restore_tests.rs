//! Restore tests of device-resident snapshots on the fake backend: the adaptive rule's
//! snapshot-time decisions, device-resident hashes, and the one-pass restore (readied at
//! snapshot time, the same chunks as the other checks, a failure part-way).

use std::sync::atomic::Ordering;

use kreplay_common::stream::{Record, snapshot_mode as m};

use super::config::{PlacementPref, SnapshotPolicy};
use super::fake::{FakeBackend, FakeDispatch};
use super::inventory::Inventory;
use super::replay::Outcome;
use super::restore_tests::{
    B, B_LEN, CHUNK, FOOTPRINT, SMALL_CHUNK, policy, restores, scattered, scattered_once,
    snapshot_rec, with_b,
};
use super::tests::{GPU, run_with};

/// Replays `scattered()` three passes from an adaptive device-resident snapshot, checks that B
/// ends with one pass's writes, and returns the records.
fn adaptive_device_run(fake: &FakeBackend, inv: &Inventory) -> Vec<Record> {
    let before = fake.read(B, B_LEN);
    let adaptive = SnapshotPolicy {
        adaptive: true,
        ..policy(PlacementPref::Device)
    };
    let (_, recs) = run_with(fake, inv, &scattered(), 3, adaptive);
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
    recs
}

#[test]
fn a_device_copy_whose_hashing_costs_more_than_copying_it_restores_every_byte_from_the_start() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, false);
    // Hashing the snapshot takes 50 ms per region: far more than copying 1 MiB.
    fake.device_hash_delay_us.store(50_000, Ordering::SeqCst);
    let recs = adaptive_device_run(&fake, &inv);
    let s = snapshot_rec(&recs);
    assert_eq!((s.placement, s.check), (m::DEVICE, m::DEVICE_HASH));
    for r in restores(&recs) {
        // Decided at snapshot time: no restore pays the hashing pass.
        assert_eq!((r.check, r.bytes, r.bytes_checked), (m::FULL, FOOTPRINT, 0));
    }
}

#[test]
fn the_device_hash_setup_cost_is_not_counted_as_hashing_cost() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, false);
    // Copies take 20 ms each, so the hashing pass itself is cheaper than copying; the first
    // hashing call pays 50 ms of setup on top. The snapshot readies the hash before timing its
    // pass, so the check stays on.
    fake.d2d_delay_us.store(20_000, Ordering::SeqCst);
    fake.device_hash_first_delay_us
        .store(50_000, Ordering::SeqCst);
    let recs = adaptive_device_run(&fake, &inv);
    assert_eq!(fake.device_hash_first_delay_us.load(Ordering::SeqCst), 0);
    let s = snapshot_rec(&recs);
    assert_eq!((s.placement, s.check), (m::DEVICE, m::DEVICE_HASH));
    let rs = restores(&recs);
    assert_eq!(rs.len(), 2);
    for r in rs {
        // Chunks 3, 9 and 10 written back; every byte of the footprint checked.
        assert_eq!(
            (r.check, r.bytes, r.bytes_checked),
            (m::DEVICE_HASH, 3 * CHUNK as u64, FOOTPRINT)
        );
    }
}

#[test]
fn the_one_pass_restore_is_readied_at_snapshot_time_not_timed_as_checking() {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, false);
    // Each of the snapshot's four copies takes 20 ms, so a full restore is estimated at about
    // 80 ms; the one-pass restore's one-time setup takes 200 ms unless it was readied for its
    // jobs. The snapshot readies it, so the first restore is timed without it and checking
    // stays on.
    fake.d2d_delay_us.store(20_000, Ordering::SeqCst);
    fake.one_pass_setup_delay_us
        .store(200_000, Ordering::SeqCst);
    let recs = adaptive_device_run(&fake, &inv);
    assert_eq!(
        (
            fake.one_pass_prepares.load(Ordering::SeqCst),
            fake.one_pass_restores.load(Ordering::SeqCst)
        ),
        (1, 2)
    );
    for r in restores(&recs) {
        assert_eq!(
            (r.check, r.bytes, r.bytes_checked),
            (m::DEVICE_HASH, 3 * CHUNK as u64, FOOTPRINT)
        );
    }
}

#[test]
fn hashes_kept_on_the_device_find_the_same_chunks_as_hashes_brought_back() {
    // (hashes stay on the device, one-pass restores offered)
    let modes = [(true, true), (true, false), (false, false)];
    let mut seen = Vec::new();
    for (resident, one_pass) in modes {
        let (fake, inv) = with_b();
        fake.enable_device(1 << 30, true, false);
        fake.no_resident_hashes.store(!resident, Ordering::SeqCst);
        fake.no_one_pass_restore.store(!one_pass, Ordering::SeqCst);
        let before = fake.read(B, B_LEN);
        let small = SnapshotPolicy {
            chunk: SMALL_CHUNK,
            ..policy(PlacementPref::Device)
        };
        let (_, recs) = run_with(&fake, &inv, &scattered(), 3, small);
        assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
        let rs = restores(&recs);
        // Two restores: one one-pass restore of all four regions each when offered, else one
        // device-side comparison per region (X, Y, B, the counter) when their hashes stay on
        // the device.
        let want = match (resident, one_pass) {
            (true, true) => (2, 0),
            (true, false) => (0, 2 * 4),
            _ => (0, 0),
        };
        assert_eq!(
            (
                fake.one_pass_restores.load(Ordering::SeqCst),
                fake.resident_checks.load(Ordering::SeqCst)
            ),
            want
        );
        assert_eq!(fake.device_bytes_live(), 0, "copies and hashes freed");
        // Device-to-device: the snapshot's copies, then exactly the dirty chunks twice.
        let small = SMALL_CHUNK as u64;
        assert_eq!(
            fake.d2d_bytes.load(Ordering::SeqCst),
            FOOTPRINT + 2 * 3 * small
        );
        seen.push(
            rs.iter()
                .map(|r| (r.check, r.bytes, r.dirty_chunks, r.bytes_checked))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], seen[2]);
    // The byte flipped in B's chunk 3 (64 KiB chunks) and the 8 bytes across the boundary at
    // 10 * 64 KiB: three small chunks.
    let small = SMALL_CHUNK as u64;
    assert_eq!(seen[0][0], (m::DEVICE_HASH, 3 * small, 3, FOOTPRINT));
}

/// A second 1 MiB buffer, as big as B (its hashes stay on the device with `SMALL_CHUNK`).
const B2: u64 = 0x70_0000;

#[test]
fn a_one_pass_restore_that_fails_part_way_is_checked_and_written_again() {
    let (fake, inv) = with_b();
    fake.add_alloc(B2, B_LEN, GPU, Some(4));
    inv.record_alloc(B2, B_LEN as u64, GPU);
    fake.enable_device(1 << 30, true, false);
    // The first one-pass restore writes X, Y and B back, then fails before B2.
    fake.fail_one_pass_before.store(B2, Ordering::SeqCst);
    let before = fake.read(B, B_LEN);
    let both: FakeDispatch = Box::new(|f: &FakeBackend| {
        scattered()(f);
        f.write(B2 + 5, &[1, 2, 3]);
    });
    let small = SnapshotPolicy {
        chunk: SMALL_CHUNK,
        ..policy(PlacementPref::Device)
    };
    let (out, recs) = run_with(&fake, &inv, &both, 3, small);
    assert!(matches!(out, Outcome::Replayed { passes: 3, .. }));
    // Every pass saw the same inputs: one pass's writes at the end.
    assert_eq!(fake.read(B, B_LEN), scattered_once(&before));
    let mut b2 = vec![0u8; B_LEN];
    b2[5..8].copy_from_slice(&[1, 2, 3]);
    assert_eq!(fake.read(B2, B_LEN), b2);
    assert_eq!(fake.one_pass_restores.load(Ordering::SeqCst), 2);
    let small = SMALL_CHUNK as u64;
    let rs: Vec<(u64, u64)> = restores(&recs)
        .iter()
        .map(|r| (r.bytes, r.dirty_chunks))
        .collect();
    // The failed restore's fallback found B already written back by the failed call and
    // wrote B2's chunk; the next restore did both in one pass.
    assert_eq!(rs, [(small, 1), (4 * small, 4)]);
    assert_eq!(fake.device_bytes_live(), 0);
}
