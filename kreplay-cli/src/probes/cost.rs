//! The probes' own run time, from the kernel's BPF statistics (`--bpf-stats` of `trace` and
//! `probe`): how much of a probed call's cost is spent inside kreplay's programs, as opposed to
//! the uprobe trap and uretprobe machinery that any probe pays.
use std::os::fd::OwnedFd;

use crate::{
    audit::maps::{enable_run_time_stats, program_runs},
    probes::loader::{Probes, Programs},
};

/// Statistics switched on for as long as this lives (the kernel's counting adds two clock reads
/// to every program run, so measure cost with it and time calls without it).
pub struct ProgramCost {
    _fd: OwnedFd,
    programs: Programs,
}

impl ProgramCost {
    /// Turns statistics on for `programs`; `None` (a warning is logged) when the kernel refuses.
    pub fn start(programs: Programs) -> Option<ProgramCost> {
        enable_run_time_stats().map(|fd| ProgramCost { _fd: fd, programs })
    }

    /// One line for stderr: runs and mean ns per run of the entry and return programs.
    pub fn report(&self, probes: &Probes) -> String {
        let [entry, ret] = self.programs.names();
        match program_runs(probes.ebpf(), [entry, ret]) {
            Ok([e, r]) => format!(
                "bpf program time: {entry} {:.0} ns/run ({} runs), {ret} {:.0} ns/run ({} runs)",
                per_run(e.run_time_ns, e.run_count),
                e.run_count,
                per_run(r.run_time_ns, r.run_count),
                r.run_count
            ),
            Err(e) => format!("bpf program time: unavailable ({e})"),
        }
    }
}

fn per_run(ns: u64, runs: u64) -> f64 {
    if runs == 0 {
        0.0
    } else {
        ns as f64 / runs as f64
    }
}

#[cfg(test)]
mod tests {
    use super::per_run;

    #[test]
    fn per_run_divides_and_survives_no_runs() {
        assert_eq!(per_run(3000, 4), 750.0);
        assert_eq!(per_run(5, 0), 0.0);
    }
}
