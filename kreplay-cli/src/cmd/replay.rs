//! `kreplay replay`: runs a command with kreplay-tool injected (through `HSA_TOOLS_LIB` for
//! ROCm, `LD_PRELOAD` for CUDA — one library serves both), replaying its kernels, then merges
//! the tool's stream into a Perfetto trace and prints the per-kernel table. With `--probes`
//! the command runs under `kreplay trace` as well, and the probes' streams are merged with the
//! tool's into the one trace (API slices with flows to the dispatches they produced).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use kreplay_cli::output;
use kreplay_cli::quick_exit;
use kreplay_cli::replay::{
    attach, ending, files, plan, progress,
    summary::Summary,
    table::{self, RunTotals},
};
use kreplay_common::replay_config::{
    self as contract, DeviceCheck, ReplaySettings, RestoreMode, SnapshotPlacement,
};

/// Arguments of `kreplay replay`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    kreplay replay --passes 10 --kernel gemm -- python3 train.py\n  \
    kreplay replay --passes 5 --max-dispatches 20 --json k.json -o k.pftrace -- ./app\n  \
    sudo kreplay replay --kernel gemm --passes 5 --duration 10s -p 4242\n\n\
    The per-kernel table: dispatches seen and replayed, passes per replayed dispatch (a \
    range when a replay stopped early), min/median/max time of one pass, median snapshot \
    time, bytes per snapshot, median restore time, restores that failed, dispatches whose \
    passes differed (nondet), and why dispatches were declined, grouped by cause with one \
    example. Names are demangled and shortened; the trace and --json have them in full. The \
    closing line says how much of the run was spent inside kreplay. On a terminal a progress \
    line shows dispatches replayed, passes and time inside kreplay while the command runs; \
    the tool says each warning once per cause and counts the rest at exit. A copy that fails inside \
    kreplay stops that dispatch's replay: the snapshot is written back and the dispatch runs \
    once, so the application computes what it computes without kreplay.\n\n\
    The tool's (and with --probes the probes') stream files go to a \
    directory this run creates, $TMPDIR/kreplay-replay-PID (mode 0700; when that name is taken, \
    the first free kreplay-replay-PID.2, .3, … instead: what is there is left alone). After the \
    merge kreplay removes the files it wrote there, then the directory if nothing else is in \
    it; a failed merge keeps them and says where. The trace is written under a temporary name \
    beside FILE and renamed over FILE once complete: a run that fails leaves an old FILE as it \
    was.")]
pub struct ReplayArgs {
    /// Passes per replayed dispatch (at least 1; with 1 every dispatch runs once, unreplayed).
    #[arg(long, default_value_t = 2)]
    passes: u32,
    /// Replay only kernels whose name matches this regex.
    #[arg(long, value_name = "REGEX")]
    kernel: Option<String>,
    /// Replay at most this many dispatches.
    #[arg(long, value_name = "M", value_parser = contract::parse_count)]
    max_dispatches: Option<u64>,
    /// Chunk size of the dirty check (`64K`, `1M`; a power of two from 4K to 1G).
    #[arg(long, value_name = "SIZE", value_parser = contract::parse_chunk_size)]
    chunk_size: Option<u64>,
    /// `auto` (default): restore only changed chunks while checking pays; `dirty`: always
    /// restore only changed chunks; `full`: restore every byte.
    #[arg(
        long,
        value_name = "MODE",
        value_parser = choice::<RestoreMode>(RestoreMode::NAMES)
    )]
    restore: Option<RestoreMode>,
    /// Decline replay when the snapshot footprint exceeds this (`512M`, `8G`, bytes).
    #[arg(long, value_name = "SIZE", value_parser = contract::parse_size)]
    snapshot_budget: Option<u64>,
    /// Where snapshot copies live.
    #[arg(
        long,
        value_name = "WHERE",
        value_parser = choice::<SnapshotPlacement>(SnapshotPlacement::NAMES)
    )]
    snapshot_placement: Option<SnapshotPlacement>,
    /// How changed chunks of a device-resident snapshot are found: `hash` (default: 128-bit
    /// chunk hashes on the device, one read of the footprint) or `compare` (exact, two reads).
    #[arg(
        long,
        value_name = "HOW",
        value_parser = choice::<DeviceCheck>(DeviceCheck::NAMES)
    )]
    device_check: Option<DeviceCheck>,
    /// Also write the per-kernel table as JSON lines to FILE (schema `kreplay-replay/1`,
    /// docs/replay-json.md).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Trace file to write.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "kreplay-replay.pftrace"
    )]
    output: PathBuf,
    /// Also attach the API probes (as `kreplay trace` does; needs root): the application's
    /// runtime calls go into the same trace, on ROCm with flows to their dispatches (on CUDA
    /// the tool's launch wrapper runs outside the probed call, so no flow is drawn); the calls
    /// kreplay makes itself while replaying go on each thread's "kreplay (replay)" track.
    #[arg(long)]
    probes: bool,
    /// Replay in the running process PID instead of a command (CUDA: any process, through
    /// CUPTI's launch callbacks, restoring the allocations the launch's arguments point into;
    /// ROCm: a process started with HSA_TOOLS_LIB=libkreplay_tool.so KREPLAY_ATTACH=1;
    /// docs/attach.md).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with_all = ["command", "probes"])]
    pid: Option<u32>,
    /// With -p: end the session after this long (else Ctrl-C or the process's exit).
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = kreplay_cli::duration::parse,
        requires = "pid",
        conflicts_with = "command"
    )]
    duration: Option<std::time::Duration>,
    /// The command (after `--`).
    #[arg(last = true, required_unless_present = "pid", value_name = "CMD")]
    command: Vec<String>,
}

