//! `cargo xtask soak`: long runs of `kreplay trace --all`, `kreplay audit` (scraped by a real
//! Prometheus) and `kreplay replay`, sampling kreplay's (and the application's) resident
//! memory and open descriptors, judged by [`judge`], written to `docs/bench/soak.md`.
//!
//! Not part of CI: the trace and audit soaks run side by side for `--minutes` (30 by default;
//! the trace less when the disk cannot hold its streams and trace). Each soak runs in a PID
//! namespace of its own (`unshare --pid --mount-proc`), so `trace --all` and the audit see,
//! and rescan, only their own workload's processes, and the namespace's end kills whatever is
//! left in it. Their workloads load different copies of the simulated runtime (the audit's
//! through `LD_LIBRARY_PATH`), so neither's probes fire on the other's calls. The replay soak
//! probes only its own command and runs outside a namespace (`kreplay trace -- CMD` attaches
//! by pid, which must be the kernel's).
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::bench::field;
use crate::run::{root, say};

mod judge;
mod long;
mod prom;
mod replay;
mod report;
mod sample;
mod splice;
mod trace_check;

use sample::Series;

/// Which soak to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Soak {
    /// `kreplay trace --all` against a paced call loop.
    Trace,
    /// `kreplay audit` scraped every second by Prometheus.
    Audit,
    /// `kreplay replay --probes` over 10,000 dispatches.
    Replay,
}

/// What the soak was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// Minutes of the trace and audit soaks.
    pub minutes: u64,
    /// The soaks to run (empty: all).
    pub only: Vec<Soak>,
    /// Calls per second of the paced workload.
    pub rate: u64,
}

impl Options {
    fn wants(&self, s: Soak) -> bool {
        self.only.is_empty() || self.only.contains(&s)
    }

    fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--minutes".to_string(),
            self.minutes.to_string(),
            "--rate".to_string(),
            self.rate.to_string(),
        ];
        for s in &self.only {
            a.push("--only".into());
            a.push(format!("{s:?}").to_lowercase());
        }
        a
    }
}

/// Seconds between samples in the long soaks.
const PERIOD: Duration = Duration::from_secs(5);
/// Calls of the unpaced capacity runs (bare, then under the probes).
const CAPACITY_CALLS: u64 = 2_000_000;
/// Packets of the trace decoded in full by the independent decoder.
const DECODED_PACKETS: u64 = 200_000;

/// The release `kreplay`.
fn kreplay() -> PathBuf {
    kreplay_tests::target_dir().join("release").join("kreplay")
}

/// The outer half: builds, then runs each soak in a fresh PID namespace of its own (trace
/// and audit side by side, then replay) and writes `docs/bench/soak.md` from their sections.
pub fn run(opts: &Options) -> Result<()> {
    if !kreplay_tests::is_root() {
        bail!("the soak loads BPF programs: run it as root");
    }
    crate::run::build_release()?;
    kreplay_tests::build_callloop();
    kreplay_tests::workload("high_qps");
    long::audit_libs()?;
    // The build above may have replaced this binary: run the one now at its path.
    let me = std::env::current_exe()?;
    let me = PathBuf::from(
        me.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    );
    let mut out = report::header(opts);
    let _ = writeln!(out, "{}\n", report::load_line("at the start"));
    let spawn = |s: Soak| -> Result<Child> {
        let _ = std::fs::remove_file(section(s));
        say("soak", &format!("{s:?}: in a PID namespace of its own"));
        let mut one = opts.clone();
        one.only = vec![s];
        Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
            .arg(&me)
            .args(["soak", "--inside"])
            .args(one.args())
            .spawn()
            .context("running unshare")
    };
    let mut failed = vec![];
    let mut running = vec![];
    for s in [Soak::Trace, Soak::Audit]
        .into_iter()
        .filter(|&s| opts.wants(s))
    {
        running.push((s, spawn(s)?));
    }
    for (s, mut child) in running {
        let status = child.wait()?;
        match std::fs::read_to_string(section(s)) {
            Ok(text) if status.success() => out.push_str(&text),
            _ => {
                let _ = writeln!(out, "## {s:?}\n\n**The soak failed** ({status}).\n");
                failed.push(s);
            }
        }
    }
    // Replay probes only its own command: it runs here, where its pids are the kernel's.
    if opts.wants(Soak::Replay)
        && let Err(e) = replay::soak(&kreplay(), &mut out)
    {
        let _ = writeln!(out, "## Replay\n\n**The soak failed**: {e:#}.\n");
        failed.push(Soak::Replay);
    }
    let _ = writeln!(out, "{}", report::load_line("at the end"));
    let dir = root().join("docs").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("soak.md");
    // `--only` reruns some soaks: the others' sections stay, each naming its run.
    if !opts.only.is_empty()
        && let Ok(old) = std::fs::read_to_string(&path)
    {
        out = splice::splice(&old, &out);
    }
    std::fs::write(&path, out)?;
    say("soak", &format!("results written to {}", path.display()));
    if !failed.is_empty() {
        bail!("soaks failed: {failed:?}");
    }
    Ok(())
}

