//! `cargo xtask`: everything the README's two commands do, from a fresh machine.
//!
//! `cargo xtask demo` runs the main job; `cargo xtask test` runs every check CI runs. Both
//! start with `setup`, which installs what is missing (rust-src, bpf-linker, Debian and PyPI
//! packages) and skips what is there.
use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench;
mod bench_discovery;
mod bench_exit;
mod bench_gpu;
mod bench_phases;
mod demo;
mod fuzz;
mod gpu;
mod numbers;
mod paired;
mod run;
mod setup;
mod soak;
mod test;

/// kreplay's build orchestration.
#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what building and testing need (idempotent).
    Setup,
    /// Set up, then build the whole workspace and the simulated ROCm runtime.
    Build,
    /// Set up, build, and run the main job end to end.
    Demo,
    /// Set up, build, then fmt check, clippy and every test (what CI runs).
    Test,
    /// Run every benchmark (or those named by --only) and write docs/bench/NAME.md (run as
    /// root). The committed results are one file per benchmark, each rewritten by its own
    /// command, e.g. `--only probe --name probe-cost`, `--only contention --name contention`.
    Bench {
        /// Name of the results file, docs/bench/NAME.md.
        #[arg(long, default_value = "dev-vm")]
        name: String,
        /// Run only these sections (repeatable): probe, discovery, replay-phases, trace-exit and
        /// gpu-timeline (only when named), or a cargo bench name.
        #[arg(long)]
        only: Vec<String>,
    },
    /// Long runs of trace, audit and replay (not in CI): kreplay's memory and descriptors over
    /// time, judged flat or leaking, written to docs/bench/soak.md (run as root).
    Soak {
        /// Minutes of the trace and audit soaks.
        #[arg(long, default_value_t = 30)]
        minutes: u64,
        /// Run only this soak (repeatable).
        #[arg(long, value_enum)]
        only: Vec<soak::Soak>,
        /// Calls per second of the trace and audit soaks' workload.
        #[arg(long, default_value_t = 220_000)]
        rate: u64,
        /// Already inside the soak's PID namespace (set by the soak itself).
        #[arg(long, hide = true)]
        inside: bool,
    },
    /// Build the binaries the GPU machine runs into .gpu-carry/ and, where an NVIDIA GPU is
    /// present, run the scripts of tests/gpu/ (run.sh, replay.sh, restore_matrix.sh,
    /// probe_overhead.sh, replay_cost.sh, replay_vs_ncu.sh); their results are in docs/gpu/.
    GpuTest {
        /// Only build and copy into .gpu-carry/.
        #[arg(long)]
        build_only: bool,
    },
}

fn main() -> std::process::ExitCode {
    match dispatch(Cli::parse().command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("xtask: error: {}", chain.join(": "));
            std::process::ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Cmd) -> Result<()> {
    match command {
        Cmd::Setup => setup::all(),
        Cmd::Build => {
            setup::all()?;
            run::build_all()
        }
        Cmd::Demo => {
            setup::all()?;
            run::build_all()?;
            demo::run()
        }
        Cmd::Bench { name, only } => {
            setup::all()?;
            run::build_all()?;
            bench::run(&name, &only)
        }
        Cmd::Soak {
            minutes,
            only,
            rate,
            inside,
        } => {
            let opts = soak::Options {
                minutes,
                only,
                rate,
            };
            if inside {
                soak::inside(&opts)
            } else {
                setup::all()?;
                run::build_all()?;
                soak::run(&opts)
            }
        }
        Cmd::GpuTest { build_only } => {
            setup::all()?;
            gpu::run(build_only)
        }
        Cmd::Test => {
            setup::all()?;
            run::build_all()?;
            test::run()
        }
    }
}
