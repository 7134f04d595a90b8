//! Stopping kreplay with signals: a second interrupt while `trace` or `audit` is ending exits
//! at once (the probes' teardown, seconds in the kernel when each function has a perf event,
//! goes on in a background process; the tests that need that teardown to be slow force perf
//! events with `KREPLAY_UPROBE_MULTI=0`, since uprobe-multi links close in a moment),
//! the kept streams merge, a command kreplay started and left running is named, and a first
//! interrupt of a replay writes the trace of what the command replayed.
//! Its own test binary: the teardowns it leaves behind must not run beside trace.rs's
//! timing-sensitive tests.
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, scratch, spawn_pid_target_with};

/// One perf event per probed function: the teardown then takes seconds, which the tests of a
/// second interrupt need in order to interrupt it.
const PERF_EVENTS: (&str, &str) = ("KREPLAY_UPROBE_MULTI", "0");

/// kreplay's stderr, line by line, from a reader thread.
struct Lines {
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn new(child: &mut Child) -> Lines {
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (up to 60 s) for a line starting with `prefix`; returns it.
    fn wait_for(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!("no line {prefix:?} in:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Every line, once the writer has closed its end.
    fn finish(mut self) -> String {
        while let Ok(line) = self.rx.recv_timeout(Duration::from_secs(60)) {
            self.seen.push(line);
        }
        self.seen.join("\n") + "\n"
    }
}

fn sigint(pid: u32) {
    // SAFETY: plain signal send to a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
}

/// The children of `pid` (every thread's).
fn children(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
    {
        let p = task.unwrap().path().join("children");
        let s = std::fs::read_to_string(p).unwrap_or_default();
        v.extend(s.split_whitespace().map(|c| c.parse::<u32>().unwrap()));
    }
    v
}

/// Whether `pid` exists and has not exited.
fn alive(pid: u32) -> bool {
    kreplay_cli::trace::ending::running(pid)
}

/// Waits for kreplay's exit; returns its exit code and how long it took.
fn exit_of(kreplay: &mut Child, limit: Duration) -> (Option<i32>, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(s) = kreplay.try_wait().unwrap() {
            return (s.code(), t0.elapsed());
        }
        assert!(
            t0.elapsed() < limit,
            "kreplay did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Asserts that kreplay, just interrupted a second time, exits with 130 within 1 s while its
/// teardown child `helper` is still detaching the probes; returns its stderr.
fn exits_at_once_detaching(kreplay: &mut Child, helper: u32, lines: Lines) -> String {
    let (code, took) = exit_of(kreplay, Duration::from_secs(60));
    let detaching = alive(helper);
    let stderr = lines.finish();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(1), "{took:?}: {stderr}");
    assert!(detaching, "the teardown child was already gone: {stderr}");
    stderr
}

/// The child kreplay forks to detach its probes, once it exists.
fn teardown_child(kreplay: u32) -> u32 {
    let t0 = Instant::now();
    loop {
        if let [c] = children(kreplay)[..] {
            return c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no teardown child");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Interrupts `kreplay` a second time while its teardown child detaches the probes, and
/// checks that it exits at once (exit code 130) while the teardown goes on for longer, and
/// that the teardown ends. Returns kreplay's stderr.
fn second_interrupt_exits_at_once(mut kreplay: Child, mut lines: Lines) -> String {
    sigint(kreplay.id());
    let stopping = lines.wait_for("kreplay: stopping:");
    let probes: u64 = stopping
        .split_whitespace()
        .skip_while(|w| *w != "detaching")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no probe count in {stopping:?}"));
    assert!(probes >= 10, "{stopping}");
    let helper = teardown_child(kreplay.id());
    sigint(kreplay.id());
    // The kernel takes about 0.1 s per probe to detach (serially, under one lock): with 10 or
    // more probes, an exit within 1 s means kreplay did not wait for them.
    let stderr = exits_at_once_detaching(&mut kreplay, helper, lines);
    let t0 = Instant::now();
    while alive(helper) {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the teardown never ends"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stderr
}

/// Calls of `pid_target` by name, over every track of the trace at `path`.
fn hip_calls(path: &Path) -> BTreeMap<String, u64> {
    let d = decode_trace(path);
    let mut calls = BTreeMap::new();
    for slices in d["slices"].as_object().unwrap().values() {
        for s in slices.as_array().unwrap() {
            let name = s["name"].as_str().unwrap();
            if name.starts_with("hip") {
                *calls.entry(name.to_string()).or_insert(0u64) += 1;
            }
        }
    }
    calls
}

#[test]
fn a_second_interrupt_ends_trace_at_once_and_says_where_every_call_is() {
    require_root!();
    let dir = scratch("interrupt");
    let out = dir.join("twice.pftrace");
    let streams = dir.join("twice.pftrace.streams");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&streams);
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_name()
            .to_string_lossy()
            .starts_with(".twice.pftrace.tmp-")
        {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    // Enough calls that rendering them takes a while: the second interrupt comes while the
    // trace is being written, as a user's impatient one would.
    let n = 2000;
    let (mut target, mut target_out) = spawn_pid_target_with(n, true);
    let mut kreplay = Command::new(kreplay_bin())
        .env(PERF_EVENTS.0, PERF_EVENTS.1)
        .args(["trace", "-o", out.to_str().unwrap(), "-p"])
        .arg(target.id().to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(&mut kreplay);
    lines.wait_for("kreplay: tracing pid");
    target.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    let stderr = second_interrupt_exits_at_once(kreplay, lines);
    let merge = format!("kreplay merge {} -o {}", streams.display(), out.display());
    let kept = format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; the \
         stream files are kept in {}: `{merge}` renders them\n",
        streams.display()
    );
    let written = format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; {} is \
         written\n",
        out.display()
    );
    let temporary: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".twice.pftrace.tmp-"))
        .collect();
    assert_eq!(
        temporary,
        Vec::<String>::new(),
        "the half-written trace is removed"
    );
    // Whichever the note says, every call made before the first interrupt is where it says.
    if stderr.ends_with(&kept) {
        assert!(!out.exists(), "no trace was written: {stderr}");
        let merged = Command::new(kreplay_bin())
            .args(merge.split(' ').skip(1))
            .output()
            .unwrap();
        assert!(merged.status.success(), "{merged:?}");
        assert!(
            !String::from_utf8_lossy(&merged.stderr).contains("warning"),
            "{merged:?}"
        );
    } else {
        assert!(stderr.ends_with(&written), "{stderr}");
    }
    assert_eq!(
        hip_calls(&out),
        BTreeMap::from([("hipFree".to_string(), n), ("hipMalloc".to_string(), n)])
    );
    target.stdin.as_mut().unwrap().write_all(b"exit\n").unwrap();
    assert!(target.wait().unwrap().success());
}

#[test]
fn a_second_interrupt_ends_audit_at_once() {
    require_root!();
    let (mut target, _out) = spawn_pid_target_with(0, true);
    let mut kreplay = Command::new(kreplay_bin())
        .env(PERF_EVENTS.0, PERF_EVENTS.1)
        .args(["audit", "-p"])
        .arg(target.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(&mut kreplay);
    lines.wait_for("kreplay: audit running");
    let stderr = second_interrupt_exits_at_once(kreplay, lines);
    assert!(
        stderr.ends_with(
            "kreplay: interrupted again: exiting now, the probes detach in the background\n"
        ),
        "{stderr}"
    );
    target
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"go\nexit\n")
        .unwrap();
    assert!(target.wait().unwrap().success());
}

#[test]
fn a_command_left_running_by_an_interrupted_trace_is_named() {
    require_root!();
    let out = scratch("interrupt").join("left.pftrace");
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "-o", out.to_str().unwrap(), "--", "sleep", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(&mut kreplay);
    let started = lines.wait_for("kreplay: tracing sleep (pid ");
    let pid: u32 = started["kreplay: tracing sleep (pid ".len()..]
        .split(')')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Only kreplay is interrupted, as `kill -INT` of its pid does; the command runs on.
    sigint(kreplay.id());
    let (code, _) = exit_of(&mut kreplay, Duration::from_secs(120));
    let running = alive(pid);
    // SAFETY: plain signal send to the command this test had kreplay start.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let stderr = lines.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(running, "sleep runs on after kreplay stops: {stderr}");
    assert!(
        stderr.contains(&format!(
            "\nkreplay: sleep (pid {pid}) is still running, untraced: kreplay stopped before it \
             exited, and its calls from now on are not in the trace\n"
        )),
        "{stderr}"
    );
    assert!(Path::new(&out).exists());
}

/// The `*.krs` files directly in `dir`.
fn streams_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "krs"))
        })
        .count()
    })
}

