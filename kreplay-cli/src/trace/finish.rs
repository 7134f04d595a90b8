//! The end of `kreplay trace`: marks the last losses, closes the streams, renders the trace
//! while the probes detach, removes or keeps the streams, and prints the summary and the
//! closing lines.
use std::io::Write;

use anyhow::{Context, Result};

use crate::{
    merge::{self, gpu_time},
    output as out_file,
    probes::{
        cost::{ProgramCost, reader_cpu_line},
        loader::Probes,
        rings::rings_line,
    },
    quick_exit,
    trace::{collect::mark_losses, ending, nvtx, record::Recorded, setup::Paths},
};

/// What the user asked of the end of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct EndOptions {
    /// Keep the stream files (`--keep-streams`).
    pub keep_streams: bool,
    /// Print neither the per-API summary nor the leak list and kernel table (`--no-summary`).
    pub no_summary: bool,
    /// Some calls are only in kreplay-tool's streams (`--cupti-launches`): the per-API summary
    /// is made from the merged streams, not from the probes' calls as they came.
    pub summary_from_streams: bool,
}

/// What a run says once its trace is written, in the order it is said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Closing {
    /// Where kept streams are, or that their directory stayed.
    pub streams_note: Option<String>,
    /// The per-API summary, the leak lines and the GPU time per kernel table, as one text
    /// (`None` with `--no-summary`).
    pub summary: Option<String>,
    /// The reading thread's CPU time.
    pub reader_line: String,
    /// The rings and what each delivered.
    pub rings_line: String,
    /// The merge's warnings.
    pub warnings: Vec<String>,
    /// Records the merge could not place.
    pub unplaced: Option<String>,
    /// How long processes were held for kreplay.
    pub follow: Vec<String>,
    /// About the started command.
    pub command_notes: Vec<String>,
    /// The last line: the trace written.
    pub wrote: String,
}

impl Closing {
    /// The whole text, each line ended.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, l: &str| {
            out.push_str(l);
            out.push('\n');
        };
        if let Some(n) = &self.streams_note {
            line(&mut out, n);
        }
        if let Some(s) = &self.summary {
            out.push_str(s);
        }
        line(&mut out, &self.reader_line);
        line(&mut out, &self.rings_line);
        self.warnings
            .iter()
            .chain(&self.unplaced)
            .chain(&self.follow)
            .chain(&self.command_notes)
            .for_each(|l| line(&mut out, l));
        line(&mut out, &self.wrote);
        out
    }
}

/// The summary block: the per-API table (`summary`, already rendered), one line per process
/// and layer with allocations still live, then the GPU time per kernel table.
pub fn summary_text(summary: String, leak_lines: &[String], kernel_table: &str) -> String {
    let mut out = summary;
    for l in leak_lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(kernel_table);
    out
}

