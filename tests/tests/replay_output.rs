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

#[test]
fn each_pass_on_rocm_is_timed_by_the_gpus_own_start_and_end_of_it() {
    make_sim(&[]);
    let dir = scratch("replay-output");
    let (trace, json) = (dir.join("timed.pftrace"), dir.join("timed.json"));
    // Every kernel runs 3 ms on the simulated GPU; its profiling record says when.
    let out = Command::new(kreplay_bin())
        .args(["replay", "--passes", "4", "--json"])
        .arg(&json)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(workload("saxpy"))
        .args(["1", "4096", "2"])
        .env("KRSIM_KERNEL_LATENCY_US", "3000")
        .output()
        .expect("run kreplay replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("kernel "))
        .unwrap()
        .split_whitespace()
        .collect();
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("saxpy"))
        .unwrap()
        .split_whitespace()
        .collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!((col("passes"), col("time")), ("4", "gpu"), "{stdout}");
    let text = std::fs::read_to_string(&json).unwrap();
    let k: serde_json::Value =
        serde_json::from_str(text.lines().find(|l| l.contains("\"saxpy")).unwrap()).unwrap();
    let ns = |f: &str, g: &str| k[f][g].as_u64().unwrap();
    // Two dispatches of four passes, each at least the 3 ms the GPU took, and no longer than
    // the host's span of it.
    assert_eq!(k["pass_gpu_ns"]["passes"], 8, "{k}");
    assert!(ns("pass_gpu_ns", "min") >= 3_000_000, "{k}");
    assert!(ns("pass_gpu_ns", "max") <= ns("pass_ns", "max"), "{k}");
}