#[test]
fn a_second_interrupt_ends_replay_with_probes_at_once() {
    use std::os::unix::process::CommandExt;
    require_root!();
    kreplay_tests::make_sim(&[]);
    let tmp = scratch("interrupt-replay");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = tmp.join("replayed.pftrace");
    // One thread launching kernels until it is interrupted (two of them replayed), in a
    // process group of its own, which the test signals as a terminal's Ctrl-C does.
    let mut kreplay = Command::new(kreplay_bin())
        .args([
            "replay",
            "--probes",
            "--passes",
            "2",
            "--max-dispatches",
            "2",
        ])
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(kreplay_tests::workload("high_qps"))
        .args(["1", "1000000000"])
        .env("TMPDIR", &tmp)
        .env(PERF_EVENTS.0, PERF_EVENTS.1)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let group = kreplay.id();
    let ctrl_c = || {
        // SAFETY: plain signal send to the process group this test started.
        assert_eq!(unsafe { libc::kill(-(group as i32), libc::SIGINT) }, 0);
    };
    let mut lines = Lines::new(&mut kreplay);
    let dir = tmp.join(format!("kreplay-replay-{}", kreplay.id()));
    let probe_dir = dir.join("probes.pftrace.streams");
    // Under the tool and the probes once both have written a stream file and the tool has
    // replayed both dispatches (its progress counters: dispatches replayed first). The tool
    // counts a replay only once its records are in the stream file, so the Ctrl-C that kills
    // the command next loses none of them.
    let replayed = || {
        std::fs::read(dir.join("progress"))
            .ok()
            .and_then(|b| Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?)))
    };
    let t0 = Instant::now();
    while streams_in(&dir) == 0 || streams_in(&probe_dir) == 0 || replayed() != Some(2) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no streams in {dir:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // kreplay's one child is the probes' `kreplay trace`, whose one child is the command.
    let [tracer] = children(kreplay.id())[..] else {
        panic!("children {:?}", children(kreplay.id()))
    };
    let [command] = children(tracer)[..] else {
        panic!("children {:?}", children(tracer))
    };
    ctrl_c();
    let stopping = lines.wait_for("kreplay: stopping:");
    assert_eq!(
        stopping,
        "kreplay: stopping: the trace is written once the command and the probes' trace end; \
         Ctrl-C again to exit at once"
    );
    // The tracer forks its teardown child once its streams are complete.
    let t0 = Instant::now();
    let helper = loop {
        if let Some(&c) = children(tracer).iter().find(|&&c| c != command) {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no teardown child");
        std::thread::sleep(Duration::from_millis(5));
    };
    ctrl_c();
    let stderr = exits_at_once_detaching(&mut kreplay, helper, lines);
    assert!(!alive(tracer) && !alive(command), "{stderr}");
    let merge = format!(
        "kreplay merge {} {} -o {}",
        dir.display(),
        probe_dir.display(),
        out.display()
    );
    // The one note is kreplay's: the tracer it ran, interrupted too, says nothing.
    assert!(
        stderr.ends_with(&format!(
            "\nkreplay: interrupted again: exiting now, the probes detach in the background; the \
             stream files are kept in {}: `{merge}` renders them\n",
            dir.display()
        )),
        "{stderr}"
    );
    assert_eq!(stderr.matches("interrupted").count(), 1, "{stderr}");
    let t0 = Instant::now();
    while alive(helper) {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the teardown never ends"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No trace and no temporary file of one; the streams render with the command named.
    let mut left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [format!("kreplay-replay-{}", kreplay.id())]);
    let merged = Command::new(kreplay_bin())
        .args(merge.split(' ').skip(1))
        .output()
        .unwrap();
    assert!(merged.status.success(), "{merged:?}");
    let d = decode_trace(&out);
    // Both replayed dispatches are in it, each with its snapshot, and nothing is malformed.
    let snapshots: usize = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap())
        .filter(|s| s["name"] == "snapshot")
        .count();
    assert_eq!(snapshots, 2);
    assert_eq!(d["errors"], serde_json::json!([]));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_first_interrupt_of_replay_writes_the_trace_of_what_the_command_replayed() {
    use std::os::unix::process::CommandExt;
    kreplay_tests::make_sim(&[]);
    let tmp = scratch("interrupt-plain-replay");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = tmp.join("replayed.pftrace");
    // Kernels launched until the command is interrupted, two of them replayed, in a process
    // group of its own, which the test signals as a terminal's Ctrl-C does.
    let kreplay = Command::new(kreplay_bin())
        .args(["replay", "--passes", "2", "--max-dispatches", "2", "-o"])
        .arg(&out)
        .arg("--")
        .arg(kreplay_tests::workload("high_qps"))
        .args(["1", "1000000000"])
        .env("TMPDIR", &tmp)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dir = tmp.join(format!("kreplay-replay-{}", kreplay.id()));
    let replayed = || {
        std::fs::read(dir.join("progress"))
            .ok()
            .and_then(|b| Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?)))
    };
    let t0 = Instant::now();
    while replayed() != Some(2) {
        assert!(t0.elapsed() < Duration::from_secs(60), "nothing replayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let group = -(kreplay.id() as i32);
    // SAFETY: plain signal send to the process group this test started.
    let sent = unsafe { libc::kill(group, libc::SIGINT) };
    assert_eq!(sent, 0);
    let done = kreplay.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    let stdout = String::from_utf8_lossy(&done.stdout);
    // The command's end is told as a shell tells it: 128 + SIGINT.
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.starts_with(
            "kreplay: stopping: the trace is written once the command ends; Ctrl-C again to \
             exit at once\n"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("kreplay: 2 dispatches replayed (4 passes)"),
        "{stdout}"
    );
    // The trace holds both replayed dispatches; the run's directory is gone.
    let d = decode_trace(&out);
    let snapshots = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap())
        .filter(|s| s["name"] == "snapshot")
        .count();
    assert_eq!(snapshots, 2);
    assert_eq!(d["errors"], serde_json::json!([]));
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["replayed.pftrace"]);
    std::fs::remove_dir_all(&tmp).unwrap();
}
