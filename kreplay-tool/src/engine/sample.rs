//! The first restore of an adaptive snapshot checked on the device samples before it checks.
//! A device-hash check reads every byte before it writes any, so where a kernel rewrote most
//! of its footprint the first restore costs the check plus a full copy (1.47x a full restore:
//! docs/gpu/h200-restore.md), and only then does the adaptive rule switch to full restores. About
//! [`SAMPLES`] chunks, one at a pseudo-random place in each stretch of the snapshot's chunks
//! (so that a kernel writing with a regular stride cannot alias with the sample), are restored
//! first in one backend call (hash, compare and copy on the device, as the one-pass restore
//! does); when more than half of them had changed, this restore and the later ones write every
//! byte. Otherwise the one-pass restore follows and finds the sampled chunks already restored.
//! Either way the result is exact: the sample only chooses between two complete restores.
//! Snapshots under [`SAMPLE_MIN_CHUNKS`] chunks do not sample: there the check's extra read
//! costs less than the sample's own launch and wait.

use super::backend::{Backend, DeviceRestore, Written};
use super::placement::Check;
use super::restore_device::one_pass_jobs;
use super::restore_stats::RestoreStats;
use super::snapshot::Snapshot;
use kreplay_common::stream::monotonic_ns as now_ns;

/// Chunks a snapshot must have before its first restore samples: 1 GiB at the default 16 KiB
/// chunk. The sample costs a launch and a wait, which at 256 MiB was 13% of the mean
/// restore with nothing written, while there the first restore's extra read
/// costs only about 2% of five restores (docs/gpu/h200-restore.md).
pub const SAMPLE_MIN_CHUNKS: usize = 64 * 1024;
/// Chunks sampled, about (a fixed number: the decision needs the fraction, not every chunk; a
/// sample that grew with the snapshot, one chunk in 64, cost 870 µs on the first restore at
/// 8 GiB: docs/gpu/h200-restore.md).
pub const SAMPLES: usize = 256;

/// Whether the first restore of `snap` samples: restores that keep no pass hashes, adaptive,
/// checked with device-resident hashes, still checking, and at least [`SAMPLE_MIN_CHUNKS`]
/// chunks in one-pass regions.
pub(crate) fn wants_sample<B: Backend>(snap: &Snapshot<'_, B>, jobs: &[DeviceRestore]) -> bool {
    // Restores that keep pass hashes do not sample: the first restore's hashes of pass 0 are
    // the determinism check's reference, and a sample would put chunks back before they are
    // hashed.
    snap.seen_buf == 0
        && snap.adaptive
        && snap.check == Check::DeviceHash
        && !snap.skip_check.get()
        && snap.chunk > 0
        && total_chunks(jobs, snap.chunk) >= SAMPLE_MIN_CHUNKS
}

fn total_chunks(jobs: &[DeviceRestore], chunk: usize) -> usize {
    jobs.iter().map(|j| j.len.div_ceil(chunk)).sum()
}

