//! `kreplay probe`: one uprobe + uretprobe on one function, every call printed.
//!
//! The smallest end-to-end use of kreplay's probes, and a handy diagnostic: it shows whether a
//! function is reached, by which threads, with which arguments and how long it takes.
use std::{
    io::Write,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Args;
use kreplay_cli::{
    duration, launch,
    preflight::{self, HostPaths},
    probes::{
        cost::ProgramCost,
        elf::SymbolTable,
        intake::Intake,
        loader::{Counters, Probes, Programs, Scope},
    },
};
use kreplay_common::{
    api::{NO_ARG, USER_FUNCTION},
    probe::{CallRecord, Cookie, Sample, mode, role},
};

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
    if !args.ringbuf_bytes.is_power_of_two() || args.ringbuf_bytes < 4096 {
        bail!(
            "--ringbuf-bytes must be a power of two of at least 4096, got {}",
            args.ringbuf_bytes
        );
    }
    if !args.pids.is_empty() && !args.command.is_empty() {
        bail!("give either -p PID or a command after --, not both");
    }
    for &pid in &args.pids {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            bail!("no such process: {pid}");
        }
    }
    if !args.lib.exists() {
        bail!("library not found: {}", args.lib.display());
    }
    let table = SymbolTable::read(&args.lib)?;
    let offset = table.offset(&args.symbol).with_context(|| {
        format!(
            "symbol {} not found in {} ({} functions there)",
            args.symbol,
            args.lib.display(),
            table.len()
        )
    })?;
    preflight::check(&HostPaths::default())?;
    preflight::raise_memlock();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut probes = Probes::load(args.ringbuf_bytes)?;
    let programs = if args.bare {
        Programs::Bare
    } else {
        Programs::Record
    };
    let cost = if args.bpf_stats {
        ProgramCost::start(programs)
    } else {
        None
    };
    let cookie = Cookie::new(
        USER_FUNCTION,
        NO_ARG,
        mode::STACK_WORDS,
        0,
        role::NONE,
        NO_ARG,
        NO_ARG,
    );

    let child = if args.command.is_empty() {
        None
    } else {
        Some(
            launch::spawn_paused(&args.command, &[])
                .with_context(|| format!("starting {}", args.command[0]))?,
        )
    };
    let scopes: Vec<Scope> = match (&child, args.pids.is_empty()) {
        (Some(c), _) => vec![Scope::Pid(c.pid)],
        (None, false) => args.pids.iter().map(|&p| Scope::Pid(p)).collect(),
        (None, true) => vec![Scope::All],
    };
    for scope in scopes {
        probes.attach_programs(&args.lib, offset, cookie, scope, programs)?;
    }
    let mut intake = {
        let _in_runtime = rt.enter();
        Intake::new(probes.take_events()?, probes.rings().bytes)?
    };
    // Said once the probes are in place, as `kreplay trace` does: a user (or a script) that
    // attached by pid knows from here on every call is seen.
    let what = match (&child, args.pids.is_empty()) {
        (Some(c), _) => format!("{} (pid {})", args.command[0], c.pid),
        (None, false) => format!(
            "pid {}",
            args.pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, true) => "every process".to_string(),
    };
    eprintln!(
        "kreplay: probing {} in {} for {what}; stop with Ctrl-C",
        args.symbol,
        args.lib.display()
    );

    let child_pid = child.as_ref().map(|c| c.pid);
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
    let mut calls = 0u64;
    // A user-named function names no kernel: only call records come.
    let mut sink = |s: Sample| {
        if let Sample::Call(r) = s {
            calls += 1;
            let _ = print_call(&mut out, &r, &args.symbol, args.json);
        }
    };
    let started = Instant::now();
    let exit_code = rt.block_on(async {
        let mut waiter = child_pid.map(|pid| tokio::task::spawn_blocking(move || launch::wait_exit(pid)));
        let deadline = args.duration.map(|d| started + d);
        // Registered once so a signal arriving mid-drain is not lost.
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut code = 0u8;
        let mut drain_tick = tokio::time::interval(kreplay_cli::probes::intake::DRAIN_EVERY);
        // One timer for the whole loop: a sleep created inside `select!` restarts whenever
        // another branch fires first, and the drain tick fires every 10 ms.
        let mut exit_check = tokio::time::interval(Duration::from_millis(200));
        loop {
            let sleep_until = deadline.unwrap_or(Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = intake.next_batch(&mut sink) => { r?; }
                _ = drain_tick.tick() => { intake.drain(&mut sink); }
                _ = tokio::time::sleep_until(sleep_until.into()) => break,
                _ = int.recv() => break,
                _ = term.recv() => break,
                res = async { waiter.as_mut().unwrap().await }, if waiter.is_some() => {
                    code = res.context("waiting for the command")??.clamp(0, 255) as u8;
                    break;
                }
                _ = exit_check.tick(), if !args.pids.is_empty() => {
                    if args.pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
                        break;
                    }
                }
            }
        }
        intake.finish(&mut sink);
        anyhow::Ok(code)
    })?;
    // The waiter for a command that is still running (kreplay was stopped first) must not hold
    // the exit: the command is the user's and runs on.
    rt.shutdown_background();
    out.flush()?;
    drop(out);
    let counters = probes.counters()?;
    report(calls, &counters, intake.malformed);
    if let Some(c) = &cost {
        eprintln!("{}", c.report(&probes));
    }
    Ok(exit_code)
}

fn print_call(
    out: &mut impl Write,
    r: &CallRecord,
    symbol: &str,
    json: bool,
) -> std::io::Result<()> {
    let a = r.args;
    if json {
        writeln!(
            out,
            "{{\"pid\":{},\"tid\":{},\"enter_ns\":{},\"exit_ns\":{},\"args\":[{},{},{},{},{},{}],\"ret\":{}}}",
            r.pid, r.tid, r.enter_ns, r.exit_ns, a[0], a[1], a[2], a[3], a[4], a[5], r.ret
        )
    } else {
        writeln!(
            out,
            "{:>7} {:>7} {symbol}({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x}) = {:#x}  {} ns",
            r.pid,
            r.tid,
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            r.ret,
            r.exit_ns.saturating_sub(r.enter_ns)
        )
    }
}

fn report(calls: u64, c: &Counters, malformed: u64) {
    eprintln!(
        "kreplay: {calls} calls recorded; dropped: {} (ring buffer full {}, nested too deep {}, \
         thread slot shared {}); returns without entry {}; unreadable records {malformed}",
        c.lost(),
        c.ringbuf_drops,
        c.entry_map_full,
        c.slot_clash,
        c.missing_entry
    );
}
