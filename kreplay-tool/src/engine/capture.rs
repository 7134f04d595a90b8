//! Taking a snapshot: [`snap`] lists what an agent owns (`snapshot_plan.rs`), admits it
//! against the budget, allocates the copies and captures every region (all at once on the
//! device, `device_capture.rs`, or one by one, `capture_region.rs`), then readies the first
//! restore. What a snapshot is and holds is in `snapshot.rs`.

use super::arena::SnapshotArena;
use super::backend::Backend;
use super::capture_region::capture;
use super::chunks::chunk_count;
use super::config::SnapshotPolicy;
use super::inventory::Inventory;
use super::placement::{Check, Placement, Store};
use super::snapshot::*;
use super::snapshot_plan::{allocate, choose_check, wanted};
use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::replay_step;

/// Captures `agent`'s tracked allocations and module variables under `policy`, in fresh
/// buffers freed when the snapshot is dropped.
pub fn snap<'b, B: Backend>(
    backend: &'b B,
    inv: &Inventory,
    agent: u64,
    policy: &SnapshotPolicy,
) -> Snapshot<'b, B> {
    snap_in(backend, inv, agent, policy, None)
}

/// [`snap`], reusing the buffers `arena` keeps when they fit exactly and giving them back
/// when the snapshot is dropped.
pub fn snap_in<'b, B: Backend>(
    backend: &'b B,
    inv: &Inventory,
    agent: u64,
    policy: &SnapshotPolicy,
    arena: Option<&'b SnapshotArena>,
) -> Snapshot<'b, B> {
    let mut s = Snapshot {
        backend,
        arena,
        regions: Vec::new(),
        failure: None,
        oversized_vars: 0,
        placement: Placement::Pageable,
        check: Check::Full,
        chunk: policy.chunk,
        bytes_hashed: 0,
        copy_ns: 0,
        copied: 0,
        adaptive: policy.adaptive,
        hash_ns: 0,
        skip_check: std::cell::Cell::new(false),
        sampled: std::cell::Cell::new(false),
        scratch: None,
        check_buf: Default::default(),
        dev_hash_buf: 0,
        dev_hash_used: 0,
        seen_buf: 0,
        hash_buf_len: 0,
        steps: Vec::new(),
        write_set: Default::default(),
        last_dirty: Default::default(),
        sample_dirty: Default::default(),
    };
    let wanted = match wanted(backend, inv, agent, &mut s.oversized_vars) {
        Ok(w) => w,
        Err(f) => {
            s.failure = Some(f);
            return s;
        }
    };
    let footprint: u64 = wanted.iter().map(|w| w.1).sum();
    if footprint > policy.budget {
        let f = SnapFailure::OverBudget {
            footprint,
            budget: policy.budget,
        };
        tracing::warn!("kreplay: replay declined: {f}");
        s.failure = Some(f);
        return s;
    }
    if s.regions.try_reserve(wanted.len()).is_err() {
        s.failure = Some(SnapFailure::Metadata);
        return s;
    }
    let mut sizes = Vec::new();
    if sizes.try_reserve(wanted.len()).is_err() {
        s.failure = Some(SnapFailure::Metadata);
        return s;
    }
    sizes.extend(wanted.iter().map(|w| w.1 as usize));
    let order = Placement::order(policy.placement);
    let alloc_start = now_ns();
    let reused = arena.and_then(|a| a.take_all(order, &sizes));
    let allocated = match reused {
        Some(v) => Ok(v),
        None => {
            // Nothing kept fits: free it before allocating (the footprint is held once).
            if let Some(a) = arena {
                a.clear_copies(backend);
            }
            allocate(backend, policy, &wanted)
        }
    };
    let (placement, stores) = match allocated {
        Ok(v) => v,
        Err(f) => {
            s.failure = Some(f);
            return s;
        }
    };
    s.placement = placement;
    s.check = choose_check(backend, policy, placement);
    let biggest = wanted.iter().map(|w| w.1 as usize).max().unwrap_or(0);
    if s.check == Check::HostHash {
        let len = biggest.min(HASH_BATCH.max(policy.chunk));
        let scratch = arena
            .and_then(|a| a.take_host(len))
            .or_else(|| Store::alloc(backend, Placement::Pinned, len))
            .or_else(|| Store::alloc(backend, Placement::Pageable, len));
        match scratch {
            Some(st) => s.scratch = Some((st, len)),
            None => {
                tracing::warn!("kreplay: no {len}-byte hash scratch; restores write every byte");
                s.check = Check::Full;
            }
        }
    }
    if s.check == Check::DeviceHash {
        warm_device_hash(&s, &wanted);
        let chunks: usize = wanted.iter().map(|w| chunk_count(w.1, s.chunk)).sum();
        let len = chunks * 16;
        s.hash_buf_len = len;
        if let Some(a) = arena {
            a.retain_hash_bufs(len, backend);
        }
        let take = || {
            arena
                .and_then(|a| a.take_hash_buf(len))
                .or_else(|| backend.device_alloc(len))
        };
        s.dev_hash_buf = take().unwrap_or(0);
        // Pass hashes serve the determinism check on the device, which also compares there.
        let compares = || backend.compare_chunks_on_device(0, 0, 0, 16, &mut []) == Ok(true);
        if policy.pass_hashes && s.dev_hash_buf != 0 && compares() {
            s.seen_buf = take().unwrap_or(0);
        }
    }
    if let Some(a) = arena {
        a.clear_copies(backend);
    }
    s.steps.push((
        replay_step::SNAPSHOT_ALLOCATE,
        alloc_start,
        now_ns(),
        footprint,
    ));
    let mut stores = stores.into_iter();
    // Device-resident copies are taken all at once after every region is listed.
    let at_once = super::device_capture::applies(&s);
    let copy_start = now_ns();
    for (addr, size, kind) in wanted {
        let Some(store) = stores.next() else { break };
        // Pushed first so a failure below still frees it with the snapshot.
        s.regions.push(Region {
            addr,
            size,
            kind,
            store,
            hashes: Vec::new(),
            dev_hashes: 0,
        });
        if at_once {
            continue;
        }
        let last = s.regions.len() - 1;
        if let Err(f) = capture(&mut s, last) {
            tracing::warn!("kreplay: snapshot declined: {f}");
            s.failure = Some(f);
            stores.for_each(|st| st.free(backend));
            return s;
        }
    }
    if at_once && let Err(f) = super::device_capture::capture_all(&mut s) {
        tracing::warn!("kreplay: snapshot declined: {f}");
        s.failure = Some(f);
        return s;
    }
    if !at_once {
        // Copied (and hashed, per the check) region by region.
        s.steps
            .push((replay_step::SNAPSHOT_COPY, copy_start, now_ns(), s.copied));
    }
    // A device-resident copy whose hashing pass already cost as much as copying the whole
    // footprint: every restore would pay that pass, and writing every byte back costs about
    // one such copy, so checking cannot pay (a slow hash against a fast device-to-device copy:
    // docs/gpu/h200-restore.md). Decide now, before the first restore pays it.
    if s.adaptive
        && s.check == Check::DeviceHash
        && s.placement == Placement::Device
        && s.copied >= super::restore_stats::MEASURE_MIN
        && s.hash_ns >= s.copy_ns
    {
        tracing::debug!(
            "kreplay: hashing the snapshot ({} ns) cost more than copying it ({} ns); restores write every byte",
            s.hash_ns,
            s.copy_ns
        );
        s.skip_check.set(true);
    }
    // Ready the one-pass restore (and the first restore's sample) now, so the first restore's
    // time (which decides whether checking pays) holds no one-time setup.
    if s.check == Check::DeviceHash && !s.skip_check.get() {
        let prepare_start = now_ns();
        let all = vec![true; s.regions.len()];
        let jobs: Vec<_> = super::restore_device::one_pass_jobs(&s, &all)
            .into_iter()
            .map(|(_, j)| j)
            .collect();
        if super::sample::wants_sample(&s, &jobs) {
            backend.prepare_restore_on_device(&super::sample::sample_jobs(&jobs, s.chunk), s.chunk);
        }
        if !jobs.is_empty() {
            // In the pieces the first restore's table has.
            let pieces: Vec<_> = super::restore_device::one_pass_pieces(&s, &all)
                .into_iter()
                .map(|(_, j)| j)
                .collect();
            backend.prepare_restore_on_device(&pieces, s.chunk);
        }
        let table = 48 * jobs.len() as u64;
        s.steps.push((
            replay_step::SNAPSHOT_PREPARE,
            prepare_start,
            now_ns(),
            table,
        ));
    }
    s
}

/// Readies the device hash before the snapshot times it: hashes the first chunk of the biggest
/// region with the output sized for that whole region, so the backend's one-time costs (the
/// kernel's first launch, its output buffers) are not counted as hashing cost.
fn warm_device_hash<B: Backend>(s: &Snapshot<'_, B>, wanted: &[(u64, u64, RegionKind)]) {
    let Some(&(addr, size, _)) = wanted.iter().max_by_key(|w| w.1) else {
        return;
    };
    // Zeroed by the allocator (pages not touched): only its length matters to the backend,
    // which writes the first chunk's hash.
    let mut sizing = vec![[0u64; 2]; chunk_count(size, s.chunk)];
    let first = (size as usize).min(s.chunk);
    if let Err(e) = s
        .backend
        .hash_chunks_on_device(addr, first, s.chunk, &mut sizing)
    {
        tracing::debug!(
            "kreplay: warming the device hash failed ({e}); the snapshot's pass will say"
        );
    }
}
