//! A bounded summary of many durations: count, sum, min and max exactly, and the median
//! exactly up to [`EXACT`] values, then from a log-bucketed histogram within
//! [`MEDIAN_REL_ERROR`] of the exact median.
//!
//! `kreplay replay` keeps one per kernel for pass, snapshot and restore times, so its memory
//! stays flat however many passes and dispatches it summarizes.
//!
//! Histogram buckets: a value below 256 has its own bucket; a larger value `v` falls in the
//! bucket of its 8 leading binary digits, `[m << s, (m + 1) << s)` with `128 ≤ m < 256`, whose
//! width is at most 1/128 of its lower bound. The median reported is the middle of the bucket
//! holding the middle value (clamped to min and max), so it is within 1/256 (0.39%) of that
//! value. At most 7424 buckets exist (u64 values), and only the occupied ones are stored.

use std::collections::BTreeMap;

/// Values kept exactly before the histogram takes over.
pub const EXACT: usize = 1024;

/// The median's largest relative error once the histogram holds the values: 1/256.
#[cfg(test)]
pub const MEDIAN_REL_ERROR: f64 = 1.0 / 256.0;

/// Durations (or any `u64` values) summarized in bounded memory. Two are equal when they
/// hold the same values, whatever the order they were added in.
#[derive(Clone, Debug, Default)]
pub struct Durations {
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
    /// The values while there are at most [`EXACT`]; empty once `hist` holds them.
    exact: Vec<u64>,
    /// Occupied buckets and their counts, once there were more than [`EXACT`] values.
    hist: BTreeMap<u16, u64>,
}

impl PartialEq for Durations {
    fn eq(&self, other: &Self) -> bool {
        let sorted = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v
        };
        (self.count, self.sum, self.min, self.max) == (other.count, other.sum, other.min, other.max)
            && self.hist == other.hist
            && sorted(&self.exact) == sorted(&other.exact)
    }
}

impl Eq for Durations {}

/// The histogram bucket of `v`.
fn bucket(v: u64) -> u16 {
    if v < 256 {
        return v as u16;
    }
    let shift = 63 - v.leading_zeros() - 7;
    let mantissa = v >> shift;
    ((shift + 1) * 128 + (mantissa as u32 - 128)) as u16
}

/// The lowest value of bucket `b`, and its width.
fn bucket_range(b: u16) -> (u64, u64) {
    if b < 256 {
        return (u64::from(b), 1);
    }
    let shift = u32::from(b) / 128 - 1;
    let mantissa = 128 + u64::from(b) % 128;
    (mantissa << shift, 1 << shift)
}

impl Durations {
    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        self.min = if self.count == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        if self.hist.is_empty() {
            self.exact.push(v);
            if self.exact.len() > EXACT {
                for x in std::mem::take(&mut self.exact) {
                    *self.hist.entry(bucket(x)).or_default() += 1;
                }
            }
        } else {
            *self.hist.entry(bucket(v)).or_default() += 1;
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Durations) {
        if other.count == 0 {
            return;
        }
        if other.hist.is_empty() {
            other.exact.iter().for_each(|&v| self.add(v));
            return;
        }
        self.min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        for x in std::mem::take(&mut self.exact) {
            *self.hist.entry(bucket(x)).or_default() += 1;
        }
        for (&b, &n) in &other.hist {
            *self.hist.entry(b).or_default() += n;
        }
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The smallest (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at rank `count / 2` of the sorted values (0 when empty): exact up to
    /// [`EXACT`] values, else within [`MEDIAN_REL_ERROR`] of it.
    pub fn median(&self) -> u64 {
        let rank = self.count / 2;
        if self.hist.is_empty() {
            let mut v = self.exact.clone();
            let Some(i) = usize::try_from(rank).ok().filter(|&i| i < v.len()) else {
                return 0;
            };
            return *v.select_nth_unstable(i).1;
        }
        let mut seen = 0;
        for (&b, &n) in &self.hist {
            seen += n;
            if seen > rank {
                let (low, width) = bucket_range(b);
                return (low + (width - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Values and buckets this summary holds in memory (what its bound is about).
    #[cfg(test)]
    pub fn heap_entries(&self) -> usize {
        self.exact.capacity() + self.hist.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once_with_bounded_width() {
        let mut last = None;
        for v in (0..70_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket(v);
            let (low, width) = bucket_range(b);
            assert!(
                low <= v && v - low < width,
                "{v} in bucket {b} [{low}, +{width})"
            );
            assert!(width == 1 || width * 128 <= low, "width {width} at {low}");
            if let Some((pv, pb)) = last
                && v == pv + 1
            {
                assert!(b == pb || b == pb + 1, "buckets are contiguous at {v}");
            }
            last = Some((v, b));
        }
        assert_eq!(bucket(255), 255);
        assert_eq!(bucket(256), 256);
        assert_eq!(bucket_range(256), (256, 2));
        assert_eq!(bucket(u64::MAX), 7423);
    }

    #[test]
    fn exact_up_to_the_bound() {
        let mut d = Durations::default();
        assert_eq!((d.count(), d.min(), d.median(), d.max()), (0, 0, 0, 0));
        for v in [4000, 1000, 3000, 2000] {
            d.add(v);
        }
        assert_eq!(
            (d.count(), d.sum(), d.min(), d.median(), d.max()),
            (4, 10_000, 1000, 3000, 4000)
        );
        // 1024 values, all distinct and off the bucket grid: still exact.
        let mut d = Durations::default();
        for i in 0..EXACT as u64 {
            d.add(1_000_003 + 7 * i);
        }
        assert_eq!(d.median(), 1_000_003 + 7 * 512);
    }

    #[test]
    fn past_the_bound_the_median_is_within_the_stated_error_and_memory_is_bounded() {
        let mut d = Durations::default();
        let n = 1_000_000u64;
        // A spread of durations from 10 µs to about 1.3 ms, in a scrambled order.
        let val = |i: u64| 10_000 + (i.wrapping_mul(2_654_435_761) % n) * 1_300 / 1_000;
        for i in 0..n {
            d.add(val(i));
        }
        let mut all: Vec<u64> = (0..n).map(val).collect();
        all.sort_unstable();
        let exact = all[(n / 2) as usize];
        let got = d.median();
        let err = (got as f64 - exact as f64).abs() / exact as f64;
        assert!(err <= MEDIAN_REL_ERROR, "median {got} vs {exact}: {err}");
        assert_ne!(got, exact, "the histogram, not the values, gave it");
        assert_eq!((d.min(), d.max()), (all[0], all[(n - 1) as usize]));
        assert_eq!(d.count(), n);
        assert_eq!(d.sum(), all.iter().sum::<u64>());
        // 10 µs..1.3 ms spans 8 doublings: at most 8 × 128 buckets.
        assert!(d.heap_entries() <= 8 * 128, "{} entries", d.heap_entries());
    }

    #[test]
    fn merging_equals_adding_the_values() {
        let (mut a, mut b, mut all) = (
            Durations::default(),
            Durations::default(),
            Durations::default(),
        );
        for i in 0..3000u64 {
            let v = 500 + i * 37 % 10_007;
            if i % 3 == 0 { &mut a } else { &mut b }.add(v);
            all.add(v);
        }
        let mut small = Durations::default();
        small.add(9);
        all.add(9);
        a.merge(&b);
        a.merge(&small);
        assert_eq!(a, all);
        let mut e = Durations::default();
        e.merge(&a);
        assert_eq!(e, all);
    }
}
