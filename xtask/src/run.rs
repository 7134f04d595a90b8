//! Running commands with a visible log line, and the shared build step.
use std::{path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};

/// Prints what is about to happen, xtask-style.
pub fn say(step: &str, msg: &str) {
    eprintln!("xtask: [{step}] {msg}");
}

/// The workspace root.
pub fn root() -> PathBuf {
    kreplay_tests::workspace_root()
}

/// `$CARGO_HOME/bin`, where `cargo install` puts bpf-linker.
pub fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
        })
        .join("bin")
}

/// PATH with `$CARGO_HOME/bin` in front, so tools installed by setup are found.
pub fn path_env() -> std::ffi::OsString {
    let mut parts = vec![cargo_bin_dir()];
    if let Some(p) = std::env::var_os("PATH") {
        parts.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(parts).unwrap_or_default()
}

/// A command rooted at the workspace with the extended PATH.
pub fn cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(root()).env("PATH", path_env());
    c
}

/// Runs a command, failing with its name when it fails.
pub fn check(step: &str, mut c: Command) -> Result<()> {
    say(step, &format!("running {}", describe(&c)));
    let status = c
        .status()
        .with_context(|| format!("starting {}", describe(&c)))?;
    if !status.success() {
        bail!("{} failed ({status})", describe(&c));
    }
    Ok(())
}

/// Runs a command and returns its stdout, or None when it cannot run or fails.
pub fn output(mut c: Command) -> Option<String> {
    let out = c.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Builds the simulated ROCm runtime (when present) and the whole workspace.
pub fn build_all() -> Result<()> {
    if root().join("tests/rocm-sim/Makefile").exists() {
        let mut make = cmd("make");
        make.args(["-C", "tests/rocm-sim", "-j2"]);
        check("build", make)?;
    }
    let mut cargo = cmd("cargo");
    cargo.args(["build", "--workspace", "--exclude", "kreplay-ebpf"]);
    check("build", cargo)
}

/// The release `kreplay` and `libkreplay_tool.so` (what benchmarks and the GPU machine run).
pub fn build_release() -> Result<()> {
    let mut build = cmd("cargo");
    build.args([
        "build",
        "--release",
        "-p",
        "kreplay-cli",
        "-p",
        "kreplay-tool",
    ]);
    check("release build", build)
}
