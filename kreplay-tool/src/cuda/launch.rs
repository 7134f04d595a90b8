//! A kernel launch as the engine replays it, and the launch wrapper's decision: pass through
//! (replay off, kernel not selected, limit reached), decline with a reason (memory that cannot
//! be restored is live, the device did not drain), or replay through the engine inside the
//! device's replay window. A replayed launch is synchronous: it returns after its last pass.

use kreplay_common::stream::monotonic_ns as now_ns;

use core::ffi::{CStr, c_char, c_uint, c_void};

use kreplay_common::stream::Dispatch;

use super::backend::CudaBackend;
use super::ffi::*;
use super::state::{CudaTool, cuda_tool};
use crate::engine::backend::BackendError;
use crate::engine::gate::DRAIN_LIMIT;
use crate::engine::replay::{decline, own_window};
use crate::engine::state::Ran;

/// One launch, with the real entry it was meant for.
pub enum Launch {
    /// `cuLaunchKernel`.
    Kernel {
        /// Real entry.
        real: LaunchKernelFn,
        /// Function (or kernel) handle.
        f: CUfunction,
        /// Grid in blocks.
        grid: [c_uint; 3],
        /// Block in threads.
        block: [c_uint; 3],
        /// Dynamic shared memory.
        shm: c_uint,
        /// Stream.
        stream: CUstream,
        /// Kernel parameters.
        params: *mut *mut c_void,
        /// Extra options.
        extra: *mut *mut c_void,
    },
    /// `cuLaunchKernelEx`.
    Ex {
        /// Real entry.
        real: LaunchKernelExFn,
        /// Launch configuration.
        cfg: *const CUlaunchConfig,
        /// Function (or kernel) handle.
        f: CUfunction,
        /// Kernel parameters.
        params: *mut *mut c_void,
        /// Extra options.
        extra: *mut *mut c_void,
    },
}

impl Launch {
    /// Submits the launch once, as the application made it.
    ///
    /// # Safety
    /// The launch's pointers are the application's, valid for the wrapped call's duration.
    pub unsafe fn submit(&self) -> CUresult {
        match *self {
            // SAFETY: caller's contract.
            Launch::Kernel {
                real,
                f,
                grid,
                block,
                shm,
                stream,
                params,
                extra,
            } => unsafe {
                real(
                    f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shm, stream,
                    params, extra,
                )
            },
            // SAFETY: caller's contract.
            Launch::Ex {
                real,
                cfg,
                f,
                params,
                extra,
            } => unsafe { real(cfg, f, params, extra) },
        }
    }

    fn function(&self) -> CUfunction {
        match *self {
            Launch::Kernel { f, .. } | Launch::Ex { f, .. } => f,
        }
    }

