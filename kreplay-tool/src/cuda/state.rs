//! The CUDA side's process-wide state, created on the first intercepted call: the real driver,
//! the replay configuration, the engine's inventory and gates, loaded modules with their
//! variable names, and live memory kreplay cannot snapshot (async-pool and managed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::driver::Driver;
use super::elf::{GlobalSym, ImageError};
use crate::engine::arena::SnapshotArena;
use crate::engine::backend::ModuleVar;
use crate::engine::config::ReplayConfig;
use crate::engine::state::EngineState;

/// What kind of handle a loaded module is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleKind {
    /// `CUmodule`.
    Module,
    /// `CUlibrary`.
    Library,
}

/// A loaded module and the variables its image names.
#[derive(Clone, Debug)]
pub struct LoadedModule {
    /// The handle.
    pub handle: usize,
    /// Its kind.
    pub kind: ModuleKind,
    /// Its variables, or why they are unknown.
    pub globals: Result<Vec<GlobalSym>, ImageError>,
    /// Its variables' addresses and sizes once every one resolved: they stay put while the
    /// module is loaded, and resolving hundreds of names per snapshot cost more than copying
    /// them.
    pub resolved: Arc<OnceLock<Vec<ModuleVar>>>,
}

/// Everything the CUDA wrappers share.
pub struct CudaTool {
    /// The real driver.
    pub driver: Driver,
    /// The engine's state: configuration, inventory (tracked `cuMemAlloc` allocations),
    /// per-device replay windows, kernel names by function handle.
    pub engine: EngineState,
    /// Per-device snapshot buffers kept between replays (given back when the application runs
    /// out of device memory: `room.rs`).
    pub arenas: Mutex<HashMap<u64, Arc<SnapshotArena>>>,
    /// Loaded modules.
    pub modules: Mutex<Vec<LoadedModule>>,
    /// Live memory kreplay does not snapshot (address -> (size, allocator)).
    pub untracked: Mutex<HashMap<u64, (usize, &'static str)>>,
    /// kreplay's own kernels, per context.
    pub kernels: super::kernel_buffers::KernelCache,
}

static CUDA: OnceLock<Option<CudaTool>> = OnceLock::new();

/// The CUDA tool state; created on first use, `None` when libcuda or the configuration is
/// unusable (the wrappers then only pass calls through).
pub fn cuda_tool() -> Option<&'static CudaTool> {
    CUDA.get_or_init(|| std::panic::catch_unwind(init).ok().flatten())
        .as_ref()
}

fn init() -> Option<CudaTool> {
    crate::logging::init_logging();
    let config = match ReplayConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("kreplay: configuration error: {e}; replay disabled");
            return None;
        }
    };
    let driver = match Driver::load() {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("kreplay: {e}; CUDA replay disabled");
            return None;
        }
    };
    let t = CudaTool {
        driver,
        engine: EngineState::new(config),
        arenas: Mutex::new(HashMap::new()),
        modules: Mutex::new(Vec::new()),
        untracked: Mutex::new(HashMap::new()),
        kernels: Default::default(),
    };
    t.engine.inventory.set_recording(t.engine.replaying());
    crate::record::global();
    if let Err(e) = crate::record::start_global_flusher(Duration::from_millis(200)) {
        tracing::warn!("kreplay: cannot start the stream flusher: {e}");
    }
    crate::record::install_exit_flush();
    tracing::debug!(passes = t.engine.config().passes, "kreplay CUDA tool ready");
    Some(t)
}

impl CudaTool {
    /// The device's kept snapshot buffers.
    pub fn arena(&self, device: u64) -> Arc<SnapshotArena> {
        self.arenas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(device)
            .or_insert_with(|| Arc::new(SnapshotArena::new()))
            .clone()
    }

    /// Why no launch can be replayed right now, if something live cannot be restored.
    pub fn unrestorable(&self) -> Option<String> {
        let u = self.untracked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((addr, (size, how))) = u.iter().next() {
            return Some(format!(
                "{} live allocation(s) kreplay does not snapshot (e.g. {size} bytes at {addr:#x} from {how})",
                u.len()
            ));
        }
        drop(u);
        let m = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().find_map(|lm| {
            lm.globals.as_ref().err().map(|e| {
                format!(
                    "the __device__ variables of a loaded module are unknown ({e}); they could not be restored"
                )
            })
        })
    }
}