/// A flag taking one of `names` (listed in `--help` and in clap's error), parsed as the tool
/// parses its variable.
fn choice<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|v| v.parse::<T>())
}

impl ReplayArgs {
    /// What the tool is told: these flags, the run's directory `dir` and its progress file.
    fn settings(&self, dir: &Path, progress: Option<&Path>) -> ReplaySettings {
        ReplaySettings {
            passes: Some(self.passes),
            kernel: self.kernel.clone(),
            max_dispatches: self.max_dispatches,
            // No flag: what the environment around `kreplay replay` says reaches the tool.
            check_determinism: None,
            chunk_size: self.chunk_size,
            restore: self.restore,
            snapshot_budget: self.snapshot_budget,
            snapshot_placement: self.snapshot_placement,
            device_check: self.device_check,
            output_dir: Some(dir.to_owned()),
            progress: progress.map(Path::to_owned),
            // The passes' dispatches and copies on the GPU tracks with the GPU's own times.
            gpu_timeline: Some(true),
        }
    }

    /// Refuses, before anything runs, what the tool would refuse and no flag's parser did
    /// (`--passes 0`, a `--kernel` that is not a regex), with the tool's reason, on one line.
    fn check(&self) -> Result<()> {
        match ReplaySettings::decode(self.settings(Path::new(""), None).encode()) {
            Ok(_) => Ok(()),
            Err(contract::ConfigError::Bad {
                setting,
                value,
                why,
            }) => bail!(
                "{} {value:?}: {why}",
                setting.flag().unwrap_or(setting.var())
            ),
            Err(e) => Err(e.into()),
        }
    }
}

/// Runs `kreplay replay`.
pub fn run(args: ReplayArgs) -> Result<u8> {
    args.check()?;
    if args.probes {
        // Checked here, not left to the `kreplay trace` that would attach them: its failure
        // would otherwise read as a command that never used a GPU runtime.
        kreplay_cli::preflight::check(&kreplay_cli::preflight::HostPaths::default())?;
    }
    let lib = files::tool_lib()?;
    let want = std::env::temp_dir().join(format!("kreplay-replay-{}", std::process::id()));
    // A process attached to with -p writes there as its own user.
    let mode = if args.pid.is_some() { 0o777 } else { 0o700 };
    let dir = output::fresh_dir(&want, mode)
        .with_context(|| format!("cannot create {}", want.display()))?;
    let result = run_in(&args, &lib, &dir);
    // What this run wrote there goes; a failed merge keeps the streams (its error says where).
    if result.is_ok() || files::krs_files(&dir).is_empty() {
        files::remove_run_files(&dir);
    }
    result
}

