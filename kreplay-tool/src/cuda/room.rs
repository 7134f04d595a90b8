//! Device memory kreplay keeps between replays, given back when the application needs it.
//!
//! A replay's snapshot copies stay allocated between replays (`engine::arena`), so the next
//! replay of the same footprint neither allocates nor frees device memory in its window (for a
//! large footprint the allocation and the free are a sizeable part of a replay).
//! The application must not feel that memory: every allocation entry kreplay wraps
//! (`cuMemAlloc`, `cuMemAllocPitch`, `cuMemAllocAsync`, `cuMemAllocFromPoolAsync`,
//! `cuMemAllocManaged`, `cuMemCreate`) that fails with `CUDA_ERROR_OUT_OF_MEMORY` while
//! kreplay keeps copies frees them and is tried once more, so it fails only where it would
//! have failed without kreplay.

use super::backend::CudaBackend;
use super::ffi::*;
use super::state::cuda_tool;

/// Frees every snapshot copy kept between replays, on every device; the bytes freed.
pub fn release_kept_copies() -> usize {
    std::panic::catch_unwind(|| {
        let Some(t) = cuda_tool() else { return 0 };
        let arenas: Vec<_> = t
            .arenas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let backend = CudaBackend::new(t);
        arenas
            .iter()
            .map(|a| {
                let held = a.copy_bytes();
                a.clear_copies(&backend);
                held
            })
            .sum()
    })
    .unwrap_or(0)
}

/// Runs an application's allocation `call`; when it fails for lack of device memory and
/// kreplay kept copies, frees them and runs it once more.
pub fn with_room(mut call: impl FnMut() -> CUresult) -> CUresult {
    let r = call();
    if r != ERROR_OUT_OF_MEMORY {
        return r;
    }
    let freed = release_kept_copies();
    if freed == 0 {
        return r;
    }
    tracing::debug!("kreplay: an allocation ran out of device memory; freed {freed} kept bytes");
    call()
}

/// Wrapper body of `cuMemCreate` (physical memory for virtual memory management, e.g.
/// PyTorch's expandable segments): only [`with_room`].
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_create(
    real: MemCreateFn,
    handle: *mut u64,
    size: usize,
    prop: *const core::ffi::c_void,
    flags: u64,
) -> CUresult {
    // SAFETY: passed through.
    with_room(|| unsafe { real(handle, size, prop, flags) })
}
