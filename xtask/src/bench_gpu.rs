//! The gpu-timeline section of `cargo xtask bench`: what kreplay-tool's observe mode
//! (`KREPLAY_GPU_TIMELINE=1`, as `kreplay trace --gpu` injects it) costs a launch loop on the
//! simulated ROCm runtime, beside the same loop without the tool and with the tool waiting for
//! an attach (`KREPLAY_ATTACH=1`, `docs/attach.md`), interleaved, each dispatch run on its queue's
//! thread (`KRSIM_INLINE_DISPATCH=1`). Figures: wall time per
//! dispatch, the process's CPU time (user + system, all its threads: the runtime's
//! signal-handler thread records the GPU times) per dispatch, the dispatches and copies the
//! tool's stream holds, and the records it dropped.
use std::{fmt::Write as _, path::Path, process::Command, time::Instant};

use anyhow::{Context, Result, bail};
use kreplay_common::stream::{Record, StreamReader};

use crate::numbers::median;
use crate::run::say;

/// Rounds per arm, interleaved.
const ROUNDS: usize = 5;
/// Streams of the loop (`saxpy` buffers).
const STREAMS: u64 = 4;
/// Launches per stream.
const LAUNCHES: u64 = 50000;

/// One run: wall seconds, CPU seconds of the program (all threads).
struct Run {
    wall_s: f64,
    cpu_s: f64,
}

fn cpu_children_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the valid local.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN covers waited-for children.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// How the loop runs.
enum Arm<'a> {
    /// Without the tool.
    Plain,
    /// The tool in observe mode, writing to the directory.
    Observe(&'a Path, &'a Path),
    /// The tool loaded at start and waiting for an attach.
    Waiting(&'a Path),
}

fn run_once(arm: Arm) -> Result<Run> {
    let exe = kreplay_tests::workload("saxpy");
    let mut c = Command::new(&exe);
    c.args([STREAMS.to_string(), "256".into(), LAUNCHES.to_string()]);
    for (k, _) in std::env::vars() {
        if k.starts_with("KRSIM_") || k.starts_with("KREPLAY_") || k == "HSA_TOOLS_LIB" {
            c.env_remove(k);
        }
    }
    // Each dispatch runs on its queue's thread: the simulator's hand-off to a worker thread per
    // dispatch would cap every arm at its own rate.
    c.env("KRSIM_INLINE_DISPATCH", "1");
    match arm {
        Arm::Plain => {}
        Arm::Observe(lib, dir) => {
            c.env("HSA_TOOLS_LIB", lib)
                .env("KREPLAY_GPU_TIMELINE", "1")
                .env("KREPLAY_OUTPUT_DIR", dir);
        }
        Arm::Waiting(lib) => {
            c.env("HSA_TOOLS_LIB", lib)
                .env(kreplay_common::replay_config::ATTACH, "1");
        }
    }
    let cpu0 = cpu_children_s();
    let t0 = Instant::now();
    let out = c.output().context("running saxpy")?;
    let wall_s = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("saxpy failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(Run {
        wall_s,
        cpu_s: cpu_children_s() - cpu0,
    })
}

/// (dispatches, copies, dropped) in the tool streams of `dir`.
fn stream_counts(dir: &Path) -> Result<(u64, u64, u64)> {
    let (mut d, mut c, mut dropped) = (0, 0, 0);
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let f = std::fs::File::open(&p)?;
        let r = StreamReader::new(std::io::BufReader::new(f), &p)?;
        for rec in r {
            match rec {
                Record::Dispatch(x) if x.start_ns != 0 => d += 1,
                Record::GpuCopy(x) if x.start_ns != 0 => c += 1,
                Record::Drops(x) => dropped += x.count,
                _ => {}
            }
        }
    }
    Ok((d, c, dropped))
}

/// Runs the section and appends it to `out`.
pub fn run(out: &mut String) -> Result<()> {
    let lib = kreplay_tests::target_dir()
        .join("release")
        .join("libkreplay_tool.so");
    let scratch = kreplay_tests::scratch("bench-gpu-timeline");
    let dispatches = STREAMS * LAUNCHES;
    let (mut plain, mut tool, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
    let mut counts = Vec::new();
    for round in 0..ROUNDS {
        say(
            "bench",
            &format!("gpu-timeline round {}/{ROUNDS}", round + 1),
        );
        plain.push(run_once(Arm::Plain)?);
        let dir = scratch.join(format!("round{round}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        tool.push(run_once(Arm::Observe(&lib, &dir))?);
        counts.push(stream_counts(&dir)?);
        waiting.push(run_once(Arm::Waiting(&lib))?);
    }
    let per = |v: &[Run], f: fn(&Run) -> f64| {
        median(v.iter().map(|r| f(r) * 1e6 / dispatches as f64).collect())
    };
    let (pw, tw) = (per(&plain, |r| r.wall_s), per(&tool, |r| r.wall_s));
    let (pc, tc) = (per(&plain, |r| r.cpu_s), per(&tool, |r| r.cpu_s));
    let (ww, wc) = (per(&waiting, |r| r.wall_s), per(&waiting, |r| r.cpu_s));
    let _ = writeln!(
        out,
        "## GPU timeline on the simulated ROCm runtime\n\n\
         `saxpy {STREAMS} 256 {LAUNCHES}` ({dispatches} dispatches on {STREAMS} streams, each \
         with its own queue; `KRSIM_INLINE_DISPATCH=1`: each dispatch runs on its queue's \
         thread, without the simulator's hand-off to a worker thread, which alone holds a plain \
         loop to about 90k dispatches/s on this machine), plain, with `HSA_TOOLS_LIB=target/release/libkreplay_tool.so \
         KREPLAY_GPU_TIMELINE=1` (observe mode, as `kreplay trace --gpu` injects it; no \
         probes), and with `HSA_TOOLS_LIB=target/release/libkreplay_tool.so KREPLAY_ATTACH=1` \
         (the tool waiting for a `kreplay -p` that never comes: every queue intercepted, every \
         batch passed through), {ROUNDS} rounds interleaved; medians per dispatch. CPU is the \
         program's user + system time over all its threads.\n\n\
         | arm | wall µs/dispatch | dispatches/s | CPU µs/dispatch |\n|---|---:|---:|---:|\n\
         | plain | {pw:.2} | {:.0} | {pc:.2} |\n| observe mode | {tw:.2} | {:.0} | {tc:.2} |\n\
         | waiting for an attach | {ww:.2} | {:.0} | {wc:.2} |\n\n\
         Added per GPU record: {:.2} µs wall, {:.2} µs CPU. Added per dispatch while waiting: \
         {:.2} µs wall, {:.2} µs CPU.\n",
        1e6 / pw,
        1e6 / tw,
        1e6 / ww,
        tw - pw,
        tc - pc,
        ww - pw,
        wc - pc
    );
    let _ = writeln!(
        out,
        "Target: at least 200000 dispatches/s sustained in observe mode with no GPU record \
         dropped: {} ({:.0} dispatches/s).\n\n\
         Records in the tool's stream per round (dispatches with GPU times, copies with GPU times, dropped):\n",
        if 1e6 / tw >= 200_000.0 && counts.iter().all(|&(d, _, x)| d == dispatches && x == 0) {
            "met"
        } else {
            "missed"
        },
        1e6 / tw
    );
    for (i, (d, c, x)) in counts.iter().enumerate() {
        let _ = writeln!(out, "- round {}: {d} of {dispatches}, {c}, {x}", i + 1);
    }
    let _ = writeln!(out);
    Ok(())
}
