//! `cargo xtask`: everything the README's two commands do, from a fresh machine.
//!
//! `cargo xtask demo` runs the main job; `cargo xtask test` runs every check CI runs. Both
//! start with `setup`, which installs what is missing (rust-src, bpf-linker, Debian and PyPI
//! packages) and skips what is there.
use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench;
mod bench_phases;
mod demo;
mod fuzz;
mod gpu;
mod paired;
mod run;
mod setup;
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
    /// Run every benchmark and write docs/bench/NAME.md (run as root).
    Bench {
        /// Name of the results file (e.g. the machine: dev-vm, h200).
        #[arg(long, default_value = "dev-vm")]
        name: String,
        /// Run only these sections (repeatable): probe, replay-phases (only when named), or a
        /// cargo bench name.
        #[arg(long)]
        only: Vec<String>,
    },
    /// Build the binaries the GPU machine runs into .gpu-carry/ and, where an NVIDIA GPU is
    /// present, run tests/gpu/run.sh and tests/gpu/replay.sh.
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
