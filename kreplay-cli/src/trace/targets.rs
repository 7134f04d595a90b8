//! Choosing what `kreplay trace` probes and attaching to it before anything of the target
//! runs: the runtime libraries of each `-p` process (and those it may still `dlopen`), every
//! runtime library on the host (`--all`), or those a started command will load (`-- CMD`);
//! `--lib` files in each case. The file system and the probes are behind [`Libraries`] and
//! [`Attach`], so the choices can be tested without root or a real process.
use std::path::PathBuf;

use anyhow::Context;

use super::{
    discover::{self, RuntimeLib},
    plan::{Mode, Plan},
    session::Target,
};
use crate::probes::loader::Scope;

/// Where runtime libraries are found.
pub trait Libraries {
    /// The runtime libraries process `pid` maps, plus `extra`; an error when it is gone or
    /// maps none.
    fn of_pid(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>>;
    /// The runtime libraries process `pid` maps, plus `extra`, possibly none (the root of a
    /// followed tree, a launcher); an error when it is gone.
    fn of_tree_root(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>>;
    /// The runtime libraries process `pid` could still `dlopen` by name.
    fn dlopen_candidates(&self, pid: u32) -> Vec<RuntimeLib>;
    /// Every runtime library in `ld_library_path`, the loader's directories, and `extra`.
    fn candidates(&self, ld_library_path: Option<&str>, extra: &[PathBuf]) -> Vec<RuntimeLib>;
    /// The runtime libraries the loader maps when `program` starts.
    fn startup(&self, program: &str) -> Vec<RuntimeLib>;
}

/// This host's libraries, as [`discover`] finds them.
pub struct HostLibraries;

impl Libraries for HostLibraries {
    fn of_pid(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
        discover::target_libs(pid, extra)
    }

    fn of_tree_root(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
        discover::mapped_libs(pid, extra)
    }

    fn dlopen_candidates(&self, pid: u32) -> Vec<RuntimeLib> {
        discover::dlopen_candidates(pid)
    }

    fn candidates(&self, ld_library_path: Option<&str>, extra: &[PathBuf]) -> Vec<RuntimeLib> {
        discover::candidates(ld_library_path, extra)
    }

    fn startup(&self, program: &str) -> Vec<RuntimeLib> {
        // The program itself too: a CUDA runtime linked into it statically.
        discover::startup_objects(program)
    }
}

/// The probes, as attaching uses them.
pub trait Attach {
    /// Attaches every API of `lib`'s family for `scope` (nothing when already attached).
    fn attach(&mut self, lib: &RuntimeLib, scope: Scope) -> anyhow::Result<()>;
    /// Attaches system-wide to every runtime library a process maps now.
    fn rescan_all(&mut self);
}

/// The scope of the probes for a process of the plan: every process when a process tree is
/// followed (the programs then skip the processes outside it), else that process alone.
pub fn scope(plan: &Plan, pid: u32) -> Scope {
    if plan.follow {
        Scope::All
    } else {
        Scope::Pid(pid)
    }
}

/// The descendants of `root`, given every process's (pid, parent pid), parents before their
/// children.
pub fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in parents {
            if parent == p && child != root && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// The runtime libraries of each `-p` process, looked up before anything is loaded: a process
/// that is gone ends the run here, and so does one that maps no runtime unless its tree is
/// followed (`--children`: a launcher's children load the runtimes). Empty for the other
/// modes.
pub fn pid_libraries(
    plan: &Plan,
    libs: &impl Libraries,
) -> anyhow::Result<Vec<(u32, Vec<RuntimeLib>)>> {
    match &plan.mode {
        Mode::Pids(pids) => pids
            .iter()
            .map(|&pid| {
                let mapped = if plan.follow {
                    libs.of_tree_root(pid, &plan.libs)?
                } else {
                    libs.of_pid(pid, &plan.libs)?
                };
                Ok((pid, mapped))
            })
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// Starts the command of a `-- CMD` plan with `spawn` (paused before its first instruction;
/// it returns the child and its pid) and says what is traced. Nothing is started for the
/// other modes.
pub fn start<C>(
    plan: &Plan,
    spawn: impl FnOnce(&[String], &[(String, String)]) -> std::io::Result<(C, u32)>,
) -> anyhow::Result<(Target, Option<C>)> {
    Ok(match &plan.mode {
        Mode::Pids(pids) => (Target::Pids(pids.clone()), None),
        Mode::All => (Target::All, None),
        Mode::Command { argv, env } => {
            let (child, pid) = spawn(argv, env).with_context(|| format!("starting {}", argv[0]))?;
            (Target::Command(pid), Some(child))
        }
    })
}

/// Attaches the probes for `target` before anything of it runs. `pid_libs` is
/// [`pid_libraries`]'s answer; `ld_library_path` is kreplay's own, which a started command
/// inherits. A library that fails to attach fails the run, except one a `-p` process has not
/// loaded yet.
pub fn attach(
    plan: &Plan,
    target: &Target,
    pid_libs: &[(u32, Vec<RuntimeLib>)],
    ld_library_path: Option<&str>,
    libs: &impl Libraries,
    probes: &mut impl Attach,
) -> anyhow::Result<()> {
    match target {
        Target::Pids(_) => {
            for (pid, mapped) in pid_libs {
                for lib in mapped {
                    probes.attach(lib, scope(plan, *pid))?;
                }
                // Runtimes of another family the process may still dlopen by name: probed
                // now, so their first calls are seen (the rescan alone would miss up to a
                // tick's worth of them).
                for lib in libs
                    .dlopen_candidates(*pid)
                    .into_iter()
                    .filter(|c| !mapped.iter().any(|l| l.family == c.family))
                {
                    if let Err(e) = probes.attach(&lib, scope(plan, *pid)) {
                        tracing::debug!(pid, library = %lib.host_path.display(), error = %e, "not attached ahead of dlopen");
                    }
                }
            }
        }
        Target::All => {
            for lib in libs.candidates(None, &plan.libs) {
                probes.attach(&lib, Scope::All)?;
            }
            probes.rescan_all();
        }
        Target::Command(pid) => {
            // The libraries the loader will map at startup (rpath included), then every
            // runtime library in the usual places, for those loaded later with dlopen.
            let startup = libs.startup(plan.program().unwrap_or_default());
            let later = libs
                .candidates(ld_library_path, &plan.libs)
                .into_iter()
                // A family the loader already resolves at startup is not looked for elsewhere.
                .filter(|c| {
                    !startup
                        .iter()
                        .any(|s| s.family == c.family && s.dev_ino != c.dev_ino)
                });
            for lib in later.chain(startup.iter().cloned()) {
                probes.attach(&lib, scope(plan, *pid))?;
            }
        }
    }
    Ok(())
}

/// The line that says tracing has begun, with the time spent attaching.
pub fn tracing_line(
    target: &Target,
    program: Option<&str>,
    attachments: usize,
    attaching: std::time::Duration,
) -> String {
    let what = match target {
        Target::Pids(p) => format!(
            "pid {}",
            p.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
        Target::All => "every process using a GPU runtime".to_string(),
        Target::Command(pid) => format!("{} (pid {pid})", program.unwrap_or_default()),
    };
    format!(
        "kreplay: tracing {what}: {attachments} probes attached in {} ms; stop with Ctrl-C",
        attaching.as_millis()
    )
}

#[cfg(test)]
mod tests;
