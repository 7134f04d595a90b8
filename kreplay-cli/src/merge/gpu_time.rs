//! What the GPU timeline adds up: a per-GPU counter of the share of time the GPU was busy, and
//! the per-kernel GPU-time table of the end-of-run summary.
//!
//! Busy share: each device's kernels and copies are merged into the union of their
//! `[start, end]` spans (they arrive in start order, so one sweep with a "covered until" mark is
//! exact even when queues overlap), and that union is cut into [`BUSY_BUCKET_NS`] buckets. A
//! bucket's value (busy ns / bucket ns, in percent) is written at the bucket's start once the
//! merge time has passed its end: no later span can start inside it. Values are written only
//! when they change; each device's counter has a sequence of its own, so its values stay in
//! time order whatever the other devices do.

use std::collections::BTreeMap;
use std::io::Write;

use super::FastMap;
use crate::perfetto::{CounterUnit, Sequence, TraceWriter, Track, WriterError};

/// Width of a busy-share bucket: 1 ms.
pub const BUSY_BUCKET_NS: u64 = 1_000_000;
/// Name of the per-GPU busy-share counter track.
pub const BUSY_TRACK: &str = "GPU busy %";

struct DeviceBusy {
    track: Track,
    seq: Sequence,
    /// End of the union of spans seen so far.
    covered_until: u64,
    /// Busy ns per bucket index, for buckets not yet written.
    buckets: BTreeMap<u64, u64>,
    /// The first bucket not yet written.
    next: u64,
    /// The last value written.
    last: Option<u64>,
}

/// The busy-share counters of every device.
#[derive(Default)]
pub struct Busy {
    devices: FastMap<(u32, u64), DeviceBusy>,
    /// Counter values written.
    pub values: u64,
    /// The values written, `(ts, percent)`, for the tests.
    #[cfg(test)]
    written: Vec<(u64, f64)>,
}

impl Busy {
    /// Adds span `[start, end]` of device `key` (whose track group is `device`); spans of one
    /// device come in start order.
    pub fn add<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        key: (u32, u64),
        device: Track,
        start: u64,
        end: u64,
    ) -> Result<(), WriterError> {
        let d = match self.devices.get_mut(&key) {
            Some(d) => d,
            None => {
                let track =
                    w.counter_track(Some(device), BUSY_TRACK, CounterUnit::UnitUnspecified)?;
                let seq = w.sequence();
                self.devices.entry(key).or_insert(DeviceBusy {
                    track,
                    seq,
                    covered_until: 0,
                    buckets: BTreeMap::new(),
                    next: start / BUSY_BUCKET_NS,
                    last: None,
                })
            }
        };
        let from = start.max(d.covered_until);
        if end <= from {
            return Ok(());
        }
        d.covered_until = end;
        let mut at = from;
        while at < end {
            let b = at / BUSY_BUCKET_NS;
            let bucket_end = (b + 1).saturating_mul(BUSY_BUCKET_NS);
            let upto = end.min(bucket_end);
            *d.buckets.entry(b).or_default() += upto - at;
            at = upto;
        }
        Ok(())
    }

    /// Writes every bucket that ends at or before merge time `now`.
    pub fn advance<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        now: u64,
    ) -> Result<(), WriterError> {
        for d in self.devices.values_mut() {
            while (d.next + 1).saturating_mul(BUSY_BUCKET_NS) <= now {
                let b = d.next;
                let busy = d.buckets.remove(&b).unwrap_or(0);
                if d.last != Some(busy) {
                    let share = busy as f64 * 100.0 / BUSY_BUCKET_NS as f64;
                    w.counter_f64(d.seq, d.track, b * BUSY_BUCKET_NS, share)?;
                    self.values += 1;
                    #[cfg(test)]
                    self.written.push((b * BUSY_BUCKET_NS, share));
                    d.last = Some(busy);
                }
                d.next = match (busy, d.buckets.keys().next()) {
                    // Idle, and 0 written: skip to the next busy bucket.
                    (0, Some(&k)) => k,
                    (0, None) => {
                        d.next = now / BUSY_BUCKET_NS;
                        break;
                    }
                    _ => b + 1,
                };
            }
        }
        Ok(())
    }
}

/// One row of the per-kernel GPU-time table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelRow {
    /// Kernel name (demangled).
    pub name: String,
    /// Dispatches with GPU times.
    pub count: u64,
    /// Sum of their GPU durations.
    pub total_ns: u64,
    /// Mean duration.
    pub mean_ns: u64,
    /// Median duration (nearest rank).
    pub p50_ns: u64,
    /// 99th percentile duration (nearest rank).
    pub p99_ns: u64,
}

/// GPU durations per kernel name.
#[derive(Default)]
pub struct KernelTimes {
    by_name: FastMap<std::rc::Rc<str>, Vec<u64>>,
}

