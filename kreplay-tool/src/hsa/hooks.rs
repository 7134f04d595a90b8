//! The wrappers over allocation, vmem mapping and async copies. The allocate/free wrappers feed
//! the inventory (one relaxed load when not recording); vmem mappings of coarse-grained GPU
//! memory (hipMallocAsync, hipMemMap) feed it too, other mappings are counted so replay is
//! declined while one is live; async copies hold their agents' replay windows shared from
//! submission until completion (kreplay's signal, forwarded to the application's).

use core::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::classify::{Class, classify};
use super::ffi::alloc_flags::EXECUTABLE as ALLOC_EXECUTABLE;
use super::ffi::{
    hsa_agent_t, hsa_amd_memory_pool_t, hsa_amd_vmem_alloc_handle_t, hsa_region_t, hsa_signal_t,
    hsa_signal_value_t, hsa_status_t, signal_condition, status,
};
use super::state::{Tool, tool};
use crate::amd_next;
use crate::engine::gate::Gate;

fn track(t: &Tool, ptr: *mut c_void, flags: u32, pool_flags: Option<u32>) {
    if let Class::Tracked { base, size, agent } =
        classify(&t.backend, ptr as u64, flags, pool_flags)
    {
        t.engine.inventory.record_alloc(base, size, agent);
    }
}

/// Wrapper of `hsa_amd_memory_pool_allocate`.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn pool_allocate(
    pool: hsa_amd_memory_pool_t,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let Some(next) = amd_next!(t.backend.next(), hsa_amd_memory_pool_allocate_fn) else {
        return status::ERROR;
    };
    // SAFETY: the application's arguments, passed through unchanged.
    let st = unsafe { next(pool, size, flags, ptr) };
    if st == status::SUCCESS && t.engine.inventory.is_recording() && !ptr.is_null() {
        let _ = crate::fault::guard(|| {
            crate::fault::point("hsa.alloc");
            // SAFETY: the runtime just wrote the allocation's address into *ptr.
            let p = unsafe { *ptr };
            let pf = if flags & ALLOC_EXECUTABLE == 0 {
                t.backend.pool_global_flags(pool)
            } else {
                None
            };
            track(t, p, flags, pf);
        });
    }
    st
}

/// Wrapper of `hsa_amd_memory_pool_free`.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn pool_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let _ = crate::fault::guard(|| {
        crate::fault::point("hsa.free");
        t.engine.inventory.record_free(ptr as u64)
    });
    let Some(next) = amd_next!(t.backend.next(), hsa_amd_memory_pool_free_fn) else {
        return status::ERROR;
    };
    // SAFETY: the application's argument, passed through.
    unsafe { next(ptr) }
}

/// Wrapper of `hsa_memory_allocate`.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn memory_allocate(
    region: hsa_region_t,
    size: usize,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let Some(next) = t.backend.next().core.hsa_memory_allocate_fn else {
        return status::ERROR;
    };
    // SAFETY: the application's arguments, passed through unchanged.
    let st = unsafe { next(region, size, ptr) };
    if st == status::SUCCESS && t.engine.inventory.is_recording() && !ptr.is_null() {
        // SAFETY: the runtime just wrote the allocation's address into *ptr.
        let p = unsafe { *ptr };
        let _ = crate::fault::guard(|| {
            crate::fault::point("hsa.alloc");
            track(t, p, 0, None)
        });
    }
    st
}

/// Wrapper of `hsa_memory_free`.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn memory_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let _ = crate::fault::guard(|| {
        crate::fault::point("hsa.free");
        t.engine.inventory.record_free(ptr as u64)
    });
    let Some(next) = t.backend.next().core.hsa_memory_free_fn else {
        return status::ERROR;
    };
    // SAFETY: the application's argument, passed through.
    unsafe { next(ptr) }
}

