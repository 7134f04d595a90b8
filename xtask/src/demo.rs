//! `cargo xtask demo`: the main job, end to end, on this machine.
use anyhow::{Result, bail};

use crate::run::{check, cmd, say};

/// Runs the probe demo: a uprobe and uretprobe on a small library's function, every call shown.
pub fn run() -> Result<()> {
    if !kreplay_tests::is_root() {
        bail!("the demo loads BPF probes: run it as root (sudo -E cargo xtask demo)");
    }
    let (lib, exe) = kreplay_tests::build_smoke();
    let bin = kreplay_tests::target_dir().join("debug").join("kreplay");
    say(
        "demo",
        "probing krsmoke_add in a small test library while a program calls it 5 times",
    );
    let mut probe = cmd(bin.to_str().unwrap_or("kreplay"));
    probe
        .args(["probe", "--lib"])
        .arg(&lib)
        .args(["--symbol", "krsmoke_add", "--"])
        .arg(&exe)
        .arg("5");
    check("demo", probe)?;
    say(
        "demo",
        "each line above is one call seen by the uprobe/uretprobe pair: pid, tid, arguments, return value, duration",
    );
    Ok(())
}
