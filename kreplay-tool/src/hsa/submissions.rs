//! Submission boundaries of intercepted queues. An application submits by writing packets and
//! then the id of the last one to the queue's doorbell; the runtime may hand the interceptor
//! several submissions in one batch (all packets published by the time it looks). kreplay wraps
//! the doorbell stores (`hsa_signal_store_relaxed`/`_screlease`), remembers each doorbell value
//! of its intercept queues, and splits a batch at those values, so that each submission is
//! judged on its own: a one-packet, one-dispatch submission can be replayed even when it
//! arrives batched; a submission of several packets (a HIP graph launch, a barrier + dispatch)
//! stays declined. Packets past the last doorbell value seen form one submission of unknown
//! extent (judged as a whole: declined when it holds more than one packet).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Mutex, RwLock};

use super::ffi::{hsa_signal_t, hsa_signal_value_t};
use crate::tool::tool;

/// Doorbell values written to one intercept queue and not yet consumed by its handler.
#[derive(Default)]
pub struct Bounds {
    rung: Mutex<BTreeSet<u64>>,
}

/// More doorbell values than this pending on one queue (a handler that stopped consuming
/// them): the oldest are dropped, so memory stays bounded.
const MAX_PENDING: usize = 4096;

impl Bounds {
    /// Notes a doorbell write of packet id `value`.
    pub fn rung(&self, value: hsa_signal_value_t) {
        let Ok(v) = u64::try_from(value) else { return };
        let mut set = self.rung.lock().unwrap_or_else(|p| p.into_inner());
        set.insert(v);
        while set.len() > MAX_PENDING {
            set.pop_first();
        }
    }

    /// Splits the batch of `count` packets starting at packet id `first` into submissions
    /// (index ranges into the batch), consuming the doorbell values up to its end.
    pub fn split(&self, first: u64, count: usize) -> Vec<Range<usize>> {
        let mut set = self.rung.lock().unwrap_or_else(|p| p.into_inner());
        split(&mut set, first, count)
    }
}

/// [`Bounds::split`] on a plain set (unit-testable).
fn split(set: &mut BTreeSet<u64>, first: u64, count: usize) -> Vec<Range<usize>> {
    let end = first + count as u64; // exclusive
    let mut out = Vec::new();
    let mut start = 0usize;
    for &b in set.range(first..end) {
        let stop = (b - first) as usize + 1;
        out.push(start..stop);
        start = stop;
    }
    if start < count {
        out.push(start..count);
    }
    // Values below the batch's end are consumed (stale ones from before it included).
    let keep = set.split_off(&end);
    *set = keep;
    out
}

/// Intercept queues by doorbell signal handle.
static DOORBELLS: RwLock<Option<HashMap<u64, &'static Bounds>>> = RwLock::new(None);

/// Registers the doorbell of a new intercept queue.
pub fn register(doorbell: u64, bounds: &'static Bounds) {
    DOORBELLS
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(doorbell, bounds);
}

fn note(signal: hsa_signal_t, value: hsa_signal_value_t) {
    let map = DOORBELLS.read().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = map.as_ref().and_then(|m| m.get(&signal.handle)) {
        b.rung(value);
    }
}

/// Wrapper of `hsa_signal_store_relaxed`: notes doorbell writes, then stores.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) {
    let Some(t) = tool() else { return };
    let _ = std::panic::catch_unwind(|| note(signal, value));
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
    let _ = std::panic::catch_unwind(|| note(signal, value));
    if let Some(next) = t.backend.next().core.hsa_signal_store_screlease_fn {
        // SAFETY: the application's arguments, passed through.
        unsafe { next(signal, value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    #[test]
    fn a_batch_splits_at_each_doorbell_value() {
        // Five one-packet submissions rung 10..=14, handed over as one batch.
        let mut s = set(&[10, 11, 12, 13, 14]);
        assert_eq!(split(&mut s, 10, 5), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
        assert!(s.is_empty());
    }

    #[test]
    fn a_graph_launch_between_single_launches_stays_one_submission() {
        // 20: a launch; 21..=24: a four-packet graph rung once at 24; 25: a launch.
        let mut s = set(&[20, 24, 25]);
        assert_eq!(split(&mut s, 20, 6), vec![0..1, 1..5, 5..6]);
    }

    #[test]
    fn packets_past_the_last_doorbell_are_one_submission_and_later_values_are_kept() {
        // Stale value 3 (before the batch) is dropped; 9 is past the batch and kept.
        let mut s = set(&[3, 5, 9]);
        assert_eq!(split(&mut s, 4, 4), vec![0..2, 2..4]);
        assert_eq!(s, set(&[9]));
        let mut none = BTreeSet::new();
        assert_eq!(split(&mut none, 0, 3), vec![0..3]);
    }

    #[test]
    fn pending_values_are_bounded() {
        let b = Bounds::default();
        for v in 0..(MAX_PENDING as i64 + 10) {
            b.rung(v);
        }
        b.rung(-1);
        let s = b.rung.lock().unwrap();
        assert_eq!(s.len(), MAX_PENDING);
        assert_eq!(s.first(), Some(&10));
    }
}
