//! `cargo xtask bench`: every benchmark, side by side in one run, results written to
//! `docs/bench/` with the machine, the date and the commands that produced them.
//!
//! Timings on shared machines are noisy, so each comparison runs its variants interleaved in
//! the same run and reports ratios; absolute numbers are for orientation only.
use crate::numbers::{field, median};
use std::{fmt::Write as _, path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};

use crate::run::{cmd, root, say};

/// Benches registered with cargo: (package, bench target).
const CARGO_BENCHES: &[(&str, &str)] = &[
    ("kreplay-cli", "perfetto_encode"),
    ("kreplay-cli", "merge"),
    ("kreplay-cli", "audit_overhead"),
    ("kreplay-cli", "inject"),
    ("kreplay-cli", "attach"),
    ("kreplay-tool", "contention"),
    ("kreplay-tool", "stress"),
    ("kreplay-tool", "replay"),
    ("kreplay-tool", "restore"),
];

/// The machine, in one line: cores, CPU, memory, kernel, load average.
pub(crate) fn machine() -> String {
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

/// The date and time now, UTC.
pub(crate) fn today() -> String {
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

/// Interleaved rounds of the probe-overhead comparison (medians are reported).
const PROBE_ROUNDS: usize = 9;

/// An older `kreplay` binary to time beside the current one (`KREPLAY_BENCH_BASELINE`): a
/// before/after comparison in one run, under the same load.
fn baseline_bin() -> Option<PathBuf> {
    std::env::var_os("KREPLAY_BENCH_BASELINE")
        .map(PathBuf::from)
        .filter(|p| p.exists())
}

/// One timed callloop run: the loop's wall and CPU ns per call, and (under `kreplay trace`) the
/// reader's CPU ns per event from the trace summary.
#[derive(Clone, Copy)]
struct Timing {
    wall: f64,
    cpu: f64,
    reader: Option<f64>,
}

impl Timing {
    fn parse(stdout: &str, stderr: &str) -> Result<Timing> {
        Ok(Timing {
            wall: field(stdout, "ns_per_call:").context("ns_per_call")?,
            cpu: field(stdout, "cpu_ns_per_call:").context("cpu_ns_per_call")?,
            reader: reader_cpu(stderr),
        })
    }
}

/// The trace summary's `reader cpu: N ns per event (...)` figure.
fn reader_cpu(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("reader cpu: "))
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
}

/// One callloop run under `kreplay ARGS -- callloop 1 CALLS` (`bin` None: unprobed).
fn timed(
    bin: Option<&std::path::Path>,
    args: &[&std::ffi::OsStr],
    loop_exe: &std::path::Path,
    calls: &str,
) -> Result<Timing> {
    let mut c = match bin {
        Some(b) => {
            let mut c = Command::new(b);
            c.args(args).arg("--").arg(loop_exe);
            c
        }
        None => Command::new(loop_exe),
    };
    c.args(["1", calls]);
    let (stdout, stderr) = capture(c)?;
    Timing::parse(&stdout, &stderr)
}

/// Medians of a mode's rounds: (wall, cpu, reader).
fn medians(v: &[Timing]) -> (f64, f64, Option<f64>) {
    let reader: Vec<f64> = v.iter().filter_map(|t| t.reader).collect();
    (
        median(v.iter().map(|t| t.wall).collect()),
        median(v.iter().map(|t| t.cpu).collect()),
        (!reader.is_empty()).then(|| median(reader)),
    )
}

/// The `bpf program time:` line's two ns/run figures (entry, return).
fn program_time(stderr: &str) -> Option<(f64, f64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("bpf program time:"))?;
    let mut ns = line
        .split(" ns/run")
        .filter_map(|part| part.rsplit(' ').next()?.parse::<f64>().ok());
    Some((ns.next()?, ns.next()?))
}

