//! Submission boundaries of intercepted queues. An application submits by writing packets and
//! then the id of the last one to the queue's doorbell; the runtime may hand the interceptor
//! several submissions in one batch (all packets published by the time it looks). kreplay wraps
//! the doorbell stores (`hsa_signal_store_relaxed`/`_screlease`), remembers each doorbell value
//! of its intercept queues, and splits a batch at those values, so that each submission is
//! judged on its own: a one-packet, one-dispatch submission can be replayed even when it
//! arrives batched; a submission of several packets (a HIP graph launch, a barrier + dispatch)
//! stays declined. Packets past the last doorbell value seen form one submission of unknown
//! extent (judged as a whole: declined when it holds more than one packet).
//!
//! Each doorbell value also keeps who rang it and when: the application thread inside its
//! launch call. A dispatch is recorded with that thread and time, so the trace links it to its
//! launch even where the interceptor runs on another thread.

use kreplay_common::stream::monotonic_ns as now_ns;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::ffi::{hsa_signal_t, hsa_signal_value_t};
use super::state::tool;

/// Who rang a doorbell: the thread id and CLOCK_MONOTONIC time of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The ringing thread.
    pub tid: u32,
    /// When it rang (ns).
    pub ts_ns: u64,
}

/// One submission of a batch: its packets (indices into the batch) and, when its doorbell
/// write was seen, who rang it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// Index range into the batch.
    pub packets: Range<usize>,
    /// The doorbell write that ended it (`None`: packets past the last value seen).
    pub origin: Option<Origin>,
}

/// Doorbell values written to one intercept queue and not yet consumed by its handler.
#[derive(Default)]
pub struct Bounds {
    rung: Mutex<BTreeMap<u64, Origin>>,
}

/// More doorbell values than this pending on one queue (a handler that stopped consuming
/// them): the oldest are dropped, so memory stays bounded.
const MAX_PENDING: usize = 4096;

impl Bounds {
    /// Notes a doorbell write of packet id `value` by `origin`.
    pub fn rung(&self, value: hsa_signal_value_t, origin: Origin) {
        let Ok(v) = u64::try_from(value) else { return };
        let mut map = self.rung.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(v, origin);
        while map.len() > MAX_PENDING {
            map.pop_first();
        }
    }

    /// Splits the batch of `count` packets starting at packet id `first` into submissions,
    /// consuming the doorbell values up to its end.
    pub fn split(&self, first: u64, count: usize) -> Vec<Submission> {
        let mut map = self.rung.lock().unwrap_or_else(|p| p.into_inner());
        split(&mut map, first, count)
    }
}

/// [`Bounds::split`] on a plain map (unit-testable).
fn split(map: &mut BTreeMap<u64, Origin>, first: u64, count: usize) -> Vec<Submission> {
    let end = first + count as u64; // exclusive
    let mut out = Vec::new();
    let mut start = 0usize;
    for (&b, &origin) in map.range(first..end) {
        let stop = (b - first) as usize + 1;
        out.push(Submission {
            packets: start..stop,
            origin: Some(origin),
        });
        start = stop;
    }
    if start < count {
        out.push(Submission {
            packets: start..count,
            origin: None,
        });
    }
    // Values below the batch's end are consumed (stale ones from before it included).
    let keep = map.split_off(&end);
    *map = keep;
    out
}

/// Slots of the doorbell table (a power of two): intercept queues a process can have tracked.
const SLOTS: usize = 4096;

/// Intercept queues by doorbell signal handle: an insert-only open-addressing table, so the
/// store wrappers — on every signal store of the application — look up with plain atomic
/// loads (no lock, no shared write) and usually one probe.
struct DoorbellTable {
    keys: [AtomicU64; SLOTS],
    vals: [AtomicPtr<Bounds>; SLOTS],
}