/// A fixed pseudo-random value for stretch `k` of region `r` (the SplitMix64 finalizer).
fn mix(r: usize, k: usize) -> u64 {
    let mut z = (r as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (k as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sampled chunks of `jobs` as one-chunk jobs: each region's chunks are cut into stretches
/// of `stride` (the total over [`SAMPLES`], at least 1) and one chunk is taken at a fixed
/// pseudo-random place in each stretch (a region shorter than a stretch gives one). A chunk's
/// hash does not depend on where its region starts, so each job's expected hash is the
/// snapshot's for that chunk (16 bytes per chunk).
pub(crate) fn sample_jobs(jobs: &[DeviceRestore], chunk: usize) -> Vec<DeviceRestore> {
    let stride = (total_chunks(jobs, chunk) / SAMPLES).max(1);
    let mut out = Vec::new();
    for (r, j) in jobs.iter().enumerate() {
        let n = j.len.div_ceil(chunk);
        for k in 0..n.div_ceil(stride) {
            let from = k * stride;
            let c = from + (mix(r, k) % (stride.min(n - from) as u64)) as usize;
            let off = c * chunk;
            out.push(DeviceRestore {
                live: j.live + off as u64,
                copy: j.copy + off as u64,
                len: chunk.min(j.len - off),
                expected: j.expected + 16 * c as u64,
                seen: 0,
                reference: 0,
            });
        }
    }
    out
}

/// Before the first restore of `snap`: restores the sample and, when most of it had changed,
/// makes this restore (`st.check_skipped`) and every later one write every byte. Counts the
/// sample's reads, writes and time (as checking) in `st` and returns the bytes it wrote. Does
/// nothing on later restores, for snapshots that do not sample, or when the backend cannot
/// (the one-pass restore then checks everything).
pub(crate) fn sample_first_restore<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
    valid: &[bool],
    st: &mut RestoreStats,
) -> u64 {
    if snap.sampled.replace(true) || st.check_skipped {
        return 0;
    }
    let jobs: Vec<DeviceRestore> = one_pass_jobs(snap, valid)
        .into_iter()
        .map(|(_, j)| j)
        .collect();
    if !wants_sample(snap, &jobs) {
        return 0;
    }
    let sample = sample_jobs(&jobs, snap.chunk);
    let mut written = vec![Written::default(); sample.len()];
    let t = now_ns();
    let result = backend.restore_changed_on_device(&sample, snap.chunk, &mut written);
    st.check_ns += now_ns() - t;
    match result {
        Ok(true) => {}
        Ok(false) => return 0,
        Err(e) => {
            tracing::debug!("kreplay: sampling the first restore failed ({e}); checking it all");
            return 0;
        }
    }
    *snap.sample_dirty.borrow_mut() = sample
        .iter()
        .zip(&written)
        .filter(|(_, w)| w.bytes > 0)
        .map(|(j, _)| j.live)
        .collect();
    let changed: u64 = written.iter().map(|w| w.chunks).sum();
    st.bytes_checked += sample.iter().map(|j| j.len as u64).sum::<u64>();
    // What the sample wrote was written, whatever follows.
    let wrote: u64 = written.iter().map(|w| w.bytes).sum();
    st.bytes += wrote;
    if changed * 2 <= sample.len() as u64 {
        // The one-pass restore that follows finds these chunks restored: count them here.
        st.dirty_chunks += changed;
    } else {
        // The full restore that follows counts every chunk.
        tracing::debug!(
            "kreplay: {changed} of {} sampled chunks changed; restores write every byte",
            sample.len()
        );
        snap.skip_check.set(true);
        st.check_skipped = true;
    }
    wrote
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(live: u64, len: usize) -> DeviceRestore {
        DeviceRestore {
            live,
            copy: live + 0x100_0000,
            len,
            expected: live + 0x200_0000,
            seen: 0,
            reference: 0,
        }
    }

    #[test]
    fn one_chunk_per_stretch_is_sampled_inside_its_stretch_and_region() {
        // 10000 chunks of 1 KiB and a short last one, 30 chunks, one 4-byte chunk, nothing:
        // 10032 chunks, so stretches of 10032 / 256 = 39 chunks.
        let jobs = [
            job(0x1000_0000, 10_000 * 1024 + 10),
            job(0x2000_0000, 30 * 1024),
            job(0x3000_0000, 4),
            job(0x4000_0000, 0),
        ];
        let got = sample_jobs(&jobs, 1024);
        // ceil(10001 / 39) + 1 + 1 stretches.
        assert_eq!(got.len(), 257 + 1 + 1);
        let mut per_region = [0usize; 4];
        for s in &got {
            let r = ((s.live >> 28) - 1) as usize;
            per_region[r] += 1;
            let off = s.live - jobs[r].live;
            assert_eq!(off % 1024, 0);
            let c = off / 1024;
            assert_eq!(
                (s.copy - s.live, s.expected),
                (0x100_0000, jobs[r].expected + 16 * c)
            );
            assert_eq!(s.len, 1024.min(jobs[r].len - off as usize));
        }
        assert_eq!(per_region, [257, 1, 1, 0]);
        // One per stretch, in order, inside it.
        let first: Vec<u64> = got[..257]
            .iter()
            .map(|s| (s.live - 0x1000_0000) / 1024)
            .collect();
        for (k, c) in first.iter().enumerate() {
            assert!(
                (k as u64 * 39..(k as u64 + 1) * 39).contains(c),
                "stretch {k}: {c}"
            );
        }
        // Not all at one place in their stretches (a regular stride would alias with them).
        let places: std::collections::BTreeSet<u64> = first.iter().map(|c| c % 39).collect();
        assert!(places.len() > 20, "{places:?}");
        // The same every time.
        assert_eq!(sample_jobs(&jobs, 1024), got);
    }
}
