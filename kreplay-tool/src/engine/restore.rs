//! `restore()`: writes a snapshot back — only the chunks whose contents changed, unless the
//! snapshot's check is `Full`. Regions with a device copy and device-resident hashes are
//! restored first, all in one backend call that hashes, compares and copies on the device
//! ([`OnePassRestore::restore_changed_on_device`]); the others region by region, check then
//! write.
//! Tracked regions are re-validated under the inventory read
//! lock, held across the copies so a concurrent free cannot slip in between: a region that
//! was freed, shrunk, or reallocated at the same address (a different generation) since the
//! snapshot is skipped with a warning. Module variables are always restored. A failed copy
//! counts the region as failed ([`RestoreStats::failed`]): the device then holds neither the
//! snapshot nor the pass's output there, and the replay loop must not run on it
//! ([`restore_all`] is its recovery); a failed dirty check writes the whole region back (never
//! less).
//!
//! The first restore of a large adaptive snapshot restores a sample of chunks before it
//! checks, and writes every byte when most of the sample had changed (`sample.rs`).
//!
//! Adaptive check: the check reads every byte (on the host path, a device-to-host read and a
//! hash), so it pays only when reading and hashing is cheaper than writing what it spares.
//! After a restore that wrote at least [`MEASURE_MIN`] bytes, with the snapshot's policy
//! adaptive, the measured costs decide ([`check_pays`]); when the check does not pay, later
//! restores of the same snapshot write every byte (their records say `full`). A restore whose
//! read also feeds the determinism check ([`restore_hashing`]) decides nothing: that read
//! happens either way.
//!
//! [`OnePassRestore::restore_changed_on_device`]: crate::engine::backend::OnePassRestore::restore_changed_on_device
//! [`MEASURE_MIN`]: super::restore_stats::MEASURE_MIN

use super::chunks::HASH_CHUNK;
use kreplay_common::stream::monotonic_ns as now_ns;
use std::collections::BTreeMap;

use xxhash_rust::xxh3::xxh3_64;

use super::backend::{Backend, BackendError};
use super::chunks::{DirtyRuns, chunk_count, hash_chunk, read_in_pieces};
use super::inventory::{Entry, Inventory};
use super::placement::{Check, Store};
use super::snapshot::{Region, RegionKind, Snapshot};

use super::restore_device::{restore_in_one_pass, write_whole_device_regions};
use super::restore_stats::{RestoreStats, check_pays};

/// Writes every still-valid region of `snap` back to the device (only its changed chunks
/// when the snapshot has a dirty check).
pub fn restore<B: Backend>(backend: &B, inv: &Inventory, snap: &Snapshot<'_, B>) -> RestoreStats {
    restore_hashing(backend, inv, snap, None)
}

/// Writes every byte of every still-valid region of `snap` back, checking nothing: the
/// recovery after a failed restore or pass, when which chunks hold what is no longer known.
/// Leaves the snapshot's adaptive decision as it was.
pub fn restore_all<B: Backend>(
    backend: &B,
    inv: &Inventory,
    snap: &Snapshot<'_, B>,
) -> RestoreStats {
    restore_inner(backend, inv, snap, None, true)
}

/// [`restore`]; with `blocks`, a host-hash check also pushes, per region, the XXH3-64 of every
/// [`HASH_CHUNK`] bytes it read (the determinism check's hashes of what the pass wrote, taken
/// from the same read; empty for a region that was skipped or not read on the host).
pub fn restore_hashing<B: Backend>(
    backend: &B,
    inv: &Inventory,
    snap: &Snapshot<'_, B>,
    blocks: Option<&mut Vec<Vec<u64>>>,
) -> RestoreStats {
    restore_inner(backend, inv, snap, blocks, false)
}

