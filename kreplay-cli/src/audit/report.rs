//! One audit report: per-process, per-API call rates and latency quantiles over a window,
//! computed from the kernel's log2 histograms, plus kreplay's own measured cost.
use std::collections::{BTreeMap, HashMap};

use kreplay_common::{
    api::{Library, spec_of},
    audit::{AuditKey, AuditStats, HIST_BUCKETS, bucket_upper_ns},
};

use super::maps::{Lost, ProgramRuns};

/// Whether a report covers the last interval or the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportKind {
    /// The calls since the previous report.
    Interval,
    /// Every call since the audit started.
    Final,
}

impl ReportKind {
    /// The name used in the JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Interval => "interval",
            ReportKind::Final => "final",
        }
    }
}

/// One API of one process over the window.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiRow {
    /// Exported symbol name.
    pub api: &'static str,
    /// Runtime layer (`hip`, `hsa`, `cuda`, `cudart`).
    pub layer: &'static str,
    /// Completed calls.
    pub calls: u64,
    /// Calls per second of wall time.
    pub calls_per_s: f64,
    /// Sum of latencies in ns.
    pub total_ns: u64,
    /// Latency quantiles 0.5, 0.9, 0.99 as bucket upper bounds in ns; `None`: above the
    /// last finite bound.
    pub quantiles_ns: [Option<u64>; 3],
    /// Calls per log2 bucket.
    pub buckets: [u64; HIST_BUCKETS],
}

/// One process over the window.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessRow {
    /// Process id.
    pub pid: u32,
    /// Command name (`/proc/PID/comm`).
    pub comm: String,
    /// Calls of every API.
    pub calls: u64,
    /// Time in runtime calls, in ns, of the outermost layer (see [`ProcessRow::runtime_share`]).
    pub runtime_ns: u64,
    /// `runtime_ns` / window: share of wall time in runtime calls. Each layer's calls are
    /// summed separately and the largest layer is taken, since HIP calls contain the HSA calls
    /// they make; several threads in calls at once can make it exceed 1.
    pub runtime_share: f64,
    /// Per API, most expensive first.
    pub apis: Vec<ApiRow>,
}

/// kreplay's own cost: the audit programs' run time from the kernel's BPF statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overhead {
    /// Whether BPF statistics could be enabled.
    pub measured: bool,
    /// ns the entry and return programs ran in the window.
    pub bpf_run_time_ns: u64,
    /// Runs of the return program in the window: intercepted calls.
    pub intercepted_calls: u64,
    /// ns added per intercepted call by the programs (entry + return).
    pub ns_per_call: Option<f64>,
}

impl Overhead {
    /// The overhead between two readings of (entry, return) program statistics.
    pub fn between(measured: bool, before: [ProgramRuns; 2], after: [ProgramRuns; 2]) -> Self {
        let time: u64 = (0..2)
            .map(|i| after[i].run_time_ns.saturating_sub(before[i].run_time_ns))
            .sum();
        let calls = after[1].run_count.saturating_sub(before[1].run_count);
        Overhead {
            measured,
            bpf_run_time_ns: time,
            intercepted_calls: calls,
            ns_per_call: (measured && calls > 0).then(|| time as f64 / calls as f64),
        }
    }
}

/// A complete report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Interval or whole run.
    pub kind: ReportKind,
    /// Seconds since the audit started.
    pub elapsed_s: f64,
    /// Seconds the report covers.
    pub window_s: f64,
    /// Processes, most expensive first (at most `--top`).
    pub processes: Vec<ProcessRow>,
    /// Processes left out by `--top`.
    pub omitted: usize,
    /// Calls the programs could not account (cumulative).
    pub lost: Lost,
    /// kreplay's own cost in the window.
    pub overhead: Overhead,
}

/// The short name of a runtime layer.
pub fn layer_of(lib: Library) -> &'static str {
    match lib {
        Library::Hsa => "hsa",
        Library::Hip => "hip",
        Library::Cuda => "cuda",
        Library::CudaRt => "cudart",
        Library::User => "user",
        Library::Roctx => "roctx",
    }
}

/// The upper bound in ns of the bucket holding quantile `q` of a histogram; `Some(0)` when
/// empty, `None` when it lies in the unbounded last bucket.
pub fn quantile(buckets: &[u64; HIST_BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return Some(0);
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, &c) in buckets.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return bucket_upper_ns(i);
        }
    }
    None
}