/// Where the soak `s` writes its section of the results.
fn section(s: Soak) -> PathBuf {
    kreplay_tests::scratch("soak").join(format!("{s:?}.md").to_lowercase())
}

/// The inner half: runs the one soak in `opts.only`, inside its namespace, and writes its
/// section.
pub fn inside(opts: &Options) -> Result<()> {
    let mut out = String::new();
    for &s in &opts.only {
        match s {
            Soak::Trace => long::trace(opts, &mut out)?,
            Soak::Audit => long::audit(opts, &mut out)?,
            Soak::Replay => bail!("the replay soak runs outside a PID namespace"),
        }
        std::fs::write(section(s), &out)?;
    }
    Ok(())
}

/// A kreplay process with its stderr in a file, stopped with SIGINT and reaped.
struct Running {
    child: Child,
    stderr: PathBuf,
    stdout: PathBuf,
}

impl Running {
    /// Starts `kreplay ARGS` and waits until its stderr has a line containing `ready`.
    fn start(args: &[&str], log: &Path, ready: &str) -> Result<Self> {
        let stdout = log.with_extension("out");
        let child = Command::new(kreplay())
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout)?)
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .context("starting kreplay")?;
        let mut r = Running {
            child,
            stderr: log.to_path_buf(),
            stdout,
        };
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains(ready) {
                return Ok(r);
            }
            if let Ok(Some(status)) = r.child.try_wait() {
                bail!("kreplay {} exited ({status}): {text}", args.join(" "));
            }
            if t0.elapsed() > Duration::from_secs(120) {
                bail!("kreplay {} not ready after 120 s: {text}", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, then waits (up to `limit`, then SIGKILL); returns its stderr and whether it
    /// exited 0.
    fn stop(mut self, limit: Duration) -> Result<(String, bool)> {
        // SAFETY: kill(2) on our own unreaped child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break Some(s);
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        Ok((text, status.is_some_and(|s| s.success())))
    }
}

/// One callloop run: (calls made, calls per second); `lib_dir` overrides where the simulated
/// runtime is loaded from.
fn callloop(threads: u64, calls: u64, rate: u64, lib_dir: Option<&Path>) -> Result<(u64, f64)> {
    let mut c = Command::new(kreplay_tests::build_callloop());
    c.args([threads, calls, rate].map(|n| n.to_string()));
    if let Some(d) = lib_dir {
        c.env("LD_LIBRARY_PATH", d);
    }
    let out = c.output().context("running callloop")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("callloop failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((
        field(&text, "calls:").context("calls")? as u64,
        field(&text, "calls_per_sec:").context("calls_per_sec")?,
    ))
}

/// Paced callloop runs of at most a minute each until `secs` have passed: (calls made,
/// calls per second over the whole time, runs).
fn paced_for(secs: u64, rate: u64, lib_dir: Option<&Path>) -> Result<(u64, f64, u64)> {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(secs);
    let (mut calls, mut runs) = (0, 0);
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).as_secs();
        if left == 0 {
            break;
        }
        let (n, _) = callloop(1, rate * left.min(60), rate, lib_dir)?;
        calls += n;
        runs += 1;
    }
    Ok((calls, calls as f64 / t0.elapsed().as_secs_f64(), runs))
}
