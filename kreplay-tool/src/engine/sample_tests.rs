//! Tests of the first restore's sample (`sample.rs`) on the fake backend: a kernel that
//! rewrites most of its footprint is restored whole from the first restore, one that writes
//! little is restored chunk by chunk with every count exact, and both tables are readied when
//! the snapshot is taken.

use std::sync::atomic::Ordering;

use kreplay_common::stream::snapshot_mode as m;

use super::backend::DeviceRestore;
use super::config::{PlacementPref, SnapshotPolicy};
use super::fake::{FakeBackend, FakeDispatch};
use super::restore_tests::{B, B_LEN, FOOTPRINT, policy, restores, with_b};
use super::sample::{SAMPLE_MIN_CHUNKS, sample_jobs};
use super::tests::{COUNTER, N, X, Y, run_with};

/// 16-byte chunks: B alone has 65536, [`SAMPLE_MIN_CHUNKS`].
const CH: usize = 16;

/// The sample of this fixture's snapshot (x, y, the counter and B, as the snapshot orders its
/// regions; the copies' and hashes' addresses do not matter here).
fn fixture_sample() -> Vec<DeviceRestore> {
    let region = |live: u64, len: usize| DeviceRestore {
        live,
        copy: 0,
        len,
        expected: 0,
        seen: 0,
        reference: 0,
    };
    let regions = [
        region(X, N * 4),
        region(Y, N * 4),
        region(COUNTER, 4),
        region(B, B_LEN),
    ];
    sample_jobs(&regions, CH)
}

/// Sampled chunks of B (their indexes).
fn sampled_in_b() -> Vec<usize> {
    fixture_sample()
        .iter()
        .filter(|j| j.live >= B)
        .map(|j| (j.live - B) as usize / CH)
        .collect()
}

/// Bytes the sample reads.
fn sampled_bytes() -> u64 {
    fixture_sample().iter().map(|j| j.len as u64).sum()
}

/// Adaptive, device-resident, 16-byte chunks; a full restore made to look expensive (100 ms
/// per snapshot copy, 400 ms for the four) so that checking pays unless the sample says
/// otherwise, and the one-pass restore's one-time setup made to cost 1 s unless its tables
/// were readied. The fake hashes and compares the 67037 chunks on the host, 8-12 ms at the
/// dev profile's opt-level (more on a loaded host): the modelled costs must dwarf that, or the
/// cost decisions depend on the machine the tests run on.
fn sampled_setup() -> (
    FakeBackend,
    std::sync::Arc<super::inventory::Inventory>,
    SnapshotPolicy,
) {
    let (fake, inv) = with_b();
    fake.enable_device(1 << 30, true, false);
    fake.d2d_delay_us.store(100_000, Ordering::SeqCst);
    fake.one_pass_setup_delay_us
        .store(1_000_000, Ordering::SeqCst);
    let p = SnapshotPolicy {
        adaptive: true,
        chunk: CH,
        ..policy(PlacementPref::Device)
    };
    (fake, inv, p)
}

#[test]
fn the_fixture_samples() {
    let chunks = B_LEN / CH + 2 * (N * 4).div_ceil(CH) + 1;
    assert!(chunks >= SAMPLE_MIN_CHUNKS);
    // 67037 chunks in stretches of 261: 3 + 3 + 1 + 252 chunks sampled.
    assert_eq!((fixture_sample().len(), sampled_in_b().len()), (259, 252));
}