/// Builds the per-process rows of a window (`stats` already the difference of two readings).
pub fn processes(
    stats: &BTreeMap<AuditKey, AuditStats>,
    comms: &HashMap<u32, String>,
    window_s: f64,
) -> Vec<ProcessRow> {
    let mut by_pid: BTreeMap<u32, Vec<(AuditKey, &AuditStats)>> = BTreeMap::new();
    for (k, s) in stats {
        if s.count > 0 {
            by_pid.entry(k.pid).or_default().push((*k, s));
        }
    }
    let window_ns = (window_s * 1e9).max(1.0);
    let mut rows: Vec<ProcessRow> = by_pid
        .into_iter()
        .map(|(pid, entries)| {
            let mut per_layer: BTreeMap<&str, u64> = BTreeMap::new();
            let mut apis: Vec<ApiRow> = entries
                .iter()
                .map(|(k, s)| {
                    let spec = spec_of(k.api as u16);
                    let layer = spec.map_or("unknown", |sp| layer_of(sp.library));
                    *per_layer.entry(layer).or_default() += s.total_ns;
                    ApiRow {
                        api: spec.map_or("unknown", |sp| sp.name),
                        layer,
                        calls: s.count,
                        calls_per_s: s.count as f64 / window_s.max(1e-9),
                        total_ns: s.total_ns,
                        quantiles_ns: [0.5, 0.9, 0.99].map(|q| quantile(&s.buckets, q)),
                        buckets: s.buckets,
                    }
                })
                .collect();
            apis.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.api.cmp(b.api)));
            let runtime_ns = per_layer.values().copied().max().unwrap_or(0);
            ProcessRow {
                pid,
                comm: comms
                    .get(&pid)
                    .cloned()
                    .unwrap_or_else(|| format!("pid {pid}")),
                calls: apis.iter().map(|a| a.calls).sum(),
                runtime_ns,
                runtime_share: runtime_ns as f64 / window_ns,
                apis,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.runtime_ns.cmp(&a.runtime_ns).then(a.pid.cmp(&b.pid)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::{api::id_of, audit::bucket_of};

    fn stats(latencies: &[u64]) -> AuditStats {
        let mut s = AuditStats::ZERO;
        for &ns in latencies {
            s.count += 1;
            s.total_ns += ns;
            s.buckets[bucket_of(ns)] += 1;
        }
        s
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let s = stats(
            &[100; 98]
                .iter()
                .chain(&[3_000, 2_000_000])
                .copied()
                .collect::<Vec<_>>(),
        );
        assert_eq!(quantile(&s.buckets, 0.5), Some(128));
        assert_eq!(quantile(&s.buckets, 0.99), Some(4096));
        assert_eq!(quantile(&s.buckets, 1.0), Some(1 << 21));
        assert_eq!(quantile(&AuditStats::ZERO.buckets, 0.5), Some(0));
        assert_eq!(quantile(&stats(&[1 << 40]).buckets, 0.5), None);
    }

    #[test]
    fn processes_sorted_by_outer_layer_time() {
        let hip = id_of("hipMemcpy").unwrap() as u32;
        let hsa = id_of("hsa_memory_copy").unwrap() as u32;
        let mut m = BTreeMap::new();
        m.insert(AuditKey { pid: 7, api: hip }, stats(&[1000, 1000]));
        m.insert(AuditKey { pid: 7, api: hsa }, stats(&[900, 900]));
        m.insert(AuditKey { pid: 9, api: hip }, stats(&[5000]));
        let comms = HashMap::from([(7, "a".to_string())]);
        let rows = processes(&m, &comms, 2.0);
        assert_eq!(rows.iter().map(|r| r.pid).collect::<Vec<_>>(), vec![9, 7]);
        let r7 = &rows[1];
        assert_eq!((r7.comm.as_str(), r7.calls, r7.runtime_ns), ("a", 4, 2000));
        assert_eq!(r7.runtime_share, 2000.0 / 2e9);
        assert_eq!(r7.apis[0].api, "hipMemcpy");
        assert_eq!(r7.apis[0].calls_per_s, 1.0);
        assert_eq!(rows[0].comm, "pid 9");
    }

    #[test]
    fn overhead_is_runtime_per_return() {
        let a = [ProgramRuns {
            run_time_ns: 100,
            run_count: 10,
        }; 2];
        let b = [
            ProgramRuns {
                run_time_ns: 400,
                run_count: 20,
            },
            ProgramRuns {
                run_time_ns: 600,
                run_count: 20,
            },
        ];
        let o = Overhead::between(true, a, b);
        assert_eq!((o.bpf_run_time_ns, o.intercepted_calls), (800, 10));
        assert_eq!(o.ns_per_call, Some(80.0));
        assert_eq!(Overhead::between(false, a, b).ns_per_call, None);
    }
}
