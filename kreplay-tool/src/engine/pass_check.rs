//! The determinism check's host path: per-4-KiB hashes of what a pass wrote (read through the
//! host, or brought back from the device), compared with pass 0's, and the record that reports
//! a difference.

use super::chunks::HASH_CHUNK;
use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::{Nondeterministic, Record};

use xxhash_rust::xxh3::xxh3_64;

use super::backend::{Backend, BackendError};
use super::chunks::chunk_count;
use super::placement::Check;
use super::snapshot::Snapshot;

/// Per-4-KiB hashes of every region of `snap` as the device holds it now.
pub(super) fn hash_regions<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
) -> Option<Vec<Vec<u64>>> {
    // The host-hash check means the device cannot hash; every other check (full restores
    // included) tries the device first.
    if snap.check != Check::HostHash {
        match device_block_hashes(backend, snap) {
            Ok(Some(h)) => return Some(h),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("kreplay: hashing a pass's output on the device failed: {e}");
                return None;
            }
        }
    }
    let biggest = snap
        .regions
        .iter()
        .map(|r| r.size as usize)
        .max()
        .unwrap_or(0);
    // The snapshot's hash scratch when it has one (no allocation per pass), else our own.
    let mut own = None;
    let (ptr, scratch_len) = match snap.scratch_host() {
        Some(s) => s,
        None => {
            let len = biggest.min(1 << 20);
            if len == 0 {
                return Some(Vec::new());
            }
            let b = backend.host_alloc(len)?;
            let ptr = b.ptr;
            own = Some(b);
            (ptr, len)
        }
    };
    let mut out = Vec::with_capacity(snap.regions.len());
    let mut failed = false;
    'regions: for r in &snap.regions {
        let mut hashes = Vec::with_capacity((r.size as usize).div_ceil(HASH_CHUNK));
        let mut off = 0usize;
        while off < r.size as usize {
            let n = (r.size as usize - off).min(scratch_len);
            if backend.copy_d2h(ptr, r.addr + off as u64, n).is_err() {
                failed = true;
                break 'regions;
            }
            // SAFETY: scratch holds scratch_len >= n bytes, just written by the copy.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, n) };
            hashes.extend(bytes.chunks(HASH_CHUNK).map(xxh3_64));
            off += n;
        }
        out.push(hashes);
    }
    if let Some(b) = own {
        backend.host_free(b);
    }
    (!failed).then_some(out)
}

/// Per-4-KiB hashes of every region of `snap` taken on the device (the backend's 128-bit
/// chunk hash folded to 64 bits), so a pass's output is not read to the host: that read costs
/// about 40 ms per GiB per pass over PCIe, hashing in place well under a millisecond
/// (docs/gpu/h200-restore.md). `Ok(None)`:
/// the backend cannot hash on the device (the caller reads to the host), decided by the first
/// region, so every pass of a replay is hashed the same way.
fn device_block_hashes<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
) -> Result<Option<Vec<Vec<u64>>>, BackendError> {
    let mut out = Vec::with_capacity(snap.regions.len());
    let mut wide = Vec::new();
    for r in &snap.regions {
        wide.clear();
        wide.resize(chunk_count(r.size, HASH_CHUNK), [0u64; 2]);
        if !backend.hash_chunks_on_device(r.addr, r.size as usize, HASH_CHUNK, &mut wide)? {
            return Ok(None);
        }
        out.push(wide.iter().map(|h| h[0] ^ h[1].rotate_left(29)).collect());
    }
    Ok(Some(out))
}

/// The first region (address) and byte offset where `b` differs from `a`.
fn first_difference<B: Backend>(
    snap: &Snapshot<'_, B>,
    a: &[Vec<u64>],
    b: &[Vec<u64>],
) -> Option<(u64, u64)> {
    for ((r, ha), hb) in snap.regions.iter().zip(a).zip(b) {
        if let Some(i) = ha.iter().zip(hb).position(|(x, y)| x != y) {
            return Some((r.addr, (i * HASH_CHUNK) as u64));
        }
    }
    None
}

/// Compares pass `pass`'s block hashes with pass 0's (keeping pass 0's); on a difference
/// reports it and returns true.
pub(super) fn judge<B: Backend>(
    snap: &Snapshot<'_, B>,
    pass: u32,
    hashes: Option<Vec<Vec<u64>>>,
    first: &mut Option<Vec<Vec<u64>>>,
    correlation: u64,
    emit: &mut dyn FnMut(Record),
) -> bool {
    let Some(h) = hashes else {
        tracing::warn!("kreplay: hashing pass {pass} failed; determinism not checked");
        return false;
    };
    let Some(f) = first else {
        *first = Some(h);
        return false;
    };
    match first_difference(snap, f, &h) {
        Some(at) => report_difference(pass, at, correlation, emit),
        None => false,
    }
}

/// Reports that pass `pass` differs from pass 0 in `(region, offset)`; returns true.
pub(super) fn report_difference(
    pass: u32,
    (region, offset): (u64, u64),
    correlation: u64,
    emit: &mut dyn FnMut(Record),
) -> bool {
    tracing::warn!(
        "kreplay: pass {pass} differs from pass 0 in region {region:#x} at offset {offset}"
    );
    emit(
        Nondeterministic {
            correlation,
            pass,
            ts_ns: now_ns(),
            region,
            offset,
        }
        .into(),
    );
    true
}
