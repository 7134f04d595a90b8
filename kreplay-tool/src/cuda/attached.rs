//! Replay in a running CUDA process (`kreplay replay -p PID`, docs/attach.md). The tool, loaded
//! late, sees no driver call through interposition; it subscribes to CUPTI's callbacks on the
//! driver's launch calls instead ([`crate::cupti::callbacks`]). At the entry of a selected
//! launch, the application's thread waits while a kreplay thread (`kreplay-replay`, outside any
//! callback: NVIDIA supports only synchronizing inside one) drains the device, snapshots the
//! allocations the launch's arguments reach ([`super::arguments`]), runs the passes with
//! restores between them and a last restore after them; then the driver runs the
//! application's own launch from the snapshot's memory, so it computes what it would have
//! without kreplay. Other launches on the device wait at their entry while a replay runs. The
//! callback itself calls no driver function: a kernel's name and a context's device, the
//! first time they are needed, come from a short-lived kreplay thread too.

use core::ffi::c_void;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kreplay_common::replay_config::ReplaySettings;
use kreplay_common::stream::monotonic_ns as now_ns;

use super::backend::CudaBackend;
use super::ffi::*;
use super::launch::{kernel_name, record_dispatch};
use super::launch_call::Launch;
use super::state::{CudaTool, cuda_tool};
use crate::cupti::callbacks::{self, CallbackData, DOMAIN_DRIVER_API, SITE_ENTER};
use crate::engine::config::ReplayConfig;
use crate::engine::gate::{DRAIN_LIMIT, Gate};
use crate::engine::replay::{decline, own_window};
use crate::engine::state::Marks;

/// The replay thread's stack: the engine runs there what runs on an application thread's
/// (8 MiB) stack under `replay -- CMD`.
const REPLAY_STACK: usize = 8 << 20;
/// Whether a session replays now.
static ON: AtomicBool = AtomicBool::new(false);
/// Each context's device ordinal, by context handle.
static DEVICES: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

thread_local! {
    /// Set on kreplay's replay thread: its own launches pass through the callbacks.
    static OWN: Cell<bool> = const { Cell::new(false) };
    /// The window a launch of this thread entered at its call's entry, left at its exit.
    static ENTERED: RefCell<Option<Arc<Gate>>> = const { RefCell::new(None) };
}

