//! Tests of what `kreplay replay` says as it ends, with plain values.
use std::{os::unix::process::ExitStatusExt, path::PathBuf};

use kreplay_common::api::Library;

use super::*;
use crate::merge::{Rejected, stats::RenderStats};

fn report() -> MergeReport {
    MergeReport {
        records: 120,
        bytes: 4096,
        stats: RenderStats {
            slices: 40,
            dispatches: 7,
            copies: 3,
            flows: 10,
            late_windows: 2,
            ..RenderStats::default()
        },
        damage: Vec::new(),
        live_bytes: vec![(9, Library::Hip, 64), (9, Library::Hsa, 0)],
        app_summary: Default::default(),
        rejected: vec![Rejected {
            path: PathBuf::from("/r/1.krs"),
            ordinal: 5,
            kind: "slice",
            ts_ns: 100,
            why: "ends before it begins".to_owned(),
        }],
        rejected_total: 1,
    }
}

#[test]
fn without_probes_the_warnings_come_before_the_written_line() {
    let text = merged_text(&report(), Path::new("out.pftrace"), 2, None);
    let late = late_windows_warning(2).unwrap();
    assert_eq!(
        text,
        format!(
            "kreplay: warning: /r/1.krs: record 5 (slice at 100 ns) left out: ends before it begins\n\
             {late}\n\
             kreplay: wrote out.pftrace (120 records)\n"
        )
    );
}

#[test]
fn with_probes_the_summary_leaks_and_own_calls_precede_the_counts() {
    let mut r = report();
    r.rejected.clear();
    r.rejected_total = 0;
    r.stats.late_windows = 0;
    r.stats.own_calls.insert("hipMemcpy", 4);
    let text = merged_text(&r, Path::new("out.pftrace"), 2, Some(3));
    let summary = r.app_summary.0.render(0);
    assert!(summary.starts_with("API "), "{summary}");
    assert_eq!(
        text,
        format!(
            "{summary}\
             still allocated at end: pid 9 (HIP): 64 bytes\n\
             kreplay: kreplay's own runtime calls (on the \"kreplay (replay)\" tracks, left out above): hipMemcpy x4\n\
             kreplay: wrote out.pftrace (120 records from 2 tool and 3 probe streams: 40 slices, 7 dispatches, 3 copies, 10 flows)\n"
        )
    );
}

#[test]
fn the_interrupt_notes_say_where_the_streams_are_and_how_to_render_them() {
    let kept = kept_note(Path::new("/tmp/r 1"), Path::new("o.pftrace"));
    assert_eq!(
        kept,
        "the stream files are kept in /tmp/r 1: `kreplay merge '/tmp/r 1' '/tmp/r 1/probes.pftrace.streams' -o o.pftrace` renders them"
    );
    assert_eq!(
        interrupt_notes(true, "K"),
        (
            STOPPING,
            "kreplay: interrupted again: exiting now, the probes detach in the background; K"
                .to_owned()
        )
    );
    assert_eq!(
        interrupt_notes(false, "K"),
        (
            STOPPING_PLAIN,
            "kreplay: interrupted again: exiting now; K".to_owned()
        )
    );
    assert_eq!(
        interrupted_note("K"),
        "kreplay: interrupted: exiting now; K"
    );
    assert_eq!(
        written_note(Path::new("o.pftrace")),
        "kreplay: interrupted: exiting now; o.pftrace is written"
    );
}

#[test]
fn the_exit_status_is_the_commands_code_or_128_plus_its_signal() {
    // Raw wait statuses: exit code in the second byte, a signal in the low bits.
    assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
    assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
    assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGINT)), 130);
    assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
}
