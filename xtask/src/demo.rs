//! `cargo xtask demo`: the main job, end to end, on this machine.
//!
//! A sample GPU workload (in-place saxpy over several buffers, on the simulated ROCm runtime)
//! runs under `kreplay trace`; the trace is written and its summary printed.
use anyhow::{Result, bail};

use crate::run::{check, cmd, root, say};

/// Runs the trace demo.
pub fn run() -> Result<()> {
    if !kreplay_tests::is_root() {
        bail!("the demo loads BPF probes: run it as root (sudo -E cargo xtask demo)");
    }
    let bin = kreplay_tests::target_dir().join("debug").join("kreplay");
    let saxpy = kreplay_tests::workload("saxpy");
    let out = root().join("kreplay-demo.pftrace");
    say(
        "demo",
        "tracing a saxpy workload (4 buffers, 8 iterations) on the simulated ROCm runtime \
         with uprobes on libamdhip64 and libhsa-runtime64",
    );
    let mut trace = cmd(bin.to_str().unwrap_or("kreplay"));
    trace
        .args(["trace", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&saxpy)
        .args(["4", "100000", "8"]);
    check("demo", trace)?;
    say("demo", &format!("trace written to {}", out.display()));
    say(
        "demo",
        "open it at https://ui.perfetto.dev (Open trace file): one track per thread with every HIP and HSA call, live-bytes counters per runtime layer",
    );
    Ok(())
}