impl KernelTimes {
    /// Counts one dispatch of `name` that ran for `ns`.
    pub fn add(&mut self, name: &std::rc::Rc<str>, ns: u64) {
        match self.by_name.get_mut(name) {
            Some(v) => v.push(ns),
            None => {
                self.by_name.insert(name.clone(), vec![ns]);
            }
        }
    }

    /// The table, largest total first (then by name).
    pub fn rows(&self) -> Vec<KernelRow> {
        let mut rows: Vec<KernelRow> = self
            .by_name
            .iter()
            .map(|(name, v)| {
                let mut d = v.clone();
                d.sort_unstable();
                let total: u64 = d.iter().sum();
                let rank =
                    |p: u64| d[((p * d.len() as u64).div_ceil(100) as usize).clamp(1, d.len()) - 1];
                KernelRow {
                    name: name.to_string(),
                    count: d.len() as u64,
                    total_ns: total,
                    mean_ns: total / d.len() as u64,
                    p50_ns: rank(50),
                    p99_ns: rank(99),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        rows
    }
}

/// The per-kernel GPU-time table as the end-of-run summary prints it (nothing without rows).
pub fn kernel_table(rows: &[KernelRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let all: u64 = rows.iter().map(|r| r.total_ns).sum();
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
    let mut out = format!(
        "GPU time per kernel ({} kernels, {} µs in all):\n  {:>6}  {:>7}  {:>12}  {:>10}  {:>10}  {:>10}  kernel\n",
        rows.len(),
        us(all),
        "share",
        "count",
        "total µs",
        "mean µs",
        "p50 µs",
        "p99 µs"
    );
    for r in rows {
        let share = if all == 0 {
            0.0
        } else {
            r.total_ns as f64 * 100.0 / all as f64
        };
        out.push_str(&format!(
            "  {:>5.1}%  {:>7}  {:>12}  {:>10}  {:>10}  {:>10}  {}\n",
            share,
            r.count,
            us(r.total_ns),
            us(r.mean_ns),
            us(r.p50_ns),
            us(r.p99_ns),
            r.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn kernel_rows_are_sorted_by_total_with_nearest_rank_percentiles() {
        let mut t = KernelTimes::default();
        let (a, b): (Rc<str>, Rc<str>) = ("gemm".into(), "add".into());
        for ns in 1..=100 {
            t.add(&a, ns * 10);
        }
        t.add(&b, 50_000);
        let rows = t.rows();
        assert_eq!(
            rows,
            [
                KernelRow {
                    name: "gemm".into(),
                    count: 100,
                    total_ns: 50_500,
                    mean_ns: 505,
                    p50_ns: 500,
                    p99_ns: 990,
                },
                KernelRow {
                    name: "add".into(),
                    count: 1,
                    total_ns: 50_000,
                    mean_ns: 50_000,
                    p50_ns: 50_000,
                    p99_ns: 50_000,
                },
            ]
        );
        let table = kernel_table(&rows);
        assert!(
            table.starts_with("GPU time per kernel (2 kernels, 100.5 µs in all):\n"),
            "{table}"
        );
        assert!(
            table.contains(
                "   50.2%      100          50.5         0.5         0.5         1.0  gemm\n"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "   49.8%        1          50.0        50.0        50.0        50.0  add\n"
            ),
            "{table}"
        );
        assert_eq!(kernel_table(&[]), "");
    }

    #[test]
    fn overlapping_spans_count_once_and_buckets_are_written_when_passed() {
        let mut w = TraceWriter::new(Vec::new());
        let dev = w.device_track(1, "GPU").unwrap();
        let mut busy = Busy::default();
        let ms = BUSY_BUCKET_NS;
        // Bucket 1: [1.0, 1.5] and [1.25, 1.75] ms overlap: 0.75 ms busy. Bucket 2: idle.
        // Bucket 3: [3.5, 4.25]: 0.5 ms in bucket 3, 0.25 ms in bucket 4.
        busy.add(&mut w, (1, 7), dev, ms, ms + ms / 2).unwrap();
        busy.add(&mut w, (1, 7), dev, ms + ms / 4, ms + 3 * ms / 4)
            .unwrap();
        busy.advance(&mut w, 2 * ms - 1).unwrap();
        assert_eq!(busy.values, 0, "bucket 1 is not over yet");
        busy.advance(&mut w, 2 * ms).unwrap();
        assert_eq!(busy.written, [(ms, 75.0)]);
        busy.add(&mut w, (1, 7), dev, 3 * ms + ms / 2, 4 * ms + ms / 4)
            .unwrap();
        busy.advance(&mut w, u64::MAX).unwrap();
        assert_eq!(
            busy.written,
            [
                (ms, 75.0),
                (2 * ms, 0.0),
                (3 * ms, 50.0),
                (4 * ms, 25.0),
                (5 * ms, 0.0)
            ]
        );
        let d = &busy.devices[&(1, 7)];
        assert_eq!((d.last, d.buckets.len()), (Some(0), 0));
    }
}
