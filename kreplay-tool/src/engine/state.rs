//! What a runtime binding (HSA, CUDA) keeps for the whole process on the engine's side: the
//! replay configuration, the inventory of device allocations, each device's replay window,
//! kernel names, correlation ids and the count of replayed dispatches; and the one replay
//! sequence both bindings run once a device's window is closed ([`EngineState::replay_closed`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kreplay_common::stream::Record;

use super::arena::SnapshotArena;
use super::backend::Backend;
use super::config::ReplayConfig;
use super::gate::Gate;
use super::inventory::Inventory;
use super::replay::{Outcome, Request, decline, replay};

/// The engine's process-wide state, one per runtime binding.
pub struct EngineState {
    /// Replay settings (replaced by a session of `kreplay replay -p PID`, [`Self::set_config`]).
    config: RwLock<Arc<ReplayConfig>>,
    /// Tracked device allocations.
    pub inventory: Inventory,
    /// Per-device (HSA: per-agent) replay windows.
    gates: Mutex<HashMap<u64, Arc<Gate>>>,
    /// Kernel names by the runtime's kernel handle.
    names: Mutex<HashMap<u64, String>>,
    /// Next correlation id.
    correlation: AtomicU64,
    /// Dispatches replayed so far.
    replayed: AtomicU64,
    /// Replays whose records are written, under the current settings.
    recorded: AtomicU64,
    /// The warning that graph launches are not replayed was given.
    pub graph_warned: AtomicBool,
}

/// How a dispatch the engine was asked to replay ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ran {
    /// Replayed: the application's memory holds the first pass's result.
    Replayed,
    /// Declined before any pass: the caller runs the dispatch once, still inside the window
    /// (the memory is as the application left it).
    Declined,
    /// A pass or restore failed and the snapshot was put back: the caller runs the dispatch
    /// once, still inside the window, or returns the failed launch's own status.
    Failed,
}

impl EngineState {
    /// A fresh state for `config`.
    pub fn new(config: ReplayConfig) -> Self {
        Self {
            config: RwLock::new(Arc::new(config)),
            inventory: Inventory::new(),
            gates: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            correlation: AtomicU64::new(1),
            replayed: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            graph_warned: AtomicBool::new(false),
        }
    }

    /// The replay window of `device`.
    pub fn gate(&self, device: u64) -> Arc<Gate> {
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(device)
            .or_default()
            .clone()
    }

    /// Forgets every device's replay window: launches from now on use new ones. For the end of a
    /// session whose callbacks stop mid-call (a launch that entered a window then never leaves
    /// it); a replay still running keeps the window it closed.
    pub fn reset_gates(&self) {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// A new correlation id (one per dispatch the tool records).
    pub fn next_correlation(&self) -> u64 {
        self.correlation.fetch_add(1, Ordering::Relaxed)
    }

    /// The replay settings in effect.
    pub fn config(&self) -> Arc<ReplayConfig> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `config` in effect for the dispatches from now on, with its own
    /// `--max-dispatches` count (a replay already running keeps the settings it began with).
    pub fn set_config(&self, config: ReplayConfig) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
        self.replayed.store(0, Ordering::Relaxed);
        self.recorded.store(0, Ordering::Relaxed);
    }

    /// Whether replay is on with a `--max-dispatches` limit and that many replays are written.
    pub fn limit_reached(&self) -> bool {
        let config = self.config();
        config.passes > 1
            && config
                .max_dispatches
                .is_some_and(|m| self.recorded.load(Ordering::Relaxed) >= m)
    }

    /// Whether replay is on (more than one pass).
    pub fn replaying(&self) -> bool {
        self.config().passes > 1
    }

