//! `kreplay trace` end to end: real uprobes on the simulated ROCm runtime, traces decoded by
//! the independent decoder (the official Perfetto protos), exact counts asserted.
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use kreplay_tests::stderr_watch::StderrWatch;
use kreplay_tests::{decode_trace, kreplay_bin, monotonic_ns, require_root, scratch, workload};
use serde_json::Value;

#[path = "trace_parts/all.rs"]
mod all;
#[path = "trace_parts/cuda.rs"]
mod cuda;
#[path = "trace_parts/cudart.rs"]
mod cudart;
#[path = "trace_parts/devices.rs"]
mod devices;
#[path = "trace_parts/dlopen.rs"]
mod dlopen;
#[path = "trace_parts/ends.rs"]
mod ends;
#[path = "trace_parts/files.rs"]
mod files;
#[path = "trace_parts/links.rs"]
mod links;
#[path = "trace_parts/new_files.rs"]
mod new_files;
#[path = "trace_parts/pids.rs"]
mod pids;
#[path = "trace_parts/registrations.rs"]
mod registrations;
#[path = "trace_parts/rings.rs"]
mod rings;
#[path = "trace_parts/slots.rs"]
mod slots;
#[path = "trace_parts/stops.rs"]
mod stops;
#[path = "trace_parts/tree.rs"]
mod tree;

/// The HIP live-bytes track of a thread that never calls hipSetDevice.
const HIP_LIVE: &str = "live bytes (HIP, device not set during trace)";

/// Spawns `cmd` with its stdin and stdout piped, for a program that prints `ready` and then
/// waits for a line on stdin before its GPU work; returns it, and its stdout, once it is ready.
fn spawn_ready(cmd: &mut Command) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, out)
}

/// `tests/trace/dlopen_target.c` built as `name` against the simulated HSA runtime, with the
/// simulated runtime's directory as its run path when `rpath` is set.
fn dlopen_target(name: &str, rpath: bool) -> PathBuf {
    let sim = kreplay_tests::sim_dir();
    let exe = scratch("hip-programs").join(name);
    let src = kreplay_tests::workspace_root().join("tests/trace/dlopen_target.c");
    let libdir = format!("-L{}", sim.display());
    let run_path = format!("-Wl,-rpath,{}", sim.display());
    let mut args = vec![
        "-std=gnu11",
        "-O1",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &libdir,
        "-l:libhsa-runtime64.so.1",
        "-ldl",
    ];
    if rpath {
        args.push(&run_path);
    }
    kreplay_tests::cc(&args);
    exe
}

/// Taken by every `--all` test: two system-wide traces at once would each resume the
/// processes the other holds.
static ALL_TRACES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds [`ALL_TRACES`] (a test that failed holding it does not poison it for the others).
fn one_all_trace() -> std::sync::MutexGuard<'static, ()> {
    ALL_TRACES.lock().unwrap_or_else(|e| e.into_inner())
}

fn out_path(name: &str) -> PathBuf {
    let p = scratch("trace").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&p);
    p
}

fn trace_command(output: &Path, extra: &[&str], cmd: &[&str]) -> Output {
    Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", output.to_str().unwrap()])
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .expect("run kreplay trace")
}

