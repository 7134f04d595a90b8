//! `kreplay trace` end to end: real uprobes on the simulated ROCm runtime, traces decoded by
//! the independent decoder (the official Perfetto protos), exact counts asserted.
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

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
#[path = "trace_parts/files.rs"]
mod files;
#[path = "trace_parts/links.rs"]
mod links;
#[path = "trace_parts/new_files.rs"]
mod new_files;
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

/// Reads a child's stderr on a thread: `wait_for` blocks until a line starting with a prefix
/// arrives (kreplay prints `kreplay: tracing ...` once its probes are attached), `finish`
/// returns everything read.
struct StderrWatch {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl StderrWatch {
    fn new(child: &mut std::process::Child) -> StderrWatch {
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        StderrWatch {
            lines: rx,
            seen: Vec::new(),
        }
    }

    fn wait_for(&mut self, prefix: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.starts_with(prefix);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("no line starting with {prefix:?}; got {:?}", self.seen),
            }
        }
    }

    fn finish(mut self) -> String {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(120)) {
            self.seen.push(line);
        }
        self.seen.join("\n") + "\n"
    }
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

/// Lets a `spawn_pid_target` target that `kreplay` traces go, waits for its `done` line and
/// for both to exit, and checks that kreplay exited successfully (a target's exit is not an
/// error).
fn finish_pid_target(
    mut child: std::process::Child,
    mut child_out: BufReader<std::process::ChildStdout>,
    mut kreplay: std::process::Child,
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

#[test]
fn bad_targets_and_outputs_are_one_clear_line() {
    let bin = kreplay_bin();
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let spid = sleeper.id().to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["trace", "-p", "999999999"], "kreplay: error: no such process: 999999999".into()),
        (
            vec!["trace", "-p", &spid],
            format!(
                "kreplay: error: process {spid} (sleep) maps no supported GPU runtime library \
                 (looked for libhsa-runtime64.so*, libamdhip64.so*, libcuda.so*, libcudart.so*, \
                 libroctx64.so*)"
            ),
        ),
        (
            vec!["trace", "-o", "/nonexistent-dir/x.pftrace", "--", "true"],
            "kreplay: error: cannot write trace to /nonexistent-dir/x.pftrace: No such file or directory".into(),
        ),
        (vec!["trace", "--duration", "soon", "--all"], "error: invalid value 'soon' for '--duration".into()),
        (vec!["trace"], "kreplay: error: say what to trace: -p PID, --all, or a command after --".into()),
    ];
    for (args, want) in cases {
        let out = Command::new(&bin).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stderr.starts_with(&want),
            "{args:?}:\n{stderr}\nwanted: {want}"
        );
        if want.starts_with("kreplay:") {
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        }
    }
    let mut sleeper = sleeper;
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

/// Pids of the direct children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(s) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

#[test]
fn a_target_killed_mid_trace_still_gives_a_valid_trace() {
    require_root!();
    let out = out_path("killed");
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "-o", out.to_str().unwrap(), "--"])
        .args([workload("high_qps").to_str().unwrap(), "4", "100000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing");
    std::thread::sleep(Duration::from_millis(1000));
    let kids = children(kreplay.id());
    assert_eq!(kids.len(), 1, "{kids:?}");
    // SAFETY: kill sends a signal to a pid; no memory is involved.
    assert_eq!(unsafe { libc::kill(kids[0] as i32, libc::SIGKILL) }, 0);
    let status = kreplay.wait().unwrap();
    let stderr = watch.finish();
    assert_eq!(
        status.code(),
        Some(128 + 9),
        "exit code is the command's: {stderr}"
    );
    assert!(stderr.contains("kreplay: wrote"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let launches: u64 = thread_tracks(&d)
        .iter()
        .map(|t| {
            counts(&d, &t.0)
                .get("hipLaunchKernel")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    assert!(launches > 0, "the calls before the kill are in the trace");
}

#[test]
fn sigint_stops_cleanly_and_a_tiny_ring_buffer_reports_every_drop() {
    require_root!();
    let out = out_path("sigint");
    let mut kreplay = Command::new(kreplay_bin())
        .args([
            "trace",
            "--ringbuf-bytes",
            "4096",
            "-o",
            out.to_str().unwrap(),
            "--",
        ])
        // Four threads calling an idle hipStreamSynchronize as fast as they can: the ring must
        // fill faster than kreplay drains it whatever the host's speed (a workload whose calls
        // wait for the device, like high_qps's hipFree, can be slow enough that it never does).
        .arg(kreplay_tests::build_callloop())
        .args(["4", "100000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing");
    std::thread::sleep(Duration::from_millis(1500));
    let kids = children(kreplay.id());
    // SAFETY: plain signal send.
    assert_eq!(unsafe { libc::kill(kreplay.id() as i32, libc::SIGINT) }, 0);
    // kreplay stops and leaves the command running (it is the user's); the command shares
    // kreplay's stderr pipe, so it must be gone before the pipe can reach end-of-file.
    // Detaching every probe while the command still hammers them takes the kernel a while on
    // a loaded host (one SRCU grace period per probe); the bound is generous on purpose.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while kreplay.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "kreplay did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for k in &kids {
        assert!(
            Path::new(&format!("/proc/{k}")).exists(),
            "the command runs on after kreplay stops"
        );
        // SAFETY: plain signal send; the workload would otherwise run on.
        unsafe { libc::kill(*k as i32, libc::SIGKILL) };
    }
    let status = kreplay.wait().unwrap();
    let stderr = watch.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let dropped = events_dropped(&stderr);
    assert!(
        dropped > 0,
        "a 4 KiB ring buffer cannot keep up with 4 threads: {stderr}"
    );
    let d = decode_trace(&out);
    assert_valid(&d);
    // Every drop is visible in the trace as a marker whose counts add up to the summary.
    let marked: u64 = d["instants"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap().iter())
        .filter(|i| i["name"] == "events dropped")
        .map(|i| i["args"]["count"]["uint"].as_u64().unwrap())
        .sum();
    assert_eq!(marked, dropped);
}
