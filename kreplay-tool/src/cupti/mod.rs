//! The GPU timeline on CUDA: kreplay-tool as the driver's injection library
//! (`CUDA_INJECTION64_PATH`, set by `kreplay trace --gpu -- CMD`), recording every kernel, copy
//! and memset the GPU ran through CUPTI's activity API.
//!
//! The driver calls [`InitializeInjection`] inside `cuInit`, the point where NVIDIA's own CUPTI
//! injection samples start the activity API. With `KREPLAY_GPU_TIMELINE=1` (and no replay) the
//! tool loads CUPTI at run time ([`api`]), puts CUPTI's timestamps on the trace's clock
//! (`cuptiActivityRegisterTimestampCallback` with CLOCK_MONOTONIC; without it, an offset
//! measured from `cuptiGetTimestamp`), asks for system thread ids, and enables concurrent
//! kernel, memcpy, memset, and runtime and driver API records: the API records give each GPU
//! record its thread and submit time ([`activity`]); those of calls that launch no GPU work
//! are turned off ([`quiet`]); with `KREPLAY_CUPTI_LAUNCHES=1` those of launches also become
//! the trace's launch calls ([`launch_calls`]). CUPTI hands filled buffers to
//! [`buffer_complete`] on its own thread, which writes `Dispatch` and `GpuCopy` records through
//! the tool's recorder, each device they name described once before them (a `GpuDevice`: its
//! ordinal and the driver's `cuDeviceGetName`, read on a thread of the tool's own, never inside
//! a CUPTI callback: [`crate::cuda::devices`]); at exit the remaining buffers are flushed before
//! the tool's stream.
//!
//! A kreplay attached to the running process ([`crate::attach`]) turns the same records on with
//! [`start`] and off again with [`stop`] (each kind disabled, CUPTI's buffers flushed). Replay
//! in a running process subscribes to the driver's launch calls instead ([`callbacks`]).
//!
//! When CUPTI cannot be used (none found, too old, another subscriber, a failing call) the tool
//! says why once and records nothing more: the application and the API trace go on.

pub mod activity;
pub mod api;
pub mod callbacks;
pub mod launch_calls;
pub mod quiet;

use core::ffi::c_void;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use activity::{Activity, Joiner};
use api::{Cupti, CuptiError, FLUSH_FORCED, THREAD_ID_SYSTEM};
use kreplay_common::stream::{Record, queue_ids};

/// Size of each activity buffer CUPTI fills.
const BUFFER_BYTES: usize = 4 << 20;
/// How often the stream flusher writes when nothing else asks.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

struct State {
    cupti: Cupti,
    /// CUPTI's clock on the trace's when no timestamp callback could be registered.
    clock: Option<crate::hsa::timeline::SystemClock>,
    joiner: Mutex<Joiner>,
    pid: u32,
}

static STATE: OnceLock<State> = OnceLock::new();

/// The entry point the CUDA driver calls in `CUDA_INJECTION64_PATH`'s library, inside `cuInit`.
/// Returns 1 (the driver ignores failures of an injection library's setup).
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    let _ = crate::fault::guard(|| {
        crate::logging::init_logging();
        let config = match crate::engine::config::ReplayConfig::from_env() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("kreplay: configuration error: {e}; no GPU timeline");
                if launch_calls::wanted() {
                    eprintln!(
                        "kreplay: configuration error: {e}: no GPU timeline; {}",
                        launches_without_cupti()
                    );
                }
                return;
            }
        };
        if !config.gpu_timeline || config.passes > 1 {
            return;
        }
        if let Err(e) = start() {
            if launch_calls::wanted() {
                eprintln!(
                    "kreplay: CUPTI is unusable ({e}): no GPU timeline for this process; {}",
                    launches_without_cupti()
                );
            } else {
                eprintln!(
                    "kreplay: CUPTI is unusable ({e}): no GPU timeline for this process; its API calls are still traced"
                );
            }
        }
    });
    1
}

/// How long the process waits, inside `cuInit`, for `kreplay trace` to probe its launch calls
/// when CUPTI cannot record them (the CLI looks every 200 ms).
const PROBES_PATIENCE: Duration = Duration::from_secs(2);

