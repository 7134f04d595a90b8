//! What each wrapped driver entry does around the real call: allocation tracking
//! (`cuMemAlloc_v2`/`cuMemFree_v2` into the engine's inventory; async-pool and managed memory
//! as untracked, which declines replay while live), module loads (variable names from the
//! image), graph launches (warned once, run once) and kernel launches (replayed through the
//! engine). Every handler catches panics and falls back to the plain call.

use core::ffi::{c_int, c_uint, c_void};
use kreplay_common::stream::monotonic_ns as now_ns;
use std::sync::atomic::Ordering;

use super::ffi::*;
use super::image::globals_of;
use super::launch::on_launch;
use super::launch_call::Launch;
use super::room::with_room;
use super::state::{LoadedModule, ModuleKind, cuda_tool};

/// Wrapper body of `cuLaunchKernel`.
///
/// # Safety
/// The application's arguments and the real entry.
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
pub unsafe fn launch_kernel(
    real: LaunchKernelFn,
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shm: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let l = Launch::Kernel {
        real,
        f,
        grid: [gx, gy, gz],
        block: [bx, by, bz],
        shm,
        stream,
        params,
        extra,
    };
    // SAFETY: the application's launch, as given.
    unsafe { on_launch(&l) }
}

/// Wrapper body of `cuLaunchKernelEx`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn launch_kernel_ex(
    real: LaunchKernelExFn,
    cfg: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    if cfg.is_null() {
        // SAFETY: passed through; the driver reports the error.
        return unsafe { real(cfg, f, params, extra) };
    }
    let l = Launch::Ex {
        real,
        cfg,
        f,
        params,
        extra,
    };
    // SAFETY: the application's launch, as given.
    unsafe { on_launch(&l) }
}

/// Wrapper body of `cuMemAlloc_v2`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_alloc(real: MemAllocFn, dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    // SAFETY: passed through.
    let r = with_room(|| unsafe { real(dptr, size) });
    if r == SUCCESS && !dptr.is_null() {
        // SAFETY: the driver wrote the new address.
        track(unsafe { *dptr }, size);
    }
    r
}

/// Wrapper body of `cuMemFree_v2`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_free(real: MemFreeFn, dptr: CUdeviceptr) -> CUresult {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.free");
        if let Some(t) = cuda_tool() {
            t.engine.inventory.record_free(dptr);
        }
    });
    // SAFETY: passed through.
    unsafe { real(dptr) }
}

/// Wrapper body of `cuMemAllocPitch_v2`: tracked as `pitch * height` bytes.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_alloc_pitch(
    real: MemAllocPitchFn,
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    elem: c_uint,
) -> CUresult {
    // SAFETY: passed through.
    let r = with_room(|| unsafe { real(dptr, pitch, width, height, elem) });
    if r == SUCCESS && !dptr.is_null() && !pitch.is_null() {
        // SAFETY: the driver wrote both.
        let (p, pitch) = unsafe { (*dptr, *pitch) };
        track(p, pitch.saturating_mul(height));
    }
    r
}

/// Wrapper body of `cuMemMap` (virtual memory management, e.g. PyTorch's expandable
/// segments): the mapped range is tracked like an allocation until unmapped.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_map(
    real: MemMapFn,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: u64,
    flags: u64,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(ptr, size, offset, handle, flags) };
    if r == SUCCESS {
        track(ptr, size);
    }
    r
}

/// Wrapper body of `cuMemUnmap`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_unmap(real: MemUnmapFn, ptr: CUdeviceptr, size: usize) -> CUresult {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.free");
        if let Some(t) = cuda_tool() {
            t.engine.inventory.record_free(ptr);
        }
    });
    // SAFETY: passed through.
    unsafe { real(ptr, size) }
}

fn track(p: CUdeviceptr, size: usize) {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.alloc");
        if let Some(t) = cuda_tool()
            && t.engine.inventory.is_recording()
        {
            t.engine
                .inventory
                .record_alloc(p, size as u64, t.driver.current_device());
        }
    });
}

fn note_untracked(dptr: *mut CUdeviceptr, size: usize, how: &'static str) {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.untracked");
        if let Some(t) = cuda_tool()
            && t.engine.replaying()
            && !dptr.is_null()
        {
            // SAFETY: the driver wrote the new address.
            let p = unsafe { *dptr };
            t.untracked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(p, (size, how));
        }
    });
}

fn forget_untracked(dptr: CUdeviceptr) {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.untracked");
        if let Some(t) = cuda_tool() {
            t.untracked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&dptr);
        }
    });
}

/// Wrapper body of `cuMemAllocAsync`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_alloc_async(
    real: MemAllocAsyncFn,
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    // SAFETY: passed through.
    let r = with_room(|| unsafe { real(dptr, size, stream) });
    if r == SUCCESS {
        note_untracked(dptr, size, "cuMemAllocAsync");
    }
    r
}

/// Wrapper body of `cuMemAllocFromPoolAsync`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_alloc_from_pool_async(
    real: MemAllocFromPoolAsyncFn,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    // SAFETY: passed through.
    let r = with_room(|| unsafe { real(dptr, size, pool, stream) });
    if r == SUCCESS {
        note_untracked(dptr, size, "cuMemAllocFromPoolAsync");
    }
    r
}

/// Wrapper body of `cuMemFreeAsync`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_free_async(
    real: MemFreeAsyncFn,
    dptr: CUdeviceptr,
    stream: CUstream,
) -> CUresult {
    forget_untracked(dptr);
    // SAFETY: passed through.
    unsafe { real(dptr, stream) }
}

