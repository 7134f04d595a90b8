//! The HSA side's process-wide state, created once in `OnLoad` (`tool.rs`) and read by every
//! wrapper.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::backend::HsaBackend;
use crate::engine::arena::SnapshotArena;
use crate::engine::state::EngineState;

/// Everything the wrappers share, created once in `OnLoad`.
pub struct Tool {
    /// The engine's HSA backend (original entries).
    pub backend: HsaBackend,
    /// The engine's state: configuration, inventory, replay windows, kernel names.
    pub engine: EngineState,
    /// Snapshot buffers kept between replays (the last footprint, reused when it fits).
    pub arena: SnapshotArena,
    /// Live vmem mappings that are not in the inventory (not coarse-grained GPU memory), address
    /// -> size: replay is declined while one is live.
    pub vmem: Mutex<HashMap<u64, usize>>,
    /// The GPU timeline, when `KREPLAY_GPU_TIMELINE` asked for it and the runtime allows it.
    pub timeline: Option<super::timeline::Timeline>,
}

static TOOL: OnceLock<Tool> = OnceLock::new();

/// The tool state, once `OnLoad` installed it.
pub fn tool() -> Option<&'static Tool> {
    TOOL.get()
}

/// Makes `t` the process's tool state; false when one is already set.
pub(super) fn install(t: Tool) -> bool {
    TOOL.set(t).is_ok()
}
