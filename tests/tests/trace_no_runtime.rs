//! A command that never loads a GPU runtime gets a trace with nothing in it and one line
//! saying why, not a silent empty trace. A test binary of its own: run beside `trace.rs`'s
//! tests its 13 s of probe teardown slowed their workloads.

use std::process::Command;

use kreplay_tests::{kreplay_bin, require_root, scratch};

#[test]
fn a_command_without_a_gpu_runtime_is_told_so_in_one_line() {
    require_root!();
    let out = scratch("trace-no-runtime").join("true.pftrace");
    let r = Command::new(kreplay_bin())
        .args([
            "trace",
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--",
            "/bin/true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("GPU runtime"))
            .collect::<Vec<_>>(),
        [
            "kreplay: /bin/true made no GPU runtime call: it never loaded libcuda, libamdhip64 or libhsa-runtime64 (or none kreplay could probe)"
        ]
    );
}
