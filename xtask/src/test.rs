//! `cargo xtask test`: formatting, lints, then every test and a short fuzzing pass, as CI runs
//! them.
use anyhow::Result;

use crate::run::{check, cmd, say};

/// Runs fmt, clippy, the test suites and each fuzz target briefly.
pub fn run() -> Result<()> {
    let mut fmt = cmd("cargo");
    fmt.args(["fmt", "--all", "--check"]);
    check("test", fmt)?;
    let mut clippy = cmd("cargo");
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    check("test", clippy)?;
    let bin = kreplay_tests::target_dir().join("debug").join("kreplay");
    let mut test = cmd("cargo");
    test.args([
        "test",
        "--workspace",
        "--exclude",
        "kreplay-ebpf",
        "--no-fail-fast",
    ])
    .env(kreplay_common::replay_config::BIN, &bin);
    check("test", test)?;
    crate::fuzz::short_run()?;
    say("test", "all checks passed");
    Ok(())
}