/// (uuid, name, pid, tid) of every thread track.
fn thread_tracks(d: &Value) -> Vec<(String, String, u64, u64)> {
    let mut v: Vec<_> = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == "thread")
        .map(|(u, t)| {
            (
                u.clone(),
                t["name"].as_str().unwrap().to_string(),
                t["pid"].as_u64().unwrap(),
                t["tid"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|t| t.3);
    v
}

/// Slice counts by name on one track.
fn counts(d: &Value, uuid: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in d["slices"][uuid]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        *m.entry(s["name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

/// The values of the counter track named `name`.
fn counter_values(d: &Value, name: &str) -> Vec<i64> {
    let (uuid, _) = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, t)| t["kind"] == "counter" && t["name"] == name)
        .unwrap_or_else(|| panic!("no counter track {name}"));
    d["counters"][uuid]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_f64().unwrap() as i64)
        .collect()
}

fn assert_valid(d: &Value) {
    assert_eq!(
        d["errors"].as_array().unwrap().len(),
        0,
        "decoder errors: {}",
        d["errors"]
    );
    for (id, s) in d["sequences"].as_object().unwrap() {
        assert_eq!(s["monotonic"], true, "sequence {id} not monotonic");
        assert_eq!(s["flags_ok"], true, "sequence {id} flags");
    }
}

fn all_slices_within(d: &Value, t0: u64, t1: u64) {
    for (track, slices) in d["slices"].as_object().unwrap() {
        for s in slices.as_array().unwrap() {
            let ts = s["ts"].as_u64().unwrap();
            let end = ts + s["dur"].as_u64().unwrap();
            assert!(
                ts >= t0 && end <= t1,
                "slice {s} on {track} outside the run [{t0}, {t1}]"
            );
        }
    }
}

/// The count on the summary's `events dropped: N` line (panics with stderr when missing).
fn events_dropped(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("events dropped: "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no 'events dropped' line: {stderr}"))
}

fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

fn hip_only(m: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    m.iter()
        .filter(|(k, _)| k.starts_with("hip"))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[test]
fn saxpy_under_trace_has_every_call_once() {
    require_root!();
    let out = out_path("saxpy");
    let t0 = monotonic_ns();
    let (nbuf, iters) = (3u64, 4u64);
    let r = trace_command(
        &out,
        &[],
        &[workload("saxpy").to_str().unwrap(), "3", "2000", "4"],
    );
    let t1 = monotonic_ns();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&r.stdout).contains(&format!("launches: {}", nbuf * iters)));
    assert!(stderr.contains("events dropped: 0\n"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    all_slices_within(&d, t0, t1);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "one application thread: {threads:?}");
    let c = counts(&d, &threads[0].0);
    assert_eq!(
        hip_only(&c),
        expect(&[
            ("hipDeviceSynchronize", 1),
            ("hipFree", 2 * nbuf),
            ("hipLaunchKernel", nbuf * iters),
            ("hipMalloc", 2 * nbuf),
            ("hipMemcpy", 3 * nbuf),
        ])
    );
    // The HIP layer's live bytes go up by each buffer and back to zero after the frees.
    let hip = counter_values(&d, HIP_LIVE);
    assert_eq!(hip.len() as u64, 4 * nbuf);
    assert_eq!(*hip.iter().max().unwrap(), (2 * nbuf * 2000 * 4) as i64);
    assert_eq!(*hip.last().unwrap(), 0);
    // Launch slices carry their geometry: 2000 floats in blocks of 256 → 8 blocks.
    let launch = d["slices"][&threads[0].0]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "hipLaunchKernel")
        .unwrap();
    assert_eq!(launch["args"]["grid"]["string"], "8x1x1", "{launch}");
    assert_eq!(launch["args"]["block"]["string"], "256x1x1", "{launch}");
    assert_eq!(launch["args"]["ret"]["int"], 0);
    // Every launch names its kernel; the summary counts them by name.
    let kernels: Vec<&Value> = d["slices"][&threads[0].0]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "hipLaunchKernel")
        .map(|s| &s["args"]["kernel"]["string"])
        .collect();
    assert_eq!(
        kernels,
        vec![&Value::from("saxpy"); (nbuf * iters) as usize]
    );
    let row = stderr
        .lines()
        .find(|l| l.starts_with("saxpy "))
        .expect(&stderr);
    assert_eq!(row.split_whitespace().nth(1), Some("12"), "{row}");
}

#[test]
fn high_qps_threads_each_get_their_own_exact_counts() {
    require_root!();
    let out = out_path("high_qps");
    let (threads, iters) = (8u64, 40u64);
    let r = trace_command(
        &out,
        &[],
        &[workload("high_qps").to_str().unwrap(), "8", "40"],
    );
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(stderr.contains("events dropped: 0\n"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let per_thread: Vec<BTreeMap<String, u64>> = thread_tracks(&d)
        .iter()
        .map(|t| hip_only(&counts(&d, &t.0)))
        .filter(|c| c.contains_key("hipLaunchKernel"))
        .collect();
    assert_eq!(per_thread.len() as u64, threads, "{per_thread:?}");
    let want = expect(&[
        ("hipFree", iters),
        ("hipLaunchKernel", iters),
        ("hipMalloc", iters),
        ("hipMemcpyAsync", iters),
        ("hipStreamSynchronize", iters),
    ]);
    for c in per_thread {
        assert_eq!(c, want);
    }
}

#[test]
fn leaks_show_in_the_counter_and_the_summary() {
    require_root!();
    let out = out_path("churn");
    let r = trace_command(
        &out,
        &[],
        &[workload("churn").to_str().unwrap(), "100", "10"],
    );
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    // allocation i is 1024 * (1 + i % 5) bytes; every tenth (i % 10 == 9) leaks.
    let leaked: u64 = (0..100u64)
        .filter(|i| i % 10 == 9)
        .map(|i| 1024 * (1 + i % 5))
        .sum();
    assert!(stdout.contains(&format!("leaked: {leaked}")), "{stdout}");
    let d = decode_trace(&out);
    assert_valid(&d);
    assert_eq!(*counter_values(&d, HIP_LIVE).last().unwrap(), leaked as i64);
    let line = stderr
        .lines()
        .find(|l| l.contains("(HIP):"))
        .expect(&stderr);
    assert!(
        line.ends_with(&format!("(HIP): 10 allocations, {leaked} bytes")),
        "{line}"
    );
}

/// Starts `kreplay trace -o OUT -p PID` and returns once it says its probes are attached.
fn trace_pid(out: &Path, pid: u32) -> (std::process::Child, StderrWatch) {
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "-o", out.to_str().unwrap(), "-p", &pid.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    (kreplay, watch)
}
