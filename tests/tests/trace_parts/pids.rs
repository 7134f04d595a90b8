//! `kreplay trace -p PID`: exactly the calls made after the attach, and the draining thread's
//! raised priority beside the target's own.
use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdout},
};

use kreplay_tests::{decode_trace, require_root};

use super::{
    HIP_LIVE, StderrWatch, assert_valid, counter_values, counts, expect, hip_only, out_path,
    thread_tracks, trace_pid,
};

/// Lets a `spawn_pid_target` target that `kreplay` traces go, waits for its `done` line and
/// for both to exit, and checks that kreplay exited successfully (a target's exit is not an
/// error).
fn finish_pid_target(
    mut child: Child,
    mut child_out: BufReader<ChildStdout>,
    mut kreplay: Child,
    watch: StderrWatch,
) {
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    child_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    child.wait().unwrap();
    let status = kreplay.wait().unwrap();
    let stderr = watch.finish();
    assert!(status.success(), "target exit is not an error: {stderr}");
}

#[test]
fn attach_by_pid_sees_exactly_the_calls_made_after_attach() {
    require_root!();
    let out = out_path("pid");
    let (child, child_out) = kreplay_tests::spawn_pid_target(25);
    let pid = child.id();
    // Let the target go once the probes are attached.
    let (kreplay, watch) = trace_pid(&out, pid);
    finish_pid_target(child, child_out, kreplay, watch);
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].2, pid as u64);
    assert_eq!(
        hip_only(&counts(&d, &threads[0].0)),
        expect(&[("hipFree", 25), ("hipMalloc", 25)])
    );
    assert_eq!(*counter_values(&d, HIP_LIVE).last().unwrap(), 0);
}

/// The nice value of thread `tid` of process `pid` (field 19 of its stat line).
fn nice_of(pid: u32, tid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at field 3, the state.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace()
        .nth(19 - 3)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_draining_thread_runs_at_a_raised_priority_and_the_target_keeps_its_own() {
    require_root!();
    let out = out_path("nice");
    let (child, child_out) = kreplay_tests::spawn_pid_target(1);
    let pid = child.id();
    let (kreplay, watch) = trace_pid(&out, pid);
    // kreplay's main thread drains the ring buffer.
    let k = kreplay.id();
    assert_eq!(
        nice_of(k, k),
        kreplay_cli::probes::priority::READER_NICE as i64
    );
    assert_eq!(
        nice_of(pid, pid),
        nice_of(std::process::id(), std::process::id())
    );
    finish_pid_target(child, child_out, kreplay, watch);
}
