//! The pass-to-pass determinism check kept on the device: each pass's chunk hashes of every
//! region go to device memory in one backend call ([`DeviceChunks::hash_regions_into_device`]),
//! pass 0's are kept, and each later pass's are compared with them on the device
//! ([`DeviceChunks::compare_chunks_on_device`]), in groups of [`GROUP`] hashes: only a flag per
//! group comes back, and the hashes of the first differing group when there is one. Hashing
//! region by region and reading every hash back would cost one launch, one wait and one copy
//! per region and pass: milliseconds per pass for the hundreds of regions a PyTorch process
//! has (docs/gpu/h200-replay-cost.md).
//!
//! [`DeviceChunks::hash_regions_into_device`]: crate::engine::backend::DeviceChunks::hash_regions_into_device
//! [`DeviceChunks::compare_chunks_on_device`]: crate::engine::backend::DeviceChunks::compare_chunks_on_device

use super::arena::SnapshotArena;
use super::backend::{Backend, BackendError};
use super::chunks::chunk_count;
use super::placement::Check;
use super::snapshot::Snapshot;

/// Hashes compared per flag.
pub const GROUP: usize = 64;

/// Pass 0's hashes and the current pass's, in device memory, for one replay.
pub struct DeviceCheck<'b, B: Backend> {
    backend: &'b B,
    /// Where the hash buffers go when the check is dropped (else they are freed).
    arena: Option<&'b SnapshotArena>,
    /// Bytes per hash (the snapshot's chunk size).
    chunk: usize,
    /// Pass 0's hashes (16 bytes per chunk of every region, regions in order).
    first: u64,
    /// The latest pass's.
    now: u64,
    /// `now` is the snapshot's pass-hash buffer (kept by its restores, freed with it).
    now_is_snapshots: bool,
    /// Index of each region's first chunk among all.
    starts: Vec<usize>,
    /// Chunks over all regions.
    chunks: usize,
}

impl<'b, B: Backend> DeviceCheck<'b, B> {
    /// The device check for `snap`'s regions, when the backend hashes and compares on the
    /// device and has room for two sets of hashes; `None` otherwise (the caller hashes on the
    /// host path).
    pub fn new(backend: &'b B, snap: &Snapshot<'b, B>) -> Option<Self> {
        if snap.check == Check::HostHash || snap.regions.is_empty() {
            return None;
        }
        let chunk = snap.chunk;
        if backend.compare_chunks_on_device(0, 0, 0, 16 * GROUP, &mut []) != Ok(true)
            || backend.hash_chunks_on_device(0, 0, chunk, &mut []) != Ok(true)
        {
            return None;
        }
        let mut starts = Vec::with_capacity(snap.regions.len());
        let mut chunks = 0;
        for r in &snap.regions {
            starts.push(chunks);
            chunks += chunk_count(r.size, chunk);
        }
        let bytes = chunks * 16;
        let arena = snap.arena();
        let take = || {
            arena
                .and_then(|a| a.take_hash_buf(bytes))
                .or_else(|| backend.device_alloc(bytes))
        };
        let first = take()?;
        let now_is_snapshots = snap.seen_buf != 0;
        let now = if now_is_snapshots {
            snap.seen_buf
        } else {
            let Some(now) = take() else {
                release(backend, arena, bytes, first);
                return None;
            };
            now
        };
        Some(Self {
            backend,
            arena,
            chunk,
            first,
            now,
            now_is_snapshots,
            starts,
            chunks,
        })
    }

    /// Whether the restores keep each pass's hashes where [`Self::compare`] reads them.
    pub fn restores_hash(&self) -> bool {
        self.now_is_snapshots
    }

    /// Where pass 0's hash lies of the chunk whose pass hash the restores keep at `seen` (the
    /// reference has the pass-hash buffer's layout); 0 when `seen` is 0 or the restores keep
    /// no pass hashes.
    pub fn reference_of(&self, seen: u64) -> u64 {
        if !self.now_is_snapshots || seen == 0 {
            return 0;
        }
        self.first + (seen - self.now)
    }

    /// Bytes of hashes one pass makes (16 per chunk).
    pub fn hash_bytes(&self) -> u64 {
        16 * self.chunks as u64
    }

    /// Hashes pass `pass`'s output of `snap`'s regions (pass 0's are kept for the comparisons).
    pub fn hash(&mut self, snap: &Snapshot<'_, B>, pass: u32) -> Result<(), BackendError> {
        let dst = if pass == 0 { self.first } else { self.now };
        let list: Vec<(u64, usize, u64)> = snap
            .regions
            .iter()
            .zip(&self.starts)
            .map(|(r, &s)| (r.addr, r.size as usize, dst + 16 * s as u64))
            .collect();
        let b = self.backend;
        if !b.hash_regions_into_device(&list, self.chunk)? {
            return Err(BackendError::Unsupported("hash_regions_into_device"));
        }
        Ok(())
    }

    /// Makes the hashes the first restore kept (pass 0's output, in the snapshot's pass-hash
    /// buffer) the reference the later passes are compared with: one device copy instead of
    /// hashing pass 0 again.
    pub fn adopt_first(&self) -> Result<(), BackendError> {
        if !self.now_is_snapshots {
            return Err(BackendError::Unsupported(
                "restores do not keep pass hashes",
            ));
        }
        self.backend
            .copy_d2d(self.first, self.now, 16 * self.chunks)
    }