/// `cuLaunchKernel_params` (and `_ptsz`), cupti_driver_cbid.h.
#[repr(C)]
struct LaunchKernelParams {
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shm: u32,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// `cuLaunchKernelEx_params` (and `_ptsz`).
#[repr(C)]
struct LaunchKernelExParams {
    config: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// Starts replay with `settings` in this process (a session of [`crate::attach`]).
pub fn start(settings: &ReplaySettings) -> Result<(), String> {
    let t = cuda_tool().ok_or("the CUDA driver could not be loaded in this process")?;
    if t.driver.ctx_set_current.is_none() {
        return Err("the CUDA driver has no cuCtxSetCurrent".into());
    }
    let config = ReplayConfig::from_settings(settings).map_err(|e| e.to_string())?;
    t.engine.set_config(config);
    t.engine.inventory.set_recording(true);
    if let Err(e) = callbacks::subscribe(on_callback) {
        idle(t);
        return Err(format!("CUPTI is unusable: {e}"));
    }
    ON.store(true, Ordering::Release);
    crate::record::resume_global_flusher();
    if let Err(e) = crate::record::start_global_flusher(std::time::Duration::from_millis(200)) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    Ok(())
}

/// Ends replay: the callbacks stop, launches run as without kreplay (a replay still running
/// finishes first, with the settings it began with).
pub fn stop() {
    if !ON.swap(false, Ordering::AcqRel) {
        return;
    }
    callbacks::unsubscribe();
    if let Some(t) = cuda_tool() {
        idle(t);
        t.engine.reset_gates();
    }
}

/// Whether a session's `--max-dispatches` replays are written.
pub fn limit_reached() -> bool {
    ON.load(Ordering::Acquire) && cuda_tool().is_some_and(|t| t.engine.limit_reached())
}

/// One pass, no recording: the engine as before the session.
fn idle(t: &CudaTool) {
    if let Ok(c) = ReplayConfig::from_settings(&ReplaySettings::default()) {
        t.engine.set_config(c);
    }
    t.engine.inventory.set_recording(false);
}

/// CUPTI's callback: never unwinds into the driver.
unsafe extern "C" fn on_callback(_: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if OWN.with(Cell::get) || domain != DOMAIN_DRIVER_API || data.is_null() {
        return;
    }
    let _ = crate::fault::guard(std::panic::AssertUnwindSafe(|| {
        // SAFETY: CUPTI passes a `CUpti_CallbackData` for the driver domain.
        let d = unsafe { &*(data as *const CallbackData) };
        // A call's exit, or an entry whose previous call's exit never came: leave its window.
        if let Some(g) = ENTERED.with(|e| e.borrow_mut().take()) {
            g.exit();
        }
        if d.callback_site == SITE_ENTER {
            // SAFETY: the parameters of the launch call `cbid` names.
            unsafe { on_entry(cbid, d) };
        }
    }));
}

/// A launch call's entry.
///
/// # Safety
/// `d` is CUPTI's data for the entry of the launch call `cbid`.
unsafe fn on_entry(cbid: u32, d: &CallbackData) {
    let Some(t) = cuda_tool() else { return };
    if !ON.load(Ordering::Acquire) || !t.engine.replaying() || d.function_params.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let Some(l) = (unsafe { launch_of(t, cbid, d.function_params) }) else {
        return;
    };
    let context = d.context;
    let Some(device) = device_of(t, context) else {
        return;
    };
    let f = Handle(l.function());
    let name = t.engine.kernel_name(f.0 as u64, || {
        off_callback(t, context, || kernel_name(t, f.get())).filter(|n| !n.starts_with("kernel@"))
    });
    if !t.engine.wants(&name) {
        // Held until the call's exit: a replay on this device waits for this launch, and a
        // launch waits while a replay runs.
        let gate = t.engine.gate(device);
        gate.enter();
        ENTERED.with(|e| *e.borrow_mut() = Some(gate));
        return;
    }
    let job = Job {
        launch: l,
        context,
        app: (crate::record::current_pid(), crate::record::current_tid()),
    };
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("kreplay-replay".into())
            .stack_size(REPLAY_STACK)
            .spawn_scoped(s, || job.run(t, device, name));
        match spawned {
            Ok(h) => {
                let _ = h.join();
            }
            Err(e) => {
                decline(
                    t.engine.next_correlation(),
                    format!("no replay thread: {e}"),
                );
                t.engine.give_back();
            }
        }
    });
}

/// A function handle, handed to a kreplay thread.
#[derive(Clone, Copy)]
struct Handle(CUfunction);
// SAFETY: a driver handle, valid on any thread of its context.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}
impl Handle {
    fn get(self) -> CUfunction {
        self.0
    }
}

/// The device of `context`: cached, else asked on a kreplay thread.
fn device_of(t: &CudaTool, context: CUcontext) -> Option<u64> {
    let key = context as usize;
    if let Some(&d) = DEVICES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Some(d);
    }
    let d = off_callback(t, context, || t.driver.current_device())?;
    DEVICES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, d);
    Some(d)
}

/// Runs `f` on a kreplay thread with `context` current (driver calls do not belong inside a
/// CUPTI callback); `None` when no thread could start or the context could not be set.
fn off_callback<R: Send>(
    t: &CudaTool,
    context: CUcontext,
    f: impl FnOnce() -> R + Send,
) -> Option<R> {
    let ctx = context as usize;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("kreplay-replay".into())
            .spawn_scoped(s, move || {
                OWN.with(|o| o.set(true));
                let set = t.driver.ctx_set_current?;
                // SAFETY: the application's context, live during its launch call.
                (unsafe { set(ctx as CUcontext) } == SUCCESS).then(f)
            })
            .ok()?
            .join()
            .ok()
            .flatten()
    })
}

