//! What `kreplay replay` runs: the application's command line and the environment that
//! injects kreplay-tool into it, started directly or, with `--probes`, under `kreplay trace`.
//! Pure: the command builds the [`std::process::Command`] from it.

use std::ffi::OsString;
use std::path::Path;

/// A process to start: program, arguments, and environment variables to set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables to set in its environment (and, under `kreplay trace`, the command's).
    pub env: Vec<(OsString, OsString)>,
}

/// The plan for `command` with the tool library `lib`.
///
/// - `HSA_TOOLS_LIB`: the caller's value (`hsa_tools`, when set) with the tool appended, so
///   tools the user already loads keep loading first.
/// - `LD_PRELOAD`: the tool first, then the caller's (`preload`): on CUDA it must be in front
///   of the process's symbol lookups (kreplay-tool's `cuda/interpose.rs`).
/// - `NVTX_INJECTION64_PATH`: the tool, unless the caller set one (`nvtx_set`), so the
///   application's NVTX ranges and marks join the replay's trace (NVTX loads it once more by
///   that path, which finds the preloaded copy).
/// - With `probes = Some((kreplay, trace_output))`, the command runs under `kreplay trace`,
///   which starts it with the preload set for it alone (in the tracer the preload would load
///   the tool too), keeps its streams beside `trace_output` and prints no summary of its own
///   (the replay prints the application's, its own calls left out).
pub fn plan(
    command: &[String],
    lib: &Path,
    hsa_tools: Option<&str>,
    preload: Option<&str>,
    nvtx_set: bool,
    probes: Option<(&Path, &Path)>,
) -> Plan {
    let lib = lib.display().to_string();
    let tools = match hsa_tools.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => format!("{v} {lib}"),
        None => lib.clone(),
    };
    let mut env = vec![(OsString::from("HSA_TOOLS_LIB"), OsString::from(tools))];
    if !nvtx_set {
        env.push((
            OsString::from(crate::trace::nvtx::INJECTION_VAR),
            OsString::from(&lib),
        ));
    }
    let preload = match preload.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => format!("{lib} {v}"),
        None => lib,
    };
    match probes {
        Some((kreplay, trace_output)) => {
            let mut args: Vec<OsString> = [
                "trace",
                "--quiet",
                "--keep-streams",
                "--no-summary",
                "--silent-interrupt",
                "--env",
            ]
            .iter()
            .map(OsString::from)
            .collect();
            args.push(format!("LD_PRELOAD={preload}").into());
            args.push("-o".into());
            args.push(trace_output.into());
            args.push("--".into());
            args.extend(command.iter().map(OsString::from));
            Plan {
                program: kreplay.into(),
                args,
                env,
            }
        }
        None => {
            env.push(("LD_PRELOAD".into(), preload.into()));
            Plan {
                program: command[0].clone().into(),
                args: command[1..].iter().map(OsString::from).collect(),
                env,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn cmd() -> Vec<String> {
        vec!["python3".into(), "train.py".into()]
    }

    #[test]
    fn the_tool_goes_after_the_users_hsa_tools_and_before_their_preload() {
        let p = plan(
            &cmd(),
            Path::new("/k/libkreplay_tool.so"),
            Some("/opt/rocprof.so"),
            Some("/usr/lib/libjemalloc.so"),
            false,
            None,
        );
        assert_eq!(p.program, "python3");
        assert_eq!(p.args, os(&["train.py"]));
        assert_eq!(
            p.env,
            [
                (
                    OsString::from("HSA_TOOLS_LIB"),
                    OsString::from("/opt/rocprof.so /k/libkreplay_tool.so")
                ),
                (
                    OsString::from("NVTX_INJECTION64_PATH"),
                    OsString::from("/k/libkreplay_tool.so")
                ),
                (
                    OsString::from("LD_PRELOAD"),
                    OsString::from("/k/libkreplay_tool.so /usr/lib/libjemalloc.so")
                ),
            ]
        );
        // Empty or blank values count as unset; a user's NVTX injection library stays.
        let p = plan(
            &cmd(),
            Path::new("/k/t.so"),
            Some("  "),
            Some(""),
            true,
            None,
        );
        assert_eq!(
            p.env,
            [
                (OsString::from("HSA_TOOLS_LIB"), OsString::from("/k/t.so")),
                (OsString::from("LD_PRELOAD"), OsString::from("/k/t.so")),
            ]
        );
    }

    #[test]
    fn with_probes_the_command_runs_under_kreplay_trace_with_the_preload_for_it_alone() {
        let p = plan(
            &cmd(),
            Path::new("/k/t.so"),
            None,
            None,
            false,
            Some((
                Path::new("/usr/bin/kreplay"),
                Path::new("/tmp/r/probes.pftrace"),
            )),
        );
        assert_eq!(p.program, "/usr/bin/kreplay");
        assert_eq!(
            p.args,
            os(&[
                "trace",
                "--quiet",
                "--keep-streams",
                "--no-summary",
                "--silent-interrupt",
                "--env",
                "LD_PRELOAD=/k/t.so",
                "-o",
                "/tmp/r/probes.pftrace",
                "--",
                "python3",
                "train.py",
            ])
        );
        // The tracer gets HSA_TOOLS_LIB and NVTX_INJECTION64_PATH (the command inherits
        // them; the tracer then leaves the injection as it is), never LD_PRELOAD.
        assert_eq!(
            p.env,
            [
                (OsString::from("HSA_TOOLS_LIB"), OsString::from("/k/t.so")),
                (
                    OsString::from("NVTX_INJECTION64_PATH"),
                    OsString::from("/k/t.so")
                )
            ]
        );
    }
}
