//! What `kreplay replay` reports per kernel, aggregated from the tool's stream records as they
//! are read (no record is kept): dispatches seen and replayed, passes per replayed dispatch,
//! pass, snapshot and restore times, snapshot bytes, failed restores, nondeterminism, declines
//! grouped by cause, and how the restores ran (snapshot mode, bytes hashed, checked and
//! restored, dirty chunks, check time). Rendering is `table`'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use kreplay_common::size;

use crate::replay::durations::Durations;
use kreplay_common::stream::{Record, snapshot_mode};

/// The declines of one cause: how many, and the first reason seen as the example.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Declines {
    /// Dispatches declined for this cause.
    pub count: u64,
    /// The first reason given, addresses and sizes included.
    pub example: String,
}

/// One kernel's aggregates.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct KernelRow {
    /// Dispatches seen.
    pub dispatches: u64,
    /// Dispatches with at least one pass.
    pub replayed: u64,
    /// Dispatches neither replayed nor declined: left out by `--kernel` or `--max-dispatches`.
    pub left_out: u64,
    /// Fewest and most passes of a replayed dispatch.
    pub passes_per_dispatch: Option<(u32, u32)>,
    /// Passes run (all replayed dispatches).
    pub passes: u64,
    /// Pass durations in ns, as the host saw them: from before the launch to the end of the
    /// wait.
    pub pass_ns: Durations,
    /// The GPU's own time of the passes the backend timed (CUDA events, HSA profiling), in ns.
    pub gpu_ns: Durations,
    /// Snapshot durations in ns (their count is the snapshots taken).
    pub snapshot_ns: Durations,
    /// Snapshot bytes (sum).
    pub snapshot_bytes: u64,
    /// Restore durations in ns.
    pub restore_ns: Durations,
    /// Restores in which a region's write-back failed.
    pub failed_restores: u64,
    /// Declines by cause ([`kreplay_common::cause`]: addresses and numbers masked).
    pub declines: BTreeMap<String, Declines>,
    /// Dispatches found nondeterministic.
    pub nondeterministic: u64,
    /// Snapshot modes seen (`placement/check/chunk`), and `placement/full` when restores wrote
    /// every byte.
    pub modes: BTreeSet<String>,
    /// Bytes hashed while taking snapshots (sum).
    pub bytes_hashed: u64,
    /// Device bytes read to find changed chunks (sum over restores).
    pub bytes_checked: u64,
    /// Bytes written back (sum over restores).
    pub bytes_restored: u64,
    /// Chunks found changed (sum over restores).
    pub dirty_chunks: u64,
    /// Time finding changed chunks in ns (sum over restores).
    pub check_ns: u64,
}

impl KernelRow {
    /// The pass times to show: the GPU's when every pass was timed on the GPU, else the
    /// host's; with which of the two it is (true: the GPU's).
    pub fn shown_pass_ns(&self) -> (&Durations, bool) {
        let gpu = self.gpu_ns.count() > 0 && self.gpu_ns.count() == self.pass_ns.count();
        (if gpu { &self.gpu_ns } else { &self.pass_ns }, gpu)
    }

    /// Snapshot bytes per snapshot (the mean; 0 without snapshots).
    pub fn snapshot_bytes_each(&self) -> u64 {
        self.snapshot_bytes
            .checked_div(self.snapshot_ns.count())
            .unwrap_or(0)
    }

    /// Adds what `p` aggregated (not the dispatch counts or passes per dispatch, which
    /// [`Summary`] keeps).
    fn merge(&mut self, p: &KernelRow) {
        self.passes += p.passes;
        self.pass_ns.merge(&p.pass_ns);
        self.gpu_ns.merge(&p.gpu_ns);
        self.snapshot_ns.merge(&p.snapshot_ns);
        self.snapshot_bytes += p.snapshot_bytes;
        self.restore_ns.merge(&p.restore_ns);
        self.failed_restores += p.failed_restores;
        for (cause, d) in &p.declines {
            let e = self.declines.entry(cause.clone()).or_default();
            if e.count == 0 {
                e.example = d.example.clone();
            }
            e.count += d.count;
        }
        self.nondeterministic += p.nondeterministic;
        self.modes.extend(p.modes.iter().cloned());
        self.bytes_hashed += p.bytes_hashed;
        self.bytes_checked += p.bytes_checked;
        self.bytes_restored += p.bytes_restored;
        self.dirty_chunks += p.dirty_chunks;
        self.check_ns += p.check_ns;
    }
}