/// [`restore_hashing`]; `write_all` writes every byte of every valid region (no sample, no
/// check, no adaptive decision).
fn restore_inner<B: Backend>(
    backend: &B,
    inv: &Inventory,
    snap: &Snapshot<'_, B>,
    mut blocks: Option<&mut Vec<Vec<u64>>>,
    write_all: bool,
) -> RestoreStats {
    let hashed_blocks = blocks.is_some();
    let mut st = RestoreStats {
        check_skipped: write_all || snap.skip_check.get(),
        ..RestoreStats::default()
    };
    let mut runs = DirtyRuns::default();
    let live = inv.read();
    let valid: Vec<bool> = snap
        .regions
        .iter()
        .map(|r| still_captured(&live, r))
        .collect();
    st.skipped += valid.iter().filter(|v| !**v).count() as u64;
    // The sample's writes, like the one-pass restore's, are timed with their check.
    let sample_written = if hashed_blocks || write_all {
        0
    } else {
        super::sample::sample_first_restore(backend, snap, &valid, &mut st)
    };
    let (mut done, one_pass_written) = restore_in_one_pass(backend, snap, &valid, &mut st);
    let one_pass_written = one_pass_written + sample_written;
    if st.check_skipped || snap.check == Check::Full {
        write_whole_device_regions(backend, snap, &valid, &mut done, &mut st);
    }
    for (i, r) in snap.regions.iter().enumerate() {
        if let Some(b) = blocks.as_mut() {
            b.push(Vec::new());
        }
        if !valid[i] || done[i] {
            continue;
        }
        runs.clear();
        let t = now_ns();
        let checked = if st.check_skipped {
            runs.mark_all(r.size);
            Ok(0)
        } else {
            let sink = blocks.as_mut().and_then(|b| b.last_mut());
            find_dirty(backend, snap, r, &mut runs, sink)
        };
        st.check_ns += now_ns() - t;
        if let Err(e) = &checked {
            tracing::warn!(
                "kreplay: dirty check of {:#x} failed: {e}; writing the whole region back",
                r.addr
            );
            runs.clear();
            runs.mark_all(r.size);
        }
        st.bytes_checked += checked.unwrap_or(0);
        st.dirty_chunks += runs.chunks;
        let mut written = 0;
        let mut failed = false;
        let t = now_ns();
        let dirty = runs.finish();
        match batched_write_back(backend, r, dirty) {
            Ok(Some(n)) => written = n,
            Ok(None) => {
                for &(off, len) in dirty {
                    match write_back(backend, r, off, len as usize) {
                        Ok(()) => written += len,
                        Err(e) => {
                            tracing::warn!("kreplay: restore of {:#x} failed: {e}", r.addr);
                            failed = true;
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!("kreplay: restore of {:#x} failed: {e}", r.addr);
                failed = true;
            }
        }
        st.write_ns += now_ns() - t;
        st.bytes += written;
        if failed {
            st.failed += 1;
            if st.first_failed == 0 {
                st.first_failed = r.addr;
            }
        } else if written > 0 {
            st.regions += 1;
        }
    }
    // With `blocks`, or a one-pass restore that kept every pass hash (`seen_buf`), the read
    // serves the determinism check too: skipping the check would not skip the read (the pass
    // would be hashed on its own), so there is nothing to decide.
    // A restore limited to the write set decides nothing either: the full restore it would be
    // weighed against writes every region, not the write set.
    let kept_pass_hashes = snap.seen_buf != 0 && st.one_pass_all;
    if snap.adaptive
        && snap.write_set.borrow().is_none()
        && !hashed_blocks
        && !kept_pass_hashes
        && !write_all
        && !st.check_skipped
        && snap.check != Check::Full
        && !check_pays(
            st.check_ns,
            st.bytes_checked,
            st.write_ns,
            // One-pass restores' writes are timed with their check, not as writes.
            st.bytes - one_pass_written,
            (snap.copy_ns, snap.copied),
        )
    {
        tracing::debug!(
            "kreplay: the dirty check ({} ns for {} bytes) costs more than it saves; later restores write every byte",
            st.check_ns,
            st.bytes_checked
        );
        snap.skip_check.set(true);
    }
    st
}

/// Whether region `r` is still the allocation the snapshot captured (module variables always
/// are); warns when it is not.
fn still_captured(live: &BTreeMap<u64, Entry>, r: &Region) -> bool {
    let RegionKind::Tracked { generation } = r.kind else {
        return true;
    };
    match live.get(&r.addr) {
        Some(e) if e.generation == generation && e.size >= r.size => true,
        Some(_) => {
            tracing::warn!(
                "kreplay: restore skipped {:#x}: reallocated or shrunk since the snapshot",
                r.addr
            );
            false
        }
        None => {
            tracing::warn!(
                "kreplay: restore skipped {:#x}: freed since the snapshot",
                r.addr
            );
            false
        }
    }
}

/// Writes every dirty run of a region whose copy is on the device or in pinned memory back in
/// one backend call; `Ok(None)` when the copy is pageable or the backend copies one range at
/// a time.
fn batched_write_back<B: Backend>(
    backend: &B,
    r: &Region,
    dirty: &[(u64, u64)],
) -> Result<Option<u64>, BackendError> {
    if dirty.len() < 2 {
        return Ok(None);
    }
    let done = match &r.store {
        Store::Device(dev) => {
            let ranges: Vec<(u64, u64, usize)> = dirty
                .iter()
                .map(|&(off, len)| (r.addr + off, dev + off, len as usize))
                .collect();
            backend.copy_d2d_runs(&ranges)?
        }
        Store::Pinned(buf) => {
            let ranges: Vec<(u64, *const u8, usize)> = dirty
                .iter()
                // SAFETY (pointer arithmetic only): runs are clipped to the region, and the
                // pinned copy holds r.size bytes.
                .map(|&(off, len)| {
                    (
                        r.addr + off,
                        buf.ptr.wrapping_add(off as usize) as *const u8,
                        len as usize,
                    )
                })
                .collect();
            backend.copy_pinned_runs(&ranges)?
        }
        Store::Pageable(_) => false,
    };
    Ok(done.then(|| dirty.iter().map(|&(_, len)| len).sum()))
}

/// Copies `[off, off + len)` of region `r` from its snapshot copy to the device.
fn write_back<B: Backend>(
    backend: &B,
    r: &Region,
    off: u64,
    len: usize,
) -> Result<(), BackendError> {
    match &r.store {
        Store::Device(dev) => backend.copy_d2d(r.addr + off, dev + off, len),
        host => {
            let ptr = host.host_ptr().ok_or(BackendError::Missing("host copy"))?;
            // SAFETY: the copy holds r.size bytes and off + len <= r.size (runs are clipped).
            backend.copy_h2d(r.addr + off, unsafe { ptr.add(off as usize) }, len)
        }
    }
}

/// Marks the changed chunks of `r` in `runs`; returns the device bytes it read.
fn find_dirty<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
    r: &Region,
    runs: &mut DirtyRuns,
    mut blocks: Option<&mut Vec<u64>>,
) -> Result<u64, BackendError> {
    let (chunk, size) = (snap.chunk, r.size as usize);
    match snap.check {
        Check::Full => {
            runs.mark_all(r.size);
            Ok(0)
        }
        Check::HostHash => {
            let Some((buf, len)) = snap
                .scratch
                .as_ref()
                .and_then(|(s, n)| Some((s.host_ptr()?, *n)))
            else {
                return Err(BackendError::Missing("hash scratch"));
            };
            // SAFETY: the scratch holds `len` bytes, reused for every piece.
            unsafe {
                read_in_pieces(
                    backend,
                    r.addr,
                    size,
                    len,
                    |_| buf,
                    |off, now| {
                        if let Some(b) = blocks.as_mut() {
                            b.extend(now.chunks(HASH_CHUNK).map(xxh3_64));
                        }
                        let first = off / chunk;
                        for (i, c) in now.chunks(chunk).enumerate() {
                            if r.hashes.get(first + i) != Some(&hash_chunk(c)) {
                                runs.mark(first + i, chunk, r.size);
                            }
                        }
                    },
                )
            }?;
            Ok(size as u64)
        }
        Check::DeviceHash if r.dev_hashes != 0 => {
            let mut dirty = vec![false; chunk_count(r.size, chunk)];
            if !backend.changed_chunks_on_device(r.addr, size, chunk, r.dev_hashes, &mut dirty)? {
                return Err(BackendError::Unsupported("changed_chunks_on_device"));
            }
            for (i, d) in dirty.iter().enumerate() {
                if *d {
                    runs.mark(i, chunk, r.size);
                }
            }
            Ok(size as u64)
        }
        Check::DeviceHash => {
            let mut now = snap.check_buf.borrow_mut();
            now.resize(chunk_count(r.size, chunk), [0; 2]);
            if !backend.hash_chunks_on_device(r.addr, size, chunk, &mut now)? {
                return Err(BackendError::Unsupported("hash_chunks_on_device"));
            }
            for (i, h) in now.iter().enumerate() {
                if r.hashes.get(i) != Some(h) {
                    runs.mark(i, chunk, r.size);
                }
            }
            Ok(size as u64)
        }
        Check::DeviceCompare => {
            let Store::Device(dev) = r.store else {
                return Err(BackendError::Missing("device copy"));
            };
            let mut dirty = vec![false; chunk_count(r.size, chunk)];
            if !backend.compare_chunks_on_device(r.addr, dev, size, chunk, &mut dirty)? {
                return Err(BackendError::Unsupported("compare_chunks_on_device"));
            }
            for (i, d) in dirty.iter().enumerate() {
                if *d {
                    runs.mark(i, chunk, r.size);
                }
            }
            Ok(2 * size as u64)
        }
    }
}
