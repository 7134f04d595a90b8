//! `kreplay trace`: probe GPU runtime calls of running processes or of a command, and write
//! one Perfetto trace.
use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use clap::Args;
use kreplay_cli::{
    duration,
    launch::Launched,
    output as out_file,
    preflight::{self, HostPaths},
    probes::{
        cost::ProgramCost,
        loader::{Probes, Programs},
    },
    quick_exit,
    trace::{
        attach::Attacher,
        discover::RuntimeLib,
        finish::{self, EndOptions},
        gpu_attach, gpu_env, nvtx,
        plan::{self, Plan, Request},
        record,
        session::Target,
        setup::{self, Paths},
        targets::{self, HostLibraries},
    },
};
use kreplay_common::probe::{EVENTS_MAP, THREADS_MAP};

/// Arguments of `kreplay trace`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    sudo kreplay trace -p 4242                  trace a running process until Ctrl-C\n  \
    sudo kreplay trace --duration 10s --all     every GPU process on this host for 10 s\n  \
    sudo kreplay trace -o run.pftrace -- ./app  start ./app with the probes already attached\n  \
    sudo kreplay trace --gpu -- ./app           also what its GPU ran, and when\n  \
    sudo kreplay trace --gpu --cupti-launches -- python train.py\n                                              \
    the same, launch calls from CUPTI (torch.profiler's cost per launch)\n\n\
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
    kernel and copy with the GPU's times, on per-GPU queue (HSA) or stream (CUDA) tracks, with \
    flows from their calls, a GPU busy % counter and a GPU time per kernel table \
    (docs/gpu-timeline.md). -p PID --gpu \
    loads kreplay-tool into the running process (ptrace and its own dlopen) and tells it what \
    to do over a control socket; when kreplay ends, or is killed, the tool stops on its own. A \
    ROCm process must have been started with HSA_TOOLS_LIB=libkreplay_tool.so \
    KREPLAY_ATTACH=1 (docs/attach.md).\n\n\
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
    /// With a command or -p: also record what the GPU ran (kernels and copies with their GPU
    /// times, on per-GPU queue or stream tracks), through kreplay-tool in observe mode
    /// (docs/gpu-timeline.md; docs/attach.md for -p).
    #[arg(long, conflicts_with = "no_gpu")]
    gpu: bool,
    /// API calls only, no GPU timeline (the default).
    #[arg(long)]
    no_gpu: bool,
    /// With --gpu -- CMD on CUDA: kernel launch calls (cudaLaunchKernel, cuLaunchKernel, graph
    /// launches) are recorded from CUPTI's API records by kreplay-tool, not by uprobes, which
    /// cost each PyTorch launch two uprobe pairs: a launch then costs what torch.profiler's CUDA
    /// tracing adds. Their slices carry CUPTI's stream id, not the CUstream handle; a process
    /// whose CUPTI is unusable has its launch calls probed instead (docs/gpu-timeline.md,
    /// "Launch calls from CUPTI").
    #[arg(long, requires = "gpu")]
    cupti_launches: bool,
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

/// The checked request of these arguments.
fn request(args: &TraceArgs, cupti_launches: bool) -> Request {
    let mut env = args.env.clone();
    if cupti_launches {
        env.push((
            kreplay_common::replay_config::CUPTI_LAUNCHES.to_owned(),
            "1".to_owned(),
        ));
    }
    Request {
        pids: args.pids.clone(),
        all: args.all,
        command: args.command.clone(),
        env,
        libs: args.libs.clone(),
        ringbuf_bytes: args.ringbuf_bytes,
        thread_slots: args.thread_slots,
        children: args.children,
        no_children: args.no_children,
    }
}

/// The probes loaded and attached, and the target started (a command, paused) or named.
struct Ready {
    probes: Probes,
    cost: Option<ProgramCost>,
    attacher: Attacher,
    target: Target,
    child: Option<Launched>,
    armed: setup::Armed,
}

/// Loads the probes, starts a `-- CMD` paused, and attaches the probes for the target.
fn ready_probes(
    args: &TraceArgs,
    plan: &Plan,
    maps: &[(&'static str, u32)],
    pid_libs: &[(u32, Vec<RuntimeLib>)],
    paths: &Paths,
    gpu_tool: Option<&Path>,
    rt: &tokio::runtime::Runtime,
) -> Result<Ready> {
    let t = Instant::now();
    let mut probes = Probes::load_with(maps, plan.follow)?;
    let loaded = t.elapsed();
    let cost = args
        .bpf_stats
        .then(|| ProgramCost::start(Programs::Record))
        .flatten();
    // `--cupti-launches` put its variable in the command's environment (with --gpu: the tool
    // that records the launches is injected).
    let cupti_launches = gpu_tool.is_some()
        && matches!(&plan.mode, plan::Mode::Command { env, .. }
            if env.iter().any(|(k, _)| k == kreplay_common::replay_config::CUPTI_LAUNCHES));
    let mut attacher = if cupti_launches {
        Attacher::without_cuda_launches()
    } else {
        Attacher::default()
    };
    let (target, child) = setup::start_command(plan, &paths.dir, gpu_tool)?;
    let armed = setup::arm(
        plan,
        &target,
        pid_libs,
        &mut probes,
        &mut attacher,
        &paths.dir,
        rt,
    )?;
    tracing::debug!(?loaded, armed = ?t.elapsed() - loaded, "probes ready");
    Ok(Ready {
        probes,
        cost,
        attacher,
        target,
        child,
        armed,
    })
}

/// Runs `kreplay trace`; returns the exit code.
pub fn run(args: TraceArgs) -> Result<u8> {
    let injection_set = args.env.iter().any(|(k, _)| k == gpu_env::CUDA_INJECTION)
        || std::env::var_os(gpu_env::CUDA_INJECTION).is_some();
    let cupti_launches =
        gpu_env::cupti_launches(args.cupti_launches, !args.command.is_empty(), injection_set)?;
    let plan = Plan::check(request(&args, cupti_launches), Path::exists)?;
    let gpu_tool = gpu_env::tool_for(args.gpu, !args.command.is_empty() || !args.pids.is_empty())?;
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
    let maps = [
        (EVENTS_MAP, plan.ringbuf_bytes),
        (THREADS_MAP, plan.thread_slots),
    ];
    let paths = Paths::create(output)?;
    // While the probes load and attach (most of kreplay's start-up), on threads of their own:
    // `-p PID --gpu` gives the running processes kreplay-tool, so the GPU timeline begins as
    // soon as the tool is in (launches made before the probes are in have GPU slices without
    // a launch slice); and the `-p` processes' kernel names are read ahead (every mapped
    // library's symbols: gigabytes of them in a PyTorch process), so the rings are drained
    // from the moment the probes are in, not after that read.
    let gpu_pids = match (&plan.mode, &gpu_tool) {
        (plan::Mode::Pids(pids), Some(tool)) => Some((pids.as_slice(), tool.as_path())),
        _ => None,
    };
    let named: &[u32] = match &plan.mode {
        plan::Mode::Pids(pids) => pids,
        _ => &[],
    };
    let (ready, gpu_sessions, kernels) = std::thread::scope(|s| {
        let gpu = gpu_pids.map(|(pids, tool)| {
            s.spawn(|| gpu_attach::open_all(pids, tool, &paths.dir, args.quiet))
        });
        let names = s.spawn(|| setup::kernel_names(named));
        let ready = ready_probes(
            &args,
            &plan,
            &maps,
            &pid_libs,
            &paths,
            gpu_tool.as_deref(),
            &rt,
        );
        let sessions = gpu.map_or_else(Vec::new, |h| {
            h.join().unwrap_or_else(|_| {
                eprintln!("kreplay: --gpu: attaching kreplay-tool failed; tracing API calls only");
                Vec::new()
            })
        });
        // Unread names are read when a launch needs them.
        let kernels = names.join().unwrap_or_default();
        (ready, sessions, kernels)
    });
    let Ready {
        mut probes,
        cost,
        mut attacher,
        target,
        child,
        armed,
    } = match ready {
        Ok(r) => r,
        Err(e) => {
            // The tools stop and close their streams before the directory goes.
            gpu_attach::end_all(gpu_sessions, &paths.dir, true);
            out_file::remove_own(&paths.dir, &nvtx::tool_streams(&paths.dir));
            return Err(e);
        }
    };
    // This thread drains the ring; the traced command was started above, so it keeps its own
    // priority.
    kreplay_cli::probes::priority::raise_reader_thread();
    let signals = record::signals(&rt)?;
    if !args.quiet {
        let (n, busy) = (probes.attachments(), attacher.busy());
        eprintln!(
            "{}",
            targets::tracing_line(&target, plan.program(), n, busy)
        );
    }
    let files = armed.capture.files();
    setup::release(child, Launched::release, &paths.dir, &files, plan.program())?;
    let status = (!args.quiet).then(|| std::io::stderr().is_terminal());
    let start = armed.into_start(&plan, target, kernels, signals, status, args.duration);
    let (exit_code, recorded) =
        record::record_until_stop(rt, start, &mut probes, &mut attacher, &paths)?;
    let end = EndOptions {
        keep_streams: args.keep_streams,
        no_summary: args.no_summary,
        summary_from_streams: attacher.launches_from_tool(),
    };
    // The tools' streams are complete before the finish lists them.
    gpu_attach::end_all(gpu_sessions, &paths.dir, args.quiet);
    finish::finish(end, probes, cost, recorded, &paths)?;
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
