//! `kreplay merge`: merge stream files (the tool's and the probes') into one Perfetto trace.
use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use clap::Args;
use kreplay_cli::merge::gpu_time::kernel_table;
use kreplay_cli::merge::render::OWN_TRACK;
use kreplay_cli::merge::stats::{late_windows_warning, own_calls_line};
use kreplay_cli::{merge, output};
use kreplay_common::stream::StreamReader;

/// Arguments of `kreplay merge`.
#[derive(Args, Debug)]
#[command(
    after_help = "Inputs are stream files (*.krs) written by the injected tool \
    (tool-<pid>.krs) and by `kreplay trace --keep-streams` (probes-<pid>-<tid>.krs), or \
    directories holding them (their *.krs files, not recursive).\n\n\
    A damaged file (a process killed mid-write: torn last chunk, bad checksum) is not an \
    error: everything before the damage is kept, a warning names the file and the byte \
    offset, and the exit code stays 0 — a torn tail is the normal result of a crash, which \
    is what the format is built for. A file that is not a stream at all, whose header is \
    torn, or whose times are on a clock other than CLOCK_MONOTONIC is skipped with a warning.\n\n\
    The trace is written under a temporary name beside FILE (.FILE.tmp-PID) and renamed over \
    FILE only once complete: a merge that fails or is interrupted (Ctrl-C, SIGTERM) leaves an \
    old FILE as it was. An output that is one of the inputs (by any name) is refused.\n\n\
    Exit codes: 0 the trace was written (warnings on stderr say what was lost); 1 nothing \
    usable to merge, a missing input, an output that is an input, or the output cannot be \
    written; 128+N interrupted by signal N.\n\n\
    Example:\n  kreplay merge run.streams/ -o run.pftrace   then open it at https://ui.perfetto.dev"
)]
pub struct MergeArgs {
    /// Stream files (*.krs) or directories of them.
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// Trace file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.pftrace")]
    output: PathBuf,
}

/// The stream files named by `inputs`: files as given, directories' `*.krs` sorted by name.
fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        let meta =
            std::fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if !meta.is_dir() {
            files.push(input.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(input)
            .with_context(|| format!("cannot list {}", input.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "krs") && p.is_file())
            .collect();
        if found.is_empty() {
            bail!("no stream files (*.krs) in {}", input.display());
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Keeps the files whose header reads; warns about the others.
fn readable(files: Vec<PathBuf>, err: &mut impl Write) -> Vec<PathBuf> {
    files
        .into_iter()
        .filter(|f| match StreamReader::open(f) {
            Ok(_) => true,
            Err(e) => {
                let _ = writeln!(err, "kreplay: warning: skipped {e}");
                false
            }
        })
        .collect()
}

/// Runs `kreplay merge`; returns the exit code.
pub fn run(args: MergeArgs) -> Result<u8> {
    output::catch_interrupts();
    let files = expand(&args.inputs)?;
    // Every file named, readable stream or not: none is the output's to replace.
    output::refuse_input_as_output(&files, &args.output)?;
    let stderr = std::io::stderr();
    let mut e = stderr.lock();
    let usable = readable(files, &mut e);
    if usable.is_empty() {
        bail!("none of the inputs is a readable kreplay stream");
    }
    let report = match merge::merge(&usable, &args.output) {
        Ok(r) => r,
        Err(err) => {
            if let Some(sig) = output::interrupted() {
                let _ = writeln!(e, "kreplay: {err}");
                return Ok((128 + sig) as u8);
            }
            return Err(err);
        }
    };
    for w in report.warnings() {
        let _ = writeln!(e, "{w}");
    }
    let s = &report.stats;
    if let Some(w) = late_windows_warning(s.late_windows) {
        let _ = writeln!(e, "{w}");
    }
    if !s.own_calls.is_empty() {
        let _ = writeln!(
            e,
            "kreplay: kreplay's own runtime calls (on the \"{OWN_TRACK}\" tracks): {}",
            own_calls_line(&s.own_calls)
        );
    }
    let _ = write!(e, "{}", kernel_table(&s.gpu_kernels));
    if s.unrenderable > 0 {
        let _ = writeln!(
            e,
            "kreplay: warning: {} records could not be placed in the trace",
            s.unrenderable
        );
    }
    let _ = writeln!(
        e,
        "kreplay: wrote {} ({} records from {} streams: {} slices, {} dispatches, {} copies, {} flows; {} bytes); open it at https://ui.perfetto.dev",
        display(&args.output),
        report.records,
        usable.len(),
        s.slices,
        s.dispatches,
        s.copies,
        s.flows,
        report.bytes
    );
    Ok(0)
}

fn display(p: &Path) -> String {
    p.display().to_string()
}
