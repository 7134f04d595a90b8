//! What a merge counted: the rendering statistics, and the per-API summary of the
//! application's own calls (kreplay's left out) that `kreplay replay --probes` prints.

use std::collections::BTreeMap;
use std::fmt;

use kreplay_common::probe::{CallRecord, FLAG_OUT_VALID};
use kreplay_common::stream::ApiCall;

use crate::trace::summary::Summary;

/// Counts of what rendering did, for the end-of-run report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RenderStats {
    /// Slices written.
    pub slices: u64,
    /// Counter values written.
    pub counter_values: u64,
    /// Records that sorted before an earlier one of their stream (rendered on a side track).
    pub late: u64,
    /// Records that could not be placed on any track without breaking nesting (skipped,
    /// counted here and reported).
    pub unrenderable: u64,
    /// Events the capture reported lost.
    pub dropped: u64,
    /// GPU dispatches written.
    pub dispatches: u64,
    /// Flows from a launch slice to its dispatch.
    pub flows: u64,
    /// Dispatches whose launch call was not found (no flow).
    pub unmatched_dispatches: u64,
    /// GPU copy and memset slices written.
    pub copies: u64,
    /// Copies whose copy call was not found (no flow).
    pub unmatched_copies: u64,
    /// GPU time per kernel, largest total first.
    pub gpu_kernels: Vec<super::gpu_time::KernelRow>,
    /// Launch slices written before their hold ended because their thread held too much.
    pub forced_launches: u64,
    /// kreplay's own runtime calls per API (on the [`OWN_TRACK`] tracks, not the app's).
    pub own_calls: BTreeMap<&'static str, u64>,
    /// Tool window records that arrived out of order (calls before them may be the app's).
    pub late_windows: u64,
    /// The application's annotation ranges and marks written (roctx, NVTX).
    pub annotations: u64,
    /// Annotation pops and ends whose push or start was not seen (not drawn).
    pub unmatched_annotations: u64,
}

/// The per-API summary of the application's probed calls, kreplay's own left out.
#[derive(Default)]
pub struct AppSummary(pub Summary);

impl fmt::Debug for AppSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppSummary({} calls)", self.0.total_calls())
    }
}

/// A merged call as the probe record the summary counts (`out` valid when non-zero: a stream
/// keeps no flags, and a zero out-value means nothing was read).
pub fn call_record(c: &ApiCall) -> CallRecord {
    CallRecord {
        enter_ns: c.enter_ns,
        exit_ns: c.exit_ns,
        pid: c.pid,
        tid: c.tid,
        api: c.api,
        flags: if c.out != 0 { FLAG_OUT_VALID } else { 0 },
        parent: 0,
        _pad: 0,
        args: c.args,
        extra: c.extra,
        ret: c.ret,
        out: c.out,
    }
}

/// `api xN, api xM` of kreplay's own calls, most first; `none` when there were none.
pub fn own_calls_line(own: &BTreeMap<&'static str, u64>) -> String {
    let mut v: Vec<(&&str, &u64)> = own.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|(name, n)| format!("{name} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The warning for tool windows merged out of order, `None` when there were none.
pub fn late_windows_warning(late: u64) -> Option<String> {
    (late > 0).then(|| {
        format!(
            "kreplay: warning: {late} of the tool's windows arrived out of order: calls kreplay made before them may show as the application's"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::api::id_of;

    #[test]
    fn the_own_calls_line_lists_the_most_called_first() {
        let mut own = BTreeMap::new();
        assert_eq!(own_calls_line(&own), "none");
        own.insert("cuMemFree_v2", 3);
        own.insert("cuMemcpyDtoH_v2", 12);
        own.insert("cuMemAlloc_v2", 3);
        assert_eq!(
            own_calls_line(&own),
            "cuMemcpyDtoH_v2 x12, cuMemAlloc_v2 x3, cuMemFree_v2 x3"
        );
    }

    #[test]
    fn a_merged_allocation_counts_in_the_summary_like_the_probe_record() {
        let alloc = ApiCall {
            pid: 4,
            tid: 5,
            api: id_of("cuMemAlloc_v2").unwrap(),
            enter_ns: 10,
            exit_ns: 30,
            ret: 0,
            args: [0, 4096, 0, 0, 0, 0],
            extra: [0; 5],
            out: 0xd000,
        };
        let mut s = Summary::default();
        assert_eq!(s.add(&call_record(&alloc)), Some(4096));
        let stats = &s.apis[&alloc.api];
        assert_eq!((stats.calls, stats.bytes, stats.total_ns), (1, 4096, 20));
    }
}
