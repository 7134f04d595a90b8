//! `kreplay trace`: probe GPU runtime calls of running processes or of a command, and write
//! one Perfetto trace.
use std::{
    io::{IsTerminal, Write},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Args;
use kreplay_cli::merge::render::layer_name;
use kreplay_cli::{
    duration, launch, merge, output as out_file,
    preflight::{self, HostPaths},
    probes::{
        cost::{ProgramCost, reader_cpu_line, reader_cpu_ns},
        intake::Intake,
        loader::{Probes, Programs, Scope},
        rings::rings_line,
    },
    quick_exit,
    trace::{
        attach::Attacher,
        capture::Capture,
        discover::{self, RuntimeLib},
        ending::{kept_streams, merge_command, running},
        kernels::KernelNames,
        nvtx,
        session::{Next, Session, Target as Targets, Wake},
        summary::Summary,
    },
};
use kreplay_common::api::spec_of;

use super::trace_collect::{Collector, LiveProbes, LiveRecording, mark_losses};

/// Arguments of `kreplay trace`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    sudo kreplay trace -p 4242                  trace a running process until Ctrl-C\n  \
    sudo kreplay trace --duration 10s --all     every GPU process on this host for 10 s\n  \
    sudo kreplay trace -o run.pftrace -- ./app  start ./app with the probes already attached\n\n\
    Records go to per-thread stream files in FILE.streams/ first, a directory this run \
    creates; when that name is taken (by an earlier run's kept streams, or anything else) \
    FILE.streams.2/, .3/, … is used, and what is there is left alone. The trace is written \
    under a temporary name beside FILE (.FILE.tmp-PID) and renamed over FILE once complete: \
    a run that fails (no privileges, a command that cannot run, a render error) leaves an \
    old FILE as it was. At the end kreplay removes the stream files it wrote, then the \
    directory if nothing else is in it (--keep-streams keeps them; a failed render keeps \
    them and says where).\n\n\
    roctx ranges and marks are traced with the runtimes. With -- CMD, kreplay-tool is also \
    the command's NVTX injection library (NVTX_INJECTION64_PATH, unless already set), so its \
    NVTX ranges and marks are in the trace too.\n\n\
    Open the trace at https://ui.perfetto.dev (Open trace file).")]
pub struct TraceArgs {
    /// Trace this running process (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Trace every process that maps a supported runtime, including ones started later.
    #[arg(long, conflicts_with = "pids")]
    all: bool,
    /// Trace file to write [default: kreplay-<date>-<time>.pftrace].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Stop after this long (e.g. 10s, 500ms, 2m). Default: Ctrl-C, SIGTERM, or the targets exit.
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Also probe this runtime library (repeatable); its name picks the API family.
    #[arg(long = "lib", value_name = "PATH")]
    libs: Vec<PathBuf>,
    /// No live status line.
    #[arg(short, long)]
    quiet: bool,
    /// Size of each CPU's BPF ring buffer in bytes (a power of two, at least 4096); one ring per
    /// CPU, at most 16.
    #[arg(long, default_value_t = 1 << 23, value_name = "BYTES")]
    ringbuf_bytes: u32,
    /// Slots for calls in flight, one per thread id modulo this count (rounded down to a power
    /// of two, 432 bytes each). Calls of two threads sharing a slot at the same time are
    /// counted as dropped, not recorded.
    #[arg(long, default_value_t = kreplay_common::probe::DEFAULT_THREAD_SLOTS, value_name = "N")]
    thread_slots: u32,
    /// Measure the probes' own run time (the kernel's BPF statistics, which add a little to
    /// every probed call) and print it on exit.
    #[arg(long)]
    bpf_stats: bool,
    /// Print on stderr why the probes skipped a call or lost a record, as it happens (a full
    /// ring, an entry never saved, an unreadable out-pointer): the reasons behind the
    /// summary's drop counts. Off, the probes carry no logging code at all.
    #[arg(long)]
    debug_probes: bool,
    /// Keep the per-thread stream files next to the trace (in FILE.streams/, or in the fresh
    /// name printed when that was taken).
    #[arg(long)]
    keep_streams: bool,
    /// Print neither the per-API summary nor the leak list at the end: `kreplay replay
    /// --probes` prints the application's own after its merge, kreplay's calls left out.
    #[arg(long, hide = true)]
    no_summary: bool,
    /// Print nothing when interrupted again while ending: `kreplay replay --probes` runs this
    /// command and says what its whole run left.
    #[arg(long, hide = true)]
    silent_interrupt: bool,
    /// Set KEY=VALUE in the started command's environment only, not kreplay's (repeatable),
    /// e.g. `--env LD_PRELOAD=./libtool.so` for a library that must not load into the tracer.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = env_pair, requires = "command")]
    env: Vec<(String, String)>,
    /// Command to start with the probes attached before its first instruction (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Most `--thread-slots` accepted: 113 MiB of kernel memory.
const MAX_THREAD_SLOTS: u32 = 1 << 18;

/// The started command's `--env` pairs plus those that make kreplay-tool its NVTX injection
/// library, writing to `dir` (`kreplay_cli::trace::nvtx::injection_env`), and what its NVTX
/// calls will reach.
fn nvtx_env(user: &[(String, String)], dir: &Path) -> (Vec<(String, String)>, nvtx::Injection) {
    let set = |k: &str| user.iter().any(|(u, _)| u == k) || std::env::var_os(k).is_some();
    let (add, injection) = nvtx::injection_env(nvtx::tool_lib().as_deref(), dir, set);
    (user.iter().cloned().chain(add).collect(), injection)
}

/// `KEY=VALUE` of `--env`: a non-empty key without `=` or NUL; the value may hold anything but
/// NUL, `=` included.
fn env_pair(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((k, val)) if !k.is_empty() && !k.contains('\0') && !val.contains('\0') => {
            Ok((k.to_owned(), val.to_owned()))
        }
        _ => Err(format!("'{v}' is not KEY=VALUE")),
    }
}

/// The default trace file: `kreplay-<date>-<time>.pftrace` in the current directory.
fn default_output() -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes into the tm it is given; both pointers are valid.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm
    };
    PathBuf::from(format!(
        "kreplay-{:04}{:02}{:02}-{:02}{:02}{:02}.pftrace",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

fn streams_dir(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!("{name}.streams"))
}

/// Runs `kreplay trace`; returns the exit code.
pub fn run(args: TraceArgs) -> Result<u8> {
    let modes = [!args.pids.is_empty(), args.all, !args.command.is_empty()];
    match modes.iter().filter(|&&m| m).count() {
        0 => bail!("say what to trace: -p PID, --all, or a command after --"),
        1 => {}
        _ => bail!("give only one of -p PID, --all, or a command after --"),
    }
    if !args.ringbuf_bytes.is_power_of_two() || args.ringbuf_bytes < 4096 {
        bail!(
            "--ringbuf-bytes must be a power of two of at least 4096, got {}",
            args.ringbuf_bytes
        );
    }
    if !(1..=MAX_THREAD_SLOTS).contains(&args.thread_slots) {
        bail!(
            "--thread-slots must be between 1 and {MAX_THREAD_SLOTS} (432 bytes of kernel memory each), got {}",
            args.thread_slots
        );
    }
    for lib in &args.libs {
        if !lib.exists() {
            bail!("library not found: {}", lib.display());
        }
    }
    let mut pid_libs: Vec<(u32, Vec<RuntimeLib>)> = Vec::new();
    for &pid in &args.pids {
        pid_libs.push((pid, discover::target_libs(pid, &args.libs)?));
    }
    let output = args.output.clone().unwrap_or_else(default_output);
    // Nothing is written to `output` itself until the trace is complete.
    out_file::check_writable(&output)
        .with_context(|| format!("cannot write trace to {}", output.display()))?;
    preflight::check(&HostPaths::default())?;
    preflight::raise_memlock();
    if args.silent_interrupt {
        quick_exit::silence();
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    kreplay_cli::probes::debug_log::enable(args.debug_probes);
    let mut probes = Probes::load_with_slots(args.ringbuf_bytes, args.thread_slots)?;
    let cost = if args.bpf_stats {
        ProgramCost::start(Programs::Record)
    } else {
        None
    };
    let mut attacher = Attacher::default();
    let targets = if args.all {
        Targets::All
    } else if !args.command.is_empty() {
        Targets::Command(0)
    } else {
        Targets::Pids(args.pids.clone())
    };
    // The stream directory exists before the command starts: its NVTX calls go to
    // kreplay-tool, which writes its stream there.
    let want = streams_dir(&output);
    let dir = out_file::fresh_dir(&want, 0o777)
        .with_context(|| format!("cannot create a stream directory {}", want.display()))?;
    let child = match targets {
        Targets::Command(_) => {
            let (env, injection) = nvtx_env(&args.env, &dir);
            match launch::spawn_paused(&args.command, &env) {
                Ok(c) => {
                    tracing::debug!(?injection, "NVTX annotations of the command");
                    Some(c)
                }
                Err(e) => {
                    out_file::remove_own(&dir, &[]);
                    return Err(
                        anyhow::Error::new(e).context(format!("starting {}", args.command[0]))
                    );
                }
            }
        }
        _ => None,
    };
    let targets = match (targets, &child) {
        (Targets::Command(_), Some(c)) => Targets::Command(c.pid),
        (t, _) => t,
    };
    // Attach before anything runs.
    let attached = (|| -> Result<()> {
        match &targets {
            Targets::Pids(_) => {
                for (pid, libs) in &pid_libs {
                    for lib in libs {
                        attacher.attach(&mut probes, lib, Scope::Pid(*pid))?;
                    }
                    // Runtimes of another family the process may still dlopen by name: probed
                    // now, so their first calls are seen (the rescan alone would miss up to a
                    // tick's worth of them).
                    for lib in discover::dlopen_candidates(*pid)
                        .into_iter()
                        .filter(|c| !libs.iter().any(|l| l.family == c.family))
                    {
                        if let Err(e) = attacher.attach(&mut probes, &lib, Scope::Pid(*pid)) {
                            tracing::debug!(pid, library = %lib.host_path.display(), error = %e, "not attached ahead of dlopen");
                        }
                    }
                }
            }
            Targets::All => {
                for lib in discover::candidates(None, &args.libs) {
                    attacher.attach(&mut probes, &lib, Scope::All)?;
                }
                attacher.rescan_all(&mut probes);
            }
            Targets::Command(pid) => {
                // The libraries the loader will map at startup (rpath included), then every
                // runtime library in the usual places, for those loaded later with dlopen.
                let startup: Vec<RuntimeLib> = discover::startup_libraries(&args.command[0])
                    .iter()
                    .filter_map(|p| discover::describe(p))
                    .collect();
                let ld = std::env::var("LD_LIBRARY_PATH").ok();
                let libs = discover::candidates(ld.as_deref(), &args.libs)
                    .into_iter()
                    // A family the loader already resolves at startup is not looked for elsewhere.
                    .filter(|c| {
                        !startup
                            .iter()
                            .any(|s| s.family == c.family && s.dev_ino != c.dev_ino)
                    })
                    .chain(startup.iter().cloned());
                for lib in libs {
                    attacher.attach(&mut probes, &lib, Scope::Pid(*pid))?;
                }
            }
        }
        Ok(())
    })();
    let made = attached.and_then(|()| {
        let _in_runtime = rt.enter();
        let intake = Intake::new(probes.take_events()?, probes.rings().bytes)?;
        Ok((intake, Capture::create(&dir)?))
    });
    let (mut intake, capture) = match made {
        Ok(m) => m,
        Err(e) => {
            out_file::remove_own(&dir, &nvtx::tool_streams(&dir));
            return Err(e);
        }
    };
    // The targets' mappings as of the attach, read before the status line says tracing has
    // begun (a target told to go on that line may run and exit at once): a launch drained after
    // its process exited still finds the file its kernel's address lies in.
    let mut kernels = KernelNames::default();
    if let Targets::Pids(pids) = &targets {
        for &pid in pids {
            kernels.remember(pid);
        }
    }
    // This thread drains the ring; the traced command was started above, so it keeps its own
    // priority.
    kreplay_cli::probes::priority::raise_reader_thread();
    // Registered once, before the line that says Ctrl-C stops the trace: a signal that arrives
    // while records are being processed is kept for the next select instead of being lost
    // with a fresh listener.
    let (mut term, mut int) = {
        let _in_runtime = rt.enter();
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        )
    };
    if !args.quiet {
        let what = match &targets {
            Targets::Pids(p) => format!(
                "pid {}",
                p.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
            Targets::All => "every process using a GPU runtime".to_string(),
            Targets::Command(pid) => format!("{} (pid {pid})", args.command[0]),
        };
        eprintln!(
            "kreplay: tracing {what}: {} probes attached in {} ms; stop with Ctrl-C",
            probes.attachments(),
            attacher.busy().as_millis()
        );
    }
    if let Some(c) = child
        && let Err(e) = c.release()
    {
        // Nothing ran: what this run wrote goes, and an old trace stays as it was.
        out_file::remove_own(&dir, &capture.files());
        return Err(anyhow::Error::new(e).context(format!("cannot run {}", args.command[0])));
    }

    let mut col = Collector {
        capture,
        summary: Summary::default(),
        kernels,
        pids: Default::default(),
        last_pid: 0,
        io_error: None,
        roctx: Default::default(),
    };
    let started = Instant::now();
    let cpu_at_start = reader_cpu_ns();
    let status = !args.quiet;
    let tty = std::io::stderr().is_terminal();
    // Per cause (`Counters::losses`): what the trace's drop markers already say.
    let mut reported = [0u64; 4];
    let mut session = Session::new(targets, status.then_some(tty), started);
    let (exit_code, signalled) = rt.block_on(async {
        let mut waiter = match session.target() {
            &Targets::Command(pid) => Some(tokio::task::spawn_blocking(move || launch::wait_exit(pid))),
            _ => None,
        };
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut drain_tick = tokio::time::interval(kreplay_cli::probes::intake::DRAIN_EVERY);
        let deadline = args.duration.map(|d| started + d);
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let mut code = 0u8;
        let mut signalled = false;
        let alive = |p: u32| Path::new(&format!("/proc/{p}")).exists();
        loop {
            let wake = tokio::select! {
                r = intake.readable() => { r?; Wake::Data }
                _ = drain_tick.tick() => Wake::Data,
                _ = tokio::time::sleep_until(deadline.unwrap_or(far).into()) => Wake::Stop,
                _ = int.recv() => { signalled = true; Wake::Stop }
                _ = term.recv() => { signalled = true; Wake::Stop }
                res = async { waiter.as_mut().expect("guarded").await }, if waiter.is_some() => {
                    code = res.context("waiting for the command")??.clamp(0, 255) as u8;
                    Wake::Stop
                }
                _ = tick.tick() => Wake::Tick,
            };
            let mut live = LiveProbes {
                probes: &mut probes,
                attacher: &mut attacher,
            };
            let mut rec = LiveRecording {
                intake: &mut intake,
                col: &mut col,
                reported: &mut reported,
            };
            let (next, line) = session.on(wake, Instant::now(), &mut live, &mut rec, &alive)?;
            if let Some(st) = line {
                // On a terminal the status line updates in place; into a file or pipe, one
                // line at a time.
                if st.in_place {
                    eprint!("\r{}\x1b[K", st.text);
                } else {
                    eprintln!("{}", st.text);
                }
            }
            if next == Next::Finish {
                break;
            }
        }
        intake.finish(&mut |s| col.push(&s));
        col.finish();
        anyhow::Ok((code, signalled))
    })
    .with_context(|| kept_streams(&dir, &output))?;
    let reader_cpu = reader_cpu_ns().saturating_sub(cpu_at_start);
    // The waiter for a command that is still running (kreplay was stopped first) must not hold
    // the exit: the command is the user's and runs on.
    rt.shutdown_background();
    let col_records = col.capture.records;
    let (ring_layout, per_ring) = (probes.rings(), intake.per_ring());
    let Collector {
        mut capture,
        summary,
        io_error,
        ..
    } = col;
    if status && tty {
        eprintln!();
    }
    if let Some(e) = io_error {
        return Err(e.context(kept_streams(&dir, &output)));
    }
    let counters = probes.counters()?;
    tracing::debug!(?counters, "probe counters at the end");
    if let Some(c) = &cost {
        eprintln!("{}", c.report(&probes));
    }
    mark_losses(&mut capture, &counters, &mut reported)?;
    let leaks = probes.live_allocations().unwrap_or_default();
    // Detaching runs one RCU grace period per probe in the kernel, which takes seconds on a
    // busy host: do it beside the rendering instead of before it.
    let attachments = probes.attachments();
    let slow_detach = if probes.uses_multi_links() {
        ""
    } else {
        " (a few seconds)"
    };
    let mut files = capture
        .finish()
        .with_context(|| kept_streams(&dir, &output))?;
    // The NVTX annotations kreplay-tool wrote for the traced processes.
    files.extend(nvtx::tool_streams(&dir));
    // Every record is in the stream files now: an interrupt from here on ends kreplay at
    // once, and the streams say what the trace would have held.
    let merge_cmd = merge_command(&dir, &output);
    quick_exit::arm(&format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; the \
         stream files are kept in {}: `{merge_cmd}` renders them",
        dir.display()
    ));
    if signalled && status {
        eprintln!(
            "kreplay: stopping: writing the trace and detaching {attachments} probes{slow_detach}; \
             Ctrl-C again to exit at once"
        );
    }
    let detach = std::thread::spawn(move || quick_exit::detach_in_child(probes));
    let report = merge::merge(&files, &output).with_context(|| {
        format!(
            "rendering the trace (the stream files are kept in {}: `{merge_cmd}` renders them again)",
            dir.display()
        )
    })?;
    quick_exit::set_note(&format!(
        "kreplay: interrupted again: exiting now, the probes detach in the background; {} is \
         written",
        output.display()
    ));
    let stderr = std::io::stderr();
    let mut e = stderr.lock();
    if args.keep_streams {
        // Said when they are not where --help says (`kreplay replay --probes` uses this
        // command in a directory of its own, where the name is always free).
        if dir != want {
            let _ = writeln!(
                e,
                "kreplay: streams kept in {} ({} was taken)",
                dir.display(),
                want.display()
            );
        }
    } else if !out_file::remove_own(&dir, &files) {
        let _ = writeln!(
            e,
            "kreplay: warning: kept {}: it holds files this run did not write",
            dir.display()
        );
    }
    if !args.no_summary {
        let _ = write!(e, "{}", summary.render(counters.lost()));
    }
    let mut by_pid: std::collections::BTreeMap<(u32, &str), (u64, u64)> = Default::default();
    for (k, v) in leaks.iter().filter(|_| !args.no_summary) {
        let layer = spec_of(v.api).map_or("?", |s| layer_name(s.library));
        let ent = by_pid.entry((k.pid, layer)).or_default();
        ent.0 += 1;
        ent.1 += v.size;
    }
    for ((pid, layer), (n, bytes)) in by_pid {
        let _ = writeln!(
            e,
            "still allocated at end: pid {pid} ({layer}): {n} allocations, {bytes} bytes"
        );
    }
    let _ = writeln!(
        e,
        "{}",
        reader_cpu_line(reader_cpu, col_records, counters.wakeups)
    );
    let _ = writeln!(e, "{}", rings_line(ring_layout, &per_ring));
    for w in report.warnings() {
        let _ = writeln!(e, "{w}");
    }
    if report.stats.unrenderable > 0 {
        let _ = writeln!(
            e,
            "kreplay: warning: {} records could not be placed in the trace",
            report.stats.unrenderable
        );
    }
    if !args.command.is_empty() && summary.total_calls() == 0 {
        let _ = writeln!(
            e,
            "kreplay: {} made no GPU runtime call: it never loaded libcuda, libamdhip64 or libhsa-runtime64 (or none kreplay could probe)",
            args.command[0]
        );
    }
    if let &Targets::Command(pid) = session.target()
        && running(pid)
    {
        let _ = writeln!(
            e,
            "kreplay: {} (pid {pid}) is still running, untraced: kreplay stopped before it \
             exited, and its calls from now on are not in the trace",
            args.command[0]
        );
    }
    let _ = writeln!(
        e,
        "kreplay: wrote {} ({} events, {} bytes); open it at https://ui.perfetto.dev",
        output.display(),
        report.records,
        report.bytes
    );
    let _ = detach.join();
    Ok(exit_code)
}

#[cfg(test)]
mod tests {
    use super::env_pair;

    #[test]
    fn env_pairs_split_at_the_first_equals_sign_and_need_a_key() {
        let pair = |k: &str, v: &str| Ok((k.to_owned(), v.to_owned()));
        assert_eq!(
            env_pair("LD_PRELOAD=/a/b.so"),
            pair("LD_PRELOAD", "/a/b.so")
        );
        assert_eq!(env_pair("A=b=c"), pair("A", "b=c"));
        assert_eq!(env_pair("EMPTY="), pair("EMPTY", ""));
        assert_eq!(env_pair("=x"), Err("'=x' is not KEY=VALUE".to_owned()));
        assert_eq!(
            env_pair("NOVALUE"),
            Err("'NOVALUE' is not KEY=VALUE".to_owned())
        );
    }
}
