//! The audit in the Prometheus text exposition format (version 0.0.4), with bounded label
//! cardinality: at most `max_pids` processes get their own series; later ones are folded into
//! one overflow series (`pid="other"`, `comm="other"`) and counted.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt::Write as _,
};

use kreplay_common::{
    api::spec_of,
    audit::{AuditKey, AuditStats, HIST_BUCKETS, bucket_upper_ns},
};

use super::{maps::Lost, report::layer_of};

/// Which processes have series of their own.
#[derive(Debug)]
pub struct LabelCap {
    max_pids: usize,
    labelled: BTreeSet<u32>,
    overflow: BTreeSet<u32>,
}

impl LabelCap {
    /// A cap of `max_pids` labelled processes.
    pub fn new(max_pids: usize) -> Self {
        LabelCap {
            max_pids,
            labelled: BTreeSet::new(),
            overflow: BTreeSet::new(),
        }
    }

    /// Whether `pid` has its own series; the first `max_pids` processes seen do, for good
    /// (a process never moves between series, so every counter stays monotonic).
    pub fn labelled(&mut self, pid: u32) -> bool {
        if self.labelled.contains(&pid) {
            return true;
        }
        if self.overflow.contains(&pid) {
            return false;
        }
        if self.labelled.len() < self.max_pids {
            self.labelled.insert(pid);
            true
        } else {
            self.overflow.insert(pid);
            false
        }
    }

    /// Processes folded into the overflow series.
    pub fn dropped(&self) -> usize {
        self.overflow.len()
    }
}

/// Escapes a label value (backslash, double quote, newline).
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// What `/metrics` shows: cumulative totals since the audit started.
pub struct Exposition<'a> {
    /// Per (pid, API) totals.
    pub totals: &'a BTreeMap<AuditKey, AuditStats>,
    /// Command names.
    pub comms: &'a HashMap<u32, String>,
    /// Total run time of the audit programs in ns, and their runs (return program).
    pub bpf: Option<(u64, u64)>,
    /// Uncounted calls.
    pub lost: Lost,
}

/// `2^k` ns in seconds, as the shortest decimal that round-trips.
fn le_seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

