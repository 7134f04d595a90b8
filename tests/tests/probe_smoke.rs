//! The first real probe, end to end: `kreplay probe` attaches a uprobe and a uretprobe to
//! `krsmoke_add` in a small shared library and every call arrives through the ring buffer.
use std::process::Command;

use kreplay_tests::{build_smoke, kreplay_bin, require_root};
use serde_json::Value;

fn run_probe(extra: &[&str], calls: u64) -> (std::process::Output, Vec<Value>) {
    let (lib, exe) = build_smoke();
    let out = Command::new(kreplay_bin())
        .args([
            "probe",
            "--lib",
            lib.to_str().unwrap(),
            "--symbol",
            "krsmoke_add",
            "--json",
        ])
        .args(extra)
        .arg("--")
        .arg(&exe)
        .arg(calls.to_string())
        .output()
        .expect("run kreplay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let records = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect();
    (out, records)
}

#[test]
fn every_call_arrives_with_exact_arguments_and_return_values() {
    require_root!();
    let n = 1000u64;
    let (out, records) = run_probe(&[], n);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kreplay failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The command's own output passes through: sum of 3i for i < n.
    assert!(
        stdout.contains(&format!("sum {}", 3 * n * (n - 1) / 2)),
        "{stdout}"
    );
    assert_eq!(records.len() as u64, n, "{stderr}");
    let pid = records[0]["pid"].as_u64().unwrap();
    for (i, r) in records.iter().enumerate() {
        let i = i as u64;
        assert_eq!(r["args"][0].as_u64(), Some(i), "record {i}: {r}");
        assert_eq!(r["args"][1].as_u64(), Some(2 * i), "record {i}: {r}");
        assert_eq!(r["ret"].as_u64(), Some(3 * i), "record {i}: {r}");
        assert_eq!(r["pid"].as_u64(), Some(pid));
        assert_eq!(r["tid"].as_u64(), Some(pid), "single-threaded program");
        assert!(r["exit_ns"].as_u64() >= r["enter_ns"].as_u64(), "{r}");
    }
    assert!(
        stderr.contains(&format!("kreplay: {n} calls recorded; dropped: 0 ")),
        "summary missing: {stderr}"
    );
}

#[test]
fn a_full_ring_buffer_counts_every_lost_record() {
    require_root!();
    // A one-page ring buffer holds about 28 records; 200k calls overrun it. Every call is
    // either delivered or counted as dropped: none vanishes.
    let n = 200_000u64;
    let (out, records) = run_probe(&["--ringbuf-bytes", "4096"], n);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = stderr
        .lines()
        .find(|l| l.contains("calls recorded"))
        .expect(&stderr);
    let dropped: u64 = summary
        .split("dropped: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect(summary);
    assert_eq!(records.len() as u64 + dropped, n, "{summary}");
    assert!(
        dropped > 0,
        "a 4 KiB ring buffer cannot hold {n} records: {summary}"
    );
}

#[test]
fn user_errors_are_one_line() {
    let (lib, _) = build_smoke();
    let bin = kreplay_bin();
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "probe",
                "--lib",
                "/nonexistent/libx.so",
                "--symbol",
                "f",
                "--",
                "true",
            ],
            "kreplay: error: library not found: /nonexistent/libx.so",
        ),
        (
            &[
                "probe",
                "--lib",
                lib.to_str().unwrap(),
                "--symbol",
                "no_such_fn",
                "--",
                "true",
            ],
            "kreplay: error: symbol no_such_fn not found in",
        ),
        (
            &[
                "probe",
                "--lib",
                lib.to_str().unwrap(),
                "--symbol",
                "krsmoke_add",
                "-p",
                "999999999",
            ],
            "kreplay: error: no such process: 999999999",
        ),
    ];
    for (args, expected) in cases {
        let out = Command::new(&bin).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unprivileged_user_is_told_what_is_missing() {
    require_root!(); // root is needed to drop to another user
    let (lib, _) = build_smoke();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(kreplay_bin())
        .args([
            "probe",
            "--lib",
            lib.to_str().unwrap(),
            "--symbol",
            "krsmoke_add",
            "--",
            "true",
        ])
        .output()
        .expect("setpriv (util-linux) runs kreplay as nobody");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "kreplay: error: kreplay needs CAP_BPF and CAP_PERFMON (or root) to load probes; this \
         process lacks CAP_BPF and CAP_PERFMON — run it with sudo"
    );
}

#[test]
fn probe_by_pid_drains_at_a_raised_priority_and_stops_when_every_target_has_exited() {
    require_root!();
    let (lib, _) = build_smoke();
    // A target that lives 2 s; the probe is asked for a minute.
    let mut target = Command::new("sleep").arg("2").spawn().expect("spawn sleep");
    let started = std::time::Instant::now();
    let mut probe = Command::new(kreplay_bin())
        .args(["probe", "-p", &target.id().to_string(), "--lib"])
        .arg(&lib)
        .args(["--symbol", "krsmoke_add", "--duration", "60s"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kreplay");
    // Its one thread drains the ring at a raised priority (as `kreplay trace`'s reader); the
    // target keeps its own.
    let k = probe.id();
    let raised = kreplay_cli::probes::priority::READER_NICE as i64;
    let mut nice = nice_of(k);
    while nice != Some(raised) && started.elapsed() < std::time::Duration::from_millis(1500) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        nice = nice_of(k);
    }
    assert_eq!(nice, Some(raised));
    assert_eq!(nice_of(target.id()), nice_of(std::process::id()));
    target.wait().expect("sleep exits");
    // Generous: the exit is checked every 200 ms; only a probe that never notices takes 30 s.
    let status = loop {
        if let Some(s) = probe.try_wait().expect("poll kreplay") {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            let _ = probe.kill();
            panic!("kreplay probe -p still running 30 s after its target started (2 s life)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = probe.wait_with_output().expect("collect kreplay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("kreplay: 0 calls recorded; dropped: 0 "),
        "{stderr}"
    );
    // Said once attached, first: a script that attaches by pid waits for this line.
    assert_eq!(
        stderr.lines().next(),
        Some(
            format!(
                "kreplay: probing krsmoke_add in {} for pid {}; stop with Ctrl-C",
                lib.display(),
                target.id()
            )
            .as_str()
        ),
        "{stderr}"
    );
}

/// The nice value of process `pid`'s main thread (field 19 of /proc/PID/stat), if it runs.
fn nice_of(pid: u32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3, the state.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19 - 3)?.parse().ok()
}
