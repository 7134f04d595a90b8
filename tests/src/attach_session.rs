//! Driving `kreplay trace -p PID --gpu` and `kreplay replay -p PID` against a running sim
//! program: start one and wait until its session is open, stop it as Ctrl-C does, and read
//! what a replay session printed.
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::kreplay_bin;
use crate::stderr_watch::StderrWatch;

/// Starts `kreplay trace --gpu -o OUT -p PID` and returns once it traces.
pub fn trace_gpu(out: &Path, pid: u32) -> (Child, StderrWatch) {
    let mut k = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "-o", out.to_str().unwrap(), "-p"])
        .arg(pid.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut k);
    watch.wait_for("kreplay: tracing pid");
    (k, watch)
}

/// Sends kreplay SIGINT, as Ctrl-C does.
pub fn interrupt(k: &Child) {
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(k.id() as i32, libc::SIGINT) }, 0);
}

/// Stops a kreplay with SIGINT and waits for it; checks it succeeded and returns its stderr.
pub fn stop(mut k: Child, watch: StderrWatch) -> String {
    interrupt(&k);
    let status = k.wait().unwrap();
    let stderr = watch.finish();
    assert!(status.success(), "{stderr}");
    stderr
}

/// Starts `kreplay replay -o OUT -p PID ARGS` (its debug log on, for the tool's progress
/// lines) and returns once its session is open.
pub fn replay(out: &Path, pid: u32, args: &[&str]) -> (Child, StderrWatch) {
    let mut k = Command::new(kreplay_bin())
        .env("RUST_LOG", "kreplay_cli::replay=debug")
        .args(["replay", "-o", out.to_str().unwrap(), "-p"])
        .arg(pid.to_string())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut k);
    watch.wait_for(&format!("kreplay: process {pid}: replaying"));
    (k, watch)
}

/// Waits (up to 60 s) for `replay -p` to end and checks it succeeded; returns its per-kernel
/// table's columns for `kernel` and its stderr.
pub fn replay_ended(
    mut k: Child,
    watch: StderrWatch,
    kernel: &str,
) -> (HashMap<String, String>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while k.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            k.kill().unwrap();
            panic!("replay -p did not end: {}", watch.finish());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut k.stdout.take().unwrap(), &mut stdout).unwrap();
    let status = k.wait().unwrap();
    let stderr = watch.finish();
    assert!(status.success(), "{stderr}");
    let mut cols = crate::replay_table::columns(&stdout);
    let row = cols
        .remove(kernel)
        .unwrap_or_else(|| panic!("{stdout}\n{stderr}"));
    (row, stderr)
}
