//! What `kreplay replay` prints for a person: each warning of the tool once per cause with a
//! count at the end, and a progress line on a terminal (and never on a pipe).

use std::process::Command;

use kreplay_tests::{kreplay_bin, make_sim, require_root, scratch, workload};

#[test]
fn a_warning_repeated_for_every_dispatch_is_printed_once_then_counted() {
    make_sim(&[]);
    let trace = scratch("replay-output").join("warn.pftrace");
    // The HSA backend keeps no snapshot in device memory: all 8 dispatches decline alike
    // (4 x and 4 y buffers of 16 KiB and the 8-byte launch counter).
    let out = Command::new(kreplay_bin())
        .args([
            "replay",
            "--passes",
            "3",
            "--snapshot-placement",
            "device",
            "-o",
        ])
        .arg(&trace)
        .arg("--")
        .arg(workload("saxpy"))
        .args(["4", "4096", "2"])
        .output()
        .expect("run kreplay replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("snapshot declined"))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].contains("WARN"), "{stderr}");
    assert_eq!(
        lines[1],
        "kreplay: 7 more warnings like: snapshot declined: device allocation of 131080 bytes for 9 region copies failed"
    );
    // The table groups the eight declines as one cause.
    assert!(
        stdout.contains(
            "8x snapshot incomplete: device allocation of 131080 bytes for 9 region copies failed"
        ),
        "{stdout}"
    );
}

#[test]
fn a_terminal_gets_a_progress_line_and_a_pipe_does_not() {
    make_sim(&[]);
    let trace = scratch("replay-output").join("progress.pftrace");
    let cmd = format!(
        "{} replay --passes 3 -o {} -- {} 2 4096 3",
        kreplay_bin().display(),
        trace.display(),
        workload("saxpy").display()
    );
    // Slow kernels: 6 dispatches of 3 passes at 60 ms each, over a second of replay.
    let env = [("KRSIM_KERNEL_LATENCY_US", "60000")];
    // `script` gives the command a terminal and copies what it shows to stdout.
    let tty = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .envs(env)
        .output()
        .expect("run script");
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success(), "{shown}");
    assert!(
        shown.contains("\r\x1b[Kkreplay: ") && shown.contains(" dispatches replayed, "),
        "{shown:?}"
    );
    assert!(shown.contains("s inside kreplay"), "{shown:?}");
    // The line is cleared once the command ends, before the table.
    let before = &shown[..shown.find("kernel ").expect("the table")];
    let cleared = before.rfind("\r\x1b[K").unwrap();
    assert!(
        !before[cleared..].contains("dispatches replayed,"),
        "{before:?}"
    );
    let piped = Command::new("sh")
        .args(["-c", &cmd])
        .envs(env)
        .output()
        .expect("run kreplay replay");
    assert!(piped.status.success());
    assert!(
        !String::from_utf8_lossy(&piped.stderr).contains("dispatches replayed,"),
        "no progress line on a pipe"
    );
}

#[test]
fn replay_with_probes_run_without_privileges_names_the_missing_ones_and_runs_nothing() {
    require_root!(); // root is needed to drop to another user
    make_sim(&[]);
    let marker = scratch("replay-output").join("unprivileged-ran");
    let _ = std::fs::remove_file(&marker);
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(kreplay_bin())
        .args([
            "replay",
            "--probes",
            "-o",
            "/tmp/kreplay-unprivileged.pftrace",
            "--",
        ])
        .arg("touch")
        .arg(&marker)
        .output()
        .expect("setpriv (util-linux) runs kreplay as nobody");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "kreplay: error: kreplay needs CAP_BPF and CAP_PERFMON (or root) to load probes; this \
         process lacks CAP_BPF and CAP_PERFMON — run it with sudo\n"
    );
    assert!(!marker.exists(), "the command must not run");
}
