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
        .with_ansi(kreplay_common::color::stderr_wants_color())
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
            eprintln!("kreplay: error: {}", one_line(&err));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, outermost first; a cause whose text its parent
/// already ends with (errors that format their source into their message) is said once.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain().map(|e| e.to_string()) {
        if !line.ends_with(&cause) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&cause);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_cause_already_in_its_parent_message_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let text = io.to_string();
        #[derive(Debug, thiserror::Error)]
        #[error("cannot listen: {source}")]
        struct Bind {
            source: std::io::Error,
        }
        let err = anyhow::Error::new(Bind { source: io }).context("--prometheus 127.0.0.1:1");
        assert_eq!(
            one_line(&err),
            format!("--prometheus 127.0.0.1:1: cannot listen: {text}")
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&plain), "outer: inner");
    }
}
