//! The maps of `kreplay audit`: per-(process, API) latency histograms aggregated in the kernel.
//!
//! The audit programs share the trace programs' attach cookie ([`crate::probe::Cookie`]) but
//! send nothing to userspace per call: the entry program saves the entry time per (thread,
//! API) in [`AUDIT_STARTS_MAP`], the return program adds the call's latency to the per-CPU
//! [`AuditStats`] of its (pid, API) in [`AUDIT_STATS_MAP`].
//!
//! Latency buckets are log2 with Prometheus' `le` semantics: bucket `i` (for `i` below
//! [`HIST_BUCKETS`]` - 1`) counts calls of at most [`bucket_upper_ns`]`(i)` = 2^(i +
//! [`HIST_MIN_EXP`]) ns and more than the previous bucket's bound; the last bucket counts
//! everything longer (its bound is +Inf).

/// Number of histogram buckets.
pub const HIST_BUCKETS: usize = 32;
/// log2 of the upper bound, in ns, of bucket 0 (2^6 = 64 ns).
pub const HIST_MIN_EXP: u32 = 6;

/// Name of the per-CPU stats map ([`AuditKey`] → [`AuditStats`]).
pub const AUDIT_STATS_MAP: &str = "AUDIT_STATS";
/// Name of the map of calls in flight ([`crate::probe::EntryKey`] → entry time in ns).
pub const AUDIT_STARTS_MAP: &str = "AUDIT_STARTS";
/// Name of the map of command names (pid → `comm`, 16 bytes, NUL-padded).
pub const AUDIT_COMMS_MAP: &str = "AUDIT_COMMS";
/// Name of the per-CPU counter array of the audit programs (indexes in [`audit_counter`]).
pub const AUDIT_COUNTERS_MAP: &str = "AUDIT_COUNTERS";
/// Name of the audit entry program.
pub const AUDIT_ENTRY_PROGRAM: &str = "audit_enter";
/// Name of the audit return program.
pub const AUDIT_RETURN_PROGRAM: &str = "audit_return";

/// Default capacity of [`AUDIT_STATS_MAP`]: (pid, API) pairs.
pub const AUDIT_STATS_ENTRIES: u32 = 32768;
/// Default capacity of [`AUDIT_STARTS_MAP`]: calls in flight at once.
pub const AUDIT_STARTS_ENTRIES: u32 = 16384;
/// Capacity of [`AUDIT_COMMS_MAP`]: processes.
pub const AUDIT_COMMS_ENTRIES: u32 = 8192;

/// Indexes into the audit counter array.
pub mod audit_counter {
    /// Calls whose entry time could not be saved (in-flight map full).
    pub const STARTS_FULL: u32 = 0;
    /// Returns without a saved entry time (attached mid-call, or evicted).
    pub const MISSING_ENTRY: u32 = 1;
    /// Calls not counted because the stats map was full.
    pub const STATS_FULL: u32 = 2;
    /// Number of counters.
    pub const COUNT: u32 = 3;
}

/// Key of [`AUDIT_STATS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditKey {
    /// Process id (tgid).
    pub pid: u32,
    /// API id ([`crate::api::ApiId`] widened).
    pub api: u32,
}

/// One CPU's aggregate for one (pid, API).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditStats {
    /// Completed calls.
    pub count: u64,
    /// Sum of their latencies in ns.
    pub total_ns: u64,
    /// Calls per log2 latency bucket (see the module documentation).
    pub buckets: [u64; HIST_BUCKETS],
}

impl AuditStats {
    /// All zero.
    pub const ZERO: AuditStats = AuditStats {
        count: 0,
        total_ns: 0,
        buckets: [0; HIST_BUCKETS],
    };

    /// Adds `other` into `self` (summing CPUs or intervals), wrapping like the kernel counters.
    pub fn add(&mut self, other: &AuditStats) {
        self.count = self.count.wrapping_add(other.count);
        self.total_ns = self.total_ns.wrapping_add(other.total_ns);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a = a.wrapping_add(*b);
        }
    }

    /// `self - earlier`: what happened between two readings of the same counters.
    pub fn since(&self, earlier: &AuditStats) -> AuditStats {
        let mut d = AuditStats::ZERO;
        d.count = self.count.wrapping_sub(earlier.count);
        d.total_ns = self.total_ns.wrapping_sub(earlier.total_ns);
        for (i, b) in d.buckets.iter_mut().enumerate() {
            *b = self.buckets[i].wrapping_sub(earlier.buckets[i]);
        }
        d
    }
}

/// The bucket of a latency of `ns` nanoseconds (same computation as the BPF program).
#[inline(always)]
pub const fn bucket_of(ns: u64) -> usize {
    // Bit length of ns - 1: the smallest e with ns <= 2^e.
    let e = if ns <= 1 {
        0
    } else {
        64 - (ns - 1).leading_zeros()
    };
    if e <= HIST_MIN_EXP {
        0
    } else if e - HIST_MIN_EXP >= HIST_BUCKETS as u32 - 1 {
        HIST_BUCKETS - 1
    } else {
        (e - HIST_MIN_EXP) as usize
    }
}

/// Upper bound in ns of bucket `i`; `None` for the last bucket (+Inf).
pub const fn bucket_upper_ns(i: usize) -> Option<u64> {
    if i + 1 >= HIST_BUCKETS {
        None
    } else {
        Some(1u64 << (i as u32 + HIST_MIN_EXP))
    }
}

const _: () = assert!(core::mem::size_of::<AuditKey>() == 8);
const _: () = assert!(core::mem::size_of::<AuditStats>() == 16 + 8 * HIST_BUCKETS);
const _: () = assert!(core::mem::size_of::<AuditStats>() == 272);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: #[repr(C)], two u32 fields, no padding: every bit pattern is a valid value.
    unsafe impl aya::Pod for super::AuditKey {}
    // SAFETY: #[repr(C)], u64 fields and an array of u64, no padding: any bit pattern is valid.
    unsafe impl aya::Pod for super::AuditStats {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_le_semantics() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(64), 0);
        assert_eq!(bucket_of(65), 1);
        assert_eq!(bucket_of(128), 1);
        assert_eq!(bucket_of(129), 2);
        // 2 ms lands in the bucket bounded by 2^21 ns (2.097152 ms).
        let b = bucket_of(2_000_000);
        assert_eq!(bucket_upper_ns(b), Some(1 << 21));
        assert_eq!(bucket_of(1 << 21), b);
        assert_eq!(bucket_of((1 << 21) + 1), b + 1);
        assert_eq!(bucket_upper_ns(HIST_BUCKETS - 2), Some(1 << 36));
        assert_eq!(bucket_of(1 << 36), HIST_BUCKETS - 2);
        assert_eq!(bucket_of((1 << 36) + 1), HIST_BUCKETS - 1);
        assert_eq!(bucket_of(u64::MAX), HIST_BUCKETS - 1);
        assert_eq!(bucket_upper_ns(HIST_BUCKETS - 1), None);
    }

    #[test]
    fn add_and_since_are_inverse() {
        let mut a = AuditStats::ZERO;
        a.count = 3;
        a.total_ns = 300;
        a.buckets[2] = 3;
        let mut b = a;
        let mut c = AuditStats::ZERO;
        c.count = 2;
        c.total_ns = 50;
        c.buckets[0] = 2;
        b.add(&c);
        assert_eq!(b.count, 5);
        assert_eq!(b.since(&a), c);
    }
}
