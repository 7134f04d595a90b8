//! Readying a trace before its target runs: the started command's environment, following the
//! process trees, the loader hook, `--all` holding, the first attach, and the rings, holds and
//! kernel names the recording loop starts from.
use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result};
use tokio::signal::unix::Signal;

use crate::{
    launch::{self, Launched},
    output as out_file,
    probes::{intake::Intake, loader::Probes},
    trace::{
        attach::Attacher,
        capture::Capture,
        discover::{self, RuntimeLib},
        gpu_env,
        holds::Holds,
        kernels::KernelNames,
        live::LiveProbes,
        nvtx,
        plan::{self, Plan},
        session::{Probed, Target},
        targets::{self, HostLibraries},
    },
};

/// Where a run writes: the trace, the stream directory asked for and the one used.
#[derive(Debug)]
pub struct Paths {
    /// The trace file.
    pub output: PathBuf,
    /// The stream directory asked for (`FILE.streams`).
    pub want: PathBuf,
    /// The stream directory used (`want`, or a fresh name when that was taken).
    pub dir: PathBuf,
}

impl Paths {
    /// Creates the stream directory of the trace `output`: `FILE.streams`, or a fresh name
    /// when that is taken. It exists before a command starts: the command's NVTX calls go to
    /// kreplay-tool, which writes its stream there.
    pub fn create(output: PathBuf) -> Result<Paths> {
        let want = plan::streams_dir(&output);
        let dir = out_file::fresh_dir(&want, 0o777)
            .with_context(|| format!("cannot create a stream directory {}", want.display()))?;
        Ok(Paths { output, want, dir })
    }
}

/// Starts the command of a `-- CMD` plan paused before its first instruction, its
/// environment from [`command_env`] with kreplay's own; says what is traced. A command that
/// cannot start removes the stream directory `dir` (then empty) again.
pub fn start_command(
    plan: &Plan,
    dir: &Path,
    gpu_tool: Option<&Path>,
) -> Result<(Target, Option<Launched>)> {
    let started = targets::start(plan, |argv, user| {
        let tool = nvtx::tool_lib();
        let (env, injection) = command_env(user, dir, tool.as_deref(), gpu_tool, |k| {
            std::env::var_os(k)
        });
        tracing::debug!(?injection, "NVTX annotations of the command");
        launch::spawn_paused(argv, &env).map(|c| {
            let pid = c.pid;
            (c, pid)
        })
    });
    started.inspect_err(|_| {
        out_file::remove_own(dir, &[]);
    })
}

/// Lets the paused command `child` run with `go`; when it cannot, removes the stream files
/// `files` this run wrote in `dir` (and `dir` when that empties it: an old trace stays as it
/// was) and says that `program` cannot run.
pub fn release<C>(
    child: Option<C>,
    go: impl FnOnce(C) -> std::io::Result<()>,
    dir: &Path,
    files: &[PathBuf],
    program: Option<&str>,
) -> Result<()> {
    let Some(c) = child else {
        return Ok(());
    };
    go(c).map_err(|e| {
        // Nothing ran: what this run wrote goes.
        out_file::remove_own(dir, files);
        anyhow::Error::new(e).context(format!("cannot run {}", program.unwrap_or_default()))
    })
}

/// The started command's environment: the `--env` pairs `user`, those that make kreplay-tool
/// (`tool_lib`) its NVTX injection library writing to `dir`, and with `--gpu` (`gpu_tool`)
/// those that inject the tool in observe mode. `inherited(name)` is the value the command
/// would inherit from kreplay (set but not UTF-8 counts as set for NVTX, unset for `--gpu`).
/// Also says what its NVTX calls will reach.
pub fn command_env(
    user: &[(String, String)],
    dir: &Path,
    tool_lib: Option<&Path>,
    gpu_tool: Option<&Path>,
    inherited: impl Fn(&str) -> Option<OsString>,
) -> (Vec<(String, String)>, nvtx::Injection) {
    let set = |k: &str| user.iter().any(|(u, _)| u == k) || inherited(k).is_some();
    let (add, injection) = nvtx::injection_env(tool_lib, dir, set);
    let mut env: Vec<(String, String)> = user.iter().cloned().chain(add).collect();
    if let Some(tool) = gpu_tool {
        env = gpu_env::with_gpu_env(env, tool, dir, |k| {
            inherited(k).and_then(|v| v.into_string().ok())
        });
    }
    (env, injection)
}

/// The processes whose trees are followed from the start: the `-p` processes or the started
/// command (none for `--all`).
pub fn follow_roots(target: &Target) -> Vec<u32> {
    match target {
        Target::Pids(p) => p.clone(),
        Target::Command(pid) => vec![*pid],
        Target::All => Vec::new(),
    }
}

/// Each root followed by its descendants as `parents` (`(pid, parent)` pairs) has them now.
pub fn follow_seeds(roots: &[u32], parents: &[(u32, u32)]) -> Vec<u32> {
    let mut seeds = Vec::new();
    for &root in roots {
        seeds.push(root);
        seeds.extend(targets::descendants(root, parents));
    }
    seeds
}

