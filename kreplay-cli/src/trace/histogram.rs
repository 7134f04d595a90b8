//! A fixed-size log-linear latency histogram: constant memory however long the trace.
//!
//! Values are bucketed by their power of two and 16 linear sub-buckets within it, so any
//! reported quantile is within 1/16 (6.25%) of the true value, and the memory is 64 × 16
//! counters whatever the number of samples.

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

/// Counts of values in log-linear buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = exp - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    ((exp - SUB_BITS + 1) as usize) * SUB + sub
}

/// The smallest value that falls in bucket `i`.
fn lower_bound(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    (1u64 << exp) | (sub << (exp - SUB_BITS))
}

impl Histogram {
    /// Adds one value.
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` (0..=1): the lower bound of the bucket holding it, so the
    /// true value is at most 6.25% above it. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return lower_bound(i);
            }
        }
        lower_bound(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in 0..16 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 7);
        assert_eq!(h.quantile(1.0), 15);
        assert_eq!(h.count(), 16);
    }

    #[test]
    fn bucket_bounds_are_monotonic_and_contain_their_values() {
        for v in [16u64, 17, 31, 32, 1000, 1_000_000, u64::MAX / 3] {
            let i = index(v);
            assert!(lower_bound(i) <= v, "{v}");
            assert!(i + 1 >= BUCKETS || lower_bound(i + 1) > v, "{v}");
        }
    }

    #[test]
    fn quantiles_within_one_sixteenth() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 100);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 <= 1.0 / 16.0, "{p50}");
        assert!((p99 - 990_000.0).abs() / 990_000.0 <= 1.0 / 16.0, "{p99}");
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
