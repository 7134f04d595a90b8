//! The inventory of live tracked device allocations, fed by the allocate/free wrappers.
//!
//! Recording is gated on one relaxed [`AtomicBool`]: a process that never replays pays one
//! load plus the chained call. The map sits behind an `RwLock` (writers: allocate and free;
//! readers: snapshot and restore). Each entry carries a process-wide generation stamp, so a
//! restore can tell a reallocation at the same address from the allocation it captured.
//! Teardown guard: after [`Inventory::shut_down`] (OnUnload, or the exit hook) the wrappers'
//! late frees return before touching the lock, and a poisoned lock is recovered, never
//! unwrapped — nothing here can panic into the runtime's teardown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One tracked allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Size in bytes.
    pub size: u64,
    /// Owning agent.
    pub agent: u64,
    /// Process-wide generation stamp taken when it was recorded.
    pub generation: u64,
}

/// Live tracked allocations by base address.
pub struct Inventory {
    recording: AtomicBool,
    closed: AtomicBool,
    next_generation: AtomicU64,
    map: RwLock<BTreeMap<u64, Entry>>,
}

impl Default for Inventory {
    fn default() -> Self {
        Self::new()
    }
}

impl Inventory {
    /// An empty inventory, not recording.
    pub const fn new() -> Self {
        Self {
            recording: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            next_generation: AtomicU64::new(1),
            map: RwLock::new(BTreeMap::new()),
        }
    }

    /// Turns recording on or off.
    pub fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }

    /// Whether allocations are being recorded (one relaxed load: the wrappers' fast path).
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed) && !self.closed.load(Ordering::Relaxed)
    }

    /// Teardown: every later call returns without touching the lock.
    pub fn shut_down(&self) {
        self.closed.store(true, Ordering::Release);
        self.recording.store(false, Ordering::Release);
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<u64, Entry>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The read-locked view restore validates against (held across its copies).
    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<u64, Entry>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a tracked allocation; returns its generation (0 when not recording).
    pub fn record_alloc(&self, base: u64, size: u64, agent: u64) -> u64 {
        if !self.is_recording() {
            return 0;
        }
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        self.write().insert(
            base,
            Entry {
                size,
                agent,
                generation,
            },
        );
        generation
    }

    /// Forgets the allocation at `base` (a free); true if it was tracked.
    pub fn record_free(&self, base: u64) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        // Frees are recorded even while recording is off, so a stale entry never survives.
        self.write().remove(&base).is_some()
    }

    /// The tracked allocations owned by `agent`, in address order.
    pub fn of_agent(&self, agent: u64) -> Vec<(u64, Entry)> {
        if self.closed.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.read()
            .iter()
            .filter(|(_, e)| e.agent == agent)
            .map(|(b, e)| (*b, *e))
            .collect()
    }

    /// Number of tracked allocations.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_recording_records_nothing() {
        let inv = Inventory::new();
        assert_eq!(inv.record_alloc(0x1000, 64, 7), 0);
        assert!(inv.is_empty());
        inv.set_recording(true);
        assert_eq!(inv.record_alloc(0x1000, 64, 7), 1);
        assert_eq!(
            inv.of_agent(7),
            vec![(
                0x1000,
                Entry {
                    size: 64,
                    agent: 7,
                    generation: 1
                }
            )]
        );
        assert!(inv.of_agent(8).is_empty());
    }

    #[test]
    fn reallocation_at_the_same_address_gets_a_new_generation() {
        let inv = Inventory::new();
        inv.set_recording(true);
        let g1 = inv.record_alloc(0x1000, 64, 7);
        assert!(inv.record_free(0x1000));
        assert!(!inv.record_free(0x1000));
        let g2 = inv.record_alloc(0x1000, 64, 7);
        assert_eq!((g1, g2), (1, 2));
    }

    #[test]
    fn after_shut_down_late_calls_touch_nothing() {
        let inv = Inventory::new();
        inv.set_recording(true);
        inv.record_alloc(0x1000, 64, 7);
        inv.shut_down();
        assert!(!inv.record_free(0x1000));
        assert_eq!(inv.record_alloc(0x2000, 64, 7), 0);
        assert!(inv.of_agent(7).is_empty());
        assert_eq!(inv.len(), 1, "the map itself is left alone");
    }
}
