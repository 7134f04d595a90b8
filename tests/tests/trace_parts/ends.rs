//! How a trace ends when something goes wrong: bad targets and outputs refused in one line, a
//! target killed mid-trace, and SIGINT with a ring too small to keep up.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, workload};

use super::{StderrWatch, assert_valid, counts, events_dropped, out_path, thread_tracks};

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