    /// Compares the latest pass's hashes with pass 0's: the region (address) and byte offset
    /// of the first chunk that differs.
    pub fn compare(&self, snap: &Snapshot<'_, B>) -> Result<Option<(u64, u64)>, BackendError> {
        let b = self.backend;
        let groups = self.chunks.div_ceil(GROUP);
        let mut differ = vec![false; groups];
        // The last group may be short: the comparison stops at the last hash.
        let len = self.chunks * 16;
        if !b.compare_chunks_on_device(self.now, self.first, len, 16 * GROUP, &mut differ)? {
            return Err(BackendError::Unsupported("compare_chunks_on_device"));
        }
        let Some(g) = differ.iter().position(|d| *d) else {
            return Ok(None);
        };
        // The group's two sets of hashes, to find the chunk.
        let at = g * GROUP * 16;
        let n = (len - at).min(16 * GROUP);
        let (mut a, mut c) = (vec![0u8; n], vec![0u8; n]);
        let at = at as u64;
        b.copy_d2h(a.as_mut_ptr(), self.first + at, a.len())?;
        b.copy_d2h(c.as_mut_ptr(), self.now + at, c.len())?;
        let within = a
            .chunks(16)
            .zip(c.chunks(16))
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let index = g * GROUP + within;
        let region = self.starts.partition_point(|&s| s <= index) - 1;
        let offset = ((index - self.starts[region]) * self.chunk) as u64;
        Ok(Some((snap.regions[region].addr, offset)))
    }
}

/// Gives a hash buffer back to `arena`, or frees it without one.
fn release<B: Backend>(backend: &B, arena: Option<&SnapshotArena>, len: usize, ptr: u64) {
    match arena {
        Some(a) => a.give_hash_buf(len, ptr),
        None => backend.device_free(ptr),
    }
}

impl<B: Backend> Drop for DeviceCheck<'_, B> {
    fn drop(&mut self) {
        let len = 16 * self.chunks;
        release(self.backend, self.arena, len, self.first);
        if !self.now_is_snapshots {
            release(self.backend, self.arena, len, self.now);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use kreplay_common::stream::Record;

    use crate::engine::config::{PlacementPref, SnapshotPolicy};
    use crate::engine::fake::{FakeBackend, FakeDispatch};
    use crate::engine::replay::Outcome;
    use crate::engine::tests::{N, Y, run_with, setup};

    fn device_policy() -> SnapshotPolicy {
        SnapshotPolicy {
            chunk: 4096,
            placement: PlacementPref::Device,
            ..SnapshotPolicy::default()
        }
    }

    /// Writes pass-dependent bytes at `Y + 5000` from the third pass on.
    fn racy() -> FakeDispatch {
        let n = AtomicU32::new(0);
        Box::new(move |f: &FakeBackend| {
            let p = n.fetch_add(1, Ordering::SeqCst);
            f.write(Y + 5000, &[(p.max(1) as u8) * 7]);
        })
    }

    fn differences(recs: &[Record]) -> Vec<(u32, u64, u64)> {
        recs.iter()
            .filter_map(|r| match r {
                Record::Nondeterministic(n) => Some((n.pass, n.region, n.offset)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_pass_that_differs_is_found_on_the_device_by_region_and_chunk() {
        let (fake, inv) = setup();
        fake.enable_device(1 << 30, true, true);
        fake.device_batch.store(true, Ordering::SeqCst);
        let (out, recs) = run_with(&fake, &inv, &racy(), 4, device_policy());
        assert_eq!(
            out,
            Outcome::Replayed {
                passes: 4,
                nondeterministic: true
            }
        );
        // Passes 0 and 1 write 7; pass 2 writes 14 at byte 5000 of y: chunk 1 of 4 KiB.
        assert_eq!(differences(&recs), [(2, Y, 4096)]);
        // The snapshot's hashes only: passes 0, 1 and 2 are hashed by the restores that follow
        // them (pass 0's become the reference), and pass 3 is not hashed once a difference was
        // found.
        assert_eq!(fake.hash_batches.load(Ordering::SeqCst), 1);
        assert_eq!(fake.device_bytes_live(), 0, "the check's buffers are freed");
    }

    #[test]
    fn passes_that_agree_are_not_reported_and_no_room_falls_back_to_the_host_path() {
        let same: FakeDispatch = Box::new(|f: &FakeBackend| f.write(Y, &[1; 16]));
        let (fake, inv) = setup();
        fake.enable_device(1 << 30, true, true);
        let (out, recs) = run_with(&fake, &inv, &same, 3, device_policy());
        assert!(matches!(
            out,
            Outcome::Replayed {
                nondeterministic: false,
                ..
            }
        ));
        assert_eq!(differences(&recs), []);
        // Room for the snapshot's copies and hashes, not for the check's two hash sets: the
        // passes' hashes come back to the host, and the difference is still found.
        let (fake, inv) = setup();
        let footprint = (2 * N * 4 + 4) as u64;
        let hashes = 16 * 7;
        fake.enable_device(footprint + hashes, true, true);
        fake.device_batch.store(true, Ordering::SeqCst);
        let (out, recs) = run_with(&fake, &inv, &racy(), 3, device_policy());
        assert!(
            matches!(
                out,
                Outcome::Replayed {
                    nondeterministic: true,
                    ..
                }
            ),
            "{out:?}"
        );
        assert_eq!(differences(&recs), [(2, Y, 4096)]);
        assert_eq!(
            fake.hash_batches.load(Ordering::SeqCst),
            1,
            "the snapshot's only"
        );
    }
}
