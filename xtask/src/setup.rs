//! Installing what the build and the tests need, skipping what is already there.
//!
//! Every step checks first, so running setup twice does nothing the second time.
use anyhow::{Context, Result, bail};

use crate::run::{check, cmd, output, root, say};

/// bpf-linker's version that works with this toolchain's LLVM (docs/platform.md, "Toolchain").
const BPF_LINKER_VERSION: &str = "0.10.4";

/// cargo-fuzz's version (the fuzz targets in `fuzz/` are built and run with it).
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Debian packages: the official ROCm headers and libraries for the layout and
/// binary-compatibility tests, and the C toolchain for the simulated runtime.
const APT_PACKAGES: &[&str] = &[
    "libhsa-runtime-dev",
    "libamdhip64-dev",
    "make",
    "gcc",
    "g++",
    "binutils",
    "prometheus",
];

/// Runs every setup step.
pub fn all() -> Result<()> {
    rust_src()?;
    bpf_linker()?;
    cargo_fuzz()?;
    apt()?;
    python()?;
    Ok(())
}

fn rust_src() -> Result<()> {
    let mut list = cmd("rustup");
    list.args(["component", "list", "--installed", "--toolchain", "stable"]);
    let installed =
        output(list).context("rustup is needed (the BPF build uses its stable toolchain)")?;
    if installed.lines().any(|l| l.starts_with("rust-src")) {
        say("setup", "rust-src: already installed");
        return Ok(());
    }
    let mut add = cmd("rustup");
    add.args(["component", "add", "rust-src", "--toolchain", "stable"]);
    check("setup", add)
}

fn bpf_linker() -> Result<()> {
    let mut v = cmd("bpf-linker");
    v.arg("--version");
    if let Some(out) = output(v) {
        if out.contains(BPF_LINKER_VERSION) {
            say(
                "setup",
                &format!("bpf-linker {BPF_LINKER_VERSION}: already installed"),
            );
            return Ok(());
        }
        say(
            "setup",
            &format!("bpf-linker is {}, want {BPF_LINKER_VERSION}", out.trim()),
        );
    }
    say("setup", "installing bpf-linker (2-4 minutes, once)");
    let mut install = cmd("cargo");
    install.args([
        "install",
        &format!("bpf-linker@{BPF_LINKER_VERSION}"),
        "--locked",
        "--force",
    ]);
    check("setup", install)
}

fn cargo_fuzz() -> Result<()> {
    let mut v = cmd("cargo");
    v.args(["fuzz", "--version"]);
    if output(v).is_some_and(|out| out.contains(CARGO_FUZZ_VERSION)) {
        say(
            "setup",
            &format!("cargo-fuzz {CARGO_FUZZ_VERSION}: already installed"),
        );
        return Ok(());
    }
    say("setup", "installing cargo-fuzz (about 2 minutes, once)");
    let mut install = cmd("cargo");
    install.args([
        "install",
        &format!("cargo-fuzz@{CARGO_FUZZ_VERSION}"),
        "--locked",
        "--force",
    ]);
    check("setup", install)
}

fn dpkg_installed(pkg: &str) -> bool {
    let mut q = cmd("dpkg-query");
    q.args(["-W", "-f=${Status}", pkg]);
    output(q).is_some_and(|s| s.contains("install ok installed"))
}

fn apt() -> Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        say(
            "setup",
            &format!(
                "Debian packages: already installed ({})",
                APT_PACKAGES.join(", ")
            ),
        );
        return Ok(());
    }
    let mut update = cmd("apt-get");
    update
        .arg("update")
        .env("DEBIAN_FRONTEND", "noninteractive");
    check("setup", update)?;
    let mut install = cmd("apt-get");
    install
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    check("setup", install)
}

fn python() -> Result<()> {
    let req = root().join("tests/python/requirements.txt");
    if !req.exists() {
        return Ok(());
    }
    let mut probe = cmd("python3");
    probe.args([
        "-c",
        "import perfetto.protos.perfetto.trace.perfetto_trace_pb2, google.protobuf, nvidia.nvtx",
    ]);
    if output(probe).is_some() {
        say("setup", "Python test packages: already installed");
        return Ok(());
    }
    let mut pip = cmd("python3");
    pip.args(["-m", "pip", "install", "-q", "-r"]).arg(&req);
    check("setup", pip).or_else(|e| {
        bail!(
            "{e}: the trace tests decode with the perfetto PyPI package and build against \
                 the NVTX headers of nvidia-nvtx-cu12"
        )
    })
}