#[test]
fn a_kernel_that_rewrites_its_buffer_is_restored_whole_from_the_first_restore() {
    let (fake, inv, p) = sampled_setup();
    let before = fake.read(B, B_LEN);
    let rewrite: FakeDispatch = Box::new(|f: &FakeBackend| {
        let v: Vec<u8> = f.read(B, B_LEN).iter().map(|b| b ^ 0xFF).collect();
        f.write(B, &v);
    });
    let (_, recs) = run_with(&fake, &inv, &rewrite, 3, p);
    let want: Vec<u8> = before.iter().map(|b| b ^ 0xFF).collect();
    assert_eq!(fake.read(B, B_LEN), want);
    let rs = restores(&recs);
    assert_eq!(rs.len(), 2);
    // First restore: the sample restored B's sampled chunks (all changed; x, y and the
    // counter's were not), then every byte was written.
    assert_eq!(
        (rs[0].check, rs[0].bytes, rs[0].bytes_checked),
        (
            m::FULL,
            FOOTPRINT + (sampled_in_b().len() * CH) as u64,
            sampled_bytes()
        )
    );
    assert_eq!(
        (rs[1].check, rs[1].bytes, rs[1].bytes_checked),
        (m::FULL, FOOTPRINT, 0)
    );
    // The sample was the only one-pass call, on a table readied at snapshot time (no 1 s
    // setup: the snapshot readied the sample and the full table).
    assert_eq!(
        (
            fake.one_pass_prepares.load(Ordering::SeqCst),
            fake.one_pass_restores.load(Ordering::SeqCst)
        ),
        (2, 1)
    );
    assert!(rs[0].check_ns < 1_000_000_000, "{}", rs[0].check_ns);
}

#[test]
fn a_kernel_that_writes_little_is_restored_chunk_by_chunk_with_exact_counts() {
    let (fake, inv, p) = sampled_setup();
    let before = fake.read(B, B_LEN);
    // One byte in a sampled chunk of B and in two chunks that are not sampled.
    let sampled = sampled_in_b();
    let s = sampled[100];
    let others: Vec<usize> = (s + 1..).filter(|c| !sampled.contains(c)).take(2).collect();
    let dirty = [s, others[0], others[1]];
    let few: FakeDispatch = Box::new(move |f: &FakeBackend| {
        for c in dirty {
            let at = B + (c * CH) as u64 + 5;
            let v = f.read(at, 1)[0];
            f.write(at, &[v ^ 0x40]);
        }
    });
    let (_, recs) = run_with(&fake, &inv, &few, 3, p);
    let mut want = before.clone();
    for c in dirty {
        want[c * CH + 5] ^= 0x40;
    }
    assert_eq!(fake.read(B, B_LEN), want);
    let rs = restores(&recs);
    assert_eq!(rs.len(), 2);
    // First restore: the sample restored the sampled chunk, the one-pass restore the two
    // others; each counted once, every byte checked plus the sample's.
    assert_eq!(
        (
            rs[0].check,
            rs[0].bytes,
            rs[0].dirty_chunks,
            rs[0].bytes_checked
        ),
        (
            m::DEVICE_HASH,
            3 * CH as u64,
            3,
            FOOTPRINT + sampled_bytes()
        )
    );
    // Later restores do not sample.
    assert_eq!(
        (
            rs[1].check,
            rs[1].bytes,
            rs[1].dirty_chunks,
            rs[1].bytes_checked
        ),
        (m::DEVICE_HASH, 3 * CH as u64, 3, FOOTPRINT)
    );
    assert_eq!(
        (
            fake.one_pass_prepares.load(Ordering::SeqCst),
            fake.one_pass_restores.load(Ordering::SeqCst)
        ),
        (2, 3)
    );
}

#[test]
fn without_the_adaptive_policy_the_first_restore_does_not_sample() {
    let (fake, inv, p) = sampled_setup();
    let p = SnapshotPolicy {
        adaptive: false,
        ..p
    };
    let rewrite: FakeDispatch = Box::new(|f: &FakeBackend| {
        let v: Vec<u8> = f.read(B, B_LEN).iter().map(|b| b ^ 0xFF).collect();
        f.write(B, &v);
    });
    let (_, recs) = run_with(&fake, &inv, &rewrite, 3, p);
    for r in restores(&recs) {
        // `--restore dirty`: every restore checks, and writes exactly B.
        assert_eq!(
            (r.check, r.bytes, r.bytes_checked),
            (m::DEVICE_HASH, B_LEN as u64, FOOTPRINT)
        );
    }
    assert_eq!(
        (
            fake.one_pass_prepares.load(Ordering::SeqCst),
            fake.one_pass_restores.load(Ordering::SeqCst)
        ),
        (1, 2)
    );
}
