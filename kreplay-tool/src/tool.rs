//! The `HSA_TOOLS_LIB` entry points and the tool's process-wide state.
//!
//! `OnLoad` validates the `KREPLAY_*` configuration, saves the runtime's original entries,
//! installs the wrappers once per process (a second library instance finds the wrappers of the
//! first in the table and installs nothing), starts the stream flusher and the exit flush.
//! Every export catches panics: nothing unwinds into the runtime.

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::engine::arena::SnapshotArena;
use crate::engine::config::ReplayConfig;
use crate::engine::gate::Gate;
use crate::engine::inventory::Inventory;
use crate::hsa::backend::HsaBackend;
use crate::hsa::ffi::HsaApiTable;

/// Everything the wrappers share, created once in `OnLoad`.
pub struct Tool {
    /// The engine's HSA backend (original entries).
    pub backend: HsaBackend,
    /// Replay settings.
    pub config: ReplayConfig,
    /// Tracked allocations.
    pub inventory: Inventory,
    /// Snapshot buffers kept between replays (the last footprint, reused when it fits).
    pub arena: SnapshotArena,
    /// Per-agent replay windows.
    pub gates: Mutex<HashMap<u64, Arc<Gate>>>,
    /// Live vmem mappings that are not in the inventory (not coarse-grained GPU memory), address
    /// -> size: replay is declined while one is live.
    pub vmem: Mutex<HashMap<u64, usize>>,
    /// Kernel names by kernel object.
    pub names: Mutex<HashMap<u64, String>>,
    /// Next correlation id.
    pub correlation: AtomicU64,
    /// Dispatches replayed so far.
    pub replayed: AtomicU64,
    /// The graph-launch warning was given.
    pub graph_warned: AtomicBool,
}

static TOOL: OnceLock<Tool> = OnceLock::new();

/// The tool state, once `OnLoad` installed it.
pub fn tool() -> Option<&'static Tool> {
    TOOL.get()
}

impl Tool {
    /// The gate of `agent`.
    pub fn gate(&self, agent: u64) -> Arc<Gate> {
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(agent)
            .or_default()
            .clone()
    }
}

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
        init_logging();
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
        crate::warn_once::print_repeated_once();
        t.inventory.shut_down();
        t.arena.clear(&t.backend);
        if let Err(e) = crate::record::flush_global() {
            eprintln!("kreplay: flushing the tool stream at unload failed: {e}");
        }
    });
}

/// Installs the `KREPLAY_LOG`-filtered stderr logger (once per process), coloured only when
/// stderr is a terminal and `NO_COLOR` is unset, each warning printed once per cause
/// ([`crate::warn_once`]).
pub(crate) fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let filter = EnvFilter::try_from_env(kreplay_common::replay_config::LOG)
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(kreplay_common::color::stderr_wants_color())
        .with_writer(std::io::stderr)
        .with_filter(crate::warn_once::OncePerCause);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init();
}

/// Whether the table's pool-allocate entry already belongs to a kreplay library instance.
///
/// # Safety
/// `f` is any code address (or null).
unsafe fn owned_by_kreplay(f: *const c_void) -> bool {
    if f.is_null() {
        return false;
    }
    // SAFETY: dladdr only reads the loader's maps; info is a valid out-struct.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
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
    if TOOL.get().is_some() {
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
    if unsafe { owned_by_kreplay(current) } {
        tracing::warn!(
            "kreplay: another kreplay instance already wrapped this runtime; this one stays idle"
        );
        return true;
    }
    let t = Tool {
        backend: HsaBackend::new(next),
        config,
        inventory: Inventory::new(),
        arena: SnapshotArena::new(),
        gates: Mutex::new(HashMap::new()),
        vmem: Mutex::new(HashMap::new()),
        names: Mutex::new(HashMap::new()),
        correlation: AtomicU64::new(1),
        replayed: AtomicU64::new(0),
        graph_warned: AtomicBool::new(false),
    };
    if TOOL.set(t).is_err() {
        return true;
    }
    let Some(t) = tool() else { return true };
    t.inventory.set_recording(true);
    // SAFETY: table is live; the wrappers read TOOL, which is now set.
    let installed = unsafe { crate::hsa::install::install(table) };
    tracing::debug!(
        runtime_version,
        installed,
        passes = t.config.passes,
        "kreplay tool loaded"
    );
    crate::record::global();
    if let Err(e) = crate::record::start_global_flusher(Duration::from_millis(200)) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    crate::record::install_exit_flush();
    true
}
