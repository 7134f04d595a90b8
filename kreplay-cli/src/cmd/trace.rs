//! `kreplay trace`: probe GPU runtime calls of running processes or of a command, and write
//! one Perfetto trace.
use std::{
    io::{IsTerminal, Write},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use clap::Args;
use kreplay_cli::{
    duration, launch, merge, output as out_file,
    preflight::{self, HostPaths},
    probes::{
        cost::{ProgramCost, reader_cpu_line, reader_cpu_ns},
        intake::Intake,
        loader::{Probes, Programs},
        rings::{RingLayout, rings_line},
    },
    quick_exit,
    trace::{
        attach::Attacher,
        capture::Capture,
        discover,
        ending::{self, kept_streams},
        gpu_env,
        holds::Holds,
        kernels::KernelNames,
        nvtx,
        plan::{self, Plan, Request},
        session::{Next, Probed, Session, Target, Wake},
        summary::Summary,
        targets::{self, HostLibraries},
    },
};
use kreplay_common::probe::{EVENTS_MAP, THREADS_MAP};
use tokio::signal::unix::Signal;

use super::trace_collect::{Collector, LiveProbes, LiveRecording, mark_losses};

/// Arguments of `kreplay trace`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    sudo kreplay trace -p 4242                  trace a running process until Ctrl-C\n  \
    sudo kreplay trace --duration 10s --all     every GPU process on this host for 10 s\n  \
    sudo kreplay trace -o run.pftrace -- ./app  start ./app with the probes already attached\n  \
    sudo kreplay trace --gpu -- ./app           also what its GPU ran, and when\n\n\
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
    --gpu -- CMD loads kreplay-tool into CMD (HSA_TOOLS_LIB; CUDA_INJECTION64_PATH, through \
    CUPTI; observe mode: no replay): every \
    kernel and copy with the GPU's times, on per-GPU queue tracks, with flows from their \
    calls, a GPU busy % counter and a GPU time per kernel table (docs/trace.md).\n\n\
    Open the trace at https://ui.perfetto.dev (Open trace file).")]
pub struct TraceArgs {
    /// Trace this running process (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// With -p: also trace the processes' descendants, those running now and those they start
    /// later.
    #[arg(long, requires = "pids")]
    children: bool,
    /// With a command: trace the command alone, not the processes it starts (then the probes
    /// fire in that one process only; see docs/trace.md, "Process trees").
    #[arg(long, requires = "command")]
    no_children: bool,
    /// Trace every process that maps a supported runtime, including ones started later; a
    /// process that maps a runtime library file in a new place (a virtualenv, an rpath) is held
    /// until it is probed, so its first calls are traced (docs/trace.md, "--all: runtime
    /// libraries in new places").
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
    /// With a command: also record what the GPU ran (kernels and copies with their GPU times,
    /// on per-GPU queue tracks), through kreplay-tool injected in observe mode.
    #[arg(long, conflicts_with = "no_gpu")]
    gpu: bool,
    /// API calls only, no GPU timeline (the default).
    #[arg(long)]
    no_gpu: bool,
    /// Command to start with the probes attached before its first instruction (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
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

/// The started command's `--env` pairs plus those that make kreplay-tool its NVTX injection
/// library, writing to `dir` (`kreplay_cli::trace::nvtx::injection_env`), and what its NVTX
/// calls will reach.
fn nvtx_env(user: &[(String, String)], dir: &Path) -> (Vec<(String, String)>, nvtx::Injection) {
    let set = |k: &str| user.iter().any(|(u, _)| u == k) || std::env::var_os(k).is_some();
    let (add, injection) = nvtx::injection_env(nvtx::tool_lib().as_deref(), dir, set);
    (user.iter().cloned().chain(add).collect(), injection)
}

/// Runs `kreplay trace`; returns the exit code.
pub fn run(args: TraceArgs) -> Result<u8> {
    let plan = Plan::check(
        Request {
            pids: args.pids.clone(),
            all: args.all,
            command: args.command.clone(),
            env: args.env.clone(),
            libs: args.libs.clone(),
            ringbuf_bytes: args.ringbuf_bytes,
            thread_slots: args.thread_slots,
            children: args.children,
            no_children: args.no_children,
        },
        Path::exists,
    )?;
    let gpu_tool = gpu_env::tool_for(args.gpu, !args.command.is_empty())?;
    let pid_libs = targets::pid_libraries(&plan, &HostLibraries)?;
    let output = args.output.clone().unwrap_or_else(plan::default_output);
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
    let mut probes = Probes::load_with(
        &[
            (EVENTS_MAP, plan.ringbuf_bytes),
            (THREADS_MAP, plan.thread_slots),
        ],
        plan.follow,
    )?;
    let cost = if args.bpf_stats {
        ProgramCost::start(Programs::Record)
    } else {
        None
    };
    let mut attacher = Attacher::default();
    // The stream directory exists before the command starts: its NVTX calls go to
    // kreplay-tool, which writes its stream there.
    let want = plan::streams_dir(&output);
    let dir = out_file::fresh_dir(&want, 0o777)
        .with_context(|| format!("cannot create a stream directory {}", want.display()))?;
    let started_target = targets::start(&plan, |argv, env| {
        let (mut env, injection) = nvtx_env(env, &dir);
        tracing::debug!(?injection, "NVTX annotations of the command");
        if let Some(tool) = &gpu_tool {
            env = gpu_env::with_gpu_env(env, tool, &dir, |k| std::env::var(k).ok());
        }
        launch::spawn_paused(argv, &env).map(|c| {
            let pid = c.pid;
            (c, pid)
        })
    });
    let (target, child) = match started_target {
        Ok(t) => t,
        Err(e) => {
            out_file::remove_own(&dir, &[]);
            return Err(e);
        }
    };
    // Until the capture exists, a failure removes what this run wrote.
    let setup = (|| -> Result<_> {
        // Followed before anything runs: the command from its first instruction, a `-p`
        // process's descendants from now (their libraries are attached below or at the first
        // rescan).
        let mut seeds: Vec<u32> = Vec::new();
        if plan.follow {
            let roots = match &target {
                Target::Pids(p) => p.clone(),
                Target::Command(pid) => vec![*pid],
                Target::All => Vec::new(),
            };
            let parents = discover::parent_pids();
            for root in roots {
                seeds.push(root);
                seeds.extend(targets::descendants(root, &parents));
            }
            for &pid in &seeds {
                probes
                    .follow(pid)
                    .with_context(|| format!("following pid {pid}"))?;
            }
            // Libraries a followed process maps later (start-up libraries of a program it runs, a
            // dlopen) are probed in the loader's hook, before their code runs.
            for ld in discover::loaders(&seeds) {
                if let Err(e) = probes.attach_loader_hook(&ld) {
                    tracing::warn!(loader = %ld.display(), error = %e, "no loader hook: libraries the followed processes map later are found by the rescan");
                }
            }
        }
        // `--all`: a process that maps a runtime library file not probed yet is held from
        // now on until that file is attached (the rescan below finds those mapped already).
        let every = matches!(target, Target::All);
        let holding_new_files = every
            && probes.hold_new_files().map_or_else(
                |e| {
                    tracing::warn!(error = %e, "a process whose runtime library is in a new place loses the calls it makes before the next rescan (200 ms)");
                    false
                },
                |()| true,
            );
        // Attach before anything runs.
        let ld = std::env::var("LD_LIBRARY_PATH").ok();
        let mut live = LiveProbes {
            probes: &mut probes,
            attacher: &mut attacher,
            follow: plan.follow,
            every,
            holding_new_files,
        };
        targets::attach(
            &plan,
            &target,
            &pid_libs,
            ld.as_deref(),
            &HostLibraries,
            &mut live,
        )?;
        // The descendants of `-p --children` processes, as they are now.
        if let Target::Pids(pids) = &target {
            for &pid in seeds.iter().filter(|p| !pids.contains(p)) {
                live.rescan_pid(pid);
            }
        }
        let _in_runtime = rt.enter();
        let holds = if plan.follow || every {
            let mut h = Holds::new(probes.take_loads()?, probes.take_hold_maps()?)?;
            h.mark_probed(attacher.files_for_all());
            Some(h)
        } else {
            None
        };
        let intake = Intake::new(probes.take_events()?, probes.rings().bytes)?;
        Ok((intake, holds, holding_new_files, Capture::create(&dir)?))
    })();
    let (mut intake, mut holds, holding_new_files, capture) = match setup {
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
    if let Target::Pids(pids) = &target {
        for &pid in pids {
            kernels.remember(pid);
            // Read now, with the attach, rather than while the rings wait.
            let files = kernels.warm(pid);
            tracing::debug!(pid, files, "kernel names read ahead");
        }
    }
    // This thread drains the ring; the traced command was started above, so it keeps its own
    // priority.
    kreplay_cli::probes::priority::raise_reader_thread();
    // Registered once, before the line that says Ctrl-C stops the trace: a signal that arrives
    // while records are being processed is kept for the next select instead of being lost
    // with a fresh listener.
    let signals = {
        let _in_runtime = rt.enter();
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        )
    };
    if !args.quiet {
        eprintln!(
            "{}",
            targets::tracing_line(
                &target,
                plan.program(),
                probes.attachments(),
                attacher.busy()
            )
        );
    }
    if let Some(c) = child
        && let Err(e) = c.release()
    {
        // Nothing ran: what this run wrote goes, and an old trace stays as it was.
        out_file::remove_own(&dir, &capture.files());
        return Err(anyhow::Error::new(e)
            .context(format!("cannot run {}", plan.program().unwrap_or_default())));
    }

    let mut col = Collector {
        capture,
        summary: Summary::default(),
        kernels,
        pids: Default::default(),
        last_pid: 0,
        io_error: None,
        held: Default::default(),
        roctx: Default::default(),
    };
    let started = Instant::now();
    let cpu_at_start = reader_cpu_ns();
    let status = !args.quiet;
    let tty = std::io::stderr().is_terminal();
    // Per cause (`Counters::losses`): what the trace's drop markers already say.
    let mut reported = [0u64; 4];
    let mut session = Session::new(target, status.then_some(tty), started);
    let mut live = LiveProbes {
        probes: &mut probes,
        attacher: &mut attacher,
        follow: plan.follow,
        every: matches!(session.target(), Target::All),
        holding_new_files,
    };
    let mut rec = LiveRecording {
        intake: &mut intake,
        col: &mut col,
        reported: &mut reported,
    };
    let deadline = args.duration.map(|d| started + d);
    let (exit_code, signalled) = rt
        .block_on(record(
            &mut session,
            signals,
            deadline,
            &mut live,
            &mut rec,
            holds.as_mut(),
        ))
        .with_context(|| kept_streams(&dir, &output))?;
    let reader_cpu = reader_cpu_ns().saturating_sub(cpu_at_start);
    // The waiter for a command that is still running (kreplay was stopped first) must not hold
    // the exit: the command is the user's and runs on.
    rt.shutdown_background();
    let col_records = col.capture.records;
    let (ring_layout, per_ring) = (probes.rings(), intake.per_ring());
    let Collector {
        capture,
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
    let command = match (session.target(), plan.program()) {
        (&Target::Command(pid), Some(program)) => Some((program.to_owned(), pid)),
        _ => None,
    };
    let recorded = Recorded {
        capture,
        summary,
        records: col_records,
        reported,
        reader_cpu,
        rings: (ring_layout, per_ring),
        say_stopping: signalled && status,
        command,
        stops: holds.as_ref().map(|h| h.stops()),
    };
    // Any process stopped after the last look is resumed here.
    drop(holds);
    let paths = Paths { output, want, dir };
    finish(&args, probes, cost, recorded, &paths)?;
    Ok(exit_code)
}

/// Where a run writes: the trace, the stream directory asked for and the one used.
struct Paths {
    output: PathBuf,
    want: PathBuf,
    dir: PathBuf,
}

/// What recording leaves for the end of the run.
struct Recorded {
    capture: Capture,
    summary: Summary,
    /// Records written.
    records: u64,
    /// Losses already marked in the streams, per cause.
    reported: [u64; 4],
    /// CPU time of the reading thread, in ns.
    reader_cpu: u64,
    /// The rings and the records each delivered.
    rings: (RingLayout, Vec<u64>),
    /// Say that kreplay is stopping: a signal stopped recording and status lines are wanted.
    say_stopping: bool,
    /// The started command's program and pid.
    command: Option<(String, u32)>,
    /// How long processes were held for kreplay (`None`: none could be).
    stops: Option<ending::Stops>,
}

/// Ends a run: marks the last losses, closes the streams, renders the trace while the probes
/// detach, removes or keeps the streams, and prints the summary and the closing lines.
fn finish(
    args: &TraceArgs,
    probes: Probes,
    cost: Option<ProgramCost>,
    mut rec: Recorded,
    p: &Paths,
) -> Result<()> {
    let (dir, output) = (&p.dir, &p.output);
    let counters = probes.counters()?;
    tracing::debug!(?counters, "probe counters at the end");
    if let Some(c) = &cost {
        eprintln!("{}", c.report(&probes));
        if let Some(line) = c.report_map_hook(&probes) {
            eprintln!("{line}");
        }
    }
    mark_losses(&mut rec.capture, &counters, &mut rec.reported)?;
    let leaks = probes.live_allocations().unwrap_or_default();
    // Detaching perf-event probes runs grace periods one probe at a time in the kernel, seconds
    // on a busy host: do it beside the rendering instead of before it.
    let attachments = probes.attachments();
    let slow_detach = !probes.uses_multi_links();
    let mut files = rec
        .capture
        .finish()
        .with_context(|| kept_streams(dir, output))?;
    // The NVTX annotations kreplay-tool wrote for the traced processes.
    files.extend(nvtx::tool_streams(dir));
    // Every record is in the stream files now: an interrupt from here on ends kreplay at
    // once, and the streams say what the trace would have held.
    quick_exit::arm(&ending::interrupted_rendering(dir, output));
    if rec.say_stopping {
        eprintln!("{}", ending::stopping_line(attachments, slow_detach));
    }
    let detach = std::thread::spawn(move || quick_exit::detach_in_child(probes));
    let report =
        merge::merge(&files, output).with_context(|| ending::render_failed(dir, output))?;
    quick_exit::set_note(&ending::interrupted_written(output));
    let stderr = std::io::stderr();
    let mut e = stderr.lock();
    if let Some(note) = ending::streams_note(args.keep_streams, dir, &p.want, || {
        out_file::remove_own(dir, &files)
    }) {
        let _ = writeln!(e, "{note}");
    }
    if !args.no_summary {
        let _ = write!(e, "{}", rec.summary.render(counters.lost()));
        for line in ending::leak_lines(&leaks) {
            let _ = writeln!(e, "{line}");
        }
        let _ = write!(
            e,
            "{}",
            kreplay_cli::merge::gpu_time::kernel_table(&report.stats.gpu_kernels)
        );
    }
    let _ = writeln!(
        e,
        "{}",
        reader_cpu_line(rec.reader_cpu, rec.records, counters.wakeups)
    );
    let _ = writeln!(e, "{}", rings_line(rec.rings.0, &rec.rings.1));
    for w in report.warnings() {
        let _ = writeln!(e, "{w}");
    }
    if let Some(line) = ending::unplaced_line(report.stats.unrenderable) {
        let _ = writeln!(e, "{line}");
    }
    if let Some(stops) = rec.stops {
        for line in ending::follow_lines(stops, &counters) {
            let _ = writeln!(e, "{line}");
        }
    }
    let command = rec.command.as_ref().map(|(p, pid)| (p.as_str(), *pid));
    for note in ending::command_notes(command, rec.summary.total_calls(), ending::running) {
        let _ = writeln!(e, "{note}");
    }
    let _ = writeln!(
        e,
        "{}",
        ending::wrote_line(output, report.records, report.bytes)
    );
    let _ = detach.join();
    Ok(())
}

/// Records until a stop: feeds [`Session`] its wake-ups (records to read, the 200 ms tick,
/// Ctrl-C or SIGTERM, `deadline`, the started command's exit) and prints its status lines.
/// Returns the command's exit code (0 without one) and whether a signal stopped it.
async fn record(
    session: &mut Session,
    (mut term, mut int): (Signal, Signal),
    deadline: Option<Instant>,
    live: &mut LiveProbes<'_>,
    rec: &mut LiveRecording<'_>,
    mut holds: Option<&mut Holds>,
) -> Result<(u8, bool)> {
    let mut waiter = match session.target() {
        &Target::Command(pid) => Some(tokio::task::spawn_blocking(move || launch::wait_exit(pid))),
        _ => None,
    };
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut drain_tick = tokio::time::interval(kreplay_cli::probes::intake::DRAIN_EVERY);
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let mut code = 0u8;
    let mut signalled = false;
    let alive = |p: u32| Path::new(&format!("/proc/{p}")).exists();
    loop {
        let wake = tokio::select! {
            r = rec.intake.readable() => { r?; Wake::Data }
            _ = drain_tick.tick() => Wake::Data,
            _ = tokio::time::sleep_until(deadline.unwrap_or(far).into()) => Wake::Stop,
            _ = int.recv() => { signalled = true; Wake::Stop }
            _ = term.recv() => { signalled = true; Wake::Stop }
            res = async { waiter.as_mut().expect("guarded").await }, if waiter.is_some() => {
                code = res.context("waiting for the command")??.clamp(0, 255) as u8;
                Wake::Stop
            }
            _ = tick.tick() => Wake::Tick,
            r = async { holds.as_mut().expect("guarded").readable().await }, if holds.is_some() => {
                r?;
                // Processes stopped where the loader has mapped libraries: probe what they
                // mapped, then let them go on.
                let h = holds.as_mut().expect("guarded");
                h.serve(|pid| {
                    // Held, the process lives: its name is read now, in case it is gone
                    // before the reader reaches its first record.
                    rec.col.capture.remember_name(pid);
                    live.rescan_pid(pid);
                });
                h.mark_probed(live.attacher.files_for_all());
                continue;
            }
        };
        let (next, line) = session.on(wake, Instant::now(), live, rec, &alive)?;
        // Files the periodic rescan attached no longer hold the processes that map them.
        if let Some(h) = holds.as_mut() {
            h.mark_probed(live.attacher.files_for_all());
        }
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
    let col = &mut *rec.col;
    rec.intake.finish(&mut |s| col.push(&s));
    col.finish_held();
    col.finish();
    Ok((code, signalled))
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
