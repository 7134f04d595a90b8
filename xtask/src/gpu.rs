//! `cargo xtask gpu-test`: builds what the GPU machine runs (it has no cargo) into
//! `.gpu-carry/` — the release `kreplay`, `libkreplay_tool.so`, the contention benchmark, and the
//! probe-overhead loops with the simulated runtime (`sim/`) — and, on a machine with an NVIDIA
//! GPU, runs `tests/gpu/run.sh`, `tests/gpu/replay.sh`, `tests/gpu/restore_matrix.sh`,
//! `tests/gpu/probe_overhead.sh`, and the replay-cost runs on a PyTorch training step beside
//! Nsight Compute (`tests/gpu/replay_cost.sh`, `tests/gpu/replay_vs_ncu.sh`), the kernel times
//! replay reports beside Nsight Compute's (`tests/gpu/replay_time_vs_ncu.sh`), and the GPU
//! timeline beside torch.profiler (`tests/gpu/gpu_timeline.sh`, and its cost per training step,
//! interleaved rounds: `tests/gpu/step_cost.sh`), and the GPU timeline attached
//! to a running training loop (`tests/gpu/attach.sh`), and the GPU timeline's track names
//! (`tests/gpu/track_names.sh`), and a replay after a trace in one running process
//! (`tests/gpu/trace_then_replay.sh`).
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::run::{cmd, root, say};

/// Builds the carried binaries; runs the GPU scripts unless `build_only`.
pub fn run(build_only: bool) -> Result<()> {
    let carry = root().join(".gpu-carry");
    std::fs::create_dir_all(&carry).context("create .gpu-carry")?;
    say(
        "gpu-test",
        "building release kreplay, libkreplay_tool.so and the contention bench",
    );
    crate::run::build_release()?;
    let out = cmd("cargo")
        .args([
            "bench",
            "-p",
            "kreplay-tool",
            "--bench",
            "contention",
            "--no-run",
            "--message-format=short",
        ])
        .output()?;
    if !out.status.success() {
        bail!("building the contention bench failed");
    }
    let target = kreplay_tests::target_dir().join("release");
    copy(&target.join("kreplay"), &carry.join("kreplay"))?;
    copy(
        &target.join("libkreplay_tool.so"),
        &carry.join("libkreplay_tool.so"),
    )?;
    // `Executable unittests benches/contention.rs (target/release/deps/contention-HASH)`
    let text = String::from_utf8_lossy(&out.stderr);
    if let Some(path) = text
        .lines()
        .filter_map(|l| l.split('(').nth(1)?.strip_suffix(')'))
        .find(|p| p.contains("/contention-"))
    {
        copy(&root().join(path), &carry.join("contention"))?;
    }
    // The probe-overhead loops and the simulated runtime they call: both build against Debian's
    // ROCm headers, which the GPU machine lacks (tests/gpu/probe_overhead.sh).
    let sim = carry.join("sim");
    std::fs::create_dir_all(&sim).context("create .gpu-carry/sim")?;
    for lib in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        copy(&kreplay_tests::sim_dir().join(lib), &sim.join(lib))?;
    }
    copy(&kreplay_tests::build_callloop(), &sim.join("callloop"))?;
    copy(&kreplay_tests::build_pairloop(), &sim.join("pairloop"))?;
    say(
        "gpu-test",
        &format!("carry {} to the GPU machine", carry.display()),
    );
    if build_only {
        return Ok(());
    }
    if !Path::new("/dev/nvidiactl").exists() {
        say(
            "gpu-test",
            "SKIPPED: no NVIDIA GPU on this machine (/dev/nvidiactl missing)",
        );
        return Ok(());
    }
    for script in [
        "tests/gpu/run.sh",
        "tests/gpu/replay.sh",
        "tests/gpu/restore_matrix.sh",
        "tests/gpu/probe_overhead.sh",
        "tests/gpu/replay_cost.sh",
        "tests/gpu/replay_vs_ncu.sh",
        "tests/gpu/replay_time_vs_ncu.sh",
        "tests/gpu/gpu_timeline.sh",
        "tests/gpu/step_cost.sh",
        "tests/gpu/attach.sh",
        "tests/gpu/track_names.sh",
        "tests/gpu/trace_then_replay.sh",
    ] {
        let st = cmd("bash").arg(script).status()?;
        if !st.success() {
            bail!("{script} failed ({st})");
        }
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    Ok(())
}
