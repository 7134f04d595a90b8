//! The short fuzzing pass of `cargo xtask test`: every target of `fuzz/` for a few seconds,
//! starting from its committed corpus (which holds every input that once crashed a parser).
use std::time::Duration;

use anyhow::Result;

use crate::run::{check, cmd, root, say};

/// The fuzz targets, one per parser (see fuzz/README.md).
pub const TARGETS: &[&str] = &[
    "fatbin",
    "cubin",
    "ptx",
    "cli_elf",
    "proc_maps",
    "registrations",
];

/// How long each target runs in the test pass.
const PER_TARGET: Duration = Duration::from_secs(8);

/// A cargo-fuzz command with what it needs on the stable toolchain: `RUSTC_BOOTSTRAP=1` for
/// the sanitizer-coverage flags, and the BPF build of kreplay-cli skipped (the parsers do not
/// need the probes).
fn cargo_fuzz(args: &[&str]) -> std::process::Command {
    let mut c = cmd("cargo");
    c.arg("fuzz")
        .args(args)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("AYA_BUILD_SKIP", "1");
    c
}

/// Builds the targets (no sanitizer, overflow checks on) and runs each briefly.
pub fn short_run() -> Result<()> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        say(
            "fuzz",
            "skipped: the fuzz targets include the x86_64-only CUDA parsers and need Linux",
        );
        return Ok(());
    }
    let flags = ["-s", "none", "--debug-assertions"];
    let mut build = cargo_fuzz(&["build"]);
    build.args(flags);
    check("fuzz", build)?;
    for t in TARGETS {
        // New inputs go to a scratch directory; the committed corpus is only read.
        let scratch = std::env::temp_dir().join(format!("kreplay-fuzz-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&scratch)?;
        let corpus = root().join("fuzz/corpus").join(t);
        let mut run = cargo_fuzz(&["run"]);
        run.args(flags)
            .arg(t)
            .arg(&scratch)
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={}", PER_TARGET.as_secs()))
            .args(["-rss_limit_mb=2048", "-timeout=10", "-print_final_stats=1"]);
        let result = check("fuzz", run);
        let _ = std::fs::remove_dir_all(&scratch);
        result?;
    }
    say("fuzz", &format!("{} targets ran clean", TARGETS.len()));
    Ok(())
}
