//! `kreplay`: trace GPU runtime calls with eBPF uprobes, replay kernels, audit fleets.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// kreplay — GPU runtime tracing and kernel replay for AMD (HSA/HIP) and NVIDIA (CUDA).
///
/// Probes attach to the runtime libraries a process really maps, without restarting it.
/// Most subcommands need root (CAP_BPF and CAP_PERFMON). Logs go to stderr; set RUST_LOG
/// (e.g. RUST_LOG=kreplay=debug) for more.
#[derive(Parser, Debug)]
#[command(name = "kreplay", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Record every GPU runtime call of processes or of a command into a Perfetto trace.
    Trace(cmd::trace::TraceArgs),
    /// Attach a uprobe and uretprobe to one function of one library and print every call.
    Probe(cmd::probe::ProbeArgs),
    /// Run a command with its kernels replayed N times (snapshot/restore between passes).
    Replay(cmd::replay::ReplayArgs),
    /// Merge stream files of the tool and the probes into one Perfetto trace.
    Merge(cmd::merge::MergeArgs),
    /// Per-process GPU runtime call latencies, aggregated in the kernel (tables, JSON, Prometheus).
    Audit(cmd::audit::AuditArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(args) => cmd::trace::run(args),
        Command::Probe(args) => cmd::probe::run(args),
        Command::Replay(args) => cmd::replay::run(args),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Audit(args) => cmd::audit::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // One line: the error and its causes, outermost first.
            let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
            eprintln!("kreplay: error: {}", chain.join(": "));
            ExitCode::from(1)
        }
    }
}
