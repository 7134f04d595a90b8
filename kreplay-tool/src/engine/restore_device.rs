//! The parts of a restore done on the device in one backend call each: the one-pass restore
//! (hash, compare and copy back every changed chunk of every region with a device copy and
//! device-resident hashes, limited to the snapshot's write set when it has one) and the full
//! write-back of every device copy at once.

use super::backend::{Backend, DeviceRestore, Written};
use super::chunks::chunk_count;
use super::placement::{Check, Store};
use super::restore_stats::RestoreStats;
use super::snapshot::Snapshot;
use kreplay_common::stream::monotonic_ns as now_ns;

/// Whether the next restore of `snap` restores every region in one pass (when none was freed
/// since the snapshot): device copies, device-resident hashes, still checking.
pub(crate) fn restores_in_one_pass<B: Backend>(snap: &Snapshot<'_, B>) -> bool {
    snap.check == Check::DeviceHash
        && !snap.skip_check.get()
        && snap
            .regions
            .iter()
            .all(|r| matches!(r.store, Store::Device(_)) && r.dev_hashes != 0)
}

/// The regions a one-pass restore covers (by index, with their job): those with a device copy
/// and device-resident hashes, among the still-valid ones (`valid`, one flag per region).
pub(crate) fn one_pass_jobs<B: Backend>(
    snap: &Snapshot<'_, B>,
    valid: &[bool],
) -> Vec<(usize, DeviceRestore)> {
    snap.regions
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.store {
            Store::Device(copy) if valid[i] && r.dev_hashes != 0 => Some((
                i,
                DeviceRestore {
                    live: r.addr,
                    copy,
                    len: r.size as usize,
                    expected: r.dev_hashes,
                    // The same place in the pass-hash buffer as in the snapshot's.
                    seen: match snap.seen_buf {
                        0 => 0,
                        seen => seen + (r.dev_hashes - snap.dev_hash_buf),
                    },
                    reference: 0,
                },
            )),
            _ => None,
        })
        .collect()
}

/// Smallest piece a one-pass restore's regions are cut into: the first restore's counters tell
/// which pieces a pass changed, and later restores look only at those (the write set).
pub const PIECE_MIN: usize = 1 << 20;
/// Most pieces a footprint is cut into (the counters of every piece are read back once per
/// restore).
pub const MAX_PIECES: usize = 4096;

/// The piece length for `snap`: a power of two, at least [`PIECE_MIN`] and one chunk, large
/// enough that the footprint makes at most [`MAX_PIECES`] pieces.
pub(crate) fn piece_len<B: Backend>(snap: &Snapshot<'_, B>) -> usize {
    let total: u64 = snap.regions.iter().map(|r| r.size).sum();
    let want = (total as usize).div_ceil(MAX_PIECES);
    want.max(PIECE_MIN).max(snap.chunk).next_power_of_two()
}

/// `jobs` cut into pieces of at most `piece` bytes (a multiple of `chunk`), each keeping its
/// region's index; a piece's hashes are its region's from the piece's first chunk on.
pub(crate) fn split(
    jobs: &[(usize, DeviceRestore)],
    piece: usize,
    chunk: usize,
) -> Vec<(usize, DeviceRestore)> {
    let mut out = Vec::with_capacity(jobs.len());
    for &(i, j) in jobs {
        if j.len <= piece {
            out.push((i, j));
            continue;
        }
        let mut off = 0;
        while off < j.len {
            let hashes = 16 * (off / chunk) as u64;
            out.push((
                i,
                DeviceRestore {
                    live: j.live + off as u64,
                    copy: j.copy + off as u64,
                    len: piece.min(j.len - off),
                    expected: j.expected + hashes,
                    seen: if j.seen == 0 { 0 } else { j.seen + hashes },
                    reference: if j.reference == 0 {
                        0
                    } else {
                        j.reference + hashes
                    },
                },
            ));
            off += piece;
        }
    }
    out
}

/// The jobs a one-pass restore of every valid region gives the backend: [`one_pass_jobs`] cut
/// into pieces ([`piece_len`]).
pub(crate) fn one_pass_pieces<B: Backend>(
    snap: &Snapshot<'_, B>,
    valid: &[bool],
) -> Vec<(usize, DeviceRestore)> {
    split(&one_pass_jobs(snap, valid), piece_len(snap), snap.chunk)
}

