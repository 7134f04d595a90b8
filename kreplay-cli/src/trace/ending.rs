//! What `kreplay trace` says as it ends: about the traced command, the stream files (kept,
//! removed, or kept by a failed run), allocations still live, and the trace it wrote.
use std::{collections::BTreeMap, path::Path};

use kreplay_common::{
    api::spec_of,
    probe::{AllocInfo, AllocKey},
};

use crate::merge::labels::layer_name;

/// Whether process `pid` exists and has not exited (a zombie has).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the command name, which is in parentheses and may hold any
            // character: it is the first field after the last ')'.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// `path` as one shell word: as is when it holds only characters no shell treats specially,
/// else in single quotes.
pub fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command that renders the stream files in `dir` into `output`.
pub fn merge_command(dir: &Path, output: &Path) -> String {
    format!(
        "kreplay merge {} -o {}",
        shell_word(dir),
        shell_word(output)
    )
}

/// What a run that fails after creating its stream files says about them: they are kept,
/// where, and the command that renders the records they hold.
pub fn kept_streams(dir: &Path, output: &Path) -> String {
    format!(
        "the stream files written so far are kept in {}; once what follows is fixed (a full \
         disk: free space), `{}` renders the records they hold",
        dir.display(),
        merge_command(dir, output)
    )
}

/// What a second interrupt says while the trace is being rendered: the records are all in
/// the stream files, and the command that renders them.
pub fn interrupted_rendering(dir: &Path, output: &Path) -> String {
    format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; the \
         stream files are kept in {}: `{}` renders them",
        dir.display(),
        merge_command(dir, output)
    )
}

/// What a second interrupt says once the trace is written.
pub fn interrupted_written(output: &Path) -> String {
    format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; {} is \
         written",
        output.display()
    )
}

/// How long the processes held for kreplay were stopped: median and longest ns, and how many
/// stops, per reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stops {
    /// Followed processes in the loader's hook.
    pub loader: Option<(u64, u64, usize)>,
    /// Processes mapping a runtime library file not probed yet (`--all`).
    pub new_files: Option<(u64, u64, usize)>,
}

/// What a trace that held processes says about it: how often and how long they were held,
/// the children it could not follow and the processes it could not hold.
pub fn follow_lines(stops: Stops, c: &crate::probes::loader::Counters) -> Vec<String> {
    let mut out = Vec::new();
    let ms = |ns: u64| ns as f64 / 1e6;
    if let Some((median, longest, n)) = stops.loader {
        out.push(format!(
            "loader hook: {n} stops of followed processes, {:.2} ms median, {:.2} ms longest",
            ms(median),
            ms(longest)
        ));
    }
    if let Some((median, longest, n)) = stops.new_files {
        out.push(format!(
            "new runtime library files: {n} processes held until the file was probed, {:.2} ms median, {:.2} ms longest",
            ms(median),
            ms(longest)
        ));
    }
    if c.unfollowed > 0 {
        out.push(format!(
            "kreplay: warning: {} child processes were not followed (the set of followed processes was full): their calls are not in the trace",
            c.unfollowed
        ));
    }
    if c.loads_lost > 0 {
        out.push(format!(
            "kreplay: warning: {} library loads of followed processes were not held (the loader hook's ring was full): calls before the next rescan may be missing",
            c.loads_lost
        ));
    }
    if c.new_files_lost > 0 {
        out.push(format!(
            "kreplay: warning: {} processes mapping a new runtime library file were not held (the ring of stops or the set of held processes was full): their calls before the next rescan may be missing",
            c.new_files_lost
        ));
    }
    out
}

/// What a first Ctrl-C or SIGTERM says as recording stops; `slow_detach` when the probes are
/// perf events, which take the kernel seconds to detach.
pub fn stopping_line(attachments: usize, slow_detach: bool) -> String {
    let slow = if slow_detach { " (a few seconds)" } else { "" };
    format!(
        "kreplay: stopping: writing the trace and detaching {attachments} probes{slow}; Ctrl-C \
         again to exit at once"
    )
}

/// The context of a failed render: the stream files stay, and how to render them again.
pub fn render_failed(dir: &Path, output: &Path) -> String {
    format!(
        "rendering the trace (the stream files are kept in {}: `{}` renders them again)",
        dir.display(),
        merge_command(dir, output)
    )
}

/// Keeps the stream files in `dir` (`--keep-streams`) or removes them with `remove_own`
/// (which says whether the directory went too), and returns what to say about it: where kept
/// ones are when `dir` is not the `want`ed name, or that a directory holding others' files
/// stayed.
pub fn streams_note(
    keep: bool,
    dir: &Path,
    want: &Path,
    remove_own: impl FnOnce() -> bool,
) -> Option<String> {
    if keep {
        // Said when they are not where --help says (`kreplay replay --probes` uses this
        // command in a directory of its own, where the name is always free).
        (dir != want).then(|| {
            format!(
                "kreplay: streams kept in {} ({} was taken)",
                dir.display(),
                want.display()
            )
        })
    } else if remove_own() {
        None
    } else {
        Some(format!(
            "kreplay: warning: kept {}: it holds files this run did not write",
            dir.display()
        ))
    }
}

/// The allocations still live at the end, one line per process and runtime layer, in pid
/// then layer order.
pub fn leak_lines(leaks: &[(AllocKey, AllocInfo)]) -> Vec<String> {
    let mut by_pid: BTreeMap<(u32, &str), (u64, u64)> = BTreeMap::new();
    for (k, v) in leaks {
        let layer = spec_of(v.api).map_or("?", |s| layer_name(s.library));
        let ent = by_pid.entry((k.pid, layer)).or_default();
        ent.0 += 1;
        ent.1 += v.size;
    }
    by_pid
        .into_iter()
        .map(|((pid, layer), (n, bytes))| {
            format!("still allocated at end: pid {pid} ({layer}): {n} allocations, {bytes} bytes")
        })
        .collect()
}

/// The warning for records the merge could not place, when there are any.
pub fn unplaced_line(unrenderable: u64) -> Option<String> {
    (unrenderable > 0).then(|| {
        format!("kreplay: warning: {unrenderable} records could not be placed in the trace")
    })
}

/// What is said about a started `command` (its program and pid) at the end: that it made no
/// runtime call, and that it still runs (`running`) untraced because kreplay stopped first.
pub fn command_notes(
    command: Option<(&str, u32)>,
    total_calls: u64,
    running: impl Fn(u32) -> bool,
) -> Vec<String> {
    let Some((program, pid)) = command else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    if total_calls == 0 {
        notes.push(format!(
            "kreplay: {program} made no GPU runtime call: it never loaded libcuda, libamdhip64 or libhsa-runtime64 (or none kreplay could probe)"
        ));
    }
    if running(pid) {
        notes.push(format!(
            "kreplay: {program} (pid {pid}) is still running, untraced: kreplay stopped before it \
             exited, and its calls from now on are not in the trace"
        ));
    }
    notes
}

/// The last line: the trace written, its size, and where to open it.
pub fn wrote_line(output: &Path, records: u64, bytes: u64) -> String {
    format!(
        "kreplay: wrote {} ({records} events, {bytes} bytes); open it at https://ui.perfetto.dev",
        output.display()
    )
}

#[cfg(test)]
mod tests;
