//! Chunk hashing on the host and dirty-run bookkeeping, for restoring only what changed.
//!
//! # The hash and its collision probability
//!
//! The host path hashes each chunk with XXH3-128 (`xxhash-rust`, 128-bit output, seedless)
//! when the snapshot is taken and again, over the device's current contents, before each
//! restore; a chunk whose two hashes are equal is not written back. A changed chunk is missed
//! only if its new contents collide with its snapshot contents. XXH3-128 is not
//! cryptographic, but for data not crafted against it (a kernel's output is not) its
//! collisions behave like a random 128-bit function's: P(miss) = 2^-128 per changed chunk
//! and restore. For scale: restoring a fully dirty 1 TiB footprint in 16 KiB chunks
//! (2^26 chunks) once a second for a year (2^25 restores) checks 2^51 changed chunks, so
//! P(any miss) <= 2^51 * 2^-128 = 2^-77 (about 6.6e-24), far below the rate of undetected
//! DRAM or PCIe bit errors over the same traffic. Paths that keep the snapshot in device
//! memory and can compare on the device compare bytes exactly instead (no hash at all).

use kreplay_common::stream::monotonic_ns as now_ns;
use xxhash_rust::xxh3::xxh3_128;

use super::backend::{Backend, BackendError};

/// One chunk's 128-bit hash, as two words (low, high).
pub type Hash128 = [u64; 2];

/// XXH3-128 of `bytes`.
pub fn hash_chunk(bytes: &[u8]) -> Hash128 {
    let h = xxh3_128(bytes);
    [h as u64, (h >> 64) as u64]
}

/// Number of chunks of `chunk` bytes covering `len` bytes.
pub fn chunk_count(len: u64, chunk: usize) -> usize {
    len.div_ceil(chunk as u64) as usize
}

/// Hashes `bytes` chunk by chunk onto `out` (one entry per chunk, the last one short).
pub fn hash_into(bytes: &[u8], chunk: usize, out: &mut Vec<Hash128>) {
    out.extend(bytes.chunks(chunk).map(hash_chunk));
}

/// Reads `[addr, addr + size)` of the device to the host in pieces of at most `piece` bytes,
/// piece `off` into `dst(off)`, and hands each to `each(off, bytes)` while it is still in
/// cache. Returns the nanoseconds spent in the copies.
///
/// # Safety
/// `dst(off)` must be valid for writes of `min(piece, size - off)` bytes, and stay unaliased
/// until `each` has returned for that piece.
pub unsafe fn read_in_pieces<B: Backend>(
    backend: &B,
    addr: u64,
    size: usize,
    piece: usize,
    dst: impl Fn(usize) -> *mut u8,
    mut each: impl FnMut(usize, &[u8]),
) -> Result<u64, BackendError> {
    let mut copy_ns = 0;
    let mut off = 0;
    while off < size {
        let n = (size - off).min(piece);
        let p = dst(off);
        let t = now_ns();
        backend.copy_d2h(p, addr + off as u64, n)?;
        copy_ns += now_ns() - t;
        // SAFETY: p is valid for n bytes (caller's contract), just written by the copy.
        each(off, unsafe { std::slice::from_raw_parts(p, n) });
        off += n;
    }
    Ok(copy_ns)
}

/// Merges dirty chunks into byte ranges `(offset, len)` of a region of `size` bytes, so
/// neighbouring dirty chunks are written back with one copy.
#[derive(Default)]
pub struct DirtyRuns {
    runs: Vec<(u64, u64)>,
    open: Option<(u64, u64)>,
    /// Chunks marked dirty.
    pub chunks: u64,
}

impl DirtyRuns {
    /// Empties the runs for the next region (keeps the allocation).
    pub fn clear(&mut self) {
        self.runs.clear();
        self.open = None;
        self.chunks = 0;
    }

    /// Marks chunk `index` (of `chunk` bytes, in a region of `size` bytes) dirty. Chunks must
    /// be marked in increasing order.
    pub fn mark(&mut self, index: usize, chunk: usize, size: u64) {
        let off = index as u64 * chunk as u64;
        let len = (chunk as u64).min(size.saturating_sub(off));
        if len == 0 {
            return;
        }
        self.chunks += 1;
        match &mut self.open {
            Some((o, l)) if *o + *l == off => *l += len,
            open => {
                if let Some(done) = open.take() {
                    self.runs.push(done);
                }
                *open = Some((off, len));
            }
        }
    }

    /// Marks the whole region dirty as one run (a full restore; `chunks` counts 1).
    pub fn mark_all(&mut self, size: u64) {
        if size > 0 {
            self.open = Some((0, size));
            self.chunks = 1;
        }
    }

    /// The finished ranges.
    pub fn finish(&mut self) -> &[(u64, u64)] {
        if let Some(done) = self.open.take() {
            self.runs.push(done);
        }
        &self.runs
    }
}

/// Hash granularity of the determinism check: one XXH3-64 per 4 KiB of each region (a pass
/// that differs is reported at this granularity; 64 bits: a difference is missed with
/// probability 2^-64 per 4 KiB, and only the report, never a restore, depends on it).
pub const HASH_CHUNK: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_chunks_merge_and_the_last_is_clipped_to_the_region() {
        let mut r = DirtyRuns::default();
        for i in [0, 1, 3, 5, 6] {
            r.mark(i, 4096, 6 * 4096 + 100);
        }
        assert_eq!(
            r.finish(),
            &[(0, 8192), (3 * 4096, 4096), (5 * 4096, 4096 + 100)]
        );
        assert_eq!(r.chunks, 5);
        r.clear();
        assert_eq!(r.finish(), &[]);
    }

    #[test]
    fn one_changed_byte_changes_the_chunk_hash() {
        let a = vec![0u8; 65536];
        let mut b = a.clone();
        b[65535] = 1;
        assert_ne!(hash_chunk(&a), hash_chunk(&b));
        assert_eq!(hash_chunk(&a), hash_chunk(&a.clone()));
        let mut out = Vec::new();
        hash_into(&b, 4096, &mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(out[0], out[14]);
        assert_ne!(out[14], out[15]);
    }
}
