//! Readying a trace before its target runs: the started command's environment, following the
//! process trees, the loader hook, `--all` holding, the first attach, and the rings, holds and
//! kernel names the recording loop starts from.
use std::{ffi::OsString, path::Path};

use anyhow::{Context, Result};

use crate::{
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
        plan::Plan,
        session::{Probed, Target},
        targets::{self, HostLibraries},
    },
};

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
/// the runtime the rings and holds are read in.
pub fn arm(
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

/// The `-p` targets' mappings as of the attach, read before the status line says tracing has
/// begun (a target told to go on that line may run and exit at once): a launch drained after
/// its process exited still finds the file its kernel's address lies in.
pub fn kernel_names(target: &Target) -> KernelNames {
    let mut kernels = KernelNames::default();
    if let Target::Pids(pids) = target {
        for &pid in pids {
            kernels.remember(pid);
            // Read now, with the attach, rather than while the rings wait.
            let files = kernels.warm(pid);
            tracing::debug!(pid, files, "kernel names read ahead");
        }
    }
    kernels
}

#[cfg(test)]
mod tests;
