//! The trace-exit section of `cargo xtask bench`: how long `kreplay trace` takes to attach, and
//! to write its trace and exit once the traced program has exited or Ctrl-C was pressed, with
//! uprobe-multi links beside one perf event per function (`KREPLAY_UPROBE_MULTI=0`).
use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::numbers::median;
use crate::run::say;

/// Rounds per mode and ending, interleaved.
const ROUNDS: usize = 3;
/// Extra copies of the HIP and HSA libraries probed with `--lib`, each a file of its own.
const COPIES: usize = 3;

/// How a traced run ends.
#[derive(Clone, Copy)]
enum Ending {
    /// The traced program exits; kreplay notices and ends.
    TargetExit,
    /// Ctrl-C (SIGINT) to kreplay while the program runs on.
    Interrupt,
}

/// One run's figures.
struct Run {
    attachments: u64,
    attach_ms: f64,
    exit_s: f64,
}

/// Copies of the sim's HIP and HSA libraries in `COPIES` directories of their own, as
/// `--lib` arguments.
fn library_copies(dir: &Path) -> Result<Vec<PathBuf>> {
    let sim = kreplay_tests::sim_dir();
    let mut libs = Vec::new();
    for i in 0..COPIES {
        let d = dir.join(format!("copy{i}"));
        std::fs::create_dir_all(&d)?;
        for name in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
            let to = d.join(name);
            std::fs::copy(sim.join(name), &to)
                .with_context(|| format!("copying {name} to {}", d.display()))?;
            libs.push(to);
        }
    }
    Ok(libs)
}

/// Reads kreplay's stderr until the "tracing" line; returns (attachments, attach ms).
fn attached(stderr: &mut impl BufRead) -> Result<(u64, f64)> {
    let mut line = String::new();
    loop {
        line.clear();
        if stderr.read_line(&mut line)? == 0 {
            bail!("kreplay ended before it said it was tracing");
        }
        if let Some(rest) = line.strip_prefix("kreplay: tracing ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let n = words
                .iter()
                .position(|w| *w == "probes")
                .and_then(|i| words.get(i.wrapping_sub(1)))
                .and_then(|w| w.parse().ok())
                .context("attachment count")?;
            let ms = words
                .iter()
                .position(|w| *w == "ms;")
                .and_then(|i| words.get(i.wrapping_sub(1)))
                .and_then(|w| w.parse().ok())
                .context("attach time")?;
            return Ok((n, ms));
        }
    }
}

/// Waits for `child`'s exit and returns when it was seen (polled every millisecond).
fn exited_at(child: &mut Child) -> Result<Instant> {
    loop {
        if child.try_wait()?.is_some() {
            return Ok(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One traced run of the pid target: attach, 1000 calls, then the ending.
fn one_run(bin: &Path, libs: &[PathBuf], out: &Path, multi: bool, ending: Ending) -> Result<Run> {
    let linger = matches!(ending, Ending::Interrupt);
    let (mut target, mut target_out) = kreplay_tests::spawn_pid_target_with(1000, linger);
    let mut c = Command::new(bin);
    c.args(["trace", "--no-summary", "-o"])
        .arg(out)
        .arg("-p")
        .arg(target.id().to_string());
    for l in libs {
        c.arg("--lib").arg(l);
    }
    if !multi {
        c.env("KREPLAY_UPROBE_MULTI", "0");
    }
    let mut kreplay = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting kreplay")?;
    let mut err = BufReader::new(kreplay.stderr.take().context("stderr")?);
    let (attachments, attach_ms) = attached(&mut err)?;
    // The rest of stderr is drained so kreplay never blocks on it.
    let drain = std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut stdin = Some(target.stdin.take().context("target stdin")?);
    writeln!(stdin.as_mut().context("target stdin")?, "go")?;
    let mut line = String::new();
    target_out.read_line(&mut line)?;
    if line != "done\n" {
        bail!("the target said {line:?}, not done");
    }
    let end = match ending {
        Ending::TargetExit => {
            drop(stdin.take());
            exited_at(&mut target)?
        }
        Ending::Interrupt => {
            let t = Instant::now();
            // SAFETY: plain signal send to a process this bench started.
            unsafe { libc::kill(kreplay.id() as i32, libc::SIGINT) };
            t
        }
    };
    let done = exited_at(&mut kreplay)?;
    let _ = drain.join();
    // A lingering target exits on end of file.
    drop(stdin);
    let _ = target.wait();
    Ok(Run {
        attachments,
        attach_ms,
        exit_s: (done - end).as_secs_f64(),
    })
}

/// Appends the trace-exit comparison to `out`.
pub fn run(out: &mut String) -> Result<()> {
    if !kreplay_tests::is_root() {
        say("bench", "trace exit: skipped (needs root to load BPF)");
        let _ = writeln!(out, "## Trace exit\n\nskipped: not root\n");
        return Ok(());
    }
    let bin = kreplay_tests::target_dir().join("release").join("kreplay");
    let dir = kreplay_tests::scratch("bench-exit");
    let libs = library_copies(&dir)?;
    let trace = dir.join("exit.pftrace");
    let _ = writeln!(
        out,
        "## Trace exit\n\n`kreplay trace -p PID --lib COPY...` on `tests/trace/pid_target.c` (HIP \
         over HSA on the simulated runtime) with {COPIES} extra copies of the HIP and HSA \
         libraries probed through `--lib`, each a file of its own; the target makes 1000 \
         `hipMalloc`/`hipFree` pairs, then either exits (*target exits*: the time from its exit \
         to kreplay's) or lingers while kreplay gets SIGINT (*Ctrl-C*: from the signal to \
         kreplay's exit). *uprobe-multi*: kreplay's default where the kernel has them, one link \
         per library and program; *perf events*: `KREPLAY_UPROBE_MULTI=0`, one perf event per \
         function and program. *attach*: the time kreplay spent attaching (its \"probes \
         attached in N ms\"). {ROUNDS} rounds of each, interleaved; medians.\n\n\
         | attachments | ending | mode | attach ms | exit s |\n|---:|---|---|---:|---:|"
    );
    for (ending, label) in [
        (Ending::TargetExit, "target exits"),
        (Ending::Interrupt, "Ctrl-C"),
    ] {
        let mut rows: Vec<(bool, Vec<Run>)> = vec![(true, vec![]), (false, vec![])];
        for round in 0..ROUNDS {
            for (multi, runs) in rows.iter_mut() {
                say(
                    "bench",
                    &format!(
                        "trace exit: {label}, {}, round {}/{ROUNDS}",
                        if *multi {
                            "uprobe-multi"
                        } else {
                            "perf events"
                        },
                        round + 1
                    ),
                );
                runs.push(one_run(&bin, &libs, &trace, *multi, ending)?);
            }
        }
        for (multi, runs) in &rows {
            let _ = writeln!(
                out,
                "| {} | {label} | {} | {:.0} | {:.2} |",
                runs[0].attachments,
                if *multi {
                    "uprobe-multi"
                } else {
                    "perf events"
                },
                median(runs.iter().map(|r| r.attach_ms).collect()),
                median(runs.iter().map(|r| r.exit_s).collect()),
            );
        }
    }
    let _ = writeln!(out);
    Ok(())
}
