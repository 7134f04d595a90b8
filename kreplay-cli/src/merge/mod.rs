//! `kreplay merge`: stream files in, one Perfetto trace out.
//!
//! Inputs are merged by timestamp in one streaming pass
//! ([`kreplay_common::stream::MergedStreams`], which reorders each probe stream within a
//! small window) and rendered as they come ([`render`]); memory is bounded by the number of
//! streams, not their length.
pub mod gpu;
pub mod holdback;
pub mod live_bytes;
pub mod own_calls;
pub mod render;
pub mod replay_args;
pub mod stats;

use std::{
    io::BufWriter,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use kreplay_common::{
    api::Library,
    stream::{MergedStreams, StreamDamage},
};

use crate::output::{self, PendingFile};
use crate::perfetto::{TraceWriter, WriterOptions};

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
}

/// Merges `inputs` into a Perfetto trace at `output`: written under a temporary name beside
/// it and renamed over it once complete, so an old `output` survives a failed or interrupted
/// merge ([`output::PendingFile`]); an `output` that is one of the inputs is refused.
pub fn merge(inputs: &[PathBuf], output: &Path) -> Result<MergeReport> {
    merge_with(inputs, output, false)
}

/// [`merge`], also summarizing the application's probed calls per API in
/// [`MergeReport::app_summary`] (what `kreplay replay --probes` prints).
pub fn merge_summarizing(inputs: &[PathBuf], output: &Path) -> Result<MergeReport> {
    merge_with(inputs, output, true)
}

fn merge_with(inputs: &[PathBuf], output: &Path, summarize: bool) -> Result<MergeReport> {
    output::refuse_input_as_output(inputs, output)?;
    let (pending, file) = PendingFile::create(output)
        .with_context(|| format!("cannot write trace to {}", output.display()))?;
    let opts = WriterOptions {
        check_nesting: true,
        ..WriterOptions::default()
    };
    let writer = TraceWriter::with_options(BufWriter::new(file), opts);
    let mut renderer = render::Renderer::new(writer);
    if summarize {
        renderer.summarize_app();
    }
    let mut merged = MergedStreams::open(inputs)?;
    let pids: Vec<u32> = (0..merged.len()).map(|i| merged.header(i).pid).collect();
    let mut records = 0u64;
    for m in merged.by_ref() {
        if output::interrupted().is_some() {
            bail!("interrupted: {} left as it was", output.display());
        }
        records += 1;
        renderer
            .record(m.stream, pids[m.stream], &m.record, m.late)
            .with_context(|| format!("writing {}", output.display()))?;
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
        .into_inner()
        .map_err(|e| e.into_error())
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
    })
}