fn home(handle: u64) -> usize {
    (handle.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

impl DoorbellTable {
    const fn new() -> Self {
        Self {
            keys: [const { AtomicU64::new(0) }; SLOTS],
            vals: [const { AtomicPtr::new(core::ptr::null_mut()) }; SLOTS],
        }
    }

    /// Maps `key` to `bounds` (a doorbell handle reused by a later queue is remapped); false
    /// when the table is full.
    fn insert(&self, key: u64, bounds: &'static Bounds) -> bool {
        if key == 0 {
            return false;
        }
        let mut i = home(key);
        for _ in 0..SLOTS {
            let cur = self.keys[i].load(Ordering::Acquire);
            let ours = cur == key
                || (cur == 0
                    && self.keys[i]
                        .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
                        .map_or_else(|k| k == key, |_| true));
            if ours {
                self.vals[i].store(bounds as *const Bounds as *mut Bounds, Ordering::Release);
                return true;
            }
            i = (i + 1) & (SLOTS - 1);
        }
        false
    }

    fn get(&self, key: u64) -> Option<&'static Bounds> {
        if key == 0 {
            return None;
        }
        let mut i = home(key);
        for _ in 0..SLOTS {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == key {
                let p = self.vals[i].load(Ordering::Acquire);
                // SAFETY: p is null (the slot is being filled) or a `&'static Bounds` stored
                // by `insert`, never freed.
                return unsafe { p.as_ref() };
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }
}

static DOORBELLS: DoorbellTable = DoorbellTable::new();

/// Registers the doorbell of a new intercept queue.
pub fn register(doorbell: u64, bounds: &'static Bounds) {
    if !DOORBELLS.insert(doorbell, bounds) {
        tracing::warn!(
            "kreplay: more than {SLOTS} intercept queues; this queue's batches are judged whole"
        );
    }
}

fn note(signal: hsa_signal_t, value: hsa_signal_value_t) {
    if let Some(b) = DOORBELLS.get(signal.handle) {
        b.rung(
            value,
            Origin {
                tid: crate::record::current_tid(),
                ts_ns: now_ns(),
            },
        );
    }
}

/// Wrapper of `hsa_signal_store_relaxed`: notes doorbell writes, then stores.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) {
    let Some(t) = tool() else { return };
    let _ = crate::fault::guard(|| {
        crate::fault::point("hsa.doorbell");
        note(signal, value)
    });
    if let Some(next) = t.backend.next().core.hsa_signal_store_relaxed_fn {
        // SAFETY: the application's arguments, passed through.
        unsafe { next(signal, value) }
    }
}

/// Wrapper of `hsa_signal_store_screlease`: notes doorbell writes, then stores.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn store_screlease(signal: hsa_signal_t, value: hsa_signal_value_t) {
    let Some(t) = tool() else { return };
    let _ = crate::fault::guard(|| {
        crate::fault::point("hsa.doorbell");
        note(signal, value)
    });
    if let Some(next) = t.backend.next().core.hsa_signal_store_screlease_fn {
        // SAFETY: the application's arguments, passed through.
        unsafe { next(signal, value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(v: u64) -> Origin {
        Origin {
            tid: 7,
            ts_ns: 1000 + v,
        }
    }

    fn rung(v: &[u64]) -> BTreeMap<u64, Origin> {
        v.iter().map(|&b| (b, origin(b))).collect()
    }

    fn sub(packets: Range<usize>, bound: Option<u64>) -> Submission {
        Submission {
            packets,
            origin: bound.map(origin),
        }
    }

    #[test]
    fn a_batch_splits_at_each_doorbell_value() {
        // Five one-packet submissions rung 10..=14, handed over as one batch.
        let mut m = rung(&[10, 11, 12, 13, 14]);
        assert_eq!(
            split(&mut m, 10, 5),
            vec![
                sub(0..1, Some(10)),
                sub(1..2, Some(11)),
                sub(2..3, Some(12)),
                sub(3..4, Some(13)),
                sub(4..5, Some(14))
            ]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn a_graph_launch_between_single_launches_stays_one_submission() {
        // 20: a launch; 21..=24: a four-packet graph rung once at 24; 25: a launch.
        let mut m = rung(&[20, 24, 25]);
        assert_eq!(
            split(&mut m, 20, 6),
            vec![
                sub(0..1, Some(20)),
                sub(1..5, Some(24)),
                sub(5..6, Some(25))
            ]
        );
    }

    #[test]
    fn packets_past_the_last_doorbell_are_one_submission_and_later_values_are_kept() {
        // Stale value 3 (before the batch) is dropped; 9 is past the batch and kept.
        let mut m = rung(&[3, 5, 9]);
        assert_eq!(
            split(&mut m, 4, 4),
            vec![sub(0..2, Some(5)), sub(2..4, None)]
        );
        assert_eq!(m, rung(&[9]));
        let mut none = BTreeMap::new();
        assert_eq!(split(&mut none, 0, 3), vec![sub(0..3, None)]);
    }

    #[test]
    fn the_doorbell_table_finds_registered_handles_and_nothing_else() {
        let t = Box::new(DoorbellTable::new());
        let a: &'static Bounds = Box::leak(Box::default());
        let b: &'static Bounds = Box::leak(Box::default());
        assert!(t.get(0x1000).is_none());
        assert!(!t.insert(0, a), "handle 0 is no signal");
        // 300 handles, many sharing home slots: each found, others not.
        for h in 1..=300u64 {
            assert!(t.insert(h * 0x40, a));
        }
        assert!(t.insert(0x2000, b), "a reused handle is remapped");
        for h in 1..=300u64 {
            let want = if h * 0x40 == 0x2000 { b } else { a };
            assert!(std::ptr::eq(t.get(h * 0x40).unwrap(), want), "{h}");
        }
        assert!(t.get(0x41).is_none());
        assert!(t.get(301 * 0x40).is_none());
    }

    #[test]
    fn the_doorbell_table_refuses_when_full() {
        let t = Box::new(DoorbellTable::new());
        let a: &'static Bounds = Box::leak(Box::default());
        for h in 1..=SLOTS as u64 {
            assert!(t.insert(h, a));
        }
        assert!(!t.insert(SLOTS as u64 + 1, a));
        assert!(t.get(SLOTS as u64).is_some());
        assert!(t.get(SLOTS as u64 + 1).is_none());
    }

    #[test]
    fn pending_values_are_bounded() {
        let b = Bounds::default();
        for v in 0..(MAX_PENDING as i64 + 10) {
            b.rung(v, origin(0));
        }
        b.rung(-1, origin(0));
        let m = b.rung.lock().unwrap();
        assert_eq!(m.len(), MAX_PENDING);
        assert_eq!(m.keys().next(), Some(&10));
    }
}