/// The launch of call `cbid` with parameters `p`, as kreplay's thread submits it again.
///
/// # Safety
/// `p` points to the parameters of the launch call `cbid`.
unsafe fn launch_of(t: &CudaTool, cbid: u32, p: *const c_void) -> Option<Launch> {
    let per_thread = matches!(
        cbid,
        callbacks::CBID_LAUNCH_KERNEL_PTSZ | callbacks::CBID_LAUNCH_KERNEL_EX_PTSZ
    );
    match cbid {
        callbacks::CBID_LAUNCH_KERNEL | callbacks::CBID_LAUNCH_KERNEL_PTSZ => {
            // SAFETY: the caller's contract.
            let p = unsafe { &*(p as *const LaunchKernelParams) };
            // The application's per-thread default stream is not kreplay's thread's: its
            // passes go to kreplay's own per-thread stream, and the device is drained around
            // them either way.
            let stream = if per_thread && p.stream.is_null() {
                STREAM_PER_THREAD as CUstream
            } else {
                p.stream
            };
            Some(Launch::Kernel {
                real: t.driver.launch_kernel,
                f: p.f,
                grid: p.grid,
                block: p.block,
                shm: p.shm,
                stream,
                params: p.params,
                extra: p.extra,
            })
        }
        callbacks::CBID_LAUNCH_KERNEL_EX | callbacks::CBID_LAUNCH_KERNEL_EX_PTSZ => {
            // SAFETY: the caller's contract.
            let p = unsafe { &*(p as *const LaunchKernelExParams) };
            // SAFETY: the application's configuration, valid for its call.
            let cfg = unsafe { p.config.as_ref() }?;
            if per_thread && cfg.h_stream.is_null() {
                // Its stream would be kreplay's thread's legacy one: not replayed.
                return None;
            }
            Some(Launch::Ex {
                real: t.driver.launch_kernel_ex?,
                cfg: p.config,
                f: p.f,
                params: p.params,
                extra: p.extra,
            })
        }
        _ => None,
    }
}

/// One replay, handed to kreplay's thread while the application's waits in the callback.
struct Job {
    launch: Launch,
    context: CUcontext,
    app: (u32, u32),
}

// SAFETY: the launch's pointers (the application's parameters) and the context stay valid
// while the application's thread waits for the job in its launch call's entry callback; the
// job runs on one thread at a time.
unsafe impl Sync for Job {}

impl Job {
    /// Replays the launch on this (kreplay's) thread and records its dispatch.
    fn run(&self, t: &CudaTool, device: u64, name: String) {
        OWN.with(|o| o.set(true));
        let corr = t.engine.next_correlation();
        let submit = now_ns();
        let mut marks = Marks::default();
        self.replay(t, device, corr, &mut marks);
        // On this kreplay thread, outside the callback.
        record_dispatch(&self.launch, self.app, device, name, corr, submit, &marks);
        t.engine.replay_recorded(&marks);
    }

    /// The replay proper, or its decline with the reason.
    fn replay(&self, t: &CudaTool, device: u64, corr: u64, marks: &mut Marks) {
        let declined = |why: String| {
            decline(corr, why);
            t.engine.give_back();
        };
        let set = t.driver.ctx_set_current.expect("checked at start");
        // SAFETY: the application's context, current on its own thread for this call.
        if unsafe { set(self.context) } != SUCCESS {
            return declined("cuCtxSetCurrent failed on kreplay's thread".into());
        }
        let (_, _, stream) = self.launch.geometry();
        if t.driver.capturing(stream) {
            // A captured launch only records a graph node (a synchronize would end the
            // capture): its graph's launch is not replayed either.
            return declined("the stream is capturing a CUDA graph".into());
        }
        if let Some(reason) = t.unrestorable() {
            return declined(reason);
        }
        let regions = match super::arguments::reachable(t, &self.launch) {
            Ok(r) => r,
            Err(why) => return declined(why),
        };
        let gate = t.engine.gate(device);
        let Some(window) = gate.close_window(DRAIN_LIMIT, &|_| false) else {
            return declined("the device did not drain".into());
        };
        let backend = CudaBackend::new(t);
        let sync_start = now_ns();
        let synced = backend.synchronize();
        own_window(corr, sync_start);
        if let Err(e) = synced {
            drop(window);
            return declined(format!("{e}"));
        }
        // The allocations the arguments reach, known to the engine for this replay only.
        let inv = &t.engine.inventory;
        let known: Vec<u64> = regions
            .iter()
            .filter(|(base, _)| !inv.read().contains_key(base))
            .map(|&(base, size)| {
                inv.record_alloc(base, size, device);
                base
            })
            .collect();
        let arena = t.arena(device);
        t.engine.replay_closed(
            &backend,
            &self.launch,
            device,
            corr,
            Some(&arena),
            marks,
            true,
        );
        for base in known {
            inv.record_free(base);
        }
        drop(window);
    }
}