/// Renders the exposition, assigning labels through `cap`.
pub fn render(e: &Exposition<'_>, cap: &mut LabelCap) -> String {
    let mut series: BTreeMap<(String, &'static str, &'static str), (String, AuditStats)> =
        BTreeMap::new();
    for (k, s) in e.totals {
        let Some(spec) = spec_of(k.api as u16) else {
            continue;
        };
        let (pid, comm) = if cap.labelled(k.pid) {
            (
                k.pid.to_string(),
                e.comms.get(&k.pid).cloned().unwrap_or_default(),
            )
        } else {
            ("other".to_string(), "other".to_string())
        };
        let entry = series
            .entry((pid, spec.name, layer_of(spec.library)))
            .or_insert_with(|| (comm, AuditStats::ZERO));
        entry.1.add(s);
    }
    let mut out = String::with_capacity(4096 + series.len() * 2048);
    out.push_str(
        "# HELP kreplay_audit_call_duration_seconds Latency of GPU runtime calls, measured by \
         kreplay's in-kernel audit.\n# TYPE kreplay_audit_call_duration_seconds histogram\n",
    );
    for ((pid, api, layer), (comm, s)) in &series {
        let labels = format!(
            "api=\"{api}\",layer=\"{layer}\",comm=\"{}\",pid=\"{pid}\"",
            escape_label(comm)
        );
        let mut cumulative = 0u64;
        for (i, n) in s.buckets.iter().enumerate().take(HIST_BUCKETS - 1) {
            cumulative += n;
            let le = le_seconds(bucket_upper_ns(i).unwrap_or(0));
            let _ = writeln!(
                out,
                "kreplay_audit_call_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "kreplay_audit_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
            s.count
        );
        let _ = writeln!(
            out,
            "kreplay_audit_call_duration_seconds_sum{{{labels}}} {}",
            s.total_ns as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "kreplay_audit_call_duration_seconds_count{{{labels}}} {}",
            s.count
        );
    }
    out.push_str(
        "# HELP kreplay_audit_calls_total GPU runtime calls completed.\n\
         # TYPE kreplay_audit_calls_total counter\n",
    );
    for ((pid, api, layer), (comm, s)) in &series {
        let _ = writeln!(
            out,
            "kreplay_audit_calls_total{{api=\"{api}\",layer=\"{layer}\",comm=\"{}\",pid=\"{pid}\"}} {}",
            escape_label(comm),
            s.count
        );
    }
    if let Some((time_ns, runs)) = e.bpf {
        let _ = write!(
            out,
            "# HELP kreplay_audit_bpf_run_time_seconds_total Time kreplay's audit programs ran \
             (kernel BPF statistics).\n# TYPE kreplay_audit_bpf_run_time_seconds_total counter\n\
             kreplay_audit_bpf_run_time_seconds_total {}\n\
             # HELP kreplay_audit_intercepted_calls_total Calls kreplay's audit programs \
             intercepted.\n# TYPE kreplay_audit_intercepted_calls_total counter\n\
             kreplay_audit_intercepted_calls_total {runs}\n",
            time_ns as f64 / 1e9
        );
        if runs > 0 {
            let _ = write!(
                out,
                "# HELP kreplay_audit_overhead_seconds_per_call BPF program time added per \
                 intercepted call.\n# TYPE kreplay_audit_overhead_seconds_per_call gauge\n\
                 kreplay_audit_overhead_seconds_per_call {}\n",
                time_ns as f64 / runs as f64 / 1e9
            );
        }
    }
    let _ = write!(
        out,
        "# HELP kreplay_audit_dropped_label_pids Processes folded into the pid=\"other\" series \
         by the label cap.\n# TYPE kreplay_audit_dropped_label_pids gauge\n\
         kreplay_audit_dropped_label_pids {}\n\
         # HELP kreplay_audit_uncounted_calls_total Calls the audit could not account.\n\
         # TYPE kreplay_audit_uncounted_calls_total counter\n\
         kreplay_audit_uncounted_calls_total{{reason=\"in_flight_map_full\"}} {}\n\
         kreplay_audit_uncounted_calls_total{{reason=\"return_without_entry\"}} {}\n\
         kreplay_audit_uncounted_calls_total{{reason=\"stats_map_full\"}} {}\n",
        cap.dropped(),
        e.lost.starts_full,
        e.lost.missing_entry,
        e.lost.stats_full
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::{api::id_of, audit::bucket_of};

    #[test]
    fn cap_folds_later_pids_into_other() {
        let api = id_of("hipMalloc").unwrap() as u32;
        let mut totals = BTreeMap::new();
        for pid in [10, 20, 30] {
            let mut s = AuditStats::ZERO;
            s.count = pid as u64;
            s.total_ns = 1000 * pid as u64;
            s.buckets[bucket_of(1000)] = pid as u64;
            totals.insert(AuditKey { pid, api }, s);
        }
        let comms = HashMap::from([(10, "x\"y".to_string())]);
        let e = Exposition {
            totals: &totals,
            comms: &comms,
            bpf: Some((2_000, 4)),
            lost: Lost::default(),
        };
        let mut cap = LabelCap::new(1);
        let text = render(&e, &mut cap);
        assert_eq!(cap.dropped(), 2);
        assert!(text.contains(
            "kreplay_audit_calls_total{api=\"hipMalloc\",layer=\"hip\",comm=\"x\\\"y\",pid=\"10\"} 10\n"
        ));
        assert!(text.contains(
            "kreplay_audit_calls_total{api=\"hipMalloc\",layer=\"hip\",comm=\"other\",pid=\"other\"} 50\n"
        ));
        // 1000 ns is in the bucket bounded by 1024 ns; cumulative from there on.
        assert!(text.contains(
            "_bucket{api=\"hipMalloc\",layer=\"hip\",comm=\"other\",pid=\"other\",le=\"0.000000512\"} 0\n"
        ));
        assert!(text.contains(
            "_bucket{api=\"hipMalloc\",layer=\"hip\",comm=\"other\",pid=\"other\",le=\"0.000001024\"} 50\n"
        ));
        assert!(text.contains("le=\"+Inf\"} 50\n"));
        assert!(text.contains("kreplay_audit_call_duration_seconds_sum{api=\"hipMalloc\",layer=\"hip\",comm=\"other\",pid=\"other\"} 0.00005\n"));
        assert!(text.contains("kreplay_audit_overhead_seconds_per_call 0.0000005\n"));
        assert!(text.contains("kreplay_audit_dropped_label_pids 2\n"));
        // Stable: the same pids keep their series on the next render.
        let again = render(&e, &mut cap);
        assert_eq!(again, text);
    }
}