/// Has `kreplay trace` probe this process's launch calls, which CUPTI cannot record for
/// `--cupti-launches`; says where the launch calls are.
fn launches_without_cupti() -> &'static str {
    if launch_calls::ask_for_probes(PROBES_PATIENCE) {
        "its API calls are still traced (its launch calls by the probes)"
    } else {
        "its kernel launch calls are not traced (--cupti-launches: the probes did not answer)"
    }
}

unsafe extern "C" fn monotonic() -> u64 {
    kreplay_common::stream::monotonic_ns()
}

/// The activity kinds kreplay enables, with their names for messages.
const KINDS: [(u32, &str); 5] = [
    (activity::KIND_CONCURRENT_KERNEL, "concurrent kernel"),
    (activity::KIND_MEMCPY, "memcpy"),
    (activity::KIND_MEMSET, "memset"),
    (activity::KIND_RUNTIME, "runtime API"),
    (activity::KIND_DRIVER, "driver API"),
];

/// Whether the activity kinds are enabled now.
static ON: Mutex<bool> = Mutex::new(false);
/// When [`start`] last enabled them (CLOCK_MONOTONIC ns), until the first buffer after it has
/// been looked at (0 then): its delay is logged at debug level.
static ENABLED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Loads CUPTI and enables the activity records (again, after [`stop`]), with the stream
/// flusher and the exit flush. Returns at once when they are on already.
pub fn start() -> Result<(), CuptiError> {
    let mut on = ON.lock().unwrap_or_else(|p| p.into_inner());
    if *on {
        return Ok(());
    }
    let s = init()?;
    for (i, (kind, name)) in KINDS.iter().enumerate() {
        // SAFETY: a plain CUPTI call.
        let r = s
            .cupti
            .check("cuptiActivityEnable", unsafe { (s.cupti.enable)(*kind) });
        if let Err(e) = r {
            for (k, _) in &KINDS[..i] {
                // SAFETY: as above.
                unsafe { (s.cupti.disable)(*k) };
            }
            return Err(CuptiError::Call {
                call: "cuptiActivityEnable",
                reason: format!("{name}: {e}"),
            });
        }
    }
    let silenced = quiet::silence(&s.cupti);
    *on = true;
    ENABLED_AT.store(
        kreplay_common::stream::monotonic_ns(),
        std::sync::atomic::Ordering::Relaxed,
    );
    tracing::debug!(path = %s.cupti.path.display(), silenced, "CUPTI activity on");
    #[cfg(target_arch = "x86_64")]
    crate::cuda::devices::read_names_in_background();
    crate::record::global();
    crate::record::resume_global_flusher();
    if let Err(e) = crate::record::start_global_flusher(FLUSH_EVERY) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    Ok(())
}

/// Disables the activity records [`start`] enabled and hands every record CUPTI still holds,
/// and every GPU record still waiting for its call, to the recorder. Does nothing when off.
pub fn stop() {
    let mut on = ON.lock().unwrap_or_else(|p| p.into_inner());
    let Some(s) = STATE.get() else { return };
    if !*on {
        return;
    }
    for (kind, name) in KINDS {
        // SAFETY: a plain CUPTI call.
        let r = unsafe { (s.cupti.disable)(kind) };
        if let Err(e) = s.cupti.check("cuptiActivityDisable", r) {
            tracing::warn!("kreplay: disabling CUPTI {name} records: {e}");
        }
    }
    quiet::restore(&s.cupti);
    // SAFETY: a plain CUPTI call; buffers come back through buffer_complete.
    unsafe { (s.cupti.flush_all)(FLUSH_FORCED) };
    record_all(finish_joins(s));
    *on = false;
}

/// Every GPU record still waiting for its call; logs how many went out without theirs (but not
/// in the exit flush, where a log event would panic on the subscriber's destroyed
/// thread-locals and abandon the flush).
fn finish_joins(s: &State) -> Vec<Record> {
    let mut joiner = s.joiner.lock().unwrap_or_else(|p| p.into_inner());
    let rest = joiner.finish();
    if crate::record::exiting() {
        return rest;
    }
    tracing::debug!(
        unlinked = joiner.unlinked(),
        "GPU records whose API call CUPTI did not report in time, so far"
    );
    rest
}

