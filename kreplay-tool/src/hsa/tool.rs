//! The `HSA_TOOLS_LIB` entry points (`OnLoad`, `OnUnload`), which create the tool's state
//! (`state.rs`).
//!
//! `OnLoad` validates the `KREPLAY_*` configuration, saves the runtime's original entries,
//! installs the wrappers once per process (a second library instance finds the wrappers of the
//! first in the table and installs nothing), starts the stream flusher and the exit flush.
//! Every export catches panics: nothing unwinds into the runtime.

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::state::{Tool, tool};
use crate::engine::arena::SnapshotArena;
use crate::engine::config::ReplayConfig;
use crate::engine::state::EngineState;
use crate::hsa::backend::HsaBackend;
use crate::hsa::ffi::HsaApiTable;

/// Exported marker: a library instance whose wrappers are in the table has this symbol, so a
/// second instance (another copy of the library) knows not to wrap them again.
#[unsafe(no_mangle)]
pub static kreplay_tool_wrappers_v1: u8 = 1;

/// `OnLoad`: called by the HSA runtime for each library in `HSA_TOOLS_LIB`.
///
/// # Safety
/// `table` must be the runtime's live API table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OnLoad(
    table: *mut HsaApiTable,
    runtime_version: u64,
    failed_tool_count: u64,
    failed_tool_names: *const *const c_char,
) -> bool {
    let _ = (failed_tool_count, failed_tool_names);
    std::panic::catch_unwind(|| {
        crate::fault::point("hsa.on_load");
        crate::logging::init_logging();
        // SAFETY: the runtime passes its live table (caller's contract).
        unsafe { on_load(table, runtime_version) }
    })
    .unwrap_or(false)
}

/// `OnUnload`: flushes the tool stream and stops recording allocations. An instance that
/// stayed idle (a second copy of the library) has no stream and touches none: its flush would
/// replace the active instance's file, which has the same name.
#[unsafe(no_mangle)]
pub extern "C" fn OnUnload() {
    let _ = std::panic::catch_unwind(|| {
        crate::fault::point("hsa.on_unload");
        let Some(t) = tool() else { return };
        // Often called from the application's exit path, where logging through `tracing` can
        // no longer work: the flushes from here on are quiet.
        crate::record::enter_teardown();
        // A completion the application already saw may still be recording its dispatch.
        if !crate::hsa::hooks::wait_recordings(Duration::from_millis(100)) {
            eprintln!("kreplay: a GPU record was still being made at unload; it may be missing");
        }
        crate::warn_once::print_repeated_once();
        t.engine.inventory.shut_down();
        t.arena.clear(&t.backend);
        if let Err(e) = crate::record::flush_global() {
            eprintln!("kreplay: flushing the tool stream at unload failed: {e}");
        }
    });
}

/// Whether the table's pool-allocate entry already belongs to a kreplay library instance.
///
/// # Safety
/// `f` is any code address (or null).
unsafe fn owned_by_kreplay(f: *const c_void) -> bool {
    if f.is_null() {
        return false;
    }
    // SAFETY: Dl_info is plain data (pointers and integers), for which zero is valid.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's maps; info is a valid out-struct.
    if unsafe { libc::dladdr(f, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader; RTLD_NOLOAD opens nothing new.
    let h = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return false;
    }
    // SAFETY: h is a live handle from dlopen; the name is NUL-terminated.
    let found = !unsafe { libc::dlsym(h, c"kreplay_tool_wrappers_v1".as_ptr()) }.is_null();
    // SAFETY: balances the dlopen above.
    unsafe { libc::dlclose(h) };
    found
}

unsafe fn on_load(table: *mut HsaApiTable, runtime_version: u64) -> bool {
    if table.is_null() {
        return false;
    }
    let config = match ReplayConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("kreplay: configuration error: {e}; replay disabled");
            return true; // stay loaded, touch nothing: the application runs normally
        }
    };
    if tool().is_some() {
        tracing::warn!(
            "kreplay: OnLoad called again in this library instance; wrappers already installed"
        );
        return true;
    }
    // SAFETY: table is the runtime's live table (caller's contract).
    let Some(next) = (unsafe { crate::hsa::install::save_next(table) }) else {
        tracing::error!(
            "kreplay: the runtime's API tables are too small or unknown; replay disabled"
        );
        return true;
    };
    // SAFETY: next.amd holds the current entry; reading a function address is harmless.
    let current = crate::amd_next!(next, hsa_amd_memory_pool_allocate_fn)
        .map_or(core::ptr::null(), |f| f as *const c_void);
    // SAFETY: `current` is a code address from the runtime's table, or null.
    if unsafe { owned_by_kreplay(current) } {
        tracing::warn!(
            "kreplay: another kreplay instance already wrapped this runtime; this one stays idle"
        );
        return true;
    }
    let attach_mode = super::attach::requested(&config);
    let timeline = std::sync::OnceLock::new();
    if config.gpu_timeline
        && let Some(tl) = crate::hsa::timeline::Timeline::start(&next)
    {
        let _ = timeline.set(tl);
    }
    let t = Tool {
        backend: HsaBackend::new(next),
        engine: EngineState::new(config),
        arena: SnapshotArena::new(),
        vmem: Mutex::new(HashMap::new()),
        observing: AtomicBool::new(timeline.get().is_some()),
        timeline,
        attach_mode,
        queues: Mutex::new(Vec::new()),
    };
    if !super::state::install(t) {
        return true;
    }
    let Some(t) = tool() else { return true };
    // Also while waiting for a kreplay: a replay after the attach needs every live buffer.
    t.engine.inventory.set_recording(true);
    // SAFETY: table is live; the wrappers read TOOL, which is now set.
    let installed = unsafe { crate::hsa::install::install(table) };
    tracing::debug!(
        runtime_version,
        installed,
        passes = t.engine.config().passes,
        gpu_timeline = t.timeline().is_some(),
        attach_mode,
        "kreplay tool loaded"
    );
    crate::record::global();
    if attach_mode {
        // No stream and no flusher until a kreplay attaches.
        crate::record::install_exit_flush();
        return true;
    }
    if let Err(e) = crate::record::start_global_flusher(Duration::from_millis(200)) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    crate::record::install_exit_flush();
    true
}
