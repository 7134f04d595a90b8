//! kreplay-tool waiting in an HSA process for a `kreplay -p PID` (`docs/attach.md`). ROCR reads
//! `HSA_TOOLS_LIB` only inside `hsa_init`, and only a library loaded then gets the API table
//! and can make queues intercept queues; a library loaded later gets neither. So a process that
//! is to be attached to later is started with the tool in `HSA_TOOLS_LIB` and
//! `KREPLAY_ATTACH=1`: the tool wraps the table and intercepts every queue as usual, but passes
//! packets and copies straight through and records nothing, until a kreplay connects over the
//! control channel ([`crate::attach`]). Then [`start`] turns the GPU timeline on (profiling on
//! every live queue and on copies, dispatches given kreplay's completion signals), and replay
//! when the session asks for it (the engine takes the session's settings; allocations have
//! been recorded from the start, so a snapshot knows every live buffer), and [`stop`] turns
//! both off again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::ffi::hsa_queue_t;
use super::state::{Tool, tool};
use super::timeline::Timeline;
use crate::amd_next;
use crate::engine::config::ReplayConfig;
use kreplay_common::replay_config::ReplaySettings;

/// Whether `KREPLAY_ATTACH=1` asks for attach mode (ignored, with a warning, when the
/// environment also asks for a timeline or replay now: kreplay started this process).
pub fn requested(config: &ReplayConfig) -> bool {
    let asked = std::env::var(kreplay_common::replay_config::ATTACH).is_ok_and(|v| v.trim() == "1");
    if asked && (config.gpu_timeline || config.passes > 1) {
        tracing::warn!(
            "kreplay: {} ignored: this process runs under kreplay already",
            kreplay_common::replay_config::ATTACH
        );
        return false;
    }
    asked
}

/// The tool in attach mode, or why this process cannot be attached to.
fn attachable() -> Result<&'static Tool, String> {
    let t = tool().ok_or("the HSA runtime did not load kreplay-tool (no OnLoad)")?;
    if !t.attach_mode {
        return Err(format!(
            "kreplay-tool runs here under kreplay already (not started with {}=1)",
            kreplay_common::replay_config::ATTACH
        ));
    }
    Ok(t)
}

/// True when this process is an HSA process with the tool loaded by the runtime.
pub fn loaded_by_hsa() -> bool {
    tool().is_some()
}

/// Whether an attached replay session's `--max-dispatches` replays are all written.
pub fn limit_reached() -> bool {
    attachable().is_ok_and(|t| t.engine.limit_reached())
}

/// Turns profiling on or off on every live queue, and on async copies.
fn profiling(t: &Tool, on: bool) {
    let next = t.backend.next();
    if let Some(enable) = amd_next!(next, hsa_amd_profiling_set_profiler_enabled_fn) {
        for &q in t.queues.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            // SAFETY: q is a live queue: queue_destroy removes it from the list first.
            unsafe { enable(q as *mut hsa_queue_t, i32::from(on)) };
        }
    }
    if let Some(enable) = amd_next!(next, hsa_amd_profiling_async_copy_enable_fn) {
        // SAFETY: a plain runtime call with a bool argument.
        unsafe { enable(on) };
    }
}

/// Turns the GPU timeline on, and replay when `settings` ask for more than one pass.
pub fn start(settings: &ReplaySettings) -> Result<(), String> {
    let t = attachable()?;
    if settings.passes.is_some_and(|p| p > 1) {
        let config = ReplayConfig::from_settings(settings).map_err(|e| e.to_string())?;
        t.engine.set_config(config);
    }
    if t.timeline.get().is_none() {
        let tl = Timeline::start(t.backend.next())
            .ok_or("the HSA runtime lacks what the GPU timeline needs (profiling, timestamps)")?;
        let _ = t.timeline.set(tl);
    }
    profiling(t, true);
    t.observing.store(true, Ordering::Release);
    crate::record::resume_global_flusher();
    if let Err(e) = crate::record::start_global_flusher(Duration::from_millis(200)) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    Ok(())
}

/// Turns replay and the GPU timeline off: packets and copies pass through again, and the
/// dispatches in flight finish recording first (up to 1 s).
pub fn stop() {
    let Ok(t) = attachable() else { return };
    if let Ok(idle) = ReplayConfig::from_settings(&ReplaySettings::default()) {
        t.engine.set_config(idle);
    }
    if !t.observing.swap(false, Ordering::AcqRel) {
        return;
    }
    if !super::hooks::wait_recordings(Duration::from_secs(1)) {
        tracing::warn!("kreplay: a GPU record was still being made at detach; it may be missing");
    }
    profiling(t, false);
}