/// The CUPTI this process uses, loaded (and its activity buffer callbacks registered) once.
pub fn loaded() -> Result<&'static Cupti, CuptiError> {
    init().map(|s| &s.cupti)
}

/// CUPTI loaded and its callbacks registered, once per process.
fn init() -> Result<&'static State, CuptiError> {
    if let Some(s) = STATE.get() {
        return Ok(s);
    }
    let cupti = Cupti::load()?;
    // SAFETY: plain CUPTI calls with valid arguments (api.rs).
    let (clock, registered) = unsafe {
        cupti.check(
            "cuptiSetThreadIdType",
            (cupti.set_thread_id_type)(THREAD_ID_SYSTEM),
        )?;
        let registered = cupti.register_timestamp.is_some_and(|f| f(monotonic) == 0);
        let clock = if registered {
            None
        } else {
            Some(measure_clock(&cupti)?)
        };
        cupti.check(
            "cuptiActivityRegisterCallbacks",
            (cupti.register_callbacks)(buffer_requested, buffer_complete),
        )?;
        (clock, registered)
    };
    tracing::debug!(path = %cupti.path.display(), registered, "CUPTI loaded");
    let pid = crate::record::current_pid();
    let joiner = if launch_calls::wanted() {
        if cupti.callback_name.is_none() {
            return Err(CuptiError::Symbol {
                path: cupti.path.display().to_string(),
                symbol: "cuptiGetCallbackName",
            });
        }
        let names = cupti.callback_name;
        Joiner::with_launch_calls(launch_calls::LaunchCalls::new(
            pid,
            Box::new(move |driver, cbid| api::name_of(names, driver, cbid)),
        ))
    } else {
        Joiner::default()
    };
    let _ = STATE.set(State {
        cupti,
        clock,
        joiner: Mutex::new(joiner),
        pid,
    });
    // Registered after the tool's own exit flush, so it runs first: CUPTI's last buffers reach
    // the recorder before the stream is written.
    crate::record::install_exit_flush();
    // SAFETY: `exit_flush` is an `extern "C" fn()` that never unwinds.
    unsafe { libc::atexit(exit_flush) };
    Ok(STATE.get().expect("just set"))
}

/// CUPTI's clock on CLOCK_MONOTONIC, from brackets of `cuptiGetTimestamp` (ns).
fn measure_clock(c: &Cupti) -> Result<crate::hsa::timeline::SystemClock, CuptiError> {
    let mut samples = Vec::with_capacity(16);
    for _ in 0..16 {
        let before = kreplay_common::stream::monotonic_ns();
        let mut t = 0u64;
        // SAFETY: writes one u64.
        c.check("cuptiGetTimestamp", unsafe { (c.get_timestamp)(&mut t) })?;
        samples.push((before, t, kreplay_common::stream::monotonic_ns()));
    }
    crate::hsa::timeline::SystemClock::from_samples(1_000_000_000, &samples).ok_or(
        CuptiError::Call {
            call: "cuptiGetTimestamp",
            reason: "no usable sample".into(),
        },
    )
}

extern "C" fn exit_flush() {
    // From here on nothing logs through `tracing` (record::exiting).
    crate::record::enter_teardown();
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = STATE.get() {
            // SAFETY: a plain CUPTI call; buffers come back through buffer_complete.
            unsafe { (s.cupti.flush_all)(FLUSH_FORCED) };
            record_all(finish_joins(s));
        }
    });
}

unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let layout = std::alloc::Layout::from_size_align(BUFFER_BYTES, 8).expect("valid layout");
    // SAFETY: a non-zero-sized layout.
    let p = unsafe { std::alloc::alloc(layout) };
    // SAFETY: CUPTI passes valid out-pointers; a null buffer tells it to drop records.
    unsafe {
        *buf = p;
        *size = if p.is_null() { 0 } else { BUFFER_BYTES };
        *max = 0;
    }
}