/// `kreplay replay` with its streams in `dir`, a directory this run created.
fn run_in(args: &ReplayArgs, lib: &Path, dir: &Path) -> Result<u8> {
    // With probes, `kreplay trace` starts the command (with this environment) and keeps the
    // probes' streams next to its own trace, in this run's directory.
    let probe_trace = dir.join(files::PROBES_TRACE);
    let kreplay = if args.probes {
        Some(std::env::current_exe().context("cannot locate the kreplay binary")?)
    } else {
        None
    };
    let progress = progress::Progress::create(dir);
    // The command to start (none with -p).
    let command = || {
        let plan = plan::plan(
            &args.command,
            lib,
            std::env::var("HSA_TOOLS_LIB").ok().as_deref(),
            std::env::var("LD_PRELOAD").ok().as_deref(),
            std::env::var_os(kreplay_cli::trace::nvtx::INJECTION_VAR).is_some(),
            kreplay.as_deref().map(|k| (k, probe_trace.as_path())),
        );
        let mut cmd = Command::new(&plan.program);
        cmd.args(&plan.args).envs(plan.env);
        cmd.envs(
            args.settings(dir, progress.as_ref().map(|p| p.path()))
                .encode(),
        );
        cmd
    };
    // As with `kreplay trace`: the first interrupt (Ctrl-C reaches the command, and the probes'
    // trace too) stops the run, which then writes its trace from what the command recorded;
    // the next one ends kreplay at once and says where the streams are.
    let kept = ending::kept_note(dir, &args.output);
    let (stopping, again) = ending::interrupt_notes(args.probes, &kept);
    let started = std::time::Instant::now();
    let status = if let Some(pid) = args.pid {
        quick_exit::arm_after_first(attach::STOPPING, &again);
        attach::run(pid, lib, &args.settings(dir, None), args.duration)?;
        std::os::unix::process::ExitStatusExt::from_raw(0)
    } else {
        quick_exit::arm_after_first(stopping, &again);
        command()
            .spawn()
            .and_then(|mut child| progress::wait(&mut child, progress.as_ref()))
            .with_context(|| format!("cannot run {}", args.command[0]))?
    };
    // The command (and the probes' trace) have ended, their probes detached: an interrupt
    // from here on ends kreplay at once (the merge's temporary file removed).
    quick_exit::arm(&ending::interrupted_note(&kept));
    let wall_ns = started.elapsed().as_nanos() as u64;
    let tool_files = files::krs_files(dir);
    let summary = Summary::read(&tool_files)?;
    if tool_files.is_empty() {
        eprintln!("{}", ending::NO_STREAM);
    } else {
        merge_streams(args, dir, &tool_files)?;
    }
    let totals = RunTotals {
        wall_ns,
        inside_ns: summary.inside_ns,
        kernel_filter: args
            .kernel
            .as_deref()
            .and_then(|k| contract::kernel_regex(k).ok()),
        max_dispatches: args.max_dispatches,
        passes: args.passes,
    };
    let rows = summary.finish();
    print!(
        "{}\n{}",
        table::render(&rows),
        table::footer(&rows, &totals)
    );
    if let Some(path) = &args.json {
        table::write_json(path, &rows, &totals)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ending::exit_code(status))
}