    /// (grid in threads, block, stream).
    fn geometry(&self) -> ([u32; 3], [u32; 3], u64) {
        let (g, b, s) = match *self {
            Launch::Kernel {
                grid,
                block,
                stream,
                ..
            } => (grid, block, stream),
            Launch::Ex { cfg, .. } => {
                // SAFETY: cfg was checked non-null by the wrapper and is valid for the call.
                let c = unsafe { &*cfg };
                (
                    [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
                    [c.block_dim_x, c.block_dim_y, c.block_dim_z],
                    c.h_stream,
                )
            }
        };
        (
            [
                g[0].saturating_mul(b[0]),
                g[1].saturating_mul(b[1]),
                g[2].saturating_mul(b[2]),
            ],
            b,
            s as u64,
        )
    }
}

fn kernel_name(t: &CudaTool, f: CUfunction) -> String {
    t.engine.kernel_name(f as u64, || {
        for get in [t.driver.func_get_name, t.driver.kernel_get_name]
            .into_iter()
            .flatten()
        {
            let mut p: *const c_char = core::ptr::null();
            // SAFETY: valid out-pointer; f is the application's handle.
            if unsafe { get(&mut p, f) } == SUCCESS && !p.is_null() {
                // SAFETY: the driver returns a NUL-terminated name it owns.
                return Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
            }
        }
        None
    })
}

/// The launch wrapper: replays selected launches, passes the rest through.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
pub unsafe fn on_launch(l: &Launch) -> CUresult {
    let decided = crate::fault::guard(std::panic::AssertUnwindSafe(|| {
        crate::fault::point("cuda.launch");
        let t = cuda_tool()?;
        if !t.engine.replaying() {
            return None;
        }
        let (_, _, stream) = l.geometry();
        if t.driver.capturing(stream) {
            // Stream capture records a graph node; nothing runs (and a synchronize would
            // invalidate the capture). The graph's launch is declined instead.
            return None;
        }
        let device = t.driver.current_device();
        let name = kernel_name(t, l.function());
        if !t.engine.wants(&name) {
            // Other launches still respect a replay window open on this device.
            let gate = t.engine.gate(device);
            gate.enter();
            // SAFETY: the application's launch.
            let r = unsafe { l.submit() };
            gate.exit();
            return Some(r);
        }
        // SAFETY: the application's launch.
        Some(unsafe { replay_launch(t, l, device, name) })
    }));
    match decided {
        Ok(Some(r)) => r,
        // SAFETY: replay off, no tool, or a panic before submission: the plain call.
        _ => unsafe { l.submit() },
    }
}

/// Replays `l` inside the device's window (or declines and runs it once); either way records
/// its dispatch.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
unsafe fn replay_launch(t: &CudaTool, l: &Launch, device: u64, name: String) -> CUresult {
    let corr = t.engine.next_correlation();
    let submit = now_ns();
    let mut first_start = 0;
    // SAFETY: caller's contract.
    let result = unsafe { replay_or_decline(t, l, device, corr, &mut first_start) };
    let (grid, block, stream) = l.geometry();
    crate::record::global().record(
        Dispatch {
            pid: crate::record::current_pid(),
            tid: crate::record::current_tid(),
            agent: device,
            queue: stream,
            kernel: name,
            correlation: corr,
            kernel_object: l.function() as u64,
            grid,
            workgroup: block,
            submit_ns: submit,
            start_ns: if first_start == 0 {
                submit
            } else {
                first_start
            },
            end_ns: now_ns(),
        }
        .into(),
    );
    result
}

/// The replay proper; `first_start` gets the first pass's start.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
unsafe fn replay_or_decline(
    t: &CudaTool,
    l: &Launch,
    device: u64,
    corr: u64,
    first_start: &mut u64,
) -> CUresult {
    if let Some(reason) = t.unrestorable() {
        decline(corr, reason);
        // SAFETY: caller's contract.
        return unsafe { l.submit() };
    }
    let gate = t.engine.gate(device);
    if !gate.close(DRAIN_LIMIT, &|_| false) {
        decline(corr, "the device did not drain".into());
        // SAFETY: caller's contract.
        return unsafe { l.submit() };
    }
    let backend = CudaBackend::new(t);
    // The snapshot must see the kernel's inputs: everything submitted before it has finished.
    let sync_start = now_ns();
    let synced = backend.synchronize();
    own_window(corr, sync_start);
    if let Err(e) = synced {
        gate.open();
        decline(corr, format!("{e}"));
        // SAFETY: caller's contract.
        return unsafe { l.submit() };
    }
    let arena = t.arena(device);
    // The arena is kept between replays; given back when the application runs out of device
    // memory.
    let ran = t
        .engine
        .replay_closed(&backend, l, device, corr, Some(&arena), first_start);
    let result = match ran {
        Ran::Replayed => SUCCESS,
        // SAFETY (both): caller's contract: run once, normally, still inside the window.
        Ran::Declined => unsafe { l.submit() },
        Ran::Failed => match reason_status(&backend) {
            Some(st) => st,
            // SAFETY: the application gets its own launch's result.
            None => unsafe { l.submit() },
        },
    };
    gate.open();
    result
}

/// The launch status of a failed pass, when the launch itself was refused.
fn reason_status(b: &CudaBackend<'_>) -> Option<CUresult> {
    match b.last_launch_error() {
        Some(BackendError::Call { status, .. }) => Some(status),
        _ => None,
    }
}
