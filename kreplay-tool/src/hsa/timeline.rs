//! The GPU timeline on HSA (`KREPLAY_GPU_TIMELINE=1`): profiling enabled on every queue the
//! tool intercepts and on async copies, each dispatch's and copy's start and end read from
//! kreplay's completion signal once it completes (on the runtime's async-signal-handler thread,
//! never the application's), and put on the trace's clock.
//!
//! Clocks: `hsa_amd_profiling_get_dispatch_time` gives agent ticks, which
//! `hsa_amd_profiling_convert_tick_to_system_domain` turns into system-domain ticks (the clock of
//! `HSA_SYSTEM_INFO_TIMESTAMP`, at `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`);
//! `hsa_amd_profiling_get_async_copy_time` gives system-domain ticks directly. The system domain
//! is mapped onto CLOCK_MONOTONIC (every record's clock) by [`SystemClock`]: at load, the
//! system timestamp is read between two CLOCK_MONOTONIC reads, several times, and the tightest
//! bracket gives the offset.

use kreplay_common::stream::monotonic_ns;

use super::ffi::{
    hsa_agent_t, hsa_amd_profiling_async_copy_time_t, hsa_amd_profiling_dispatch_time_t,
    hsa_queue_t, hsa_signal_t, info, status,
};
use super::tables::Next;
use crate::amd_next;

/// Brackets read to find the system clock's offset.
const SAMPLES: usize = 16;

/// The mapping of system-domain ticks onto CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemClock {
    /// System-domain ticks per second.
    pub freq: u64,
    /// CLOCK_MONOTONIC ns minus the ticks' ns.
    pub offset_ns: i128,
    /// Width of the tightest bracket, ns: the mapping's uncertainty.
    pub bracket_ns: u64,
}

impl SystemClock {
    /// The mapping from `(monotonic before, ticks, monotonic after)` samples of a clock at
    /// `freq` ticks per second: the sample with the tightest bracket, its ticks taken at the
    /// bracket's middle. `None` without a usable sample or frequency.
    pub fn from_samples(freq: u64, samples: &[(u64, u64, u64)]) -> Option<Self> {
        if freq == 0 {
            return None;
        }
        let &(before, ticks, after) = samples
            .iter()
            .filter(|(b, _, a)| a >= b)
            .min_by_key(|(b, _, a)| a - b)?;
        let mid = i128::from(before) + i128::from(after - before) / 2;
        Some(Self {
            freq,
            offset_ns: mid - i128::from(ticks_to_ns(ticks, freq)),
            bracket_ns: after - before,
        })
    }

    /// System-domain `ticks` as CLOCK_MONOTONIC ns (0 when they map before the clock's start).
    pub fn to_monotonic(&self, ticks: u64) -> u64 {
        let ns = i128::from(ticks_to_ns(ticks, self.freq)) + self.offset_ns;
        u64::try_from(ns).unwrap_or(0)
    }
}

fn ticks_to_ns(ticks: u64, freq: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(freq)) as u64
}

/// Observe mode's state: the clock mapping, and the entries it calls.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    /// The system domain on the trace's clock.
    pub clock: SystemClock,
    /// Copies have GPU times (`hsa_amd_profiling_async_copy_enable` succeeded).
    pub copies: bool,
}

