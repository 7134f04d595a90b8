//! The GPU timeline under `kreplay trace --gpu -- CMD`: kreplay-tool injected into the command
//! in observe mode (no replay), so that it records every dispatch and copy with the GPU's own
//! times into its stream, which the trace merges with the probes'.
//!
//! HSA loads the tool through `HSA_TOOLS_LIB` (appended to a value the command already has, so
//! the user's tools load first), the CUDA driver through `CUDA_INJECTION64_PATH` (unless the
//! command already names an injection library: there is one slot); `KREPLAY_GPU_TIMELINE=1`
//! turns observe mode on; the tool's stream goes to the run's stream directory
//! (`KREPLAY_OUTPUT_DIR`, kept when already set).

use std::path::{Path, PathBuf};

use kreplay_common::replay_config::Setting;

/// The variable the HSA runtime reads to load tool libraries.
pub const HSA_TOOLS_LIB: &str = "HSA_TOOLS_LIB";
/// The variable the CUDA driver reads to load its injection library.
pub const CUDA_INJECTION: &str = "CUDA_INJECTION64_PATH";

/// The line `--all --gpu` prints: only a started command or `-p` processes are given the tool
/// (`-p PID --gpu` loads it into the running process, [`super::gpu_attach`]).
pub const ALL_NOTE: &str = "kreplay: --gpu with --all: the GPU timeline is given to a started command (-- CMD) or to -p PID processes only; tracing the API calls only";

/// `--gpu` without a kreplay-tool to inject.
#[derive(Debug, thiserror::Error)]
#[error("--gpu needs libkreplay_tool.so next to kreplay (or KREPLAY_TOOL_LIB)")]
pub struct NoTool;

/// `--cupti-launches` where it cannot apply.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--cupti-launches applies to a command started with --gpu (kreplay trace --gpu --cupti-launches -- CMD)"
)]
pub struct CuptiLaunchesWithoutCommand;

/// The line printed when `--cupti-launches` is given but the command's CUDA injection slot is
/// taken, so the probes record the launches.
pub const CUPTI_LAUNCHES_SLOT_TAKEN: &str = "kreplay: --cupti-launches: CUDA_INJECTION64_PATH is already set, so kreplay-tool is not the command's CUDA injection library; the probes trace its launch calls";

/// Whether kreplay-tool records the command's CUDA launch calls from CUPTI instead of the
/// probes: `--cupti-launches` (`wanted`) with `--gpu` and a command (`command`), unless the
/// command already has a CUDA injection library (`injection_set`: its `--env` or kreplay's
/// environment), which is said in one line.
pub fn cupti_launches(
    wanted: bool,
    command: bool,
    injection_set: bool,
) -> Result<bool, CuptiLaunchesWithoutCommand> {
    if !wanted {
        return Ok(false);
    }
    if !command {
        return Err(CuptiLaunchesWithoutCommand);
    }
    if injection_set {
        eprintln!("{CUPTI_LAUNCHES_SLOT_TAKEN}");
        return Ok(false);
    }
    Ok(true)
}

/// The tool to inject for `--gpu`: `None` without `--gpu`, or without a command to start or
/// `-p` processes to attach to (then [`ALL_NOTE`] is printed).
pub fn tool_for(gpu: bool, targets: bool) -> Result<Option<PathBuf>, NoTool> {
    if !gpu {
        return Ok(None);
    }
    if !targets {
        eprintln!("{ALL_NOTE}");
        return Ok(None);
    }
    super::nvtx::tool_lib().map(Some).ok_or(NoTool)
}