unsafe extern "C" fn buffer_complete(
    ctx: *mut c_void,
    stream: u32,
    buf: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = crate::fault::guard(std::panic::AssertUnwindSafe(|| {
        let Some(s) = STATE.get() else { return };
        let mut acts = Vec::new();
        let mut rec: *mut u8 = core::ptr::null_mut();
        // SAFETY: `buf` holds `valid` bytes of records CUPTI wrote; each record it returns is
        // read before the buffer is freed.
        while !buf.is_null() && unsafe { (s.cupti.next_record)(buf, valid, &mut rec) } == 0 {
            // SAFETY: as above.
            if let Some(a) = unsafe { activity::read(rec, s.pid) } {
                acts.push(on_clock(s, a));
            }
        }
        log_first_buffer(&acts);
        let mut dropped = 0usize;
        // SAFETY: plain CUPTI call with CUPTI's own context and stream.
        if unsafe { (s.cupti.dropped)(ctx, stream, &mut dropped) } == 0 && dropped > 0 {
            crate::record::global().record(
                kreplay_common::stream::Drops {
                    ts_ns: kreplay_common::stream::monotonic_ns(),
                    source: "tool/cupti".into(),
                    count: dropped as u64,
                }
                .into(),
            );
        }
        let out = s
            .joiner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .buffer(acts, kreplay_common::stream::monotonic_ns());
        record_all(out);
    }));
    if !buf.is_null() {
        let layout = std::alloc::Layout::from_size_align(BUFFER_BYTES, 8).expect("valid layout");
        // SAFETY: every buffer CUPTI hands back is one buffer_requested allocated.
        unsafe { std::alloc::dealloc(buf, layout) };
    }
}

/// Records the GPU records `out`, each device they name described first (once per process:
/// its ordinal and the driver's name for it as the names thread read it, its queues CUPTI's
/// stream ids).
fn record_all(out: Vec<Record>) {
    let mut last = None;
    for r in &out {
        let device = match r {
            Record::Dispatch(d) => d.agent,
            Record::GpuCopy(c) => c.device,
            _ => continue,
        };
        if last != Some(device) {
            #[cfg(target_arch = "x86_64")]
            crate::cuda::devices::announce_from_names(device, queue_ids::STREAM_ID);
            last = Some(device);
        }
    }
    for r in out {
        crate::record::global().record(r);
    }
}

/// Logs (debug) how long after [`start`] the first buffer came and when its earliest GPU work
/// began: the delay between turning the timeline on and the first GPU record.
fn log_first_buffer(acts: &[Activity]) {
    let enabled = ENABLED_AT.swap(0, std::sync::atomic::Ordering::Relaxed);
    if enabled == 0 || crate::record::exiting() {
        return;
    }
    let ms = |t: u64| t.saturating_sub(enabled) as f64 / 1e6;
    let earliest = acts
        .iter()
        .filter_map(|a| match a {
            Activity::Kernel(d) => Some(d.start_ns),
            Activity::Copy(c) => Some(c.start_ns),
            Activity::Api(_) => None,
        })
        .min();
    tracing::debug!(
        after_ms = ms(kreplay_common::stream::monotonic_ns()),
        records = acts.len(),
        earliest_gpu_start_ms = earliest.map(ms),
        "first CUPTI buffer since the activity was turned on"
    );
}

/// `a` with CUPTI's times mapped onto the trace's clock (a no-op with the timestamp callback).
fn on_clock(s: &State, a: Activity) -> Activity {
    let Some(c) = &s.clock else { return a };
    let m = |t: u64| c.to_monotonic(t);
    match a {
        Activity::Api(mut r) => {
            (r.start, r.end) = (m(r.start), m(r.end));
            Activity::Api(r)
        }
        Activity::Kernel(mut d) => {
            (d.submit_ns, d.start_ns, d.end_ns) = (m(d.submit_ns), m(d.start_ns), m(d.end_ns));
            Activity::Kernel(d)
        }
        Activity::Copy(mut x) => {
            (x.submit_ns, x.start_ns, x.end_ns) = (m(x.submit_ns), m(x.start_ns), m(x.end_ns));
            Activity::Copy(x)
        }
    }
}
