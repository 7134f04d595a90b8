//! Reading the audit programs' maps and the kernel's run-time statistics of the programs.
use std::{collections::BTreeMap, os::fd::OwnedFd};

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, PerCpuArray, PerCpuHashMap},
    programs::UProbe,
};
use kreplay_common::audit::{
    AUDIT_COMMS_MAP, AUDIT_COUNTERS_MAP, AUDIT_ENTRY_PROGRAM, AUDIT_RETURN_PROGRAM,
    AUDIT_STATS_MAP, AuditKey, AuditStats, audit_counter,
};

/// Errors reading the audit maps.
#[derive(Debug, thiserror::Error)]
pub enum AuditMapError {
    /// The object lacks a map or program.
    #[error("{0} missing from the BPF object")]
    Missing(&'static str),
    /// A map call failed.
    #[error("BPF map {name}: {source}")]
    Map {
        /// The map.
        name: &'static str,
        /// The loader's error.
        source: aya::maps::MapError,
    },
    /// Reading program information failed.
    #[error("bpf_prog_get_info_by_fd({name}): {source}")]
    Info {
        /// The program.
        name: &'static str,
        /// The loader's error.
        source: aya::programs::ProgramError,
    },
}

fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> AuditMapError {
    move |source| AuditMapError::Map { name, source }
}

/// Every (pid, API) aggregate in the kernel, summed over CPUs.
pub fn read_stats(bpf: &Ebpf) -> Result<BTreeMap<AuditKey, AuditStats>, AuditMapError> {
    let map = bpf
        .map(AUDIT_STATS_MAP)
        .ok_or(AuditMapError::Missing(AUDIT_STATS_MAP))?;
    let stats: PerCpuHashMap<_, AuditKey, AuditStats> =
        PerCpuHashMap::try_from(map).map_err(map_err(AUDIT_STATS_MAP))?;
    let mut out = BTreeMap::new();
    for item in stats.iter() {
        let (key, per_cpu) = match item {
            Ok(kv) => kv,
            // An entry removed between listing the keys and reading it.
            Err(aya::maps::MapError::KeyNotFound) => continue,
            Err(e) => return Err(map_err(AUDIT_STATS_MAP)(e)),
        };
        let mut sum = AuditStats::ZERO;
        for cpu in per_cpu.iter() {
            sum.add(cpu);
        }
        out.insert(key, sum);
    }
    Ok(out)
}

/// The command name the audit programs saw for `pid`, if any.
pub fn kernel_comm(bpf: &Ebpf, pid: u32) -> Option<String> {
    let comms: BpfHashMap<_, u32, [u8; 16]> =
        BpfHashMap::try_from(bpf.map(AUDIT_COMMS_MAP)?).ok()?;
    let raw = comms.get(&pid, 0).ok()?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Some(String::from_utf8_lossy(&raw[..end]).into_owned())
}

/// Removes the entries of processes that have exited (their totals were read before).
pub fn forget(bpf: &mut Ebpf, keys: &[AuditKey]) -> Result<(), AuditMapError> {
    if let Some(map) = bpf.map_mut(AUDIT_COMMS_MAP)
        && let Ok(mut comms) = BpfHashMap::<_, u32, [u8; 16]>::try_from(map)
    {
        for k in keys {
            let _ = comms.remove(&k.pid);
        }
    }
    let map = bpf
        .map_mut(AUDIT_STATS_MAP)
        .ok_or(AuditMapError::Missing(AUDIT_STATS_MAP))?;
    let mut stats: PerCpuHashMap<_, AuditKey, AuditStats> =
        PerCpuHashMap::try_from(map).map_err(map_err(AUDIT_STATS_MAP))?;
    for k in keys {
        match stats.remove(k) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
            Err(e) => return Err(map_err(AUDIT_STATS_MAP)(e)),
        }
    }
    Ok(())
}

/// Calls the audit programs could not account, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Entry times not saved: the in-flight map was full.
    pub starts_full: u64,
    /// Returns without a saved entry time (attached mid-call, evicted).
    pub missing_entry: u64,
    /// Calls not counted: the stats map was full.
    pub stats_full: u64,
}

/// Reads the audit loss counters.
pub fn read_lost(bpf: &Ebpf) -> Result<Lost, AuditMapError> {
    let map = bpf
        .map(AUDIT_COUNTERS_MAP)
        .ok_or(AuditMapError::Missing(AUDIT_COUNTERS_MAP))?;
    let arr: PerCpuArray<_, u64> =
        PerCpuArray::try_from(map).map_err(map_err(AUDIT_COUNTERS_MAP))?;
    let mut sums = [0u64; audit_counter::COUNT as usize];
    for (i, sum) in sums.iter_mut().enumerate() {
        *sum = arr
            .get(&(i as u32), 0)
            .map_err(map_err(AUDIT_COUNTERS_MAP))?
            .iter()
            .sum();
    }
    Ok(Lost {
        starts_full: sums[audit_counter::STARTS_FULL as usize],
        missing_entry: sums[audit_counter::MISSING_ENTRY as usize],
        stats_full: sums[audit_counter::STATS_FULL as usize],
    })
}

/// Run time and run count of one loaded program (BPF statistics must be enabled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramRuns {
    /// Total ns the program ran.
    pub run_time_ns: u64,
    /// Number of runs.
    pub run_count: u64,
}

/// Reads the kernel's statistics of the (entry, return) programs named.
pub fn program_runs(
    bpf: &Ebpf,
    names: [&'static str; 2],
) -> Result<[ProgramRuns; 2], AuditMapError> {
    let mut out = [ProgramRuns::default(); 2];
    for (slot, name) in out.iter_mut().zip(names) {
        let prog: &UProbe = bpf
            .program(name)
            .ok_or(AuditMapError::Missing(name))?
            .try_into()
            .map_err(|source| AuditMapError::Info { name, source })?;
        let info = prog
            .info()
            .map_err(|source| AuditMapError::Info { name, source })?;
        *slot = ProgramRuns {
            run_time_ns: info.run_time().as_nanos() as u64,
            run_count: info.run_count(),
        };
    }
    Ok(out)
}

/// The audit programs' names, (entry, return).
pub const AUDIT_PROGRAMS: [&str; 2] = [AUDIT_ENTRY_PROGRAM, AUDIT_RETURN_PROGRAM];

/// Turns on the kernel's BPF run-time statistics for as long as the returned fd lives
/// (BPF_ENABLE_STATS: the kernel turns them off again when the last such fd closes, even if
/// kreplay is killed). `None`, with a warning logged, when the kernel refuses.
pub fn enable_run_time_stats() -> Option<OwnedFd> {
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::warn!(error = %e, "BPF_ENABLE_STATS failed: kreplay's own cost will not be measured");
            None
        }
    }
}
