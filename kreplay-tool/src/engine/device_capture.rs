//! Taking a device-resident snapshot at once: every region's copy in one backend call
//! ([`Backend::copy_d2d_runs`]) and, for a device-hash check, every region's chunk hashes in
//! one more ([`DeviceChunks::hash_regions_into_device`]). A snapshot of hundreds of regions (module
//! variables, a caching allocator's segments) otherwise pays a copy, a launch and a wait per
//! region. Where the backend copies or hashes one range at a time, regions are captured one
//! by one as before.
//!
//! [`DeviceChunks::hash_regions_into_device`]: crate::engine::backend::DeviceChunks::hash_regions_into_device

use super::backend::Backend;
use super::capture_region::{capture, hash_captured};
use super::chunks::chunk_count;
use super::placement::{Check, Placement, Store};
use super::snapshot::{SnapFailure, Snapshot};
use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::replay_step;

/// Whether `s`'s regions are captured at once: device copies, and a check that needs nothing
/// read through the host.
pub(super) fn applies<B: Backend>(s: &Snapshot<'_, B>) -> bool {
    s.placement == Placement::Device
        && matches!(
            s.check,
            Check::DeviceHash | Check::DeviceCompare | Check::Full
        )
}

/// Copies (and hashes, per the check) every region of `s`, all pushed, none captured yet.
pub(super) fn capture_all<B: Backend>(s: &mut Snapshot<'_, B>) -> Result<(), SnapFailure> {
    let mut runs = Vec::with_capacity(s.regions.len());
    for r in &s.regions {
        let Store::Device(dev) = r.store else {
            return Err(SnapFailure::Metadata);
        };
        runs.push((dev, r.addr, r.size as usize));
    }
    if s.check == Check::DeviceHash && s.dev_hash_buf != 0 && copy_and_hash(s, &runs) {
        return Ok(());
    }
    let t = now_ns();
    match s.backend().copy_d2d_runs(&runs) {
        Ok(true) => {}
        Ok(false) => return one_by_one(s),
        Err(source) => {
            return Err(SnapFailure::CopyD2D {
                addr: runs.first().map_or(0, |r| r.1),
                source,
            });
        }
    }
    let copied = runs.iter().map(|r| r.2 as u64).sum::<u64>();
    let end = now_ns();
    s.copy_ns += end - t;
    s.copied += copied;
    s.steps.push((replay_step::SNAPSHOT_COPY, t, end, copied));
    if s.check != Check::DeviceHash {
        return Ok(());
    }
    let chunk = s.chunk;
    let total: usize = s.regions.iter().map(|r| chunk_count(r.size, chunk)).sum();
    let list: Vec<(u64, usize, u64)> = s
        .regions
        .iter()
        .zip(hash_slots(s))
        .map(|(r, at)| (r.addr, r.size as usize, at))
        .collect();
    if s.dev_hash_buf != 0 {
        let t = now_ns();
        let hashed = s.backend().hash_regions_into_device(&list, chunk);
        let end = now_ns();
        s.hash_ns += end - t;
        s.steps.push((replay_step::SNAPSHOT_HASH, t, end, s.copied));
        match hashed {
            Ok(true) => {
                for (r, &(_, _, dst)) in s.regions.iter_mut().zip(&list) {
                    r.dev_hashes = dst;
                }
                s.dev_hash_used = total;
                s.bytes_hashed += s.copied;
                return Ok(());
            }
            other => tracing::debug!(
                "kreplay: hashing every region at once: {other:?}; hashing region by region"
            ),
        }
    }
    // Region by region, into the device hash buffer where there is one, else to the host.
    let t = now_ns();
    for (i, &(_, _, dst)) in list.iter().enumerate() {
        if s.check != Check::DeviceHash {
            break;
        }
        hash_captured(s, i, (s.dev_hash_buf != 0).then_some(dst));
    }
    s.dev_hash_used = total;
    let copied = s.copied;
    s.steps
        .push((replay_step::SNAPSHOT_HASH, t, now_ns(), copied));
    Ok(())
}

/// Copies and hashes every region in one backend call, reading each byte once; false (nothing
/// recorded) when the backend cannot or the call failed: the caller copies, then hashes
/// (copying again what a failed call may have copied is harmless).
fn copy_and_hash<B: Backend>(s: &mut Snapshot<'_, B>, runs: &[(u64, u64, usize)]) -> bool {
    let chunk = s.chunk;
    let list: Vec<(u64, u64, usize, u64)> = runs
        .iter()
        .zip(hash_slots(s))
        .map(|(&(copy, addr, len), at)| (addr, copy, len, at))
        .collect();
    let t = now_ns();
    let done = s.backend().copy_and_hash_regions_on_device(&list, chunk);
    let end = now_ns();
    match done {
        Ok(true) => {}
        other => {
            if let Err(e) = other {
                tracing::debug!("kreplay: copying and hashing at once failed ({e}); one by one");
            }
            return false;
        }
    }
    let copied: u64 = runs.iter().map(|r| r.2 as u64).sum();
    // One read serves both: the copy's time is the whole call's (the adaptive rule compares
    // a restore with it), and hashing added nothing to measure.
    s.copy_ns += end - t;
    s.copied += copied;
    s.bytes_hashed += copied;
    s.steps.push((replay_step::SNAPSHOT_COPY, t, end, copied));
    for (r, &(_, _, _, dst)) in s.regions.iter_mut().zip(&list) {
        r.dev_hashes = dst;
    }
    s.dev_hash_used = list.iter().map(|l| chunk_count(l.2 as u64, chunk)).sum();
    true
}

/// Where each region's chunk hashes go in the snapshot's device hash buffer: the regions' 16
/// bytes per chunk, one after another, in order.
fn hash_slots<B: Backend>(s: &Snapshot<'_, B>) -> Vec<u64> {
    let mut at = s.dev_hash_buf;
    s.regions
        .iter()
        .map(|r| {
            let slot = at;
            at += 16 * chunk_count(r.size, s.chunk) as u64;
            slot
        })
        .collect()
}

/// Every region captured by itself (copy and hash), in order.
fn one_by_one<B: Backend>(s: &mut Snapshot<'_, B>) -> Result<(), SnapFailure> {
    (0..s.regions.len()).try_for_each(|i| capture(s, i))
}