/// Renders the tool's streams `tool_files` (and with `--probes` the probes' beside them) into
/// the trace, and says what was written.
fn merge_streams(args: &ReplayArgs, dir: &Path, tool_files: &[PathBuf]) -> Result<()> {
    let probe_files = if args.probes {
        let (v, warning) = files::probe_streams(&dir.join(files::PROBES_STREAMS));
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        v
    } else {
        Vec::new()
    };
    let inputs: Vec<PathBuf> = tool_files.iter().chain(&probe_files).cloned().collect();
    if !args.probes {
        output::catch_interrupts();
    }
    let report = if args.probes {
        kreplay_cli::merge::merge_summarizing(&inputs, &args.output)
    } else {
        kreplay_cli::merge::merge(&inputs, &args.output)
    }
    .with_context(|| format!("rendering the trace (streams kept in {})", dir.display()))?;
    if args.probes {
        quick_exit::set_note(&ending::written_note(&args.output));
    }
    let probe_streams = args.probes.then_some(probe_files.len());
    eprint!(
        "{}",
        ending::merged_text(&report, &args.output, tool_files.len(), probe_streams)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReplayArgs,
    }

    fn parse(flags: &[&str]) -> Result<ReplayArgs, clap::Error> {
        let argv = ["replay"].iter().chain(flags).chain(&["--", "app"]);
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn a_pid_replaces_the_command_and_alone_takes_a_duration() {
        let argv = |v: &[&str]| Cli::try_parse_from(["replay"].iter().chain(v)).map(|c| c.args);
        let a = argv(&["-p", "4242", "--duration", "5s", "--passes", "3"]).unwrap();
        assert_eq!(
            (a.pid, a.duration, a.command.len()),
            (Some(4242), Some(std::time::Duration::from_secs(5)), 0)
        );
        // A command and a pid, a pid with --probes, a duration without a pid, or neither
        // a command nor a pid: refused.
        assert!(argv(&["-p", "4242", "--", "app"]).is_err());
        assert!(argv(&["-p", "4242", "--probes"]).is_err());
        assert!(argv(&["--duration", "5s", "--", "app"]).is_err());
        assert!(argv(&["--passes", "3"]).is_err());
    }

    #[test]
    fn flags_become_the_settings_the_tool_decodes() {
        let args = parse(&[
            "--passes",
            "5",
            "--kernel",
            "^gemm",
            "--max-dispatches",
            "20",
            "--chunk-size",
            "64K",
            "--restore",
            "dirty",
            "--snapshot-budget",
            "40960",
            "--snapshot-placement",
            "pinned",
            "--device-check",
            "compare",
        ])
        .unwrap();
        let s = args.settings(Path::new("/tmp/run"), Some(Path::new("/tmp/run/progress")));
        assert_eq!(
            s,
            ReplaySettings {
                passes: Some(5),
                kernel: Some("^gemm".into()),
                max_dispatches: Some(20),
                check_determinism: None,
                chunk_size: Some(65536),
                restore: Some(RestoreMode::Dirty),
                snapshot_budget: Some(40960),
                snapshot_placement: Some(SnapshotPlacement::Pinned),
                device_check: Some(DeviceCheck::Compare),
                output_dir: Some("/tmp/run".into()),
                progress: Some("/tmp/run/progress".into()),
                gpu_timeline: Some(true),
            }
        );
        let env: Vec<(&str, String)> = s
            .encode()
            .into_iter()
            .map(|(k, v)| (k, v.into_string().unwrap()))
            .collect();
        assert_eq!(
            env,
            [
                ("KREPLAY_PASSES", "5"),
                ("KREPLAY_KERNEL", "^gemm"),
                ("KREPLAY_MAX_DISPATCHES", "20"),
                ("KREPLAY_CHUNK_SIZE", "64K"),
                ("KREPLAY_RESTORE", "dirty"),
                ("KREPLAY_SNAPSHOT_BUDGET", "40K"),
                ("KREPLAY_SNAPSHOT_PLACEMENT", "pinned"),
                ("KREPLAY_DEVICE_CHECK", "compare"),
                ("KREPLAY_OUTPUT_DIR", "/tmp/run"),
                ("KREPLAY_PROGRESS", "/tmp/run/progress"),
                ("KREPLAY_GPU_TIMELINE", "1"),
            ]
            .map(|(k, v)| (k, v.to_owned()))
        );
        assert_eq!(ReplaySettings::decode(s.encode()), Ok(s));
        // Unset flags are not passed: the tool's defaults (or the caller's environment) apply.
        let s = parse(&[]).unwrap().settings(Path::new("/d"), None);
        assert_eq!(
            s.encode(),
            [
                ("KREPLAY_PASSES", "2".into()),
                ("KREPLAY_OUTPUT_DIR", "/d".into()),
                ("KREPLAY_GPU_TIMELINE", "1".into())
            ]
        );
    }

    #[test]
    fn bad_flags_are_refused_with_the_tools_reasons() {
        // What only the tool's decoder refuses: one line, a run error (exit 1).
        let check = |flags: &[&str]| parse(flags).unwrap().check().unwrap_err().to_string();
        assert_eq!(
            check(&["--passes", "0"]),
            r#"--passes "0": not an integer >= 1"#
        );
        assert_eq!(
            check(&["--kernel", "("]),
            r#"--kernel "(": not a valid regex: regex parse error:     (     ^ error: unclosed group"#
        );
        assert!(
            parse(&["--passes", "1", "--kernel", "^gemm$"])
                .unwrap()
                .check()
                .is_ok()
        );
        // What a flag's parser refuses: clap's usage error, with the tool's reason.
        for (flags, message) in [
            (
                &["--chunk-size", "3000"][..],
                "invalid value '3000' for '--chunk-size <SIZE>': not a power of two from 4K \
                 to 1G",
            ),
            (
                &["--snapshot-budget", "lots"],
                "invalid value 'lots' for '--snapshot-budget <SIZE>': not a size (bytes, or \
                 with K/M/G)",
            ),
            (
                &["--restore", "some"],
                "invalid value 'some' for '--restore <MODE>'\n  \
                 [possible values: auto, dirty, full]",
            ),
            (
                &["--snapshot-placement", "gpu"],
                "invalid value 'gpu' for '--snapshot-placement <WHERE>'\n  \
                 [possible values: auto, device, pinned, pageable]",
            ),
            (
                &["--device-check", "bytes"],
                "invalid value 'bytes' for '--device-check <HOW>'\n  \
                 [possible values: hash, compare]",
            ),
        ] {
            let e = parse(flags).unwrap_err();
            // The tool's parsers validate; clap itself checks a choice's name.
            let kind = if message.contains("possible values") {
                clap::error::ErrorKind::InvalidValue
            } else {
                clap::error::ErrorKind::ValueValidation
            };
            assert_eq!(e.kind(), kind, "{flags:?}");
            let text = e.to_string();
            let first = text.lines().take(3).collect::<Vec<_>>().join("\n");
            assert!(
                first.starts_with(&format!("error: {message}")),
                "{flags:?}: {text}"
            );
        }
    }
}
