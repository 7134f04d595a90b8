//! The running totals of one audit: the kernel's per-(pid, API) aggregates read periodically,
//! kept after their processes exit (and then removed from the kernel map, so it stays
//! bounded), and turned into interval and final reports.
use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    time::Instant,
};

use crate::probes::loader::Probes;
use kreplay_common::audit::{AuditKey, AuditStats};

use super::{
    maps::{self, AUDIT_PROGRAMS, AuditMapError, Lost, ProgramRuns},
    prometheus::{Exposition, LabelCap},
    report::{self, Overhead, Report, ReportKind},
};
use crate::trace::capture::process_name;

/// Totals and bookkeeping of one audit.
pub struct Session {
    started: Instant,
    stats_on: bool,
    totals: BTreeMap<AuditKey, AuditStats>,
    carried: BTreeMap<AuditKey, AuditStats>,
    /// The kernel's aggregates at the previous refresh.
    last_read: BTreeMap<AuditKey, AuditStats>,
    at_last_report: BTreeMap<AuditKey, AuditStats>,
    last_report: Instant,
    comms: HashMap<u32, String>,
    runs_start: [ProgramRuns; 2],
    runs_last_report: [ProgramRuns; 2],
    runs_now: [ProgramRuns; 2],
    lost: Lost,
    top: Option<usize>,
}

impl Session {
    /// Starts the books; `stats_on` says whether BPF statistics are enabled.
    pub fn new(probes: &Probes, stats_on: bool, top: Option<usize>) -> Session {
        let runs = probes.program_runs(AUDIT_PROGRAMS).unwrap_or_default();
        let now = Instant::now();
        Session {
            started: now,
            stats_on,
            totals: BTreeMap::new(),
            carried: BTreeMap::new(),
            last_read: BTreeMap::new(),
            at_last_report: BTreeMap::new(),
            last_report: now,
            comms: HashMap::new(),
            runs_start: runs,
            runs_last_report: runs,
            runs_now: runs,
            lost: Lost::default(),
            top,
        }
    }

    /// Reads the kernel maps; entries of processes that have exited are kept here and
    /// removed from the kernel.
    pub fn refresh(&mut self, probes: &mut Probes) -> Result<(), AuditMapError> {
        self.runs_now = probes.program_runs(AUDIT_PROGRAMS).unwrap_or(self.runs_now);
        let bpf = probes.ebpf_mut();
        let mut live = maps::read_stats(bpf)?;
        for k in live.keys() {
            let alive = Path::new(&format!("/proc/{}", k.pid)).exists();
            if let std::collections::hash_map::Entry::Vacant(slot) = self.comms.entry(k.pid) {
                // /proc's name (the main thread's) while the process lives, else the name
                // the programs saw at its first call.
                let from_proc = alive.then(|| process_name(k.pid));
                let name = match (from_proc, maps::kernel_comm(bpf, k.pid)) {
                    (Some(p), Some(c)) if p.starts_with("pid ") => c,
                    (Some(p), _) => p,
                    (None, Some(c)) => c,
                    (None, None) => format!("pid {}", k.pid),
                };
                slot.insert(name);
            }
        }
        let gone = settled(&self.last_read, &live, |pid| {
            Path::new(&format!("/proc/{pid}")).exists()
        });
        if !gone.is_empty() {
            // Their totals move to `carried`; a later process reusing the pid starts from
            // zero in the kernel and its counts add to the earlier one's (documented).
            maps::forget(bpf, &gone)?;
            for k in &gone {
                if let Some(s) = live.remove(k) {
                    self.carried.entry(*k).or_insert(AuditStats::ZERO).add(&s);
                }
            }
        }
        let mut totals = self.carried.clone();
        for (k, s) in &live {
            totals.entry(*k).or_insert(AuditStats::ZERO).add(s);
        }
        self.last_read = live;
        self.totals = totals;
        self.lost = maps::read_lost(bpf)?;
        Ok(())
    }

    /// The report since the previous one (interval) or since the start (final).
    pub fn report(&mut self, kind: ReportKind) -> Report {
        let now = Instant::now();
        let (window, base, runs_base) = match kind {
            ReportKind::Interval => (
                now - self.last_report,
                &self.at_last_report,
                self.runs_last_report,
            ),
            ReportKind::Final => (now - self.started, &BTreeMap::new(), self.runs_start),
        };
        let window_s = window.as_secs_f64();
        let delta: BTreeMap<AuditKey, AuditStats> = self
            .totals
            .iter()
            .map(|(k, s)| (*k, base.get(k).map_or(*s, |b| s.since(b))))
            .collect();
        let mut processes = report::processes(&delta, &self.comms, window_s);
        let omitted = match self.top {
            Some(n) if processes.len() > n => {
                let extra = processes.len() - n;
                processes.truncate(n);
                extra
            }
            _ => 0,
        };
        let r = Report {
            kind,
            elapsed_s: (now - self.started).as_secs_f64(),
            window_s,
            processes,
            omitted,
            lost: self.lost,
            overhead: Overhead::between(self.stats_on, runs_base, self.runs_now),
        };
        if kind == ReportKind::Interval {
            self.at_last_report = self.totals.clone();
            self.last_report = now;
            self.runs_last_report = self.runs_now;
        }
        r
    }

    /// The `/metrics` text of the totals so far.
    pub fn exposition(&self, cap: &mut LabelCap) -> String {
        let o = Overhead::between(self.stats_on, self.runs_start, self.runs_now);
        super::prometheus::render(
            &Exposition {
                totals: &self.totals,
                comms: &self.comms,
                bpf: self
                    .stats_on
                    .then_some((o.bpf_run_time_ns, o.intercepted_calls)),
                lost: self.lost,
            },
            cap,
        )
    }
}

/// The entries to move out of the kernel: those of processes that have exited *and* whose
/// totals did not change since the previous read, so that they are final. An entry the
/// programs still update is never removed, even when `/proc` says its process is gone (the
/// audit in another PID namespace than its targets sees other pids there): removing it would
/// lose the calls made between the read and the removal. An exited process's entry therefore
/// leaves one refresh after its last call; its totals stay counted either way.
fn settled(
    previous: &BTreeMap<AuditKey, AuditStats>,
    now: &BTreeMap<AuditKey, AuditStats>,
    alive: impl Fn(u32) -> bool,
) -> Vec<AuditKey> {
    now.iter()
        .filter(|(k, s)| !alive(k.pid) && previous.get(k) == Some(*s))
        .map(|(k, _)| *k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(count: u64) -> AuditStats {
        AuditStats {
            count,
            ..AuditStats::ZERO
        }
    }

    #[test]
    fn only_exited_processes_with_final_totals_leave_the_kernel() {
        let key = |pid| AuditKey { pid, api: 3 };
        let previous =
            BTreeMap::from([(key(1), stats(10)), (key(2), stats(10)), (key(3), stats(5))]);
        // pid 1: gone, unchanged → final. pid 2: "gone" but still counting → kept.
        // pid 3: alive and unchanged → kept. pid 4: gone, first seen now → kept until the
        // next read confirms it.
        let now = BTreeMap::from([
            (key(1), stats(10)),
            (key(2), stats(12)),
            (key(3), stats(5)),
            (key(4), stats(7)),
        ]);
        assert_eq!(settled(&previous, &now, |pid| pid == 3), vec![key(1)]);
        assert_eq!(
            settled(&now, &now, |pid| pid == 3),
            vec![key(1), key(2), key(4)]
        );
    }
}
