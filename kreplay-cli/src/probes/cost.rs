//! The probes' own run time, from the kernel's BPF statistics (`--bpf-stats` of `trace` and
//! `probe`): how much of a probed call's cost is spent inside kreplay's programs, as opposed to
//! the uprobe trap and uretprobe machinery that any probe pays; and the reader's CPU time per
//! record, which a traced process pays indirectly wherever cores are scarce.
use std::os::fd::OwnedFd;

use crate::{
    audit::maps::enable_run_time_stats,
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
        match probes.program_runs([entry, ret]) {
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

    /// One line for stderr on the check `--all` makes on every executable file mapping, when
    /// it is loaded.
    pub fn report_map_hook(&self, probes: &Probes) -> Option<String> {
        let (ns, runs) = probes.map_hook_runs()?;
        Some(format!(
            "bpf program time: {} {:.0} ns/run ({runs} runs)",
            kreplay_common::probe::discovery::MAP_PROGRAM,
            per_run(ns, runs)
        ))
    }
}

/// CPU time the calling thread has used so far, in ns (0 if the clock cannot be read).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given, which lives on this stack.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The summary's line on the reader's CPU time draining the rings (decoding, the summary,
/// writing the stream files; not attaching probes to libraries met on the way), total and per
/// record, and how many reader wake-ups the probes forced.
pub fn reader_cpu_line(cpu_ns: u64, records: u64, wakeups: u64) -> String {
    format!(
        "reader cpu: {:.0} ns per event ({records} events, {:.1} ms), {wakeups} forced wake-ups",
        per_run(cpu_ns, records),
        cpu_ns as f64 / 1e6
    )
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
    use super::{per_run, reader_cpu_line, thread_cpu_ns};

    #[test]
    fn per_run_divides_and_survives_no_runs() {
        assert_eq!(per_run(3000, 4), 750.0);
        assert_eq!(per_run(5, 0), 0.0);
    }

    #[test]
    fn reader_cpu_line_gives_ns_per_event_and_total_ms() {
        assert_eq!(
            reader_cpu_line(150_000_000, 1_000_000, 3),
            "reader cpu: 150 ns per event (1000000 events, 150.0 ms), 3 forced wake-ups"
        );
        assert_eq!(
            reader_cpu_line(2_500_000, 0, 0),
            "reader cpu: 0 ns per event (0 events, 2.5 ms), 0 forced wake-ups"
        );
    }

    #[test]
    fn thread_cpu_time_grows_with_this_threads_work_only() {
        let before = thread_cpu_ns();
        assert!(before > 0, "CLOCK_THREAD_CPUTIME_ID unreadable");
        let spin = || {
            let mut x = 0u64;
            for _ in 0..2_000_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        };
        // Another thread's work is not this thread's time: two million dependent multiply-adds
        // take a millisecond or so of CPU.
        std::thread::spawn(spin).join().unwrap();
        let after_other = thread_cpu_ns();
        spin();
        let after_own = thread_cpu_ns();
        assert!(after_own >= after_other + 100_000);
        assert!(after_other - before < after_own - after_other);
    }
}
