//! Following a process tree (`kreplay trace -- CMD`, `-p PID --children`): the recording
//! programs skip processes outside the followed set, which two raw tracepoints keep in the
//! kernel (a child is added at its fork, before it runs; a process leaves once freed). The BPF
//! side is `kreplay-ebpf/src/follow.rs`.
use std::path::Path;

use aya::{Ebpf, EbpfLoader, maps::HashMap as BpfHashMap, programs::RawTracePoint};
use kreplay_common::probe::{
    FOLLOW_GLOBAL, FORK_PROGRAM, FREE_PROGRAM, TASK_PID_GLOBAL, TASK_TGID_GLOBAL, TRACED_MAP,
};

use super::btf::{VMLINUX_BTF, task_pid_tgid_offsets};
use super::loader::ProbeError;

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
    pub fn for_this_kernel() -> Result<TreeFilter, ProbeError> {
        let offsets = task_pid_tgid_offsets(Path::new(VMLINUX_BTF))
            .map_err(|e| ProbeError::Follow(e.to_string()))?;
        Ok(TreeFilter { offsets })
    }

    /// Turns the filter on in the object `loader` is about to load.
    pub fn configure<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader.override_global(FOLLOW_GLOBAL, &1u32, true);
        loader.override_global(TASK_PID_GLOBAL, &self.offsets.0, true);
        loader.override_global(TASK_TGID_GLOBAL, &self.offsets.1, true);
    }
}

/// Loads and attaches the two tracepoint programs of `bpf`.
pub fn start(bpf: &mut Ebpf) -> Result<(), ProbeError> {
    for (name, tracepoint) in TRACEPOINTS {
        let what = || format!("{name} on {tracepoint}");
        let prog: &mut RawTracePoint = bpf
            .program_mut(name)
            .ok_or_else(|| ProbeError::Follow(format!("{}: not in the object", what())))?
            .try_into()
            .map_err(|source| ProbeError::Program {
                what: what(),
                source,
            })?;
        prog.load().map_err(|source| ProbeError::Program {
            what: format!("loading {}", what()),
            source,
        })?;
        prog.attach(tracepoint)
            .map_err(|source| ProbeError::Program {
                what: format!("attaching {}", what()),
                source,
            })?;
    }
    Ok(())
}

fn traced(bpf: &mut Ebpf) -> Result<BpfHashMap<&mut aya::maps::MapData, u32, u8>, ProbeError> {
    let map = bpf
        .map_mut(TRACED_MAP)
        .ok_or(ProbeError::MissingMap(TRACED_MAP))?;
    BpfHashMap::try_from(map).map_err(|source| ProbeError::Map {
        name: TRACED_MAP,
        source,
    })
}

/// Adds process `tgid` to the followed set.
pub fn add(bpf: &mut Ebpf, tgid: u32) -> Result<(), ProbeError> {
    traced(bpf)?
        .insert(tgid, 1, 0)
        .map_err(|source| ProbeError::Map {
            name: TRACED_MAP,
            source,
        })
}

/// The processes followed now, in pid order.
pub fn followed(bpf: &mut Ebpf) -> Result<Vec<u32>, ProbeError> {
    let map = traced(bpf)?;
    let mut out: Vec<u32> = map.keys().filter_map(Result::ok).collect();
    out.sort_unstable();
    Ok(out)
}
