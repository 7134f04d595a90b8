//! The GPU's own time of a replay pass on CUDA: two driver events recorded on the launch's
//! stream, one before the kernel and one after it, read with `cuEventElapsedTime` once the pass
//! has been waited for (the context synchronized, so both have completed). The host's span of a
//! pass also holds the launch call and the wait's wake-up; the events' does not. The stream is
//! idle when the start event is recorded, so the GPU passes it while the host is still in the
//! launch call: the events' span still holds that call's latency (about 5 µs on an H200,
//! `docs/gpu/h200-replay-time.md`). Where the driver lacks the entries, or one of them fails,
//! the passes go untimed (the replay table then shows the host's span) and the replay itself
//! goes on.

use core::cell::Cell;

use super::driver::EventEntries;
use super::ffi::{CUevent, CUresult, CUstream, SUCCESS};

/// `CU_EVENT_DEFAULT`: an event that records timing.
const TIMED: core::ffi::c_uint = 0;

/// The events of one replay, created at its first pass and destroyed with it.
pub struct PassTimer {
    entries: Option<EventEntries>,
    events: Cell<Option<(CUevent, CUevent)>>,
    /// A call failed: time no more passes of this replay.
    off: Cell<bool>,
}

impl PassTimer {
    /// A timer over the driver's event entries (`None`: it times nothing).
    pub fn new(entries: Option<EventEntries>) -> Self {
        PassTimer {
            entries,
            events: Cell::new(None),
            off: Cell::new(false),
        }
    }

    /// Records the start event on `stream`, just before the pass's launch; false when the pass
    /// goes untimed.
    pub fn start(&self, stream: u64) -> bool {
        self.record(stream, |(start, _)| start)
    }

    /// Records the end event on `stream`, just after the pass's launch; false when the pass
    /// goes untimed.
    pub fn stop(&self, stream: u64) -> bool {
        self.record(stream, |(_, end)| end)
    }

    /// The GPU time between the two events (ns), once the pass has been waited for.
    pub fn elapsed_ns(&self) -> Option<u64> {
        let (e, (start, end)) = (self.entries?, self.events.get()?);
        if self.off.get() {
            return None;
        }
        let mut ms = 0f32;
        // SAFETY: both events are this timer's, recorded on one stream and complete (the
        // caller synchronized the context); a valid out-pointer.
        let r = unsafe { (e.elapsed)(&mut ms, start, end) };
        if r != SUCCESS || !ms.is_finite() || ms < 0.0 {
            self.fail("cuEventElapsedTime", r);
            return None;
        }
        Some((f64::from(ms) * 1e6).round() as u64)
    }

    fn record(&self, stream: u64, which: fn((CUevent, CUevent)) -> CUevent) -> bool {
        let Some(e) = self.entries else { return false };
        if self.off.get() {
            return false;
        }
        let Some(pair) = self.events.get().or_else(|| self.create(e)) else {
            return false;
        };
        // SAFETY: an event of this timer, created in the current context; the stream is the
        // application's launch stream (or a default-stream handle), valid during its launch.
        let r = unsafe { (e.record)(which(pair), stream as CUstream) };
        if r != SUCCESS {
            self.fail("cuEventRecord", r);
            return false;
        }
        true
    }

    fn create(&self, e: EventEntries) -> Option<(CUevent, CUevent)> {
        let mut pair: [CUevent; 2] = [core::ptr::null_mut(); 2];
        for i in 0..2 {
            // SAFETY: a valid out-pointer; the application's context is current.
            let r = unsafe { (e.create)(&mut pair[i], TIMED) };
            if r != SUCCESS {
                for made in &pair[..i] {
                    // SAFETY: an event created just above.
                    unsafe { (e.destroy)(*made) };
                }
                self.fail("cuEventCreate", r);
                return None;
            }
        }
        let pair = (pair[0], pair[1]);
        self.events.set(Some(pair));
        Some(pair)
    }

    fn fail(&self, call: &str, status: CUresult) {
        self.off.set(true);
        tracing::debug!("kreplay: {call} failed ({status}): this replay's passes go untimed");
    }
}

impl Drop for PassTimer {
    fn drop(&mut self) {
        if let (Some(e), Some((start, end))) = (self.entries, self.events.take()) {
            // SAFETY: events this timer created, no longer recorded on any stream (the last
            // pass was waited for).
            unsafe {
                (e.destroy)(start);
                (e.destroy)(end);
            }
        }
    }
}
