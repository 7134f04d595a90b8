//! `cargo xtask soak`: long runs of `kreplay trace --all`, `kreplay audit` (scraped by a real
//! Prometheus) and `kreplay replay`, sampling kreplay's (and the application's) resident
//! memory and open descriptors, judged by [`judge`], written to `docs/bench/soak.md`.
//!
//! Not part of CI: the trace and audit soaks run for `--minutes` (30 by default). Everything
//! runs in a PID namespace of its own (`unshare --pid --mount-proc`), so `trace --all` and the
//! audit see and attach to only the soak's own processes (the worktree's copies of the
//! simulated runtime), and the namespace's end kills whatever is left in it.
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
mod prom;
mod replay;
mod report;
mod sample;
mod trace_check;

use sample::{Sampler, Series};

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

/// Re-runs this command inside a fresh PID namespace (the outer half).
pub fn run(opts: &Options) -> Result<()> {
    if !kreplay_tests::is_root() {
        bail!("the soak loads BPF programs: run it as root");
    }
    crate::run::build_release()?;
    kreplay_tests::build_callloop();
    kreplay_tests::workload("high_qps");
    // The build above may have replaced this binary: run the one now at its path.
    let me = std::env::current_exe()?;
    let me = PathBuf::from(
        me.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    );
    say("soak", "entering a PID namespace of its own");
    let status = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
        .arg(me)
        .args(["soak", "--inside"])
        .args(opts.args())
        .status()
        .context("running unshare")?;
    if !status.success() {
        bail!("soak failed ({status})");
    }
    Ok(())
}

/// The soaks themselves, inside the namespace; writes `docs/bench/soak.md`.
pub fn inside(opts: &Options) -> Result<()> {
    let mut out = report::header(opts);
    if opts.wants(Soak::Trace) || opts.wants(Soak::Audit) {
        long_soaks(opts, &mut out)?;
    }
    if opts.wants(Soak::Replay) {
        replay::soak(&kreplay(), &mut out)?;
    }
    let _ = writeln!(out, "{}", report::load_line("at the end"));
    let dir = root().join("docs").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("soak.md");
    std::fs::write(&path, out)?;
    say("soak", &format!("results written to {}", path.display()));
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

/// One callloop run: (calls made, calls per second).
fn callloop(threads: u64, calls: u64, rate: u64) -> Result<(u64, f64)> {
    let out = Command::new(kreplay_tests::build_callloop())
        .args([threads, calls, rate].map(|n| n.to_string()))
        .output()
        .context("running callloop")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("callloop failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((
        field(&text, "calls:").context("calls")? as u64,
        field(&text, "calls_per_sec:").context("calls_per_sec")?,
    ))
}

/// The trace and audit soaks, side by side against one paced workload.
fn long_soaks(opts: &Options, out: &mut String) -> Result<()> {
    let scratch = kreplay_tests::scratch("soak");
    let (want_trace, want_audit) = (opts.wants(Soak::Trace), opts.wants(Soak::Audit));
    say("soak", "bare capacity run");
    let (_, bare_rate) = callloop(1, CAPACITY_CALLS, 0)?;
    // The worktree's own copies of the simulated runtime, attached system-wide from the
    // start (without --lib they are found by the periodic rescan, after a process's first
    // calls).
    let sim = kreplay_tests::sim_dir();
    let mut lib_args = vec![];
    for lib in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        lib_args.push("--lib".to_string());
        lib_args.push(sim.join(lib).to_string_lossy().into_owned());
    }
    let audit_port = prom::free_port()?;
    let audit_addr = format!("127.0.0.1:{audit_port}");
    let audit = if want_audit {
        let mut args = vec!["audit", "--prometheus", &audit_addr, "--interval", "60s"];
        args.extend(lib_args.iter().map(String::as_str));
        Some(Running::start(
            &args,
            &scratch.join("audit.err"),
            "metrics at",
        )?)
    } else {
        None
    };
    let prometheus = if want_audit {
        let p = prom::Prometheus::start(&scratch.join("prometheus"), audit_addr.parse()?)?;
        Some((p, Instant::now()))
    } else {
        None
    };
    let trace_file = scratch.join("soak.pftrace");
    let trace = if want_trace {
        let t = trace_file.to_string_lossy().into_owned();
        let mut args = vec!["trace", "--all", "-o", &t];
        args.extend(lib_args.iter().map(String::as_str));
        Some(Running::start(
            &args,
            &scratch.join("trace.err"),
            "probes attached",
        )?)
    } else {
        None
    };
    let mut known_calls = 0;
    say("soak", "capacity run under the probes");
    let (n, probed_rate) = callloop(1, CAPACITY_CALLS, 0)?;
    known_calls += n;
    let mut roles = vec![];
    if let Some(t) = &trace {
        roles.push(("kreplay trace".to_string(), t.pid()));
    }
    if let Some(a) = &audit {
        roles.push(("kreplay audit".to_string(), a.pid()));
    }
    let sampler = Sampler::start(PERIOD, move || roles.clone());
    let started = Instant::now();
    let calls = opts.rate * opts.minutes * 60;
    say(
        "soak",
        &format!(
            "{calls} paced calls at {}/s ({} min)",
            opts.rate, opts.minutes
        ),
    );
    let load_mid = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        report::load_line("1 min into the soak")
    });
    let (n, paced_rate) = callloop(1, calls, opts.rate)?;
    known_calls += n;
    let soak_secs = started.elapsed().as_secs();
    let series: Series = sampler.finish();
    let load_mid = load_mid.join().unwrap_or_default();
    let _ = writeln!(
        out,
        "## `kreplay trace --all` and `kreplay audit`, {} min\n\n{load_mid}\n\n\
         Workload: `tests/bench/callloop.c` (one thread calling `hipStreamSynchronize(NULL)` on \
         the simulated runtime), paced to {} calls/s for {soak_secs} s. Its rate unpaced \
         ({CAPACITY_CALLS} calls): **{bare_rate:.0} calls/s bare**, **{probed_rate:.0} calls/s \
         under {}**; paced, under the same: **{paced_rate:.0} calls/s** achieved.\n",
        opts.minutes,
        opts.rate,
        match (want_trace, want_audit) {
            (true, true) => "the trace and the audit at once",
            (true, false) => "the trace",
            _ => "the audit",
        }
    );
    report::series_table(out, &series, PERIOD);
    if let (Some(a), Some((p, ready))) = (audit, prometheus) {
        report::scrapes(out, &p, ready.elapsed().as_secs())?;
        let report_file = a.stdout.clone();
        let (_, ok) = a.stop(Duration::from_secs(60))?;
        drop(p);
        let text = std::fs::read_to_string(report_file).unwrap_or_default();
        report::audit_counts(out, &text, ok, known_calls);
    }
    if let Some(t) = trace {
        say("soak", "stopping the trace (rendering)");
        let stop_t = Instant::now();
        let (text, ok) = t.stop(Duration::from_secs(3600))?;
        let render_s = stop_t.elapsed().as_secs();
        report::trace_counts(out, &text, ok, known_calls, render_s);
        if ok {
            say("soak", "checking the trace");
            let check = trace_check::check(
                &trace_file,
                DECODED_PACKETS,
                &scratch.join("prefix.pftrace"),
            );
            report::trace_validity(out, &check);
        }
        let _ = std::fs::remove_file(&trace_file);
        let _ = writeln!(
            out,
            "The trace was deleted after the check (it is regenerated by the command).\n"
        );
    }
    Ok(())
}
