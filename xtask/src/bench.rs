//! `cargo xtask bench`: every benchmark, side by side in one run, results written to
//! `docs/bench/` with the machine, the date and the commands that produced them.
//!
//! Timings on shared machines are noisy, so each comparison runs its variants interleaved in
//! the same run and reports ratios; absolute numbers are for orientation only.
use std::{fmt::Write as _, path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};

use crate::run::{cmd, root, say};

/// Benches registered with cargo: (package, bench target).
const CARGO_BENCHES: &[(&str, &str)] = &[
    ("kreplay-cli", "perfetto_encode"),
    ("kreplay-cli", "merge"),
    ("kreplay-cli", "audit_overhead"),
    ("kreplay-tool", "contention"),
    ("kreplay-tool", "stress"),
    ("kreplay-tool", "replay"),
    ("kreplay-tool", "restore"),
];

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024 / 1024);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "{cores} cores ({cpu}), {mem} GiB, kernel {}, load average at start {}",
        kernel.trim(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn today() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Runs `program args` and returns (stdout, stderr), failing on a non-zero exit.
fn capture(mut c: Command) -> Result<(String, String)> {
    let out = c
        .output()
        .with_context(|| format!("starting {:?}", c.get_program()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            c.get_program(),
            stderr.lines().last().unwrap_or("")
        );
    }
    Ok((stdout, stderr))
}

fn field(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The probe-overhead comparison of issue 4: an idle `hipStreamSynchronize` loop unprobed,
/// under empty probes, and under `kreplay trace`, interleaved, then sustained events/s.
fn probe_overhead(out: &mut String) -> Result<()> {
    if !kreplay_tests::is_root() {
        say("bench", "probe overhead: skipped (needs root to load BPF)");
        let _ = writeln!(out, "## Probe overhead\n\nskipped: not root\n");
        return Ok(());
    }
    let bin = kreplay_tests::target_dir().join("release").join("kreplay");
    let lib = kreplay_tests::sim_dir().join("libamdhip64.so.6");
    let loop_exe = kreplay_tests::build_callloop();
    let calls = "200000";
    let trace_out = kreplay_tests::scratch("bench").join("overhead.pftrace");
    let mut plain = Vec::new();
    let mut bare = Vec::new();
    let mut traced = Vec::new();
    for round in 0..5 {
        say("bench", &format!("probe overhead round {}/5", round + 1));
        let mut c = Command::new(&loop_exe);
        c.args(["1", calls]);
        plain.push(field(&capture(c)?.0, "ns_per_call:").context("ns_per_call")?);
        let mut c = Command::new(&bin);
        c.args(["probe", "--bare", "--lib"]).arg(&lib).args([
            "--symbol",
            "hipStreamSynchronize",
            "--",
        ]);
        c.arg(&loop_exe).args(["1", calls]);
        bare.push(field(&capture(c)?.0, "ns_per_call:").context("ns_per_call")?);
        let mut c = Command::new(&bin);
        c.args(["trace", "-q", "-o"])
            .arg(&trace_out)
            .arg("--")
            .arg(&loop_exe)
            .args(["1", calls]);
        traced.push(field(&capture(c)?.0, "ns_per_call:").context("ns_per_call")?);
    }
    let (p, b, t) = (median(plain), median(bare), median(traced));
    let _ = writeln!(
        out,
        "## Probe overhead (issue 4)\n\nA loop of {calls} idle `hipStreamSynchronize(NULL)` calls on the simulated \
         runtime, one thread, 5 rounds interleaved, medians. *bare*: an empty uprobe + uretprobe on the same \
         function (`kreplay probe --bare`); *trace*: `kreplay trace` with every HIP/HSA probe and the full \
         pipeline (ring buffer → per-thread streams → Perfetto).\n\n\
         | mode | ns/call | added ns/call |\n|---|---:|---:|\n\
         | unprobed | {p:.0} | — |\n| bare probe | {b:.0} | {:.0} |\n| kreplay trace | {t:.0} | {:.0} |\n\n\
         Tracing adds **{:.2}×** the bare probe cost (target ≤ 1.3×).\n",
        b - p,
        t - p,
        (t - p) / (b - p)
    );
    let _ = writeln!(
        out,
        "### Sustained events/s under `kreplay trace`\n\n| threads | events/s | dropped |\n|---:|---:|---:|"
    );
    for threads in [1u32, 4, 32] {
        let per = (400_000 / threads).to_string();
        let mut c = Command::new(&bin);
        c.args(["trace", "-q", "-o"])
            .arg(&trace_out)
            .arg("--")
            .arg(&loop_exe)
            .arg(threads.to_string())
            .arg(&per);
        let (stdout, stderr) = capture(c)?;
        let rate = field(&stdout, "calls_per_sec:").context("calls_per_sec")?;
        let dropped = field(&stderr, "events dropped:").context("events dropped")?;
        let _ = writeln!(out, "| {threads} | {rate:.0} | {dropped:.0} |");
    }
    let _ = writeln!(out);
    Ok(())
}

fn cargo_benches(out: &mut String, only: &[String]) -> Result<()> {
    for &(pkg, bench) in CARGO_BENCHES {
        if !only.is_empty() && !only.iter().any(|o| o == bench) {
            continue;
        }
        let manifest = root().join(pkg).join("Cargo.toml");
        let toml = std::fs::read_to_string(&manifest).unwrap_or_default();
        if !toml.contains(&format!("name = \"{bench}\"")) {
            continue;
        }
        let result: PathBuf = kreplay_tests::scratch("bench").join(format!("{bench}.md"));
        let _ = std::fs::remove_file(&result);
        say("bench", &format!("cargo bench -p {pkg} --bench {bench}"));
        let mut c = cmd("cargo");
        c.args(["bench", "-q", "-p", pkg, "--bench", bench])
            .env("KREPLAY_BENCH_OUT", &result);
        let status = c
            .status()
            .with_context(|| format!("running bench {bench}"))?;
        if !status.success() {
            bail!("bench {bench} failed ({status})");
        }
        let text =
            std::fs::read_to_string(&result).unwrap_or_else(|_| "(no results written)\n".into());
        let _ = writeln!(
            out,
            "## `{bench}` (`cargo bench -p {pkg} --bench {bench}`)\n\n{text}\n"
        );
    }
    Ok(())
}

/// Runs every benchmark (or the sections in `only`) and writes `docs/bench/<name>.md`.
pub fn run(name: &str, only: &[String]) -> Result<()> {
    crate::run::build_release()?;
    let mut out = format!(
        "# kreplay benchmarks: {name}\n\nMachine: {}\n\nDate: {}\n\nProduced by `cargo xtask bench --name {name}` (as root); \
         each section names its own command.\n\n",
        machine(),
        today()
    );
    if only.is_empty() || only.iter().any(|o| o == "probe") {
        probe_overhead(&mut out)?;
    }
    cargo_benches(&mut out, only)?;
    let dir = root().join("docs").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.md"));
    std::fs::write(&path, out)?;
    say("bench", &format!("results written to {}", path.display()));
    Ok(())
}