/// `env` (the command's `--env` pairs and those added so far) with the variables that inject
/// the tool `tool` in observe mode, writing to `dir`. `inherited(name)` is the value the
/// command would inherit from kreplay's environment.
pub fn with_gpu_env(
    mut env: Vec<(String, String)>,
    tool: &Path,
    dir: &Path,
    inherited: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let tool = tool.display().to_string();
    let current = match env.iter().position(|(k, _)| k == HSA_TOOLS_LIB) {
        Some(i) => Some(env.remove(i).1),
        None => inherited(HSA_TOOLS_LIB),
    };
    let tools = match current.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        // Already loaded by the user's value: not twice.
        Some(v) if v.split_whitespace().any(|t| t == tool) => v.to_owned(),
        Some(v) => format!("{v} {tool}"),
        None => tool.clone(),
    };
    let cuda_set =
        env.iter().any(|(k, _)| k == CUDA_INJECTION) || inherited(CUDA_INJECTION).is_some();
    if cuda_set {
        tracing::warn!("{CUDA_INJECTION} is already set: no GPU timeline for CUDA");
    } else {
        env.push((CUDA_INJECTION.to_owned(), tool));
    }
    env.push((HSA_TOOLS_LIB.to_owned(), tools));
    env.retain(|(k, _)| k != Setting::GpuTimeline.var());
    env.push((Setting::GpuTimeline.var().to_owned(), "1".to_owned()));
    let out = Setting::OutputDir.var();
    if !env.iter().any(|(k, _)| k == out) && inherited(out).is_none() {
        env.push((out.to_owned(), dir.display().to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn cupti_launches_need_a_command_and_the_cuda_injection_slot() {
        assert_eq!(cupti_launches(false, false, true), Ok(false));
        assert_eq!(cupti_launches(true, true, false), Ok(true));
        assert_eq!(cupti_launches(true, true, true), Ok(false));
        assert_eq!(
            cupti_launches(true, false, false),
            Err(CuptiLaunchesWithoutCommand)
        );
    }

    #[test]
    fn the_tool_joins_the_commands_hsa_tools_and_writes_to_the_run_directory() {
        let tool = Path::new("/k/libkreplay_tool.so");
        let dir = Path::new("/t/x.streams");
        let none = |_: &str| None;
        assert_eq!(
            with_gpu_env(pairs(&[("A", "b")]), tool, dir, none),
            pairs(&[
                ("A", "b"),
                ("CUDA_INJECTION64_PATH", "/k/libkreplay_tool.so"),
                ("HSA_TOOLS_LIB", "/k/libkreplay_tool.so"),
                ("KREPLAY_GPU_TIMELINE", "1"),
                ("KREPLAY_OUTPUT_DIR", "/t/x.streams"),
            ])
        );
        // The user's --env value first, once; an inherited output directory is kept.
        let out = |k: &str| (k == "KREPLAY_OUTPUT_DIR").then(|| "/replay".to_owned());
        assert_eq!(
            with_gpu_env(pairs(&[("HSA_TOOLS_LIB", "/u/mine.so")]), tool, dir, out),
            pairs(&[
                ("CUDA_INJECTION64_PATH", "/k/libkreplay_tool.so"),
                ("HSA_TOOLS_LIB", "/u/mine.so /k/libkreplay_tool.so"),
                ("KREPLAY_GPU_TIMELINE", "1"),
            ])
        );
        // An inherited value that already loads the tool is not given it twice.
        let has = |k: &str| (k == "HSA_TOOLS_LIB").then(|| "/k/libkreplay_tool.so".to_owned());
        assert_eq!(
            with_gpu_env(Vec::new(), tool, dir, has)[1],
            (
                "HSA_TOOLS_LIB".to_owned(),
                "/k/libkreplay_tool.so".to_owned()
            )
        );
        // The user's own CUDA injection library keeps its slot.
        let cuda = with_gpu_env(
            pairs(&[("CUDA_INJECTION64_PATH", "/u/inj.so")]),
            tool,
            dir,
            none,
        );
        assert_eq!(
            cuda[0],
            ("CUDA_INJECTION64_PATH".to_owned(), "/u/inj.so".to_owned())
        );
        assert_eq!(
            cuda.iter()
                .filter(|(k, _)| k == "CUDA_INJECTION64_PATH")
                .count(),
            1
        );
    }
}
