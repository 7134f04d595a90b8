//! The per-kernel table `kreplay replay` prints, computed from the tool's stream records:
//! dispatches, passes, min/median/max pass time, snapshot bytes, restore time, declines by
//! reason, nondeterminism.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use kreplay_common::stream::Record;

/// One kernel's row.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct KernelRow {
    /// Dispatches seen.
    pub dispatches: u64,
    /// Passes run (all replayed dispatches).
    pub passes: u64,
    /// Pass durations in ns.
    pub pass_ns: Vec<u64>,
    /// Snapshot bytes (sum).
    pub snapshot_bytes: u64,
    /// Restore time in ns (sum).
    pub restore_ns: u64,
    /// Declines by reason.
    pub declines: BTreeMap<String, u64>,
    /// Dispatches found nondeterministic.
    pub nondeterministic: u64,
}

/// Rows by kernel name, from the tool's records.
pub fn summarize(records: &[Record]) -> BTreeMap<String, KernelRow> {
    let names: HashMap<u64, &str> = records
        .iter()
        .filter_map(|r| match r {
            Record::Dispatch(d) => Some((d.correlation, d.kernel.as_str())),
            _ => None,
        })
        .collect();
    let mut rows: BTreeMap<String, KernelRow> = BTreeMap::new();
    fn row<'a>(
        rows: &'a mut BTreeMap<String, KernelRow>,
        names: &HashMap<u64, &str>,
        corr: u64,
    ) -> &'a mut KernelRow {
        let name = names.get(&corr).copied().unwrap_or("?").to_owned();
        rows.entry(name).or_default()
    }
    for r in records {
        match r {
            Record::Dispatch(d) => row(&mut rows, &names, d.correlation).dispatches += 1,
            Record::ReplayPass(p) => {
                let k = row(&mut rows, &names, p.correlation);
                k.passes += 1;
                k.pass_ns.push(p.end_ns.saturating_sub(p.start_ns));
            }
            Record::Snapshot(s) => row(&mut rows, &names, s.correlation).snapshot_bytes += s.bytes,
            Record::Restore(s) => {
                row(&mut rows, &names, s.correlation).restore_ns +=
                    s.end_ns.saturating_sub(s.start_ns)
            }
            Record::Decline(d) => {
                *row(&mut rows, &names, d.correlation)
                    .declines
                    .entry(d.reason.clone())
                    .or_default() += 1
            }
            Record::Nondeterministic(n) => {
                row(&mut rows, &names, n.correlation).nondeterministic += 1
            }
            _ => {}
        }
    }
    for k in rows.values_mut() {
        k.pass_ns.sort_unstable();
    }
    rows
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The table as text.
pub fn render(rows: &BTreeMap<String, KernelRow>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:>10} {:>8} {:>10} {:>10} {:>10} {:>14} {:>12} {:>8}  declines",
        "kernel",
        "dispatches",
        "passes",
        "min_us",
        "median_us",
        "max_us",
        "snapshot_bytes",
        "restore_us",
        "nondet"
    );
    for (name, k) in rows {
        let (min, med, max) = match k.pass_ns.as_slice() {
            [] => (0, 0, 0),
            v => (v[0], v[v.len() / 2], v[v.len() - 1]),
        };
        let declines: Vec<String> = k
            .declines
            .iter()
            .map(|(r, n)| format!("{n}x {r}"))
            .collect();
        let _ = writeln!(
            s,
            "{:<24} {:>10} {:>8} {:>10} {:>10} {:>10} {:>14} {:>12} {:>8}  {}",
            name,
            k.dispatches,
            k.passes,
            us(min),
            us(med),
            us(max),
            k.snapshot_bytes,
            us(k.restore_ns),
            k.nondeterministic,
            if declines.is_empty() {
                "-".to_owned()
            } else {
                declines.join("; ")
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::stream::{Decline, Dispatch, ReplayPass};

    fn dispatch(corr: u64, kernel: &str) -> Record {
        Dispatch {
            pid: 1,
            tid: 1,
            agent: 2,
            queue: 3,
            kernel: kernel.into(),
            correlation: corr,
            kernel_object: 9,
            grid: [1; 3],
            workgroup: [1; 3],
            submit_ns: 0,
            start_ns: 0,
            end_ns: 0,
        }
        .into()
    }

    #[test]
    fn rows_count_passes_times_and_declines_per_kernel() {
        let recs = vec![
            dispatch(1, "saxpy"),
            ReplayPass {
                correlation: 1,
                pass: 0,
                start_ns: 0,
                end_ns: 3000,
            }
            .into(),
            ReplayPass {
                correlation: 1,
                pass: 1,
                start_ns: 5000,
                end_ns: 6000,
            }
            .into(),
            ReplayPass {
                correlation: 1,
                pass: 2,
                start_ns: 7000,
                end_ns: 9000,
            }
            .into(),
            dispatch(2, "fill"),
            Decline {
                correlation: 2,
                ts_ns: 1,
                reason: "vmem".into(),
            }
            .into(),
        ];
        let rows = summarize(&recs);
        let s = &rows["saxpy"];
        assert_eq!(
            (s.dispatches, s.passes, s.pass_ns.clone()),
            (1, 3, vec![1000, 2000, 3000])
        );
        assert_eq!(rows["fill"].declines.get("vmem"), Some(&1));
        let text = render(&rows);
        assert!(text.contains("1x vmem"));
        assert!(
            text.lines()
                .any(|l| l.starts_with("saxpy") && l.contains(" 2.0 "))
        );
    }
}
