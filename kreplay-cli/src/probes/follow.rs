//! Following a process tree (`kreplay trace -- CMD`, `-p PID --children`): the recording
//! programs skip processes outside the followed set, which two raw tracepoints keep in the
//! kernel (a child is added at its fork, before it runs; a process leaves once freed). The BPF
//! side is `kreplay-ebpf/src/follow.rs`.
use std::path::Path;

use aya::{Ebpf, EbpfLoader, maps::HashMap as BpfHashMap, programs::RawTracePoint};
use kreplay_common::probe::{
    FOLLOW_GLOBAL, FORK_PROGRAM, FREE_PROGRAM, LOADER_PROGRAM, TASK_PID_GLOBAL, TASK_TGID_GLOBAL,
    TRACED_MAP,
};

use super::btf::{VMLINUX_BTF, task_pid_tgid_offsets};

/// Errors setting up or reading the process-tree filter.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The kernel's layout could not be read, or the object lacks a part.
    #[error("{0}")]
    Setup(String),
    /// A program could not be loaded or attached.
    #[error("{what}: {source}")]
    Program {
        /// What was being done.
        what: String,
        /// The loader's error.
        source: aya::programs::ProgramError,
    },
    /// The set of followed processes could not be read or written.
    #[error("BPF map {TRACED_MAP}: {0}")]
    Map(#[from] aya::maps::MapError),
}

/// The tracepoints the programs run on, (program, tracepoint).
const TRACEPOINTS: [(&str, &str); 2] = [
    (FORK_PROGRAM, "sched_process_fork"),
    (FREE_PROGRAM, "sched_process_free"),
];

/// The `task_struct` offsets the programs need, from the kernel's BTF.
pub struct TreeFilter {
    offsets: (u32, u32),
}

impl TreeFilter {
    /// Reads the offsets from the running kernel's BTF.
    pub fn for_this_kernel() -> Result<TreeFilter, FollowError> {
        let offsets = task_pid_tgid_offsets(Path::new(VMLINUX_BTF))
            .map_err(|e| FollowError::Setup(e.to_string()))?;
        Ok(TreeFilter { offsets })
    }

    /// Turns the filter on in the object `loader` is about to load.
    pub fn configure<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader.override_global(FOLLOW_GLOBAL, &1u32, true);
        loader.override_global(TASK_PID_GLOBAL, &self.offsets.0, true);
        loader.override_global(TASK_TGID_GLOBAL, &self.offsets.1, true);
    }
}

/// Loads the loader-hook program and loads and attaches the two tracepoint programs of `bpf`.
pub fn start(bpf: &mut Ebpf) -> Result<(), FollowError> {
    let hook: &mut aya::programs::UProbe = bpf
        .program_mut(LOADER_PROGRAM)
        .ok_or_else(|| FollowError::Setup(format!("{LOADER_PROGRAM}: not in the object")))?
        .try_into()
        .map_err(|source| FollowError::Program {
            what: LOADER_PROGRAM.to_string(),
            source,
        })?;
    hook.load().map_err(|source| FollowError::Program {
        what: format!("loading {LOADER_PROGRAM}"),
        source,
    })?;
    for (name, tracepoint) in TRACEPOINTS {
        let what = || format!("{name} on {tracepoint}");
        let prog: &mut RawTracePoint = bpf
            .program_mut(name)
            .ok_or_else(|| FollowError::Setup(format!("{}: not in the object", what())))?
            .try_into()
            .map_err(|source| FollowError::Program {
                what: what(),
                source,
            })?;
        prog.load().map_err(|source| FollowError::Program {
            what: format!("loading {}", what()),
            source,
        })?;
        prog.attach(tracepoint)
            .map_err(|source| FollowError::Program {
                what: format!("attaching {}", what()),
                source,
            })?;
    }
    Ok(())
}

fn traced(bpf: &mut Ebpf) -> Result<BpfHashMap<&mut aya::maps::MapData, u32, u8>, FollowError> {
    let map = bpf.map_mut(TRACED_MAP).ok_or_else(|| {
        FollowError::Setup(format!("BPF map {TRACED_MAP} missing from the object"))
    })?;
    Ok(BpfHashMap::try_from(map)?)
}

/// Adds process `tgid` to the followed set.
pub fn add(bpf: &mut Ebpf, tgid: u32) -> Result<(), FollowError> {
    Ok(traced(bpf)?.insert(tgid, 1, 0)?)
}

/// The processes followed now, in pid order.
pub fn followed(bpf: &mut Ebpf) -> Result<Vec<u32>, FollowError> {
    let map = traced(bpf)?;
    let mut out: Vec<u32> = map.keys().filter_map(Result::ok).collect();
    out.sort_unstable();
    Ok(out)
}
