//! What `kreplay replay` says as it ends: the notes of a first and a second interrupt, the
//! lines after the merge, and the exit status of the command it ran.
use std::{path::Path, process::ExitStatus};

use crate::{
    merge::{
        MergeReport,
        render::{OWN_TRACK, layer_name},
        stats::{late_windows_warning, own_calls_line},
    },
    replay::files::PROBES_STREAMS,
    trace::ending::shell_word,
};

/// What the first interrupt of `replay` without probes prints.
pub const STOPPING_PLAIN: &str =
    "kreplay: stopping: the trace is written once the command ends; Ctrl-C again to exit at once";

/// What the first interrupt of `replay --probes` prints.
pub const STOPPING: &str = "kreplay: stopping: the trace is written once the command and the \
    probes' trace end; Ctrl-C again to exit at once";

/// What the run says when the tool wrote no stream.
pub const NO_STREAM: &str =
    "kreplay: the tool wrote no stream (did the command use the HSA or CUDA runtime?)";

/// The command that renders the tool's streams in `dir` and the probes' beside them into
/// `output`.
pub fn merge_all_command(dir: &Path, output: &Path) -> String {
    format!(
        "kreplay merge {} {} -o {}",
        shell_word(dir),
        shell_word(&dir.join(PROBES_STREAMS)),
        shell_word(output)
    )
}

/// Where the streams are kept when kreplay ends early, and how to render them.
pub fn kept_note(dir: &Path, output: &Path) -> String {
    format!(
        "the stream files are kept in {}: `{}` renders them",
        dir.display(),
        merge_all_command(dir, output)
    )
}

/// The first interrupt's line and the second's note while the command runs (`kept` is
/// [`kept_note`]'s).
pub fn interrupt_notes(probes: bool, kept: &str) -> (&'static str, String) {
    if probes {
        (
            STOPPING,
            format!(
                "kreplay: interrupted again: exiting now, the probes detach in the background; \
                 {kept}"
            ),
        )
    } else {
        (
            STOPPING_PLAIN,
            format!("kreplay: interrupted again: exiting now; {kept}"),
        )
    }
}

/// The note of an interrupt once the command has ended.
pub fn interrupted_note(kept: &str) -> String {
    format!("kreplay: interrupted: exiting now; {kept}")
}

/// The note of an interrupt once `output` is written (`--probes`).
pub fn written_note(output: &Path) -> String {
    format!(
        "kreplay: interrupted: exiting now; {} is written",
        output.display()
    )
}

/// What the run says once the trace is written: the merge's warnings, late windows, and with
/// probes (`probe_streams`: how many) the application's per-API summary, what it left
/// allocated and kreplay's own calls; last the trace written. One text, each line ended.
pub fn merged_text(
    report: &MergeReport,
    output: &Path,
    tool_streams: usize,
    probe_streams: Option<usize>,
) -> String {
    let mut out = String::new();
    let mut line = |l: &str| {
        out.push_str(l);
        out.push('\n');
    };
    for w in report.warnings() {
        line(&w);
    }
    let s = &report.stats;
    if let Some(w) = late_windows_warning(s.late_windows) {
        line(&w);
    }
    let Some(probe_streams) = probe_streams else {
        line(&format!(
            "kreplay: wrote {} ({} records)",
            output.display(),
            report.records
        ));
        return out;
    };
    out.push_str(&report.app_summary.0.render(s.dropped));
    for (pid, layer, bytes) in report.live_bytes.iter().filter(|l| l.2 != 0) {
        out.push_str(&format!(
            "still allocated at end: pid {pid} ({}): {bytes} bytes\n",
            layer_name(*layer)
        ));
    }
    out.push_str(&format!(
        "kreplay: kreplay's own runtime calls (on the \"{OWN_TRACK}\" tracks, left out above): {}\n",
        own_calls_line(&s.own_calls)
    ));
    out.push_str(&format!(
        "kreplay: wrote {} ({} records from {} tool and {} probe streams: {} slices, {} dispatches, {} copies, {} flows)\n",
        output.display(),
        report.records,
        tool_streams,
        probe_streams,
        s.slices,
        s.dispatches,
        s.copies,
        s.flows
    ));
    out
}

/// kreplay's exit status for the command's: its exit code, or as a shell reports a command
/// killed by a signal (Ctrl-C), 128 + the signal; 1 when neither is known.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .map_or_else(|| status.signal().map_or(1, |s| 128 + s as u8), |c| c as u8)
}

#[cfg(test)]
mod tests;
