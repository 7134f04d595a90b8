//! Process trees: `kreplay trace -- CMD` traces the processes CMD starts (here a shell running
//! two workloads at once, each loading its runtime from an rpath no other process used), each
//! on its own process track with exact counts; `--no-children` traces CMD alone; `-p PID
//! --children` adds the processes PID starts after the attach.
use std::{
    collections::BTreeMap,
    io::Write,
    process::{Command, Stdio},
};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, workload};
use serde_json::Value;

use super::{StderrWatch, assert_valid, counts, out_path, thread_tracks, trace_command};

/// hipLaunchKernel slices per process in a decoded trace.
fn launches_per_pid(d: &Value) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for (uuid, _, pid, _) in thread_tracks(d) {
        let n = counts(d, &uuid)
            .get("hipLaunchKernel")
            .copied()
            .unwrap_or(0);
        *m.entry(pid).or_insert(0) += n;
    }
    m
}

/// A shell line running saxpy with 1 buffer for `a` and `b` iterations at once.
fn two_at_once(a: u32, b: u32) -> String {
    let w = workload("saxpy");
    let w = w.to_str().unwrap();
    format!("{w} 1 1024 {a} > /dev/null & {w} 1 1024 {b} > /dev/null; wait")
}

#[test]
fn a_shell_starting_two_workloads_at_once_has_both_traced_from_their_first_call() {
    require_root!();
    let out = out_path("tree-two");
    let r = trace_command(&out, &[], &["sh", "-c", &two_at_once(2, 3)]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let per_pid = launches_per_pid(&d);
    let mut launches: Vec<u64> = per_pid.values().copied().filter(|&n| n > 0).collect();
    launches.sort_unstable();
    assert_eq!(launches, [2, 3], "{per_pid:?}\n{stderr}");
    // From the first call: each process registered its kernel (a start-up call) in the trace.
    for (uuid, _, pid, _) in thread_tracks(&d) {
        let c = counts(&d, &uuid);
        if c.contains_key("hipLaunchKernel") {
            assert_eq!(c.get("__hipRegisterFunction"), Some(&1), "pid {pid}: {c:?}");
            assert_eq!(c.get("hipMalloc"), Some(&2), "pid {pid}: {c:?}");
        }
    }
    // Two processes, each a process track of its own named after its program.
    let procs: Vec<(u64, String)> = d["tracks"]
        .as_object()
        .unwrap()
        .values()
        .filter(|t| t["kind"] == "process" && per_pid.contains_key(&t["pid"].as_u64().unwrap()))
        .map(|t| {
            (
                t["pid"].as_u64().unwrap(),
                t["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(procs.len(), 2, "{procs:?}");
    assert!(procs.iter().all(|(_, n)| n == "saxpy"), "{procs:?}");
    let row = stderr
        .lines()
        .find(|l| l.starts_with("hipLaunchKernel "))
        .expect(&stderr);
    assert_eq!(row.split_whitespace().nth(1), Some("5"), "{row}");
    assert!(
        stderr.contains("loader hook: ") && stderr.contains(" stops of followed processes"),
        "{stderr}"
    );
}

#[test]
fn no_children_traces_the_command_alone() {
    require_root!();
    let out = out_path("tree-alone");
    let r = trace_command(&out, &["--no-children"], &["sh", "-c", &two_at_once(2, 3)]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(
        stderr.contains("kreplay: sh made no GPU runtime call"),
        "{stderr}"
    );
    assert!(!stderr.contains("loader hook"), "{stderr}");
}

#[test]
fn children_adds_the_processes_a_traced_pid_starts_later() {
    require_root!();
    let out = out_path("tree-pid");
    // A shell that waits for a line, then runs the workload twice in a row: it maps no runtime
    // itself, as a launcher does not.
    let w = workload("saxpy");
    let script = format!(
        "read go; {w} 1 1024 4 > /dev/null; {w} 1 1024 1 > /dev/null",
        w = w.display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "-o", out.to_str().unwrap(), "--children", "-p"])
        .arg(shell.id().to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    shell.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert!(shell.wait().unwrap().success());
    // kreplay ends once the shell and every process it started have exited.
    assert!(kreplay.wait().unwrap().success());
    let stderr = watch.finish();
    let d = decode_trace(&out);
    assert_valid(&d);
    let mut launches: Vec<u64> = launches_per_pid(&d)
        .into_values()
        .filter(|&n| n > 0)
        .collect();
    launches.sort_unstable();
    assert_eq!(launches, [1, 4], "{stderr}");
}