/// Wrapper of `hsa_amd_vmem_map`: a mapping of coarse-grained GPU memory enters the inventory
/// like an allocation (snapshotted and restored); any other mapping is kept in `Tool::vmem`,
/// and replay is declined while one is live.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn vmem_map(
    va: *mut c_void,
    size: usize,
    offset: usize,
    handle: hsa_amd_vmem_alloc_handle_t,
    flags: u64,
) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let Some(next) = amd_next_v2(t, |a| a.hsa_amd_vmem_map_fn) else {
        return status::ERROR;
    };
    // SAFETY: the application's arguments, passed through.
    let st = unsafe { next(va, size, offset, handle, flags) };
    if st == status::SUCCESS {
        let _ = crate::fault::guard(|| {
            crate::fault::point("hsa.vmem_map");
            track_mapping(t, va as u64, size as u64)
        });
    }
    st
}

/// Records a new mapping `[va, va + size)`: in the inventory when it is trackable memory.
fn track_mapping(t: &Tool, va: u64, size: u64) {
    let class = if t.engine.inventory.is_recording() {
        classify(&t.backend, va, 0, None)
    } else {
        Class::Unknown
    };
    match class {
        Class::Tracked { agent, .. } => {
            t.engine.inventory.record_alloc(va, size, agent);
        }
        other => {
            tracing::debug!("kreplay: vmem mapping {va:#x}+{size} not tracked ({other:?})");
            t.vmem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(va, size as usize);
        }
    }
}

/// Forgets every tracked entry overlapping `[va, va + size)`; returns them (base, entry).
fn untrack_range(t: &Tool, va: u64, size: u64) -> Vec<(u64, crate::engine::inventory::Entry)> {
    let end = va.saturating_add(size);
    let gone: Vec<_> = t
        .engine
        .inventory
        .read()
        .range(..end)
        .filter(|(b, e)| b.saturating_add(e.size) > va)
        .map(|(b, e)| (*b, *e))
        .collect();
    for (b, _) in &gone {
        t.engine.inventory.record_free(*b);
    }
    gone
}

/// Wrapper of `hsa_amd_vmem_unmap`: the range leaves the inventory before it is unmapped (a
/// restore holding the inventory's read lock finishes first); if the unmap fails it returns.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn vmem_unmap(va: *mut c_void, size: usize) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let Some(next) = amd_next_v2(t, |a| a.hsa_amd_vmem_unmap_fn) else {
        return status::ERROR;
    };
    let gone = crate::fault::guard(|| {
        crate::fault::point("hsa.vmem_unmap");
        untrack_range(t, va as u64, size as u64)
    })
    .unwrap_or_default();
    // SAFETY: the application's arguments, passed through.
    let st = unsafe { next(va, size) };
    let _ = crate::fault::guard(|| {
        if st == status::SUCCESS {
            t.vmem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&(va as u64));
        } else {
            // Still mapped: tracked again (a new generation: a restore in between skips it).
            for (b, e) in &gone {
                t.engine.inventory.record_alloc(*b, e.size, e.agent);
            }
        }
    });
    st
}

fn amd_next_v2<F>(t: &Tool, f: impl Fn(&super::ffi::AmdExtTable) -> Option<F>) -> Option<F> {
    match &t.backend.next().amd {
        super::tables::AmdTable::V2(a) => f(a),
        super::tables::AmdTable::V1(_) => None,
    }
}

/// What a completion forwarder needs: kreplay's signal, the application's, the gates held.
pub struct Forward {
    /// kreplay's signal the operation completes.
    pub own: hsa_signal_t,
    /// The application's completion signal (0: none).
    pub app: hsa_signal_t,
    /// Gates held shared until completion.
    pub gates: Vec<Arc<Gate>>,
    /// Copy entries (gate, id) held until completion.
    pub copies: Vec<(Arc<Gate>, u64)>,
    /// Called at completion with kreplay's signal, after the application's signal is
    /// completed and before kreplay's is reused (e.g. to read its GPU times and record them).
    pub done: Option<Box<dyn FnOnce(hsa_signal_t) + Send>>,
}

