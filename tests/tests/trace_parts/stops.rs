//! How a trace of a running process ends when the process does not: `--duration` and SIGTERM
//! both stop kreplay cleanly, with every call made before the stop in the trace and the target
//! left running.
use std::{
    io::{BufRead, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, spawn_pid_target_with};

use super::{
    HIP_LIVE, StderrWatch, assert_valid, counter_values, counts, events_dropped, expect, hip_only,
    out_path, thread_tracks,
};

/// How kreplay is stopped while its target lives on.
enum Stop {
    /// `--duration 2s`.
    Duration,
    /// SIGTERM once the target's calls are done.
    Term,
}

/// Traces a lingering `pid_target` making 25 allocation pairs, stops kreplay with `stop`
/// while the target still runs, and checks the trace holds exactly those calls.
fn stop_while_the_target_lives(stop: Stop, name: &str) {
    let out = out_path(name);
    let (mut target, mut target_out) = spawn_pid_target_with(25, true);
    let pid = target.id();
    let mut args = vec![
        "trace".to_string(),
        "-o".into(),
        out.to_str().unwrap().into(),
        "-p".into(),
        pid.to_string(),
    ];
    if let Stop::Duration = stop {
        args.extend(["--duration".into(), "2s".into()]);
    }
    let started = Instant::now();
    let mut kreplay = Command::new(kreplay_bin())
        .args(&args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    target.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    if let Stop::Term = stop {
        // SAFETY: plain signal send to a child this test started.
        assert_eq!(unsafe { libc::kill(kreplay.id() as i32, libc::SIGTERM) }, 0);
    }
    // Generous: detaching probes takes the kernel a while on a loaded host.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = kreplay.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "kreplay did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = watch.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    if let Stop::Duration = stop {
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "stopped before --duration: {:?}",
            started.elapsed()
        );
    }
    assert!(
        target.try_wait().unwrap().is_none(),
        "the target runs on after kreplay stops"
    );
    assert_eq!(events_dropped(&stderr), 0, "{stderr}");
    assert!(stderr.contains("kreplay: wrote"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(threads[0].2, pid as u64);
    assert_eq!(
        hip_only(&counts(&d, &threads[0].0)),
        expect(&[("hipFree", 25), ("hipMalloc", 25)])
    );
    assert_eq!(*counter_values(&d, HIP_LIVE).last().unwrap(), 0);
    target.stdin.as_mut().unwrap().write_all(b"exit\n").unwrap();
    assert!(target.wait().unwrap().success());
}

#[test]
fn duration_stops_the_trace_of_a_running_target_after_that_long() {
    require_root!();
    stop_while_the_target_lives(Stop::Duration, "duration");
}

#[test]
fn sigterm_stops_the_trace_cleanly_and_leaves_the_target_running() {
    require_root!();
    stop_while_the_target_lives(Stop::Term, "sigterm");
}

#[test]
fn without_bpf_privileges_trace_says_so_in_one_line() {
    // Root with an empty capability bounding set: the effective set is empty after exec.
    let probe = Command::new("setpriv")
        .args(["--bounding-set", "-all", "true"])
        .status();
    if !matches!(probe, Ok(s) if s.success()) {
        eprintln!("SKIPPED: setpriv cannot drop capabilities here ({probe:?})");
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-all",
            "--inh-caps",
            "-all",
            "--ambient-caps",
            "-all",
        ])
        .arg(kreplay_bin())
        .args(["trace", "-o", "/tmp/kreplay-noprivs.pftrace", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "kreplay: error: kreplay needs CAP_BPF and CAP_PERFMON (or root) to load probes; this \
         process lacks CAP_BPF and CAP_PERFMON — run it with sudo\n"
    );
}