/// Whether `--all` holds processes that map a runtime library file in a new place: only for
/// `every`, and only when `hold` (arming the hold) succeeds; a failure is logged and the run
/// goes on without holding.
pub fn holding_new_files<E: std::fmt::Display>(
    every: bool,
    hold: impl FnOnce() -> Result<(), E>,
) -> bool {
    every
        && hold().map_or_else(
            |e| {
                tracing::warn!(error = %e, "a process whose runtime library is in a new place loses the calls it makes before the next rescan (200 ms)");
                false
            },
            |()| true,
        )
}

/// How a recording runs and what it starts from.
pub struct Start {
    /// The target, attached.
    pub target: Target,
    /// The started command's program (`None` for `-p` and `--all`).
    pub program: Option<String>,
    /// A process tree is followed.
    pub follow: bool,
    /// `--all` holds processes that map a new runtime library file.
    pub holding_new_files: bool,
    /// The rings.
    pub intake: Intake,
    /// Processes held by the loader hook or for a new library file.
    pub holds: Option<Holds>,
    /// The per-thread streams.
    pub capture: Capture,
    /// Kernel names read ahead for the `-p` targets.
    pub kernels: KernelNames,
    /// SIGTERM and SIGINT ([`signals`]).
    pub signals: (Signal, Signal),
    /// Status lines wanted (`None` with `-q`), and whether stderr is a terminal.
    pub status: Option<bool>,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// What the recording loop starts from once the probes are attached.
pub struct Armed {
    /// The rings.
    pub intake: Intake,
    /// The processes held by the loader hook or for a new library file (`--children`, a
    /// command, `--all`).
    pub holds: Option<Holds>,
    /// `--all` holds processes that map a new runtime library file.
    pub holding_new_files: bool,
    /// The per-thread streams, in the run's stream directory.
    pub capture: Capture,
}

/// Follows the target's trees, hooks the loader, holds new library files under `--all`, and
/// attaches the probes before anything of the target runs; then takes the rings and holds and
/// creates the streams in `dir`. `pid_libs` is [`targets::pid_libraries`]'s answer; `rt` is
/// the runtime the rings and holds are read in. Until the streams exist, a failure removes
/// what this run wrote in `dir` (the NVTX streams of a started command).
pub fn arm(
    plan: &Plan,
    target: &Target,
    pid_libs: &[(u32, Vec<RuntimeLib>)],
    probes: &mut Probes,
    attacher: &mut Attacher,
    dir: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<Armed> {
    arm_probes(plan, target, pid_libs, probes, attacher, dir, rt).inspect_err(|_| {
        out_file::remove_own(dir, &nvtx::tool_streams(dir));
    })
}

/// [`arm`] without the cleanup.
fn arm_probes(
    plan: &Plan,
    target: &Target,
    pid_libs: &[(u32, Vec<RuntimeLib>)],
    probes: &mut Probes,
    attacher: &mut Attacher,
    dir: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<Armed> {
    // Followed before anything runs: the command from its first instruction, a `-p`
    // process's descendants from now (their libraries are attached below or at the first
    // rescan).
    let mut seeds: Vec<u32> = Vec::new();
    if plan.follow {
        seeds = follow_seeds(&follow_roots(target), &discover::parent_pids());
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
    let holding_new_files = holding_new_files(every, || probes.hold_new_files());
    // Attach before anything runs.
    let ld = std::env::var("LD_LIBRARY_PATH").ok();
    let mut live = LiveProbes {
        probes,
        attacher,
        follow: plan.follow,
        every,
        holding_new_files,
        launch_requests: None,
    };
    targets::attach(
        plan,
        target,
        pid_libs,
        ld.as_deref(),
        &HostLibraries,
        &mut live,
    )?;
    // The descendants of `-p --children` processes, as they are now.
    if let Target::Pids(pids) = target {
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
    Ok(Armed {
        intake,
        holds,
        holding_new_files,
        capture: Capture::create(dir)?,
    })
}

impl Armed {
    /// What the recording loop starts from: these rings, holds and streams with the `target`
    /// of `plan`, the `kernels` read ahead, the `signals`, `status` lines (`None` with `-q`,
    /// else whether stderr is a terminal) and the `duration`.
    pub fn into_start(
        self,
        plan: &Plan,
        target: Target,
        kernels: KernelNames,
        signals: (Signal, Signal),
        status: Option<bool>,
        duration: Option<Duration>,
    ) -> Start {
        Start {
            target,
            program: plan.program().map(str::to_owned),
            follow: plan.follow,
            holding_new_files: self.holding_new_files,
            intake: self.intake,
            holds: self.holds,
            capture: self.capture,
            kernels,
            signals,
            status,
            duration,
        }
    }
}

/// The mappings of the `-p` processes `pids`, and the names in the files they map that register
/// kernels, read while the probes attach, before the status line says tracing has begun (a
/// target told to go on that line may run and exit at once): a launch drained after its process
/// exited still finds the file its kernel's address lies in.
pub fn kernel_names(pids: &[u32]) -> KernelNames {
    let mut kernels = KernelNames::default();
    for &pid in pids {
        kernels.remember(pid);
        // Read now, with the attach, rather than while the rings wait.
        let files = kernels.warm(pid);
        tracing::debug!(pid, files, "kernel names read ahead");
    }
    kernels
}

#[cfg(test)]
mod tests;
