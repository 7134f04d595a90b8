//! What a snapshot will hold and how it will be checked, decided before anything is copied:
//! the regions to capture (tracked allocations, then writable module variables), their copies'
//! placement (the first with room, a partial attempt freed before the next), and the best
//! dirty check the backend offers for that placement.

use super::backend::Backend;
use super::config::SnapshotPolicy;
use super::inventory::Inventory;
use super::placement::{Check, Placement, Store};
use super::snapshot::{MODULE_VAR_CAP, RegionKind, SnapFailure};

/// What to capture: (address, size, kind) of every region, tracked allocations first.
pub(super) type Wanted = Vec<(u64, u64, RegionKind)>;

/// Tracked allocations and writable module variables of `agent`, or why not.
pub(super) fn wanted<B: Backend>(
    backend: &B,
    inv: &Inventory,
    agent: u64,
    oversized: &mut u64,
) -> Result<Wanted, SnapFailure> {
    let tracked = inv.of_agent(agent);
    let vars = backend.module_variables(agent).map_err(|e| {
        tracing::warn!("kreplay: snapshot declined: module variable enumeration failed: {e}");
        SnapFailure::SymbolIteration(e)
    })?;
    let mut wanted = Vec::new();
    if wanted.try_reserve(tracked.len() + vars.len()).is_err() {
        return Err(SnapFailure::Metadata);
    }
    for (base, e) in tracked {
        let kind = RegionKind::Tracked {
            generation: e.generation,
        };
        wanted.push((base, e.size, kind));
    }
    for v in vars {
        if v.addr == 0 || v.size == 0 || v.constant {
            continue;
        }
        if v.size > MODULE_VAR_CAP {
            tracing::warn!(
                "kreplay: module variable {} ({} bytes) exceeds the 1 GiB cap; not captured",
                v.name,
                v.size
            );
            *oversized += 1;
            continue;
        }
        wanted.push((v.addr, v.size, RegionKind::ModuleVar));
    }
    Ok(wanted)
}

/// Allocates one copy per wanted region in the first placement of `policy` with room; a
/// partial attempt is freed before the next placement is tried. Device copies are asked for
/// all at once ([`Backend::device_alloc_each`]).
pub(super) fn allocate<B: Backend>(
    backend: &B,
    policy: &SnapshotPolicy,
    wanted: &Wanted,
) -> Result<(Placement, Vec<Store>), SnapFailure> {
    let mut failure = SnapFailure::Metadata;
    for &p in Placement::order(policy.placement) {
        if p == Placement::Device {
            let lens: Vec<usize> = wanted.iter().map(|w| w.1 as usize).collect();
            match backend.device_alloc_each(&lens) {
                Some(ptrs) => return Ok((p, ptrs.into_iter().map(Store::Device).collect())),
                None => {
                    failure = SnapFailure::DeviceAlloc {
                        regions: wanted.len() as u64,
                        bytes: wanted.iter().map(|w| w.1).sum(),
                    };
                    tracing::debug!("kreplay: {p:?} placement has no room: {failure}");
                    continue;
                }
            }
        }
        let mut stores = Vec::new();
        if stores.try_reserve(wanted.len()).is_err() {
            return Err(SnapFailure::Metadata);
        }
        for &(addr, size, _) in wanted {
            match Store::alloc(backend, p, size as usize) {
                Some(s) => stores.push(s),
                None => {
                    failure = SnapFailure::HostAlloc { addr, size };
                    tracing::debug!("kreplay: {p:?} placement has no room: {failure}");
                    break;
                }
            }
        }
        if stores.len() == wanted.len() {
            return Ok((p, stores));
        }
        stores.into_iter().for_each(|s| s.free(backend));
    }
    tracing::warn!("kreplay: snapshot declined: {failure}");
    Err(failure)
}

/// The best check this backend offers for `placement` (probed with zero-length calls).
pub(super) fn choose_check<B: Backend>(
    backend: &B,
    policy: &SnapshotPolicy,
    p: Placement,
) -> Check {
    if !policy.dirty_only {
        return Check::Full;
    }
    let compare = || {
        p == Placement::Device
            && backend.compare_chunks_on_device(0, 0, 0, policy.chunk, &mut []) == Ok(true)
    };
    let hash = || backend.hash_chunks_on_device(0, 0, policy.chunk, &mut []) == Ok(true);
    // A device-resident copy is compared exactly when asked to, or when the device cannot
    // hash; otherwise hashing reads the footprint once where comparing reads it twice.
    if policy.exact_device_check && compare() {
        return Check::DeviceCompare;
    }
    if hash() {
        return Check::DeviceHash;
    }
    if compare() {
        return Check::DeviceCompare;
    }
    Check::HostHash
}
