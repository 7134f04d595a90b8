//! The per-kernel table `kreplay replay` prints, computed from the tool's stream records:
//! dispatches, passes, min/median/max pass time, snapshot bytes, restore time, declines by
//! reason, nondeterminism; then, for kernels that were restored, how: the snapshot mode
//! (placement/check/chunk), bytes hashed at snapshot time, bytes checked and restored over
//! all restores, dirty chunks, check time and mean time per restore. The second table has
//! fewer than ten columns, so readers of the first that skip short lines skip it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use kreplay_common::stream::{Record, snapshot_mode};

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
    /// Snapshot modes seen (`placement/check/chunk`), and `placement/full` when restores wrote
    /// every byte.
    pub modes: std::collections::BTreeSet<String>,
    /// Bytes hashed while taking snapshots (sum).
    pub bytes_hashed: u64,
    /// Restores run.
    pub restores: u64,
    /// Device bytes read to find changed chunks (sum over restores).
    pub bytes_checked: u64,
    /// Bytes written back (sum over restores).
    pub bytes_restored: u64,
    /// Chunks found changed (sum over restores).
    pub dirty_chunks: u64,
    /// Time finding changed chunks in ns (sum over restores).
    pub check_ns: u64,
}

/// `64K`, `1M`: a chunk size for the mode column.
fn size_label(n: u64) -> String {
    match n {
        0 => "-".into(),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
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
    let mut snap_check: HashMap<u64, u8> = HashMap::new();
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
            Record::Snapshot(s) => {
                snap_check.insert(s.correlation, s.check);
                let k = row(&mut rows, &names, s.correlation);
                k.snapshot_bytes += s.bytes;
                k.bytes_hashed += s.bytes_hashed;
                let mode = snapshot_mode::label(s.placement, s.check);
                k.modes
                    .insert(format!("{mode}/{}", size_label(s.chunk_size)));
            }
            Record::Restore(s) => {
                let k = row(&mut rows, &names, s.correlation);
                k.restore_ns += s.end_ns.saturating_sub(s.start_ns);
                k.restores += 1;
                if s.check == snapshot_mode::FULL
                    && snap_check.get(&s.correlation) != Some(&snapshot_mode::FULL)
                {
                    // Every byte written: `full` restores, or adaptive ones that stopped checking.
                    k.modes
                        .insert(snapshot_mode::label(s.placement, s.check).to_string());
                }
                k.bytes_checked += s.bytes_checked;
                k.bytes_restored += s.bytes;
                k.dirty_chunks += s.dirty_chunks;
                k.check_ns += s.check_ns;
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
    let restored: Vec<_> = rows.iter().filter(|(_, k)| !k.modes.is_empty()).collect();
    if restored.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\n{:<24} {:>28} {:>8} {:>14} {:>14} {:>14} {:>12} {:>10} {:>14}",
        "restore",
        "mode",
        "restores",
        "bytes_hashed",
        "bytes_checked",
        "bytes_restored",
        "dirty_chunks",
        "check_us",
        "us_per_restore"
    );
    for (name, k) in restored {
        let modes: Vec<&str> = k.modes.iter().map(String::as_str).collect();
        let _ = writeln!(
            s,
            "{:<24} {:>28} {:>8} {:>14} {:>14} {:>14} {:>12} {:>10} {:>14}",
            name,
            modes.join(","),
            k.restores,
            k.bytes_hashed,
            k.bytes_checked,
            k.bytes_restored,
            k.dirty_chunks,
            us(k.check_ns),
            us(k.restore_ns.checked_div(k.restores).unwrap_or(0)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::stream::{Decline, Dispatch, ReplayPass, Restore, Snapshot};

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
                pid: 0,
                tid: 0,
            }
            .into(),
            ReplayPass {
                correlation: 1,
                pass: 1,
                start_ns: 5000,
                end_ns: 6000,
                pid: 0,
                tid: 0,
            }
            .into(),
            ReplayPass {
                correlation: 1,
                pass: 2,
                start_ns: 7000,
                end_ns: 9000,
                pid: 0,
                tid: 0,
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
        let mut recs = recs;
        recs.push(
            Snapshot {
                correlation: 1,
                start_ns: 0,
                end_ns: 1,
                bytes: 1 << 20,
                regions: 2,
                placement: snapshot_mode::PINNED,
                check: snapshot_mode::HOST_HASH,
                chunk_size: 64 << 10,
                bytes_hashed: 1 << 20,
                pid: 0,
                tid: 0,
            }
            .into(),
        );
        for pass in 1..3 {
            recs.push(
                Restore {
                    correlation: 1,
                    pass,
                    start_ns: 0,
                    end_ns: 4000,
                    bytes: 65536,
                    regions: 1,
                    skipped: 0,
                    placement: snapshot_mode::PINNED,
                    check: snapshot_mode::HOST_HASH,
                    bytes_checked: 1 << 20,
                    dirty_chunks: 1,
                    check_ns: 3000,
                    pid: 0,
                    tid: 0,
                    failed: 0,
                }
                .into(),
            );
        }
        let rows = summarize(&recs);
        let s = &rows["saxpy"];
        assert_eq!(
            (
                s.restores,
                s.bytes_hashed,
                s.bytes_checked,
                s.bytes_restored,
                s.dirty_chunks
            ),
            (2, 1 << 20, 2 << 20, 131072, 2)
        );
        assert_eq!(s.modes.iter().collect::<Vec<_>>(), ["pinned/host-hash/64K"]);
        assert_eq!(
            (s.dispatches, s.passes, s.pass_ns.clone()),
            (1, 3, vec![1000, 2000, 3000])
        );
        assert_eq!(rows["fill"].declines.get("vmem"), Some(&1));
        let text = render(&rows);
        assert!(text.contains("1x vmem"));
        let restore_row: Vec<&str> = text
            .lines()
            .rev()
            .find(|l| l.starts_with("saxpy"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            restore_row,
            [
                "saxpy",
                "pinned/host-hash/64K",
                "2",
                "1048576",
                "2097152",
                "131072",
                "2",
                "6.0",
                "4.0"
            ]
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("saxpy") && l.contains(" 2.0 "))
        );
    }

    #[test]
    fn restores_that_wrote_every_byte_of_a_checked_snapshot_show_as_full() {
        let restore = |check| -> Record {
            Restore {
                correlation: 1,
                pass: 1,
                start_ns: 0,
                end_ns: 10,
                bytes: 4096,
                regions: 1,
                skipped: 0,
                placement: snapshot_mode::PAGEABLE,
                check,
                bytes_checked: 0,
                dirty_chunks: 1,
                check_ns: 0,
                pid: 0,
                tid: 0,
                failed: 0,
            }
            .into()
        };
        let snapshot = |check| -> Record {
            Snapshot {
                correlation: 1,
                start_ns: 0,
                end_ns: 1,
                bytes: 4096,
                regions: 1,
                placement: snapshot_mode::PAGEABLE,
                check,
                chunk_size: 16384,
                bytes_hashed: 0,
                pid: 0,
                tid: 0,
            }
            .into()
        };
        let checked = vec![
            dispatch(1, "k"),
            snapshot(snapshot_mode::HOST_HASH),
            restore(snapshot_mode::HOST_HASH),
            restore(snapshot_mode::FULL),
        ];
        let modes: Vec<String> = summarize(&checked)["k"].modes.iter().cloned().collect();
        assert_eq!(modes, ["pageable/full", "pageable/host-hash/16K"]);
        let full = vec![
            dispatch(1, "k"),
            snapshot(snapshot_mode::FULL),
            restore(snapshot_mode::FULL),
        ];
        let modes: Vec<String> = summarize(&full)["k"].modes.iter().cloned().collect();
        assert_eq!(modes, ["pageable/full/16K"]);
    }
}