/// Restores every valid region that has a device copy and device-resident hashes in one
/// backend call ([`OnePassRestore::restore_changed_on_device`]: hash, compare and copy in one pass
/// on the device), when the snapshot checks with the device hash; with a write set
/// (`Snapshot::write_set`), only its pieces. Returns which regions it restored (every region,
/// with a write set: outside it there is nothing to do) and the bytes it wrote; the whole
/// call's time counts as checking (the writes are not timed apart). Keeps the pieces it found
/// changed, with those the first restore's sample put back, in `Snapshot::last_dirty`.
/// Unsupported or failed: nothing is marked done, and the per-region path checks and writes
/// them (after a failure part-way, what was written is the snapshot's bytes, so writing again
/// is safe).
///
/// [`OnePassRestore::restore_changed_on_device`]: crate::engine::backend::OnePassRestore::restore_changed_on_device
pub(super) fn restore_in_one_pass<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
    valid: &[bool],
    st: &mut RestoreStats,
) -> (Vec<bool>, u64) {
    let mut done = vec![false; snap.regions.len()];
    if snap.check != Check::DeviceHash || st.check_skipped {
        return (done, 0);
    }
    let all_valid = valid.iter().all(|v| *v);
    let set = snap.write_set.borrow();
    let (picked, complete) = match set.as_ref() {
        Some(w) => {
            let picked: Vec<_> = w.iter().filter(|(i, _)| valid[*i]).copied().collect();
            let complete = all_valid && picked.len() == w.len();
            (picked, complete)
        }
        None => {
            let regions = one_pass_jobs(snap, valid);
            let complete = all_valid && regions.len() == valid.len();
            (split(&regions, piece_len(snap), snap.chunk), complete)
        }
    };
    if picked.is_empty() {
        if set.is_some() && all_valid {
            // Pass 0 changed nothing: there is nothing to look at.
            done.iter_mut().for_each(|d| *d = true);
            st.one_pass_all = true;
        }
        return (done, 0);
    }
    let jobs: Vec<DeviceRestore> = picked.iter().map(|p| p.1).collect();
    let mut written = vec![Written::default(); jobs.len()];
    let t = now_ns();
    let result = backend.restore_changed_on_device(&jobs, snap.chunk, &mut written);
    st.check_ns += now_ns() - t;
    match result {
        Ok(true) => {}
        Ok(false) => return (done, 0),
        Err(e) => {
            tracing::warn!(
                "kreplay: one-pass restore failed: {e}; checking and writing region by region"
            );
            return (done, 0);
        }
    }
    let mut written_all = 0;
    let mut region_wrote = vec![false; snap.regions.len()];
    let sampled = snap.sample_dirty.borrow();
    let mut dirty = snap.last_dirty.borrow_mut();
    dirty.clear();
    st.compared = set.is_some() && picked.iter().all(|(_, j)| j.reference != 0);
    for ((i, j), w) in picked.iter().zip(&written) {
        st.differ_chunks += w.differ;
        st.bytes_checked += j.len as u64;
        st.dirty_chunks += w.chunks;
        st.bytes += w.bytes;
        written_all += w.bytes;
        done[*i] = true;
        let end = j.live + j.len as u64;
        let sample_hit = sampled.iter().any(|&a| (j.live..end).contains(&a));
        if w.bytes > 0 || sample_hit {
            region_wrote[*i] |= w.bytes > 0;
            dirty.push((*i, *j));
        }
    }
    st.regions += region_wrote.iter().filter(|w| **w).count() as u64;
    st.one_pass_all = complete;
    if set.is_some() {
        // Outside the write set nothing is checked or written.
        done.iter_mut().for_each(|d| *d = true);
    }
    (done, written_all)
}

/// A restore that writes every byte: every valid region with a device copy not yet restored
/// goes back in one backend call ([`Backend::copy_d2d_runs`]) instead of one synchronous copy
/// each, and is marked in `done`. Unsupported or failed: nothing is marked, and the
/// per-region path writes them (after a failure part-way, what was written is the snapshot's
/// bytes, so writing again is safe).
pub(super) fn write_whole_device_regions<B: Backend>(
    backend: &B,
    snap: &Snapshot<'_, B>,
    valid: &[bool],
    done: &mut [bool],
    st: &mut RestoreStats,
) {
    let picked: Vec<(usize, (u64, u64, usize))> = snap
        .regions
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.store {
            Store::Device(copy) if valid[i] && !done[i] && r.size > 0 => {
                Some((i, (r.addr, copy, r.size as usize)))
            }
            _ => None,
        })
        .collect();
    if picked.len() < 2 {
        return;
    }
    let runs: Vec<(u64, u64, usize)> = picked.iter().map(|p| p.1).collect();
    let t = now_ns();
    let result = backend.copy_d2d_runs(&runs);
    st.write_ns += now_ns() - t;
    match result {
        Ok(true) => {
            for (i, (_, _, len)) in picked {
                done[i] = true;
                st.bytes += len as u64;
                st.regions += 1;
                st.dirty_chunks += chunk_count(len as u64, snap.chunk) as u64;
            }
        }
        Ok(false) => {}
        Err(e) => tracing::warn!(
            "kreplay: writing {} regions back at once failed: {e}; writing them one by one",
            runs.len()
        ),
    }
}