/// Ends a run: marks the last losses, closes the streams, renders the trace while the probes
/// detach, removes or keeps the streams, and prints the summary and the closing lines.
pub fn finish(
    opts: EndOptions,
    probes: Probes,
    cost: Option<ProgramCost>,
    mut rec: Recorded,
    p: &Paths,
) -> Result<()> {
    let (dir, output) = (&p.dir, &p.output);
    let counters = probes.counters()?;
    tracing::debug!(?counters, "probe counters at the end");
    if let Some(c) = &cost {
        eprintln!("{}", c.report(&probes));
        if let Some(line) = c.report_map_hook(&probes) {
            eprintln!("{line}");
        }
    }
    mark_losses(&mut rec.capture, &counters, &mut rec.reported)?;
    let leaks = probes.live_allocations().unwrap_or_default();
    // Detaching perf-event probes runs grace periods one probe at a time in the kernel, seconds
    // on a busy host: do it beside the rendering instead of before it.
    let attachments = probes.attachments();
    let slow_detach = !probes.uses_multi_links();
    let mut files = rec
        .capture
        .finish()
        .with_context(|| ending::kept_streams(dir, output))?;
    // The NVTX annotations kreplay-tool wrote for the traced processes.
    files.extend(nvtx::tool_streams(dir));
    // Every record is in the stream files now: an interrupt from here on ends kreplay at
    // once, and the streams say what the trace would have held.
    quick_exit::arm(&ending::interrupted_rendering(dir, output));
    if rec.say_stopping {
        eprintln!("{}", ending::stopping_line(attachments, slow_detach));
    }
    let detach = std::thread::spawn(move || quick_exit::detach_in_child(probes));
    let report = if opts.summary_from_streams {
        merge::merge_summarizing_launches(&files, output)
    } else {
        merge::merge(&files, output)
    }
    .with_context(|| ending::render_failed(dir, output))?;
    quick_exit::set_note(&ending::interrupted_written(output));
    // A request for launch probes (and its answer) is no stream: it goes whatever is kept.
    for f in crate::trace::launch_requests::leftovers(dir) {
        let _ = std::fs::remove_file(f);
    }
    let streams_note = ending::streams_note(opts.keep_streams, dir, &p.want, || {
        out_file::remove_own(dir, &files)
    });
    let command = rec.command.as_ref().map(|(p, pid)| (p.as_str(), *pid));
    // The calls the command made: with launch calls only in the tool's streams, the merged
    // summary's count.
    let calls = if opts.summary_from_streams {
        report.app_summary.0.total_calls()
    } else {
        rec.summary.total_calls()
    };
    let closing = Closing {
        streams_note,
        summary: (!opts.no_summary).then(|| {
            let summary = if opts.summary_from_streams {
                &report.app_summary.0
            } else {
                &rec.summary
            };
            summary_text(
                summary.render(counters.lost()),
                &ending::leak_lines(&leaks),
                &gpu_time::kernel_table(&report.stats.gpu_kernels),
            )
        }),
        reader_line: reader_cpu_line(rec.reader_cpu, rec.records, counters.wakeups),
        rings_line: rings_line(rec.rings.0, &rec.rings.1),
        warnings: report.warnings(),
        unplaced: ending::unplaced_line(report.stats.unrenderable),
        follow: rec
            .stops
            .map(|stops| ending::follow_lines(stops, &counters))
            .unwrap_or_default(),
        command_notes: ending::command_notes(command, calls, ending::running),
        wrote: ending::wrote_line(output, report.records, report.bytes),
    };
    let _ = std::io::stderr()
        .lock()
        .write_all(closing.text().as_bytes());
    let _ = detach.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> String {
        v.to_owned()
    }

    #[test]
    fn the_closing_lines_come_in_order_with_the_summary_after_the_streams_note() {
        let closing = Closing {
            streams_note: Some(s("kreplay: streams kept in b (a was taken)")),
            summary: Some(summary_text(
                s("API  calls\nhipMalloc  3\n"),
                &[s(
                    "still allocated at end: pid 7 (HIP): 1 allocations, 64 bytes",
                )],
                "kernel  GPU time\nk  1 ms\n",
            )),
            reader_line: s("reader: 1 ms"),
            rings_line: s("rings: 2"),
            warnings: vec![s("w1"), s("w2")],
            unplaced: Some(s(
                "kreplay: warning: 3 records could not be placed in the trace",
            )),
            follow: vec![s("held: 1")],
            command_notes: vec![s("kreplay: ./app (pid 9) is still running")],
            wrote: s("kreplay: wrote t.pftrace"),
        };
        assert_eq!(
            closing.text(),
            "kreplay: streams kept in b (a was taken)\n\
             API  calls\nhipMalloc  3\n\
             still allocated at end: pid 7 (HIP): 1 allocations, 64 bytes\n\
             kernel  GPU time\nk  1 ms\n\
             reader: 1 ms\nrings: 2\nw1\nw2\n\
             kreplay: warning: 3 records could not be placed in the trace\n\
             held: 1\nkreplay: ./app (pid 9) is still running\n\
             kreplay: wrote t.pftrace\n"
        );
    }

    #[test]
    fn without_a_summary_or_notes_only_the_reader_rings_and_wrote_lines_are_said() {
        let closing = Closing {
            reader_line: s("reader"),
            rings_line: s("rings"),
            wrote: s("wrote"),
            ..Closing::default()
        };
        assert_eq!(closing.text(), "reader\nrings\nwrote\n");
    }

    #[test]
    fn an_empty_kernel_table_adds_nothing_after_the_leaks() {
        assert_eq!(summary_text(s("sum\n"), &[], ""), "sum\n");
        assert_eq!(
            summary_text(s(""), &[s("l1"), s("l2")], "t\n"),
            "l1\nl2\nt\n"
        );
    }
}
