//! The parts of a restore done on the device in one backend call each: the one-pass restore
//! (hash, compare and copy back every changed chunk of every region with a device copy and
//! device-resident hashes, limited to the snapshot's write set when it has one) and the full
//! write-back of every device copy at once.

use super::backend::{Backend, DeviceRestore, Written};
use super::chunks::chunk_count;
use super::placement::{Check, Store};
use super::replay::now_ns;
use super::restore::RestoreStats;
use super::snapshot::Snapshot;

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
                },
            )),
            _ => None,
        })
        .collect()
}

/// Restores every valid region that has a device copy and device-resident hashes in one
/// backend call ([`Backend::restore_changed_on_device`]: hash, compare and copy in one pass
/// on the device), when the snapshot checks with the device hash. Returns which regions it
/// restored and the bytes it wrote; the whole call's time counts as checking (the writes are
/// not timed apart). Unsupported or failed: nothing is marked done, and the per-region path
/// checks and writes them (after a failure part-way, what was written is the snapshot's
/// bytes, so writing again is safe).
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
    // With a write set, only its regions: the others are left as they are (see
    // `Snapshot::write_set`).
    let set = snap.write_set.borrow();
    let wanted: Vec<bool> = match set.as_ref() {
        Some(w) => valid.iter().zip(w).map(|(v, w)| *v && *w).collect(),
        None => valid.to_vec(),
    };
    let picked = one_pass_jobs(snap, &wanted);
    if picked.is_empty() {
        if set.is_some() && valid.iter().all(|v| *v) {
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
    st.one_pass_regions = picked.len() as u64;
    st.one_pass_all =
        valid.iter().all(|v| *v) && picked.len() == wanted.iter().filter(|w| **w).count();
    let mut dirty = snap.last_dirty.borrow_mut();
    dirty.clear();
    dirty.resize(snap.regions.len(), false);
    for ((i, j), w) in picked.iter().zip(&written) {
        st.bytes_checked += j.len as u64;
        st.dirty_chunks += w.chunks;
        st.bytes += w.bytes;
        st.regions += u64::from(w.bytes > 0);
        written_all += w.bytes;
        done[*i] = true;
        dirty[*i] = w.bytes > 0;
    }
    if let Some(w) = set.as_ref() {
        // Outside the write set nothing is checked or written.
        for (d, in_set) in done.iter_mut().zip(w) {
            *d |= !in_set;
        }
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
