//! The CUDA replay scenarios of tests/gpu/replay.sh, run by `cargo test` on a machine with an
//! NVIDIA GPU and nvcc; elsewhere (CI) skipped with the reason printed.
use std::path::Path;
use std::process::Command;

use kreplay_tests::{kreplay_bin, workspace_root};

#[test]
fn cuda_replay_scenarios_on_a_real_gpu() {
    if !Path::new("/dev/nvidiactl").exists() {
        eprintln!(
            "SKIPPED cuda_replay_scenarios_on_a_real_gpu: no NVIDIA GPU here (/dev/nvidiactl missing); run tests/gpu/replay.sh on the GPU machine"
        );
        return;
    }
    if Command::new("nvcc").arg("--version").output().is_err() {
        eprintln!("SKIPPED cuda_replay_scenarios_on_a_real_gpu: nvcc not on PATH");
        return;
    }
    let out = Command::new("bash")
        .arg("tests/gpu/replay.sh")
        .current_dir(workspace_root())
        .env(kreplay_common::replay_config::BIN, kreplay_bin())
        .output()
        .expect("run tests/gpu/replay.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(text.contains("failures: 0"), "{text}");
    assert!(out.status.success());
}
