//! The HSA side's process-wide state, created once in `OnLoad` (`tool.rs`) and read by every
//! wrapper.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The GPU timeline, once `KREPLAY_GPU_TIMELINE` or an attached kreplay asked for it and
    /// the runtime allows it; in effect while [`Tool::observing`].
    pub timeline: OnceLock<super::timeline::Timeline>,
    /// Whether the timeline is recorded now (always, once set, without [`Tool::attach_mode`]).
    pub observing: AtomicBool,
    /// Started with `KREPLAY_ATTACH=1`: everything passes through untouched until a kreplay
    /// attaches ([`super::attach`]).
    pub attach_mode: bool,
    /// Every queue the tool intercepts (addresses), for profiling turned on and off at attach.
    pub queues: Mutex<Vec<u64>>,
}

impl Tool {
    /// The GPU timeline, while it is recorded.
    pub fn timeline(&self) -> Option<&super::timeline::Timeline> {
        if self.observing.load(Ordering::Acquire) {
            self.timeline.get()
        } else {
            None
        }
    }

    /// True while an attach-mode tool waits for a kreplay: queues and copies pass through.
    pub fn passing_through(&self) -> bool {
        self.attach_mode && !self.observing.load(Ordering::Acquire)
    }
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
