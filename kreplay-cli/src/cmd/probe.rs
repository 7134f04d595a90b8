//! `kreplay probe`: one uprobe + uretprobe on one function, every call printed.
//!
//! The smallest end-to-end use of kreplay's probes, and a handy diagnostic: it shows whether a
//! function is reached, by which threads, with which arguments and how long it takes.
use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use clap::Args;
use kreplay_cli::{
    duration,
    function_probe::{
        self, Calls, Request, Watch, call_line, report_line, user_cookie, watch::watch_calls,
    },
    launch,
    preflight::{self, HostPaths},
    probes::{cost::ProgramCost, elf::SymbolTable, intake::Intake, loader::Probes},
};
use kreplay_common::probe::Sample;

/// Arguments of `kreplay probe`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    sudo kreplay probe --lib /usr/lib/x86_64-linux-gnu/libc.so.6 --symbol getpid -p 1234\n  \
    sudo kreplay probe --lib ./libfoo.so --symbol foo_add --json -- ./app arg1")]
pub struct ProbeArgs {
    /// Shared library (or executable) that defines the function.
    #[arg(long, value_name = "PATH")]
    lib: PathBuf,
    /// Exported function name to probe.
    #[arg(long, value_name = "NAME")]
    symbol: String,
    /// Only calls from this process (repeatable). Without -p or a command: every process.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Print one JSON object per call instead of text.
    #[arg(long)]
    json: bool,
    /// Stop after this long (e.g. 10s, 500ms). Default: until the command exits or Ctrl-C.
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Attach empty programs instead (nothing is recorded): the bare cost of the probes, for
    /// overhead measurements.
    #[arg(long, hide = true)]
    bare: bool,
    /// Measure the programs' own run time (the kernel's BPF statistics, which add a little to
    /// every probed call) and print it on exit.
    #[arg(long)]
    bpf_stats: bool,
    /// Size of each CPU's ring buffer in bytes (power of two); one ring per CPU, at most 16.
    #[arg(long, default_value_t = 1 << 22, value_name = "BYTES")]
    ringbuf_bytes: u32,
    /// Command to start with the probe already attached (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Runs `kreplay probe`; returns the exit code (the command's, when one was started).
pub fn run(args: ProbeArgs) -> Result<u8> {
    let req = Request {
        lib: &args.lib,
        pids: &args.pids,
        command: &args.command,
        ringbuf_bytes: args.ringbuf_bytes,
    };
    req.check(Path::exists)?;
    let offset = req.offset_in(&SymbolTable::read(&args.lib)?, &args.symbol)?;
    preflight::check(&HostPaths::default())?;
    preflight::raise_memlock();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut probes = Probes::load(args.ringbuf_bytes)?;
    let programs = function_probe::programs(args.bare);
    let cost = if args.bpf_stats {
        ProgramCost::start(programs)
    } else {
        None
    };
    let child = if args.command.is_empty() {
        None
    } else {
        Some(
            launch::spawn_paused(&args.command, &[])
                .with_context(|| format!("starting {}", args.command[0]))?,
        )
    };
    let child_pid = child.as_ref().map(|c| c.pid);
    for scope in req.scopes(child_pid) {
        probes.attach_many(&args.lib, &[(offset, user_cookie())], scope, programs)?;
    }
    let mut intake = {
        let _in_runtime = rt.enter();
        Intake::new(probes.take_events()?, probes.rings().bytes)?
    };
    // Said once the probes are in place, as `kreplay trace` does: a user (or a script) that
    // attached by pid knows from here on every call is seen.
    eprintln!("{}", req.probing_line(&args.symbol, child_pid));
    if let Some(c) = child {
        c.release()
            .with_context(|| format!("cannot run {}", args.command[0]))?;
    }
    // This thread drains the ring (the runtime has one thread); the command was started above,
    // so it keeps its own priority. As in `kreplay trace`.
    kreplay_cli::probes::priority::raise_reader_thread();
    let out = std::io::stdout();
    // Stdout's own line buffering: each record leaves in one write of whole lines, so the
    // traced command's output on the same pipe never lands inside a record (a BufWriter's
    // 8 KiB flushes split lines, and the probe smoke test read a record cut in two).
    let mut out = out.lock();
    let mut calls = Calls::default();
    let mut sink = |s: Sample| {
        if let Some(r) = calls.take(s) {
            let _ = out.write_all(call_line(&r, &args.symbol, args.json).as_bytes());
        }
    };
    let deadline = args.duration.map(|d| Instant::now() + d);
    let mut watch = Watch::new(&args.pids);
    rt.block_on(watch_calls(
        &mut watch,
        child_pid,
        deadline,
        &mut intake,
        &mut sink,
    ))?;
    // The waiter for a command that is still running (kreplay was stopped first) must not hold
    // the exit: the command is the user's and runs on.
    rt.shutdown_background();
    out.flush()?;
    drop(out);
    let counters = probes.counters()?;
    eprintln!("{}", report_line(calls.count, &counters, intake.malformed));
    if let Some(c) = &cost {
        eprintln!("{}", c.report(&probes));
    }
    Ok(watch.exit_code())
}
