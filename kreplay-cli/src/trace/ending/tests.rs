//! What the end of a trace says, line by line.

use std::cell::Cell;

use kreplay_common::api::id_of;

use super::*;

#[test]
fn paths_with_shell_characters_are_single_quoted() {
    assert_eq!(
        shell_word(Path::new("/tmp/run.pftrace")),
        "/tmp/run.pftrace"
    );
    assert_eq!(shell_word(Path::new("a b")), "'a b'");
    assert_eq!(shell_word(Path::new("it's")), r"'it'\''s'");
    assert_eq!(shell_word(Path::new("")), "''");
    assert_eq!(
        merge_command(Path::new("/d/x y.streams"), Path::new("out.pftrace")),
        "kreplay merge '/d/x y.streams' -o out.pftrace"
    );
}

#[test]
fn this_process_runs_and_a_pid_that_cannot_exist_does_not() {
    assert!(running(std::process::id()));
    assert!(!running(u32::MAX));
}

#[test]
fn interrupt_and_failure_messages_name_the_streams_and_the_merge_command() {
    let (dir, out) = (Path::new("/t/a b.streams"), Path::new("/t/a b"));
    assert_eq!(
        interrupted_rendering(dir, out),
        "kreplay: interrupted again: exiting now, the probes detach in the background; the \
         stream files are kept in /t/a b.streams: `kreplay merge '/t/a b.streams' -o '/t/a b'` \
         renders them"
    );
    assert_eq!(
        interrupted_written(out),
        "kreplay: interrupted again: exiting now, the probes detach in the background; /t/a b \
         is written"
    );
    assert_eq!(
        stopping_line(96, true),
        "kreplay: stopping: writing the trace and detaching 96 probes (a few seconds); Ctrl-C \
         again to exit at once"
    );
    assert_eq!(
        stopping_line(96, false),
        "kreplay: stopping: writing the trace and detaching 96 probes; Ctrl-C again to exit at \
         once"
    );
    assert_eq!(
        render_failed(dir, out),
        "rendering the trace (the stream files are kept in /t/a b.streams: `kreplay merge \
         '/t/a b.streams' -o '/t/a b'` renders them again)"
    );
}

#[test]
fn kept_streams_are_named_only_when_elsewhere_and_removed_ones_only_when_others_stay() {
    let (want, fresh) = (Path::new("t.streams"), Path::new("t.streams.2"));
    let removed = &Cell::new(0);
    let remove = |all_gone| {
        move || {
            removed.set(removed.get() + 1);
            all_gone
        }
    };
    assert_eq!(streams_note(true, want, want, remove(true)), None);
    assert_eq!(
        streams_note(true, fresh, want, remove(true)).as_deref(),
        Some("kreplay: streams kept in t.streams.2 (t.streams was taken)")
    );
    assert_eq!(removed.get(), 0, "kept streams are never removed");
    assert_eq!(streams_note(false, fresh, want, remove(true)), None);
    assert_eq!(
        streams_note(false, want, want, remove(false)).as_deref(),
        Some("kreplay: warning: kept t.streams: it holds files this run did not write")
    );
    assert_eq!(removed.get(), 2);
}

#[test]
fn live_allocations_are_summed_per_process_and_layer() {
    let alloc = |pid, api: &str, size| {
        (
            AllocKey {
                pid,
                _pad: 0,
                ptr: size * 16,
            },
            AllocInfo {
                size,
                ts_ns: 1,
                tid: pid,
                api: id_of(api).unwrap(),
                _pad: 0,
            },
        )
    };
    let mut unknown = alloc(5, "hipMalloc", 7);
    unknown.1.api = u16::MAX;
    let leaks = [
        alloc(9, "cuMemAlloc_v2", 100),
        alloc(5, "hipMalloc", 10),
        alloc(5, "hipMalloc", 30),
        alloc(5, "hsa_amd_memory_pool_allocate", 4096),
        unknown,
    ];
    assert_eq!(
        leak_lines(&leaks),
        [
            "still allocated at end: pid 5 (?): 1 allocations, 7 bytes",
            "still allocated at end: pid 5 (HIP): 2 allocations, 40 bytes",
            "still allocated at end: pid 5 (HSA): 1 allocations, 4096 bytes",
            "still allocated at end: pid 9 (CUDA driver): 1 allocations, 100 bytes",
        ]
    );
    assert_eq!(leak_lines(&[]), Vec::<String>::new());
}

#[test]
fn the_command_notes_say_no_calls_and_still_running() {
    let alive = |pid| pid == 41;
    let gone = |_| false;
    assert_eq!(command_notes(None, 0, alive), Vec::<String>::new());
    assert_eq!(
        command_notes(Some(("./app", 40)), 3, gone),
        Vec::<String>::new()
    );
    assert_eq!(
        command_notes(Some(("./app", 41)), 0, alive),
        [
            "kreplay: ./app made no GPU runtime call: it never loaded libcuda, libamdhip64 or \
             libhsa-runtime64 (or none kreplay could probe)",
            "kreplay: ./app (pid 41) is still running, untraced: kreplay stopped before it \
             exited, and its calls from now on are not in the trace",
        ]
    );
    assert_eq!(command_notes(Some(("./app", 41)), 1, alive).len(), 1);
}

#[test]
fn the_last_lines_count_what_was_written() {
    assert_eq!(unplaced_line(0), None);
    assert_eq!(
        unplaced_line(3).as_deref(),
        Some("kreplay: warning: 3 records could not be placed in the trace")
    );
    assert_eq!(
        wrote_line(Path::new("run.pftrace"), 1200, 34567),
        "kreplay: wrote run.pftrace (1200 events, 34567 bytes); open it at https://ui.perfetto.dev"
    );
}

#[test]
fn held_processes_report_their_stops_and_what_could_not_be_followed_or_held() {
    use crate::probes::loader::Counters;
    let loader = Stops {
        loader: Some((1_250_000, 4_000_000, 6)),
        new_files: None,
    };
    assert_eq!(
        follow_lines(loader, &Counters::default()),
        ["loader hook: 6 stops of followed processes, 1.25 ms median, 4.00 ms longest"]
    );
    let all = Stops {
        loader: None,
        new_files: Some((800_000, 2_500_000, 4)),
    };
    assert_eq!(
        follow_lines(all, &Counters::default()),
        [
            "new runtime library files: 4 processes held until the file was probed, 0.80 ms median, 2.50 ms longest"
        ]
    );
    assert_eq!(
        follow_lines(Stops::default(), &Counters::default()),
        Vec::<String>::new()
    );
    let c = Counters {
        unfollowed: 2,
        loads_lost: 3,
        new_files_lost: 1,
        ..Counters::default()
    };
    assert_eq!(
        follow_lines(Stops::default(), &c),
        [
            "kreplay: warning: 2 child processes were not followed (the set of followed processes was full): their calls are not in the trace",
            "kreplay: warning: 3 library loads of followed processes were not held (the loader hook's ring was full): calls before the next rescan may be missing",
            "kreplay: warning: 1 processes mapping a new runtime library file were not held (the ring of stops or the set of held processes was full): their calls before the next rescan may be missing",
        ]
    );
}