/// Completions between completing the application's signal and recording their work: an
/// application that waited for its signal may shut the runtime down (and `OnUnload` flush the
/// stream) while the record is being made.
static RECORDING: AtomicUsize = AtomicUsize::new(0);

/// Waits, at most `limit`, until no completion handler is between completing the application's
/// signal and recording its work; true when none is.
pub fn wait_recordings(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while RECORDING.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

unsafe extern "C" fn forward_completion(_value: hsa_signal_value_t, arg: *mut c_void) -> bool {
    // SAFETY: arg is the Box<Forward> leaked by arm_forward, handed back exactly once.
    let fwd = unsafe { Box::from_raw(arg as *mut Forward) };
    RECORDING.fetch_add(1, Ordering::AcqRel);
    let Forward {
        own,
        app,
        gates,
        copies,
        done,
    } = *fwd;
    // Each step is protected on its own: a panic while recording must still release the
    // gates and complete the application's signal, which it waits on.
    let step = |f: &mut dyn FnMut()| {
        let _ = crate::fault::guard(std::panic::AssertUnwindSafe(f));
    };
    step(&mut || {
        for g in &gates {
            g.exit();
        }
    });
    step(&mut || {
        for (g, id) in &copies {
            g.exit_copy(*id);
        }
    });
    step(&mut || {
        if let Some(t) = tool() {
            t.backend.complete_app_signal(app);
        }
    });
    let mut done = done;
    step(&mut || {
        crate::fault::point("hsa.copy_done");
        if let Some(done) = done.take() {
            done(own);
        }
    });
    step(&mut || {
        if let Some(t) = tool() {
            t.backend.give_signal(own);
        }
    });
    RECORDING.fetch_sub(1, Ordering::AcqRel);
    false
}

/// Whether any of the signals `deps` is still above zero (the copy cannot start yet).
pub fn deps_blocked(t: &Tool, deps: &[u64]) -> bool {
    let Some(load) = t.backend.next().core.hsa_signal_load_scacquire_fn else {
        return false;
    };
    deps.iter().any(|&h| {
        // SAFETY: the application's dependency signals stay live until its copy completes.
        h != 0 && unsafe { load(hsa_signal_t { handle: h }) } > 0
    })
}

/// Arms a handler that, when `fwd.own` drops below 1, completes the application's signal and
/// leaves the gates. False if the runtime refused (the caller then undoes its own state).
pub fn arm_forward(t: &Tool, fwd: Box<Forward>) -> Result<(), Box<Forward>> {
    let Some(arm) = amd_next!(t.backend.next(), hsa_amd_signal_async_handler_fn) else {
        return Err(fwd);
    };
    let own = fwd.own;
    let raw = Box::into_raw(fwd);
    // SAFETY: own is a live kreplay signal; raw is handed to forward_completion exactly once.
    let st = unsafe {
        arm(
            own,
            signal_condition::LT,
            1,
            Some(forward_completion),
            raw as *mut c_void,
        )
    };
    if st == status::SUCCESS {
        Ok(())
    } else {
        // SAFETY: the runtime refused the handler, so raw was never handed out.
        Err(unsafe { Box::from_raw(raw) })
    }
}

/// What records a copy's `GpuCopy` once it completes: its direction from which agents are
/// GPUs, its times from kreplay's completion signal (none when the runtime has none: the merge
/// then marks the submission).
fn copy_recorder(
    t: &Tool,
    dst: u64,
    src: u64,
    size: usize,
) -> Box<dyn FnOnce(hsa_signal_t) + Send> {
    use super::classify::PointerQuery;
    use kreplay_common::stream::{GpuCopy, copy_kind};
    let (src_gpu, dst_gpu) = (t.backend.agent_is_gpu(src), t.backend.agent_is_gpu(dst));
    let kind = match (src_gpu, dst_gpu) {
        (false, true) => copy_kind::HOST_TO_DEVICE,
        (true, false) => copy_kind::DEVICE_TO_HOST,
        (true, true) => copy_kind::DEVICE_TO_DEVICE,
        (false, false) => copy_kind::HOST_TO_HOST,
    };
    let device = if dst_gpu || !src_gpu { dst } else { src };
    super::devices::announce(t.backend.next(), device);
    let mut rec = GpuCopy {
        pid: crate::record::current_pid(),
        tid: crate::record::current_tid(),
        device,
        engine: 0,
        correlation: t.engine.next_correlation(),
        kind,
        bytes: size as u64,
        submit_ns: kreplay_common::stream::monotonic_ns(),
        start_ns: 0,
        end_ns: 0,
    };
    Box::new(move |own| {
        let Some(t) = tool() else { return };
        if let Some((start, end)) = t
            .timeline()
            .and_then(|tl| tl.copy_times(t.backend.next(), own))
        {
            (rec.start_ns, rec.end_ns) = (start, end);
        }
        crate::record::global().record(rec.into());
    })
}

/// Wrapper of `hsa_amd_memory_async_copy`: fenced against replay windows of both agents.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn async_copy(
    dst: *mut c_void,
    dst_agent: hsa_agent_t,
    src: *const c_void,
    src_agent: hsa_agent_t,
    size: usize,
    num_deps: u32,
    deps: *const hsa_signal_t,
    completion: hsa_signal_t,
) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let Some(next) = amd_next!(t.backend.next(), hsa_amd_memory_async_copy_fn) else {
        return status::ERROR;
    };
    if t.passing_through() {
        // SAFETY: waiting for a kreplay to attach: the application's arguments, passed through.
        return unsafe {
            next(
                dst, dst_agent, src, src_agent, size, num_deps, deps, completion,
            )
        };
    }
    let fenced = crate::fault::guard(|| {
        crate::fault::point("hsa.async_copy");
        let own = t.backend.take_signal()?;
        let mut agents = vec![dst_agent.handle, src_agent.handle];
        agents.sort_unstable();
        agents.dedup();
        let dep_handles: Vec<u64> = if deps.is_null() {
            Vec::new()
        } else {
            // SAFETY: the application passes num_deps signals at deps.
            unsafe { std::slice::from_raw_parts(deps, num_deps as usize) }
                .iter()
                .map(|s| s.handle)
                .collect()
        };
        let copies: Vec<(Arc<Gate>, u64)> = agents
            .into_iter()
            .map(|a| {
                let g = t.engine.gate(a);
                let id = g.enter_copy(dep_handles.clone());
                (g, id)
            })
            .collect();
        let done = t
            .timeline()
            .is_some()
            .then(|| copy_recorder(t, dst_agent.handle, src_agent.handle, size));
        Some(Box::new(Forward {
            own,
            app: completion,
            gates: Vec::new(),
            copies,
            done,
        }))
    })
    .ok()
    .flatten();
    let Some(fwd) = fenced else {
        // SAFETY: unfenced fallback: the application's arguments, passed through.
        return unsafe {
            next(
                dst, dst_agent, src, src_agent, size, num_deps, deps, completion,
            )
        };
    };
    let own = fwd.own;
    // SAFETY: the application's arguments, with kreplay's signal as the completion.
    let st = unsafe { next(dst, dst_agent, src, src_agent, size, num_deps, deps, own) };
    if st != status::SUCCESS {
        // Never signalled (a failed copy signals nothing): undo the fence.
        for (g, id) in &fwd.copies {
            g.exit_copy(*id);
        }
        t.backend.give_signal(own);
        return st;
    }
    // Armed after the submission: a handler armed on an already-satisfied condition fires at once.
    if let Err(fwd) = arm_forward(t, fwd) {
        let _ = t.backend.wait_signal(own);
        t.backend.complete_app_signal(fwd.app);
        for (g, id) in &fwd.copies {
            g.exit_copy(*id);
        }
        t.backend.give_signal(own);
    }
    st
}
