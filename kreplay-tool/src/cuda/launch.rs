//! The launch wrapper's decision: pass through (replay off, kernel not selected, limit
//! reached), decline with a reason (memory that cannot be restored is live, the device did not
//! drain), or replay through the engine inside the device's replay window. A replayed launch is synchronous: it returns after its last pass.

use kreplay_common::stream::monotonic_ns as now_ns;

use core::ffi::{CStr, c_char};
use std::cell::Cell;

use kreplay_common::stream::Dispatch;

use super::backend::CudaBackend;
use super::ffi::*;
use super::launch_call::Launch;
use super::state::{CudaTool, cuda_tool};
use crate::engine::backend::BackendError;
use crate::engine::gate::DRAIN_LIMIT;
use crate::engine::replay::{decline, own_window};
use crate::engine::state::{Marks, Ran};

/// The name of the kernel `f`, from the driver (cached by the engine).
pub(crate) fn kernel_name(t: &CudaTool, f: CUfunction) -> String {
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
    // The application's launch, once it has run (submitted, or replayed): a panic after that
    // must not run it a second time. (A panic in the middle of a replay leaves this unset: the
    // launch then runs once more from whatever state the device memory is in.)
    let ran: Cell<Option<CUresult>> = Cell::new(None);
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
            let _inside = gate.entered();
            // SAFETY: the application's launch.
            let r = unsafe { submit_once(l, &ran) };
            crate::fault::point("cuda.passed");
            return Some(r);
        }
        // SAFETY: the application's launch.
        Some(unsafe { replay_launch(t, l, device, name, &ran) })
    }));
    match (decided, ran.get()) {
        (Ok(Some(r)), _) | (Err(_), Some(r)) => r,
        // SAFETY: replay off, no tool, or a panic before the launch ran: the plain call.
        _ => unsafe { l.submit() },
    }
}

/// Runs the application's launch `l` once, noting in `ran` that it has run.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
unsafe fn submit_once(l: &Launch, ran: &Cell<Option<CUresult>>) -> CUresult {
    // SAFETY: caller's contract.
    let r = unsafe { l.submit() };
    ran.set(Some(r));
    r
}

/// Replays `l` inside the device's window (or declines and runs it once); either way records
/// its dispatch.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
unsafe fn replay_launch(
    t: &CudaTool,
    l: &Launch,
    device: u64,
    name: String,
    ran: &Cell<Option<CUresult>>,
) -> CUresult {
    let corr = t.engine.next_correlation();
    let submit = now_ns();
    let mut marks = Marks::default();
    // SAFETY: caller's contract.
    let result = unsafe { replay_or_decline(t, l, device, corr, &mut marks, ran) };
    let thread = (crate::record::current_pid(), crate::record::current_tid());
    record_dispatch(l, thread, device, name, corr, submit, &marks);
    t.engine.replay_recorded(&marks);
    result
}

/// Records the dispatch of launch `l` that `thread` (pid, tid) made on `device`, replayed or
/// run once: taken at `submit`, its first pass started as `marks` say, ended now. The device
/// is described first, which may ask the driver its name: never call this inside a CUPTI
/// callback.
pub(crate) fn record_dispatch(
    l: &Launch,
    (pid, tid): (u32, u32),
    device: u64,
    kernel: String,
    corr: u64,
    submit: u64,
    marks: &Marks,
) {
    let (grid, block, stream) = l.geometry();
    crate::cuda::devices::announce(device, kreplay_common::stream::queue_ids::HANDLE);
    crate::record::global().record(
        Dispatch {
            pid,
            tid,
            agent: device,
            queue: stream,
            kernel,
            correlation: corr,
            kernel_object: l.function() as u64,
            grid,
            workgroup: block,
            submit_ns: submit,
            start_ns: if marks.first_start == 0 {
                submit
            } else {
                marks.first_start
            },
            end_ns: now_ns(),
            group_segment: l.shared_mem(),
            private_segment: 0,
        }
        .into(),
    );
}

/// The replay proper; `marks` gets the first pass's start and the progress to count.
///
/// # Safety
/// `l` is the application's launch, valid for this call.
unsafe fn replay_or_decline(
    t: &CudaTool,
    l: &Launch,
    device: u64,
    corr: u64,
    marks: &mut Marks,
    ran: &Cell<Option<CUresult>>,
) -> CUresult {
    if let Some(reason) = t.unrestorable() {
        decline(corr, reason);
        t.engine.give_back();
        // SAFETY: caller's contract.
        return unsafe { submit_once(l, ran) };
    }
    let gate = t.engine.gate(device);
    let Some(window) = gate.close_window(DRAIN_LIMIT, &|_| false) else {
        decline(corr, "the device did not drain".into());
        t.engine.give_back();
        // SAFETY: caller's contract.
        return unsafe { submit_once(l, ran) };
    };
    let backend = CudaBackend::new(t);
    // The snapshot must see the kernel's inputs: everything submitted before it has finished.
    let sync_start = now_ns();
    let synced = backend.synchronize();
    own_window(corr, sync_start);
    if let Err(e) = synced {
        drop(window);
        decline(corr, format!("{e}"));
        t.engine.give_back();
        // SAFETY: caller's contract.
        return unsafe { submit_once(l, ran) };
    }
    let arena = t.arena(device);
    // The arena is kept between replays; given back when the application runs out of device
    // memory.
    let outcome = t
        .engine
        .replay_closed(&backend, l, device, corr, Some(&arena), marks, false);
    let result = match outcome {
        Ran::Replayed => SUCCESS,
        // SAFETY: caller's contract: run once, normally, still inside the window.
        Ran::Declined => unsafe { l.submit() },
        Ran::Failed => match reason_status(&backend) {
            Some(st) => st,
            // SAFETY: the application gets its own launch's result.
            None => unsafe { l.submit() },
        },
    };
    ran.set(Some(result));
    crate::fault::point("cuda.replayed");
    drop(window);
    result
}

/// The launch status of a failed pass, when the launch itself was refused.
fn reason_status(b: &CudaBackend<'_>) -> Option<CUresult> {
    match b.last_launch_error() {
        Some(BackendError::Call { status, .. }) => Some(status),
        _ => None,
    }
}