    /// Whether a dispatch of `kernel` is to be replayed: replay is on, `--kernel` selects it
    /// and one of `--max-dispatches`' slots is free, which it then takes (in one atomic step,
    /// so dispatches of several threads never take more than there are). A dispatch declined
    /// before its window closes gives its slot back ([`Self::give_back`]).
    pub fn wants(&self, kernel: &str) -> bool {
        let config = self.config();
        if config.passes <= 1 || !config.selects(kernel) {
            return false;
        }
        let take = |n: u64| match config.max_dispatches {
            Some(m) if n >= m => None,
            _ => Some(n + 1),
        };
        self.replayed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, take)
            .is_ok()
    }

    /// Gives back the slot a dispatch took in [`Self::wants`], when it was declined before its
    /// window closed (it does not count against `--max-dispatches`).
    pub fn give_back(&self) {
        self.replayed.fetch_sub(1, Ordering::Relaxed);
    }

    /// The name of the kernel with handle `handle`: cached, else `resolve`'s (cached when it
    /// has one), else `kernel@HANDLE`.
    pub fn kernel_name(&self, handle: u64, resolve: impl FnOnce() -> Option<String>) -> String {
        if let Some(n) = self
            .names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&handle)
        {
            return n.clone();
        }
        match resolve() {
            Some(n) => {
                self.names
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(handle, n.clone());
                n
            }
            None => format!("kernel@{handle:#x}"),
        }
    }

    /// Replays `dispatch` on `device` (a dispatch [`Self::wants`] took a slot for), whose
    /// window the caller has closed (nothing else runs on it), recording every step in the
    /// tool's stream; `marks` gets the first pass's start and what the progress counters are
    /// to count. A dispatch not replayed is declined with its reason here; the caller then runs
    /// it once ([`Ran`]), records the dispatch, calls [`Self::replay_recorded`] and opens the
    /// window. With `restore_after`, the memory is the snapshot's again after the last pass
    /// ([`Request::restore_after`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "one replay's inputs; a struct would only rename them"
    )]
    pub fn replay_closed<B: Backend>(
        &self,
        backend: &B,
        dispatch: &B::Dispatch,
        device: u64,
        correlation: u64,
        arena: Option<&SnapshotArena>,
        marks: &mut Marks,
        restore_after: bool,
    ) -> Ran {
        let rec = crate::record::global();
        let mut first_start = 0;
        let mut emit = |r: Record| {
            if let Record::ReplayPass(rp) = &r
                && rp.pass == 0
            {
                first_start = rp.start_ns;
            }
            rec.record(r);
        };
        let config = self.config();
        let req = Request {
            agent: device,
            dispatch,
            passes: config.passes,
            check_determinism: config.check_determinism,
            correlation,
            policy: config.snapshot,
            arena,
            restore_after,
        };
        marks.start_ns = kreplay_common::stream::monotonic_ns();
        let outcome = replay(backend, &self.inventory, &req, &mut emit);
        marks.first_start = first_start;
        marks.passes = match &outcome {
            Outcome::Replayed { passes, .. } => Some(*passes),
            _ => None,
        };
        match outcome {
            Outcome::Replayed { .. } => Ran::Replayed,
            Outcome::Declined(reason) => {
                decline(correlation, reason);
                Ran::Declined
            }
            Outcome::Failed(reason) => {
                decline(correlation, format!("replay stopped: {reason}"));
                Ran::Failed
            }
        }
    }

    /// Once the caller has recorded the dispatch [`Self::replay_closed`] replayed (or ran
    /// once): writes every record so far to the stream file, then counts the replay in the
    /// progress counters. A Ctrl-C the user sends once `kreplay replay` shows the dispatch
    /// replayed, which may kill the application before the flusher's next turn, then loses
    /// none of its records. A replay already holds its thread for milliseconds; the flush adds
    /// microseconds.
    pub fn replay_recorded(&self, marks: &Marks) {
        if marks.start_ns == 0 {
            return;
        }
        if let Err(e) = crate::record::flush_global() {
            tracing::warn!("kreplay: flushing the tool stream after a replay failed: {e}");
        }
        self.recorded.fetch_add(1, Ordering::Relaxed);
        crate::progress::note(
            marks.passes,
            kreplay_common::stream::monotonic_ns().saturating_sub(marks.start_ns),
        );
    }
}

/// What [`EngineState::replay_closed`] tells its caller beyond how the dispatch ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// When the first pass started (0: no pass ran).
    pub first_start: u64,
    /// When the replay began (0: it did not).
    pub start_ns: u64,
    /// The passes run, when every pass ran.
    pub passes: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(max: Option<u64>) -> EngineState {
        EngineState::new(ReplayConfig {
            passes: 3,
            max_dispatches: max,
            ..ReplayConfig::default()
        })
    }

    #[test]
    fn names_are_resolved_once_and_unknown_ones_are_named_by_handle() {
        let s = state(None);
        let mut calls = 0;
        let mut resolve = || {
            calls += 1;
            Some("gemm".to_string())
        };
        assert_eq!(s.kernel_name(0x40, &mut resolve), "gemm");
        assert_eq!(s.kernel_name(0x40, &mut resolve), "gemm");
        assert_eq!(calls, 1);
        assert_eq!(s.kernel_name(0x80, || None), "kernel@0x80");
    }

    #[test]
    fn threads_racing_for_the_last_slots_never_take_more_than_there_are() {
        let s = std::sync::Arc::new(state(Some(3)));
        let taken: u32 = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || (0..1000).filter(|_| s.wants("k")).count() as u32)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(taken, 3);
    }

    #[test]
    fn the_dispatch_limit_counts_replays_and_correlations_increase() {
        let s = state(Some(1));
        assert!(s.wants("any"));
        assert!(!s.wants("any"), "the one slot is taken");
        s.give_back();
        assert!(s.wants("any"), "a declined dispatch's slot is free again");
        assert_eq!((s.next_correlation(), s.next_correlation()), (1, 2));
        let g = s.gate(7);
        assert!(Arc::ptr_eq(&g, &s.gate(7)));
    }
}