/// Wrapper body of `cuMemAllocManaged`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn mem_alloc_managed(
    real: MemAllocManagedFn,
    dptr: *mut CUdeviceptr,
    size: usize,
    flags: c_uint,
) -> CUresult {
    // SAFETY: passed through.
    let r = with_room(|| unsafe { real(dptr, size, flags) });
    if r == SUCCESS {
        note_untracked(dptr, size, "cuMemAllocManaged");
    }
    r
}

fn note_module(handle: usize, kind: ModuleKind, image: *const c_void) {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.module_load");
        let Some(t) = cuda_tool() else { return };
        if !t.engine.replaying() {
            return;
        }
        // SAFETY: the image the driver just loaded successfully.
        let globals = unsafe { globals_of(image as *const u8) };
        match &globals {
            Ok(g) => tracing::debug!("kreplay: module {handle:#x}: {} variables", g.len()),
            Err(e) => tracing::warn!(
                "kreplay: module {handle:#x}: variables unknown ({e}); launches are not replayed while it is loaded"
            ),
        }
        t.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(LoadedModule {
                handle,
                kind,
                globals,
                resolved: Default::default(),
            });
    });
}

fn forget_module(handle: usize) {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.module_unload");
        if let Some(t) = cuda_tool() {
            t.modules
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|m| m.handle != handle);
        }
    });
}

/// Notes the module a successful load wrote into `*out` (a `CUmodule` or `CUlibrary`);
/// returns the load's status.
///
/// # Safety
/// `out` is the load's out-pointer, written by the driver when `r` is success.
unsafe fn loaded(
    r: CUresult,
    out: *mut *mut c_void,
    kind: ModuleKind,
    image: *const c_void,
) -> CUresult {
    if r == SUCCESS && !out.is_null() {
        // SAFETY: the driver wrote the handle (caller's contract).
        note_module(unsafe { *out } as usize, kind, image);
    }
    r
}

/// Wrapper body of `cuModuleLoadData` (and of `cuModuleLoadFatBinary`: same signature, same
/// work).
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn module_load_data(
    real: ModuleLoadDataFn,
    m: *mut CUmodule,
    image: *const c_void,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(m, image) };
    // SAFETY: m is the load's out-pointer.
    unsafe { loaded(r, m, ModuleKind::Module, image) }
}

/// Wrapper body of `cuModuleLoadDataEx`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn module_load_data_ex(
    real: ModuleLoadDataExFn,
    m: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    opts: *mut c_int,
    vals: *mut *mut c_void,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(m, image, n, opts, vals) };
    // SAFETY: m is the load's out-pointer.
    unsafe { loaded(r, m, ModuleKind::Module, image) }
}

/// Wrapper body of `cuLibraryLoadData`.
///
/// # Safety
/// The application's arguments and the real entry.
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
pub unsafe fn library_load_data(
    real: LibraryLoadDataFn,
    l: *mut CUlibrary,
    code: *const c_void,
    jo: *mut c_int,
    jv: *mut *mut c_void,
    nj: c_uint,
    lo: *mut c_int,
    lv: *mut *mut c_void,
    nl: c_uint,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(l, code, jo, jv, nj, lo, lv, nl) };
    // SAFETY: l is the load's out-pointer.
    unsafe { loaded(r, l, ModuleKind::Library, code) }
}

/// Wrapper body of `cuModuleUnload`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn module_unload(real: ModuleUnloadFn, m: CUmodule) -> CUresult {
    forget_module(m as usize);
    // SAFETY: passed through.
    unsafe { real(m) }
}

/// Wrapper body of `cuLibraryUnload`.
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn library_unload(real: LibraryUnloadFn, l: CUlibrary) -> CUresult {
    forget_module(l as usize);
    // SAFETY: passed through.
    unsafe { real(l) }
}

/// Wrapper body of `cuGraphLaunch`: never replayed (a decline record each, a warning once).
///
/// # Safety
/// The application's arguments and the real entry.
pub unsafe fn graph_launch(real: GraphLaunchFn, g: CUgraphExec, stream: CUstream) -> CUresult {
    let _ = crate::fault::guard(|| {
        crate::fault::point("cuda.graph_launch");
        let Some(t) = cuda_tool() else { return };
        if !t.engine.replaying() {
            return;
        }
        if !t.engine.graph_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "kreplay: graph launches (cuGraphLaunch) are not replayed; they run once (warned once per process)"
            );
        }
        let corr = t.engine.next_correlation();
        crate::engine::replay::decline(corr, "graph launch".into());
        let now = now_ns();
        let device = t.driver.current_device();
        crate::cuda::devices::announce(device, kreplay_common::stream::queue_ids::HANDLE);
        crate::record::global().record(
            kreplay_common::stream::Dispatch {
                pid: crate::record::current_pid(),
                tid: crate::record::current_tid(),
                agent: device,
                queue: stream as u64,
                kernel: "(cuGraphLaunch)".into(),
                correlation: corr,
                kernel_object: g as u64,
                grid: [0; 3],
                workgroup: [0; 3],
                submit_ns: now,
                start_ns: now,
                end_ns: now,
                group_segment: 0,
                private_segment: 0,
            }
            .into(),
        );
    });
    // SAFETY: passed through.
    unsafe { real(g, stream) }
}