/// What one dispatch contributed before its kernel is known (the tool writes the dispatch's
/// own record after its passes), aggregated as it comes: its memory does not grow with passes.
#[derive(Default)]
struct Pending {
    kernel: Option<usize>,
    passes: u32,
    /// The records' aggregates (its `nondeterministic` is 0 or 1: one dispatch).
    part: KernelRow,
    snap_check: Option<u8>,
    /// A decline was seen (kept after the declines moved to the row).
    declined: bool,
}

/// What stays of a dispatch once its records are in its kernel's row: enough to place its
/// later records and count its passes.
#[derive(Clone, Copy)]
struct Settled {
    kernel: usize,
    passes: u32,
    snap_check: Option<u8>,
    declined: bool,
}

/// Per kernel: how many passes its dispatches ran, from dispatches forgotten or finished.
#[derive(Default, Clone, Copy)]
struct PassCounts {
    replayed: u64,
    left_out: u64,
    range: Option<(u32, u32)>,
}

impl PassCounts {
    fn add(&mut self, d: &Settled) {
        if d.passes > 0 {
            self.replayed += 1;
            self.range = Some(match self.range {
                None => (d.passes, d.passes),
                Some((a, b)) => (a.min(d.passes), b.max(d.passes)),
            });
        } else if !d.declined {
            self.left_out += 1;
        }
    }
}

/// Settled dispatches remembered for records that come after their dispatch's own record;
/// past this many, the oldest is forgotten (its records are all in long since: the tool writes
/// a dispatch's records together).
pub const SETTLED_KEPT: usize = 65_536;

/// Aggregates records as they are read; [`Summary::finish`] gives the rows by kernel.
#[derive(Default)]
pub struct Summary {
    /// Rows by (process, kernel name).
    kernels: Vec<((u32, String), KernelRow)>,
    by_name: HashMap<(u32, String), usize>,
    /// The process each stream came from ([`Summary::set_pid`]; 0 when not said).
    pids: HashMap<usize, u32>,
    /// Per (stream, correlation): what waits for its dispatch's kernel.
    pending: HashMap<(usize, u64), Pending>,
    /// Per (stream, correlation): dispatches whose kernel is known, at most [`SETTLED_KEPT`].
    settled: HashMap<(usize, u64), Settled>,
    /// The keys of `settled` in the order they settled, to forget the oldest.
    settled_order: VecDeque<(usize, u64)>,
    /// Passes per dispatch of the dispatches forgotten, per kernel.
    pass_counts: Vec<PassCounts>,
    /// Nanoseconds the application's threads spent inside kreplay (its replay windows).
    pub inside_ns: u64,
}

impl Summary {
    /// The summary of the tool's stream `files`, read in order (the first that cannot be
    /// opened fails it).
    pub fn read(files: &[std::path::PathBuf]) -> anyhow::Result<Summary> {
        use anyhow::Context as _;
        let mut summary = Summary::new();
        for (i, f) in files.iter().enumerate() {
            let r = kreplay_common::stream::StreamReader::open(f)
                .with_context(|| format!("cannot read {}", f.display()))?;
            summary.set_pid(i, r.header().pid);
            for rec in r {
                summary.push(i, &rec);
            }
        }
        Ok(summary)
    }

    /// A new, empty summary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Says that stream `source` was written by process `pid`: its kernels get rows of their
    /// own when several processes replayed.
    pub fn set_pid(&mut self, source: usize, pid: u32) {
        self.pids.insert(source, pid);
    }

