//! `kreplay audit` in a PID namespace of its own (as in a container without the host's PID
//! namespace): its `/proc` shows none of the pids the kernel reports, so every audited process
//! looks exited at every refresh, and still every call is counted.
use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use kreplay_tests::{build_callloop, kreplay_bin, require_root, sim_dir};
use serde_json::Value;

/// A child killed (and reaped) when the test ends, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Calls of the workload: at about 200k calls/s, several refreshes of the audit.
const CALLS: u64 = 3_000_000;

#[test]
fn an_audit_whose_proc_shows_other_pids_counts_every_call() {
    require_root!();
    let loop_exe = build_callloop();
    let d = sim_dir();
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
        .arg(kreplay_bin())
        .args(["audit", "--json", "--interval", "1s"]);
    for l in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        c.arg("--lib").arg(d.join(l));
    }
    let mut ns = Reaped(
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("unshare"),
    );
    let out = ns.0.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(out).read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel();
    let err = ns.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("[kreplay] {line}");
            let _ = tx.send(line);
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("kreplay audit running line");
        if line.starts_with("kreplay: audit running") {
            break;
        }
    }
    let run = Command::new(&loop_exe)
        .args(["1", &CALLS.to_string()])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    // The workload's calls land in the kernel maps at once; give the audit two refreshes in
    // which the process is gone for good.
    std::thread::sleep(Duration::from_millis(2500));
    // kreplay is unshare's child (pid 1 of the namespace); unshare does not pass SIGINT on.
    let unshare = ns.0.id();
    let children =
        std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    let kreplay: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: plain signal send to our own grandchild, not yet reaped by unshare.
    unsafe { libc::kill(kreplay, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(300);
    while ns.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "kreplay audit did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = stdout.join().unwrap();
    let last: Value = serde_json::from_str(text.lines().last().expect("a final report")).unwrap();
    assert_eq!(last["kind"], "final");
    // System-wide on these libraries: other tests' processes may be there too.
    let calls: u64 = last["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["comm"] == "callloop")
        .flat_map(|p| p["apis"].as_array().unwrap())
        .filter(|a| a["api"] == "hipStreamSynchronize")
        .map(|a| a["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(calls, CALLS, "{last}");
}