/// The probe-overhead comparison: an idle `hipStreamSynchronize` loop unprobed,
/// under empty probes, and under `kreplay trace` (and a baseline binary's, if given),
/// interleaved; then where the time goes (BPF statistics) and sustained events/s.
fn probe_overhead(out: &mut String) -> Result<()> {
    if !kreplay_tests::is_root() {
        say("bench", "probe overhead: skipped (needs root to load BPF)");
        let _ = writeln!(out, "## Probe overhead\n\nskipped: not root\n");
        return Ok(());
    }
    let bin = kreplay_tests::target_dir().join("release").join("kreplay");
    let baseline = baseline_bin();
    let lib = kreplay_tests::sim_dir().join("libamdhip64.so.6");
    let loop_exe = kreplay_tests::build_callloop();
    let calls = "200000";
    let trace_out = kreplay_tests::scratch("bench").join("overhead.pftrace");
    let bare_args: Vec<&std::ffi::OsStr> = ["probe", "--bare", "--lib"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([lib.as_os_str()])
        .chain(
            ["--symbol", "hipStreamSynchronize"]
                .iter()
                .map(std::ffi::OsStr::new),
        )
        .collect();
    let trace_args: Vec<&std::ffi::OsStr> = ["trace", "-q", "-o"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([trace_out.as_os_str()])
        .collect();
    let (mut plain, mut bare, mut traced, mut before) = (vec![], vec![], vec![], vec![]);
    for round in 0..PROBE_ROUNDS {
        say(
            "bench",
            &format!("probe overhead round {}/{PROBE_ROUNDS}", round + 1),
        );
        plain.push(timed(None, &[], &loop_exe, calls)?);
        bare.push(timed(Some(&bin), &bare_args, &loop_exe, calls)?);
        if let Some(old) = &baseline {
            before.push(timed(Some(old), &trace_args, &loop_exe, calls)?);
        }
        traced.push(timed(Some(&bin), &trace_args, &loop_exe, calls)?);
    }
    let (p, pc, _) = medians(&plain);
    let (b, bc, _) = medians(&bare);
    let _ = writeln!(
        out,
        "## Probe overhead\n\nA loop of {calls} idle `hipStreamSynchronize(NULL)` calls on the simulated \
         runtime, one thread, {PROBE_ROUNDS} rounds interleaved, medians. *bare*: an empty uprobe + uretprobe on the same \
         function (`kreplay probe --bare`); *trace*: `kreplay trace` with every HIP/HSA probe and the full \
         pipeline (ring buffer → per-thread streams → Perfetto). *wall*: the loop's elapsed time per call (the \
         target's measure); *CPU*: its thread's CPU time per call (the probes' own cost, without time spent \
         waiting for a CPU); *reader*: `kreplay`'s CPU time per event while capturing (its summary's \
         `reader cpu` line), which competes with the loop for this machine's cores.\n\n\
         | mode | wall ns/call | added | / bare's added | CPU ns/call | added | / bare's added | reader CPU ns/event |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n\
         | unprobed | {p:.0} | — | — | {pc:.0} | — | — | — |\n\
         | bare probe | {b:.0} | {:.0} | 1.00 | {bc:.0} | {:.0} | 1.00 | — |",
        b - p,
        bc - pc
    );
    let row = |out: &mut String, name: &str, v: &[Timing]| -> f64 {
        let (t, tc, r) = medians(v);
        let _ = writeln!(
            out,
            "| {name} | {t:.0} | {:.0} | {:.2} | {tc:.0} | {:.0} | {:.2} | {} |",
            t - p,
            (t - p) / (b - p),
            tc - pc,
            (tc - pc) / (bc - pc),
            r.map_or("—".to_string(), |r| format!("{r:.0}"))
        );
        (t - p) / (b - p)
    };
    if let Some(old) = &baseline {
        row(
            out,
            &format!("kreplay trace, baseline `{}`", old.display()),
            &before,
        );
    }
    let ratio = row(out, "kreplay trace", &traced);
    let bare_lo = bare.iter().map(|t| t.wall).fold(f64::INFINITY, f64::min);
    let bare_hi = bare.iter().map(|t| t.wall).fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "\nSeparate runs: tracing adds {ratio:.2}× the bare probe cost in wall time. A whole \
         run's speed changes from one process to the next on a shared host (the bare probe read \
         {bare_lo:.0}–{bare_hi:.0} ns per call over these {PROBE_ROUNDS} rounds), so this ratio \
         moves by ±0.15 from one bench to the next; the paired measure below does not.\n"
    );
    crate::paired::paired_overhead(out, &bin, &lib)?;
    program_breakdown(out, &bin, &bare_args, &trace_args, &loop_exe, calls)?;
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

/// Where a probed call's time goes: the kernel's BPF statistics (`--bpf-stats`) of the empty
/// programs and of kreplay's, in separate runs (the statistics add their own clock reads, so
/// these runs are not timed), 3 of each interleaved, medians.
fn program_breakdown(
    out: &mut String,
    bin: &std::path::Path,
    bare_args: &[&std::ffi::OsStr],
    trace_args: &[&std::ffi::OsStr],
    loop_exe: &std::path::Path,
    calls: &str,
) -> Result<()> {
    let stats = std::ffi::OsStr::new("--bpf-stats");
    let (mut bare, mut traced) = (vec![], vec![]);
    for _ in 0..3 {
        for (args, into) in [(bare_args, &mut bare), (trace_args, &mut traced)] {
            let mut c = Command::new(bin);
            c.args(args)
                .arg(stats)
                .arg("--")
                .arg(loop_exe)
                .args(["1", calls]);
            let (_, stderr) = capture(c)?;
            into.push(program_time(&stderr).context("bpf program time line")?);
        }
    }
    let med = |v: &[(f64, f64)]| {
        (
            median(v.iter().map(|x| x.0).collect()),
            median(v.iter().map(|x| x.1).collect()),
        )
    };
    let (be, br) = med(&bare);
    let (te, tr) = med(&traced);
    let _ = writeln!(
        out,
        "### Time inside the BPF programs (`--bpf-stats`, ns per run, medians of 3)\n\n\
         | programs | entry | return | both | over the empty pair |\n|---|---:|---:|---:|---:|\n\
         | empty (`bare_enter`/`bare_return`) | {be:.0} | {br:.0} | {:.0} | — |\n\
         | kreplay (`call_enter`/`call_return`) | {te:.0} | {tr:.0} | {:.0} | {:.0} |\n\n\
         The empty pair's figure is the statistics' own cost (two clock reads per run); the last \
         column is what kreplay's programs add to a probed call.\n",
        be + br,
        te + tr,
        te + tr - be - br
    );
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
            .env(kreplay_common::replay_config::BENCH_OUT, &result);
        // A bench that runs `kreplay` runs the release build made above, unless told otherwise.
        let bin = kreplay_common::replay_config::BIN;
        if std::env::var_os(bin).is_none() {
            c.env(
                bin,
                kreplay_tests::target_dir().join("release").join("kreplay"),
            );
        }
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
        "# kreplay benchmarks: {name}\n\nMachine: {}\n\nDate: {}\n\nProduced by `cargo xtask bench --name {name}{}` (as root); \
         each section names its own command.\n\n",
        machine(),
        today(),
        only.iter()
            .map(|o| format!(" --only {o}"))
            .collect::<String>()
    );
    if only.is_empty() || only.iter().any(|o| o == "probe") {
        probe_overhead(&mut out)?;
    }
    if only.iter().any(|o| o == "trace-exit") {
        crate::bench_exit::run(&mut out)?;
    }
    if only.iter().any(|o| o == "discovery") {
        crate::bench_discovery::run(&mut out)?;
    }
    if only.iter().any(|o| o == "gpu-timeline") {
        crate::bench_gpu::run(&mut out)?;
    }
    if only.iter().any(|o| o == "replay-phases") {
        crate::bench_phases::run(&mut out)?;
    }
    cargo_benches(&mut out, only)?;
    let dir = root().join("docs").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.md"));
    std::fs::write(&path, out)?;
    say("bench", &format!("results written to {}", path.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Timing, program_time, reader_cpu};

    #[test]
    fn program_time_reads_entry_and_return_ns() {
        let stderr = "events dropped: 0\n\
            bpf program time: call_enter 120 ns/run (500005 runs), call_return 185.5 ns/run (500005 runs)\n";
        assert_eq!(program_time(stderr), Some((120.0, 185.5)));
        assert_eq!(program_time("bpf program time: unavailable (x)"), None);
    }

    #[test]
    fn timing_reads_the_loop_and_reader_figures() {
        let stdout = "ns_per_call: 1210.5\ncpu_ns_per_call: 1002.0\ncalls_per_sec: 826000\n";
        let stderr = "events dropped: 0\nreader cpu: 142 ns per event (200001 events, 28.4 ms)\n";
        let t = Timing::parse(stdout, stderr).unwrap();
        assert_eq!((t.wall, t.cpu, t.reader), (1210.5, 1002.0, Some(142.0)));
        assert_eq!(reader_cpu("events dropped: 0\n"), None);
        assert!(Timing::parse("ns_per_call: 5\n", "").is_err());
    }
}
