//! `kreplay merge`: stream files in, one Perfetto trace out.
//!
//! Inputs are merged by timestamp in one streaming pass
//! ([`kreplay_common::stream::MergedStreams`], which reorders each probe stream within a
//! small window) and rendered as they come ([`render`]); memory is bounded by the number of
//! streams, not their length.
pub mod gpu;
pub mod gpu_names;
pub mod gpu_time;
pub mod holdback;
pub mod labels;
pub mod live_bytes;
pub mod own_calls;
pub mod render;
pub mod replay_args;
pub mod replay_slices;
pub mod scratch;
pub mod stats;
pub mod user_ranges;

/// The hash map of the merge's per-record lookups: foldhash, not std's SipHash, whose cost
/// showed in the merge's profile. Iteration order is random per run either way.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The hash set of the merge's per-record lookups ([`FastMap`]'s hasher).
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kreplay_common::{
    api::Library,
    stream::{MergedStreams, StreamDamage},
};

use crate::output::{self, PendingFile};
use crate::perfetto::{TraceWriter, WriterOptions};
use crate::trace_file::TraceFile;

/// What a merge produced.
#[derive(Debug)]
pub struct MergeReport {
    /// Records read from all inputs.
    pub records: u64,
    /// Trace bytes written.
    pub bytes: u64,
    /// Rendering counts.
    pub stats: render::RenderStats,
    /// Damaged inputs: every record before the damage was kept.
    pub damage: Vec<StreamDamage>,
    /// Bytes still allocated at the end, per process and runtime layer (the application's:
    /// kreplay's own allocations are left out).
    pub live_bytes: Vec<(u32, Library, i64)>,
    /// The per-API summary of the application's probed calls, kreplay's own left out (empty
    /// unless [`merge_summarizing`] made it).
    pub app_summary: stats::AppSummary,
    /// Records left out of the trace, and why: each names its file and place (at most
    /// [`MAX_REJECTED_LISTED`]).
    pub rejected: Vec<Rejected>,
    /// Records left out, all of them.
    pub rejected_total: u64,
}

/// A record the merge left out: intact in its file (its chunk's CRC held) but not something a
/// trace can show, such as a span that ends before it begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The stream file.
    pub path: PathBuf,
    /// The record's place in that file (1 = its first record).
    pub ordinal: u64,
    /// The record's kind.
    pub kind: &'static str,
    /// Its start.
    pub ts_ns: u64,
    /// Why it was left out.
    pub why: String,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: record {} ({} at {} ns) left out: {}",
            self.path.display(),
            self.ordinal,
            self.kind,
            self.ts_ns,
            self.why
        )
    }
}

/// Records left out are listed up to this many (every one is counted).
pub const MAX_REJECTED_LISTED: usize = 100;

impl MergeReport {
    /// One warning line per damaged input and per record left out, and a count of those
    /// left out past [`MAX_REJECTED_LISTED`].
    pub fn warnings(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .damage
            .iter()
            .map(|d| format!("kreplay: warning: {d}"))
            .chain(
                self.rejected
                    .iter()
                    .map(|r| format!("kreplay: warning: {r}")),
            )
            .collect();
        let more = self.rejected_total - self.rejected.len() as u64;
        if more > 0 {
            v.push(format!("kreplay: warning: {more} more records left out"));
        }
        v
    }
}

/// Merges `inputs` into a Perfetto trace at `output`: written under a temporary name beside
/// it and renamed over it once complete, so an old `output` survives a failed or interrupted
/// merge ([`output::PendingFile`]); an `output` that is one of the inputs is refused.
pub fn merge(inputs: &[PathBuf], output: &Path) -> Result<MergeReport> {
    merge_with(inputs, output, Summarize::No)
}

/// [`merge`], also summarizing the application's probed calls per API in
/// [`MergeReport::app_summary`] (what `kreplay replay --probes` prints).
pub fn merge_summarizing(inputs: &[PathBuf], output: &Path) -> Result<MergeReport> {
    merge_with(inputs, output, Summarize::Calls)
}

/// [`merge_summarizing`], the summary also counting launches per kernel: for a trace whose
/// launch calls are kreplay-tool's (`--cupti-launches`), one record per launch, so no nested
/// launch call is counted twice.
pub fn merge_summarizing_launches(inputs: &[PathBuf], output: &Path) -> Result<MergeReport> {
    merge_with(inputs, output, Summarize::CallsAndLaunches)
}

/// What a merge summarizes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Summarize {
    No,
    Calls,
    CallsAndLaunches,
}

fn merge_with(inputs: &[PathBuf], output: &Path, summarize: Summarize) -> Result<MergeReport> {
    output::refuse_input_as_output(inputs, output)?;
    let (pending, file) = PendingFile::create(output)
        .with_context(|| format!("cannot write trace to {}", output.display()))?;
    let opts = WriterOptions {
        check_nesting: true,
        ..WriterOptions::default()
    };
    let writer = TraceWriter::with_options(TraceFile::new(file), opts);
    let mut renderer = render::Renderer::new(writer);
    match summarize {
        Summarize::No => {}
        Summarize::Calls => renderer.summarize_app(),
        Summarize::CallsAndLaunches => {
            renderer.summarize_app();
            renderer.count_launches();
        }
    }
    let mut merged = MergedStreams::open(inputs)?;
    let pids: Vec<u32> = (0..merged.len()).map(|i| merged.header(i).pid).collect();
    let paths: Vec<PathBuf> = (0..merged.len())
        .map(|i| merged.path(i).to_path_buf())
        .collect();
    let mut records = 0u64;
    let mut ordinals = vec![0u64; merged.len()];
    let (mut rejected, mut rejected_total) = (Vec::new(), 0u64);
    while let Some(m) = merged.next_ref() {
        if output::interrupted().is_some() {
            bail!("interrupted: {} left as it was", output.display());
        }
        records += 1;
        ordinals[m.stream] += 1;
        let rec = m.record;
        let why = match rec.end_ns().filter(|&e| e < rec.timestamp()) {
            Some(end) => format!("it ends at {end} ns, before it begins"),
            None => match renderer.record(m.stream, pids[m.stream], rec, m.late) {
                Ok(()) => continue,
                Err(e @ crate::perfetto::WriterError::Io { .. }) => {
                    return Err(e).with_context(|| format!("writing {}", output.display()));
                }
                // The writer checks each event before it writes it: what it wrote stays a
                // valid trace, and the merge goes on.
                Err(e) => e.to_string(),
            },
        };
        rejected_total += 1;
        if rejected.len() < MAX_REJECTED_LISTED {
            rejected.push(Rejected {
                path: paths[m.stream].clone(),
                ordinal: ordinals[m.stream],
                kind: rec.kind(),
                ts_ns: rec.timestamp(),
                why,
            });
        }
    }
    let damage = merged.damages();
    let mut live_bytes: Vec<(u32, Library, i64)> = renderer
        .live_bytes()
        .iter()
        .map(|(&(p, l), &b)| (p, l, b))
        .collect();
    live_bytes.sort();
    let app_summary = stats::AppSummary(renderer.take_app_summary());
    let (out, bytes, stats) = renderer
        .finish()
        .with_context(|| format!("writing {}", output.display()))?;
    let file = out
        .into_file()
        .with_context(|| format!("writing {}", output.display()))?;
    pending
        .commit(file)
        .with_context(|| format!("writing {}", output.display()))?;
    Ok(MergeReport {
        records,
        bytes,
        stats,
        damage,
        live_bytes,
        app_summary,
        rejected,
        rejected_total,
    })
}
