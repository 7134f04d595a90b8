//! What `kreplay replay` reports per kernel, aggregated from the tool's stream records as they
//! are read (no record is kept): dispatches seen and replayed, passes per replayed dispatch,
//! pass, snapshot and restore times, snapshot bytes, failed restores, nondeterminism, declines
//! grouped by cause, and how the restores ran (snapshot mode, bytes hashed, checked and
//! restored, dirty chunks, check time). Rendering is `replay_table`'s.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kreplay_common::size;
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
    /// Pass durations in ns, sorted.
    pub pass_ns: Vec<u64>,
    /// Snapshots taken, their durations in ns (sorted) and bytes (sum).
    pub snapshot_ns: Vec<u64>,
    /// Snapshot bytes (sum).
    pub snapshot_bytes: u64,
    /// Restore durations in ns, sorted.
    pub restore_ns: Vec<u64>,
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
    /// Snapshot bytes per snapshot (the mean; 0 without snapshots).
    pub fn snapshot_bytes_each(&self) -> u64 {
        self.snapshot_bytes
            .checked_div(self.snapshot_ns.len() as u64)
            .unwrap_or(0)
    }
}

/// The middle value of sorted `v` (0 when empty).
pub fn median(v: &[u64]) -> u64 {
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// One snapshot as the row counts it.
struct SnapPart {
    ns: u64,
    bytes: u64,
    hashed: u64,
    mode: String,
}

/// One restore as the row counts it.
struct RestorePart {
    ns: u64,
    failed: bool,
    /// `placement/full` when it wrote every byte of a checked snapshot.
    full: Option<String>,
    checked: u64,
    written: u64,
    dirty: u64,
    check_ns: u64,
}

/// What one dispatch contributed before its kernel is known (the tool writes the dispatch's
/// own record after its passes).
#[derive(Default)]
struct Pending {
    kernel: Option<usize>,
    passes: u32,
    pass_ns: Vec<u64>,
    snapshots: Vec<SnapPart>,
    restores: Vec<RestorePart>,
    declines: Vec<String>,
    nondeterministic: bool,
    snap_check: Option<u8>,
    /// A decline was seen (kept after the declines moved to the row).
    declined: bool,
}

/// Aggregates records as they are read; [`Summary::finish`] gives the rows by kernel.
#[derive(Default)]
pub struct Summary {
    kernels: Vec<(String, KernelRow)>,
    by_name: HashMap<String, usize>,
    /// Per (stream, correlation): the dispatch's passes and what waits for its kernel.
    dispatches: HashMap<(usize, u64), Pending>,
    /// Nanoseconds the application's threads spent inside kreplay (its replay windows).
    pub inside_ns: u64,
}

impl Summary {
    /// A new, empty summary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one record of stream `source` (correlation ids are per stream).
    pub fn push(&mut self, source: usize, r: &Record) {
        let key = |corr| (source, corr);
        match r {
            Record::Dispatch(d) => {
                let k = self.kernel(&d.kernel);
                self.kernels[k].1.dispatches += 1;
                let p = self.dispatches.entry(key(d.correlation)).or_default();
                p.kernel = Some(k);
                let p = std::mem::take(p);
                self.settle(key(d.correlation), p);
            }
            Record::ReplayPass(p) => {
                let e = self.dispatches.entry(key(p.correlation)).or_default();
                e.passes += 1;
                e.pass_ns.push(p.end_ns.saturating_sub(p.start_ns));
                self.flush(key(p.correlation));
            }
            Record::Snapshot(s) => {
                let e = self.dispatches.entry(key(s.correlation)).or_default();
                e.snap_check = Some(s.check);
                e.snapshots.push(SnapPart {
                    ns: s.end_ns.saturating_sub(s.start_ns),
                    bytes: s.bytes,
                    hashed: s.bytes_hashed,
                    mode: format!(
                        "{}/{}",
                        snapshot_mode::label(s.placement, s.check),
                        chunk_label(s.chunk_size)
                    ),
                });
                self.flush(key(s.correlation));
            }
            Record::Restore(s) => {
                let e = self.dispatches.entry(key(s.correlation)).or_default();
                // Every byte written: `full` restores, or adaptive ones that stopped checking.
                let full = (s.check == snapshot_mode::FULL
                    && e.snap_check != Some(snapshot_mode::FULL))
                .then(|| snapshot_mode::label(s.placement, s.check));
                e.restores.push(RestorePart {
                    ns: s.end_ns.saturating_sub(s.start_ns),
                    failed: s.failed > 0,
                    full,
                    checked: s.bytes_checked,
                    written: s.bytes,
                    dirty: s.dirty_chunks,
                    check_ns: s.check_ns,
                });
                self.flush(key(s.correlation));
            }
            Record::Decline(d) => {
                let e = self.dispatches.entry(key(d.correlation)).or_default();
                e.declines.push(d.reason.clone());
                e.declined = true;
                self.flush(key(d.correlation));
            }
            Record::Nondeterministic(n) => {
                self.dispatches
                    .entry(key(n.correlation))
                    .or_default()
                    .nondeterministic = true;
                self.flush(key(n.correlation));
            }
            Record::ToolWindow(w) => self.inside_ns += w.end_ns.saturating_sub(w.start_ns),
            _ => {}
        }
    }

    fn kernel(&mut self, name: &str) -> usize {
        if let Some(&k) = self.by_name.get(name) {
            return k;
        }
        self.kernels.push((name.to_owned(), KernelRow::default()));
        self.by_name.insert(name.to_owned(), self.kernels.len() - 1);
        self.kernels.len() - 1
    }

    /// Moves what `key` holds into its kernel's row once the kernel is known.
    fn flush(&mut self, key: (usize, u64)) {
        if let Some(p) = self.dispatches.get_mut(&key)
            && p.kernel.is_some()
        {
            let p = std::mem::take(p);
            self.settle(key, p);
        }
    }

    /// Adds `p` (taken from `key`, whose kernel is known) to the kernel's row and keeps only
    /// the kernel and the pass count under `key`.
    fn settle(&mut self, key: (usize, u64), p: Pending) {
        let Some(k) = p.kernel else { return };
        let row = &mut self.kernels[k].1;
        fold(row, &p);
        let e = self.dispatches.entry(key).or_default();
        e.kernel = Some(k);
        e.passes = p.passes;
        e.snap_check = p.snap_check;
        e.declined = p.declined;
    }

    /// The rows by kernel name. Records whose dispatch never arrived count under `?`.
    pub fn finish(mut self) -> BTreeMap<String, KernelRow> {
        let mut orphan = KernelRow::default();
        let mut passes_of: Vec<Vec<u32>> = vec![Vec::new(); self.kernels.len()];
        for p in self.dispatches.values() {
            match p.kernel {
                Some(k) => {
                    passes_of[k].push(p.passes);
                    self.kernels[k].1.left_out += u64::from(p.passes == 0 && !p.declined);
                }
                None => {
                    fold(&mut orphan, p);
                    orphan.dispatches += 1;
                }
            }
        }
        for ((_, row), passes) in self.kernels.iter_mut().zip(passes_of) {
            let replayed: Vec<u32> = passes.into_iter().filter(|&n| n > 0).collect();
            row.replayed = replayed.len() as u64;
            row.passes_per_dispatch = replayed
                .iter()
                .min()
                .zip(replayed.iter().max())
                .map(|(a, b)| (*a, *b));
        }
        let mut rows: BTreeMap<String, KernelRow> = self.kernels.drain(..).collect();
        if orphan != KernelRow::default() {
            rows.insert("?".into(), orphan);
        }
        for r in rows.values_mut() {
            r.pass_ns.sort_unstable();
            r.snapshot_ns.sort_unstable();
            r.restore_ns.sort_unstable();
        }
        rows
    }
}

/// A chunk size for the mode column (`-` when not recorded).
fn chunk_label(n: u64) -> String {
    if n == 0 { "-".into() } else { size::label(n) }
}

/// Adds one dispatch's contributions to `row` (not its dispatch count or passes per dispatch,
/// which [`Summary`] keeps).
fn fold(row: &mut KernelRow, p: &Pending) {
    row.passes += p.pass_ns.len() as u64;
    row.pass_ns.extend_from_slice(&p.pass_ns);
    for s in &p.snapshots {
        row.snapshot_ns.push(s.ns);
        row.snapshot_bytes += s.bytes;
        row.bytes_hashed += s.hashed;
        row.modes.insert(s.mode.clone());
    }
    for r in &p.restores {
        row.restore_ns.push(r.ns);
        row.failed_restores += u64::from(r.failed);
        if let Some(m) = &r.full {
            row.modes.insert(m.clone());
        }
        row.bytes_checked += r.checked;
        row.bytes_restored += r.written;
        row.dirty_chunks += r.dirty;
        row.check_ns += r.check_ns;
    }
    for reason in &p.declines {
        let d = row
            .declines
            .entry(kreplay_common::cause::of(reason))
            .or_default();
        if d.count == 0 {
            d.example = reason.clone();
        }
        d.count += 1;
    }
    row.nondeterministic += u64::from(p.nondeterministic);
}

#[cfg(test)]
#[path = "replay_summary_tests.rs"]
mod tests;