impl Timeline {
    /// Measures the clock and enables copy profiling; `None` (with the reason logged) when the
    /// runtime lacks what the timeline needs.
    pub fn start(next: &Next) -> Option<Self> {
        let Some(get) = next.core.hsa_system_get_info_fn else {
            tracing::warn!("kreplay: no hsa_system_get_info: no GPU timeline");
            return None;
        };
        let read = |attr: u32| {
            let mut v = 0u64;
            // SAFETY: both timestamp attributes write one u64 into the valid local.
            (unsafe { get(attr, &mut v as *mut u64 as *mut core::ffi::c_void) } == status::SUCCESS)
                .then_some(v)
        };
        let freq = read(info::SYSTEM_TIMESTAMP_FREQUENCY)?;
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let before = monotonic_ns();
            let ticks = read(info::SYSTEM_TIMESTAMP)?;
            samples.push((before, ticks, monotonic_ns()));
        }
        let Some(clock) = SystemClock::from_samples(freq, &samples) else {
            tracing::warn!("kreplay: HSA system timestamp frequency {freq}: no GPU timeline");
            return None;
        };
        let copies = match amd_next!(next, hsa_amd_profiling_async_copy_enable_fn) {
            // SAFETY: a plain runtime call with a bool argument.
            Some(enable) => (unsafe { enable(true) }) == status::SUCCESS,
            None => false,
        };
        if !copies {
            tracing::warn!(
                "kreplay: async copy profiling could not be enabled: copies have no GPU times"
            );
        }
        tracing::debug!(?clock, copies, "GPU timeline on");
        Some(Self { clock, copies })
    }

    /// Enables profiling on queue `q`; false (logged) when the runtime refuses.
    ///
    /// # Safety
    /// `q` is a live queue of this runtime.
    pub unsafe fn enable_queue(&self, next: &Next, q: *mut hsa_queue_t) -> bool {
        let Some(enable) = amd_next!(next, hsa_amd_profiling_set_profiler_enabled_fn) else {
            return false;
        };
        // SAFETY: q is a live queue (caller's contract).
        let st = unsafe { enable(q, 1) };
        if st != status::SUCCESS {
            tracing::warn!(
                "kreplay: profiling not enabled on queue {q:p} ({st:#x}): its dispatches have no GPU times"
            );
        }
        st == status::SUCCESS
    }

    /// The GPU start and end (CLOCK_MONOTONIC ns) of the dispatch that completed `sig` on
    /// `agent`; `None` when the runtime has none.
    pub fn dispatch_times(&self, next: &Next, agent: u64, sig: hsa_signal_t) -> Option<(u64, u64)> {
        let get = amd_next!(next, hsa_amd_profiling_get_dispatch_time_fn)?;
        let convert = amd_next!(next, hsa_amd_profiling_convert_tick_to_system_domain_fn)?;
        let agent = hsa_agent_t { handle: agent };
        let mut t = hsa_amd_profiling_dispatch_time_t::default();
        // SAFETY: sig is kreplay's completion signal of a finished dispatch on agent; t is a
        // valid out-struct.
        if unsafe { get(agent, sig, &mut t) } != status::SUCCESS {
            return None;
        }
        let system = |tick: u64| {
            let mut out = 0u64;
            // SAFETY: converts one tick of agent into the valid local.
            (unsafe { convert(agent, tick, &mut out) } == status::SUCCESS).then_some(out)
        };
        let (start, end) = (system(t.start)?, system(t.end)?);
        Some((self.clock.to_monotonic(start), self.clock.to_monotonic(end)))
    }

    /// The start and end (CLOCK_MONOTONIC ns) of the async copy that completed `sig`.
    pub fn copy_times(&self, next: &Next, sig: hsa_signal_t) -> Option<(u64, u64)> {
        if !self.copies {
            return None;
        }
        let get = amd_next!(next, hsa_amd_profiling_get_async_copy_time_fn)?;
        let mut t = hsa_amd_profiling_async_copy_time_t::default();
        // SAFETY: sig is kreplay's completion signal of a finished copy; t is a valid out-struct.
        if unsafe { get(sig, &mut t) } != status::SUCCESS {
            return None;
        }
        Some((
            self.clock.to_monotonic(t.start),
            self.clock.to_monotonic(t.end),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tightest_bracket_sets_the_offset() {
        // A 100 MHz clock (10 ns per tick) that reads 1000 ticks (10,000 ns) at monotonic 50,000.
        let c = SystemClock::from_samples(
            100_000_000,
            &[
                (49_000, 900, 51_000),
                (49_990, 1000, 50_010),
                (60_000, 2000, 59_000),
            ],
        )
        .unwrap();
        assert_eq!((c.offset_ns, c.bracket_ns), (40_000, 20));
        assert_eq!(c.to_monotonic(1000), 50_000);
        assert_eq!(c.to_monotonic(1001), 50_010);
        // A 1 GHz clock that is CLOCK_MONOTONIC already maps onto itself.
        let same = SystemClock::from_samples(1_000_000_000, &[(7, 8, 9)]).unwrap();
        assert_eq!((same.offset_ns, same.to_monotonic(123)), (0, 123));
        assert_eq!(SystemClock::from_samples(0, &[(1, 1, 1)]), None);
        assert_eq!(
            SystemClock::from_samples(1, &[(2, 1, 1)]),
            None,
            "a bracket backwards"
        );
        // Ticks that map before 0 give 0, not a wrapped time.
        let late = SystemClock::from_samples(1_000_000_000, &[(0, 500, 0)]).unwrap();
        assert_eq!(late.to_monotonic(100), 0);
    }
}
