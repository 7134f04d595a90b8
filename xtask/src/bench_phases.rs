//! The replay-phases section of `cargo xtask bench`: where a replayed dispatch's time goes on
//! the simulated ROCm runtime, whose clock is known (`KRSIM_KERNEL_LATENCY_US` is added to
//! every dispatch, `KRSIM_COPY_LATENCY_US` to every copy), per phase, beside the same target
//! the H200 runs are judged by (`tests/gpu/replay_phases.py`).
use std::fmt::Write as _;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::run::{root, say};

/// Kernel latency the sim adds to every dispatch, in µs.
const KERNEL_US: &str = "200";
/// Copy latency the sim adds to every copy, in µs.
const COPY_US: &str = "20";

/// Runs `kreplay replay` on the sim's saxpy (allocations and a module variable) at 2 and 10
/// passes and appends each run's per-phase medians.
pub fn run(out: &mut String) -> Result<()> {
    kreplay_tests::ensure_decoder();
    let bin = kreplay_tests::target_dir().join("release").join("kreplay");
    let saxpy = kreplay_tests::workload("saxpy");
    let dir = kreplay_tests::scratch("bench-phases");
    let _ = writeln!(
        out,
        "## Replay phases on the simulated ROCm runtime\n\n\
         `KRSIM_KERNEL_LATENCY_US={KERNEL_US} KRSIM_COPY_LATENCY_US={COPY_US} kreplay replay \
         --passes P -o T -- saxpy 4 65536 4` (16 dispatches over 9 regions: eight 256 KiB \
         buffers and a module variable), then `python3 tests/gpu/replay_phases.py T`. The sim \
         copies through the host (pinned/host-hash): every restore reads the footprint; each \
         pass costs at least the {KERNEL_US} µs the sim adds.\n"
    );
    for passes in ["2", "10"] {
        let trace = dir.join(format!("p{passes}.pftrace"));
        say("bench", &format!("replay phases: --passes {passes}"));
        let st = Command::new(&bin)
            .args(["replay", "--passes", passes, "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&saxpy)
            .args(["4", "65536", "4"])
            .env("KRSIM_KERNEL_LATENCY_US", KERNEL_US)
            .env("KRSIM_COPY_LATENCY_US", COPY_US)
            .output()
            .context("running kreplay replay")?;
        if !st.status.success() {
            bail!(
                "kreplay replay failed: {}",
                String::from_utf8_lossy(&st.stderr)
            );
        }
        let phases = Command::new("python3")
            .arg(root().join("tests/gpu/replay_phases.py"))
            .arg(&trace)
            .output()
            .context("running replay_phases.py")?;
        if !phases.status.success() {
            bail!(
                "replay_phases.py failed: {}",
                String::from_utf8_lossy(&phases.stderr)
            );
        }
        let _ = writeln!(
            out,
            "### `--passes {passes}`\n\n```text\n{}```\n",
            String::from_utf8_lossy(&phases.stdout)
        );
    }
    Ok(())
}