    /// Adds one record of stream `source` (correlation ids are per stream).
    pub fn push(&mut self, source: usize, r: &Record) {
        let key = |corr| (source, corr);
        match r {
            Record::Dispatch(d) => {
                let pid = self.pids.get(&source).copied().unwrap_or(0);
                let k = self.kernel(pid, &d.kernel);
                self.kernels[k].1.dispatches += 1;
                self.pending(key(d.correlation)).kernel = Some(k);
                self.flush(key(d.correlation));
            }
            Record::ReplayPass(p) => {
                let e = self.pending(key(p.correlation));
                e.passes += 1;
                e.part.passes += 1;
                e.part.pass_ns.add(p.end_ns.saturating_sub(p.start_ns));
                if p.gpu_ns > 0 {
                    e.part.gpu_ns.add(p.gpu_ns);
                }
                self.flush(key(p.correlation));
            }
            Record::Snapshot(s) => {
                let e = self.pending(key(s.correlation));
                e.snap_check = Some(s.check);
                let part = &mut e.part;
                part.snapshot_ns.add(s.end_ns.saturating_sub(s.start_ns));
                part.snapshot_bytes += s.bytes;
                part.bytes_hashed += s.bytes_hashed;
                part.modes.insert(format!(
                    "{}/{}",
                    snapshot_mode::label(s.placement, s.check),
                    chunk_label(s.chunk_size)
                ));
                self.flush(key(s.correlation));
            }
            Record::Restore(s) => {
                let e = self.pending(key(s.correlation));
                // Every byte written: `full` restores, or adaptive ones that stopped checking.
                if s.check == snapshot_mode::FULL && e.snap_check != Some(snapshot_mode::FULL) {
                    e.part
                        .modes
                        .insert(snapshot_mode::label(s.placement, s.check));
                }
                let part = &mut e.part;
                part.restore_ns.add(s.end_ns.saturating_sub(s.start_ns));
                part.failed_restores += u64::from(s.failed > 0);
                part.bytes_checked += s.bytes_checked;
                part.bytes_restored += s.bytes;
                part.dirty_chunks += s.dirty_chunks;
                part.check_ns += s.check_ns;
                self.flush(key(s.correlation));
            }
            Record::Decline(d) => {
                let e = self.pending(key(d.correlation));
                let c = e
                    .part
                    .declines
                    .entry(kreplay_common::cause::of(&d.reason))
                    .or_default();
                if c.count == 0 {
                    c.example = d.reason.clone();
                }
                c.count += 1;
                e.declined = true;
                self.flush(key(d.correlation));
            }
            Record::Nondeterministic(n) => {
                self.pending(key(n.correlation)).part.nondeterministic = 1;
                self.flush(key(n.correlation));
            }
            Record::ToolWindow(w) => self.inside_ns += w.end_ns.saturating_sub(w.start_ns),
            _ => {}
        }
    }

    fn kernel(&mut self, pid: u32, name: &str) -> usize {
        let key = (pid, name.to_owned());
        if let Some(&k) = self.by_name.get(&key) {
            return k;
        }
        self.kernels.push((key.clone(), KernelRow::default()));
        self.pass_counts.push(PassCounts::default());
        self.by_name.insert(key, self.kernels.len() - 1);
        self.kernels.len() - 1
    }

    /// The pending aggregates of `key`, started from what its settled dispatch keeps.
    fn pending(&mut self, key: (usize, u64)) -> &mut Pending {
        let settled = self.settled.get(&key).copied();
        self.pending.entry(key).or_insert_with(|| match settled {
            Some(d) => Pending {
                kernel: Some(d.kernel),
                passes: d.passes,
                snap_check: d.snap_check,
                declined: d.declined,
                ..Pending::default()
            },
            None => Pending::default(),
        })
    }

    /// Moves what `key` holds into its kernel's row once the kernel is known, keeping only
    /// what later records of the dispatch need ([`Settled`]).
    fn flush(&mut self, key: (usize, u64)) {
        if self.pending.get(&key).is_none_or(|p| p.kernel.is_none()) {
            return;
        }
        let Some(p) = self.pending.remove(&key) else {
            return;
        };
        let Some(kernel) = p.kernel else { return };
        self.kernels[kernel].1.merge(&p.part);
        let d = Settled {
            kernel,
            passes: p.passes,
            snap_check: p.snap_check,
            declined: p.declined,
        };
        if self.settled.insert(key, d).is_none() {
            self.settled_order.push_back(key);
        }
        while self.settled.len() > SETTLED_KEPT {
            let Some(old) = self.settled_order.pop_front() else {
                break;
            };
            if let Some(d) = self.settled.remove(&old) {
                self.pass_counts[d.kernel].add(&d);
            }
        }
    }

    /// The rows by kernel name, or `name [pid N]` when kernels of several processes were
    /// replayed. Records whose dispatch never arrived count under `?`.
    pub fn finish(mut self) -> BTreeMap<String, KernelRow> {
        let mut orphan = KernelRow::default();
        for p in self.pending.values() {
            orphan.merge(&p.part);
            orphan.dispatches += 1;
        }
        for d in self.settled.values() {
            self.pass_counts[d.kernel].add(d);
        }
        for ((_, row), c) in self.kernels.iter_mut().zip(&self.pass_counts) {
            row.replayed = c.replayed;
            row.left_out = c.left_out;
            row.passes_per_dispatch = c.range;
        }
        let several = self
            .kernels
            .iter()
            .map(|((pid, _), _)| pid)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1;
        let mut rows: BTreeMap<String, KernelRow> = self
            .kernels
            .drain(..)
            .map(|((pid, name), row)| {
                let label = if several {
                    format!("{name} [pid {pid}]")
                } else {
                    name
                };
                (label, row)
            })
            .collect();
        if orphan != KernelRow::default() {
            rows.insert("?".into(), orphan);
        }
        rows
    }
}

/// A chunk size for the mode column (`-` when not recorded).
fn chunk_label(n: u64) -> String {
    if n == 0 { "-".into() } else { size::label(n) }
}

#[cfg(test)]
mod tests;
