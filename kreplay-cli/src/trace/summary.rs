//! The per-API summary printed when a trace ends: calls, time, latency quantiles, bytes.
use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
};

use kreplay_common::{
    api::{APIS, ApiKind, NO_ARG, spec_of},
    probe::{CallRecord, FLAG_OUT_VALID},
};

use super::histogram::Histogram;

/// Statistics of one API.
#[derive(Default, Clone)]
pub struct ApiStats {
    /// Completed calls.
    pub calls: u64,
    /// Calls that returned an error code.
    pub errors: u64,
    /// Sum of call durations, ns.
    pub total_ns: u64,
    /// Call durations.
    pub latency: Histogram,
    /// Bytes allocated (allocations) or moved (copies).
    pub bytes: u64,
    /// Bytes released (frees, matched against the allocation that returned the pointer).
    pub bytes_freed: u64,
}

/// The summary's maps: updated for every record on the reader's hot path, so hashed with
/// foldhash rather than std's SipHash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Everything the end-of-trace summary prints.
#[derive(Default)]
pub struct Summary {
    /// Per API id.
    pub apis: FastMap<u16, ApiStats>,
    /// Live allocations: (pid, pointer) → bytes. Nested calls that return the same pointer
    /// (hipMalloc over hsa_amd_memory_pool_allocate) count once.
    pub live: FastMap<(u32, u64), u64>,
    /// Live bytes per process.
    pub live_bytes: FastMap<u32, u64>,
    /// Launches per kernel name (launch APIs that name a kernel; unresolved ones under
    /// [`UNRESOLVED`]).
    pub kernels: BTreeMap<String, u64>,
}

/// The summary's row for launches whose kernel could not be named.
pub const UNRESOLVED: &str = "(kernel not resolved)";

impl Summary {
    /// Accounts one completed call; returns the process's live bytes when they changed.
    pub fn add(&mut self, r: &CallRecord) -> Option<u64> {
        let spec = spec_of(r.api)?;
        let s = self.apis.entry(r.api).or_default();
        let dur = r.exit_ns.saturating_sub(r.enter_ns);
        s.calls += 1;
        s.total_ns += dur;
        s.latency.record(dur);
        let ok = r.ret as u32 == 0;
        if !ok && !matches!(spec.kind, ApiKind::Other | ApiKind::Annotate) && !spec.void_ret {
            s.errors += 1;
        }
        let size = spec.bytes(|i| r.arg(i).unwrap_or(0)).unwrap_or(0);
        match spec.kind {
            ApiKind::Copy if ok => s.bytes += size,
            ApiKind::Alloc if ok && r.flags & FLAG_OUT_VALID != 0 && r.out != 0 => {
                s.bytes += size;
                if self.live.insert((r.pid, r.out), size).is_none() {
                    let live = self.live_bytes.entry(r.pid).or_default();
                    *live += size;
                    return Some(*live);
                }
            }
            ApiKind::Free if ok && spec.ptr_arg != NO_ARG => {
                let ptr = r.arg(spec.ptr_arg).unwrap_or(0);
                if let Some(freed) = self.live.remove(&(r.pid, ptr)) {
                    s.bytes_freed += freed;
                    let live = self.live_bytes.entry(r.pid).or_default();
                    *live = live.saturating_sub(freed);
                    return Some(*live);
                }
            }
            _ => {}
        }
        None
    }

    /// Counts one launch of `kernel` (`None`: its name could not be resolved).
    pub fn add_launch(&mut self, kernel: Option<&str>) {
        let name = kernel.unwrap_or(UNRESOLVED);
        match self.kernels.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.kernels.insert(name.to_string(), 1);
            }
        }
    }

    /// Total calls of every API.
    pub fn total_calls(&self) -> u64 {
        self.apis.values().map(|s| s.calls).sum()
    }

    /// The table printed at the end of a trace, sorted by total time.
    pub fn render(&self, drops: u64) -> String {
        let mut rows: Vec<(&u16, &ApiStats)> = self.apis.iter().collect();
        rows.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<30} {:>9} {:>7} {:>12} {:>10} {:>10} {:>14} {:>14}",
            "API", "calls", "errors", "total ms", "p50 us", "p99 us", "bytes", "bytes freed"
        );
        for (id, s) in rows {
            let name = APIS.get(*id as usize).map_or("?", |a| a.name);
            let _ = writeln!(
                out,
                "{:<30} {:>9} {:>7} {:>12.3} {:>10.2} {:>10.2} {:>14} {:>14}",
                name,
                s.calls,
                s.errors,
                s.total_ns as f64 / 1e6,
                s.latency.quantile(0.5) as f64 / 1e3,
                s.latency.quantile(0.99) as f64 / 1e3,
                s.bytes,
                s.bytes_freed
            );
        }
        if !self.kernels.is_empty() {
            let _ = writeln!(out, "{:<60} {:>9}", "kernel", "launches");
            let mut kernels: Vec<(&String, &u64)> = self.kernels.iter().collect();
            kernels.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (name, n) in kernels {
                let _ = writeln!(out, "{name:<60} {n:>9}");
            }
        }
        let _ = writeln!(out, "events dropped: {drops}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::api::id_of;

    fn call(api: &str, pid: u32, args: [u64; 6], out: u64, dur: u64) -> CallRecord {
        CallRecord {
            enter_ns: 1000,
            exit_ns: 1000 + dur,
            pid,
            tid: pid,
            api: id_of(api).unwrap(),
            flags: if out != 0 { FLAG_OUT_VALID } else { 0 },
            parent: 0,
            _pad: 0,
            args,
            extra: [0; 5],
            ret: 0,
            out,
        }
    }

    #[test]
    fn nested_allocations_count_once_and_frees_match() {
        let mut s = Summary::default();
        // hsa allocation inside hipMalloc: both return 0x1000 for 4096 bytes.
        assert_eq!(
            s.add(&call(
                "hsa_amd_memory_pool_allocate",
                7,
                [0, 4096, 0, 0, 0, 0],
                0x1000,
                5
            )),
            Some(4096)
        );
        assert_eq!(
            s.add(&call("hipMalloc", 7, [0, 4096, 0, 0, 0, 0], 0x1000, 9)),
            None
        );
        assert_eq!(
            s.add(&call("hipMalloc", 7, [0, 100, 0, 0, 0, 0], 0x2000, 9)),
            Some(4196)
        );
        assert_eq!(
            s.add(&call("hipFree", 7, [0x1000, 0, 0, 0, 0, 0], 0, 3)),
            Some(100)
        );
        assert_eq!(s.live_bytes[&7], 100);
        let hip = &s.apis[&id_of("hipMalloc").unwrap()];
        assert_eq!((hip.calls, hip.bytes, hip.total_ns), (2, 4196, 18));
        assert_eq!(s.apis[&id_of("hipFree").unwrap()].bytes_freed, 4096);
        assert_eq!(s.total_calls(), 4);
        let table = s.render(3);
        assert!(
            table.contains("hipMalloc") && table.ends_with("events dropped: 3\n"),
            "{table}"
        );
    }

    #[test]
    fn failed_calls_count_as_errors_and_allocate_nothing() {
        let mut s = Summary::default();
        let mut r = call("hipMalloc", 1, [0, 64, 0, 0, 0, 0], 0x10, 1);
        r.ret = 2; // hipErrorOutOfMemory
        assert_eq!(s.add(&r), None);
        let st = &s.apis[&r.api];
        assert_eq!((st.calls, st.errors, st.bytes), (1, 1, 0));
    }

    #[test]
    fn kernel_launches_are_counted_by_name_and_void_calls_never_fail() {
        let mut s = Summary::default();
        s.add_launch(Some("saxpy"));
        s.add_launch(None);
        s.add_launch(Some("saxpy"));
        s.add_launch(Some("add(float*)"));
        assert_eq!(s.kernels["saxpy"], 2);
        assert_eq!(s.kernels[UNRESOLVED], 1);
        let table = s.render(0);
        let rows: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("kernel "))
            .skip(1)
            .take(3)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(rows, ["saxpy", "(kernel", "add(float*)"], "{table}");
        // __hipRegisterFunction returns void: whatever rax holds is no error.
        let mut r = call("__hipRegisterFunction", 1, [0; 6], 0, 1);
        r.ret = 0xdead;
        s.add(&r);
        assert_eq!(s.apis[&r.api].errors, 0);
    }

    #[test]
    fn a_roctx_pop_returning_its_level_is_no_error() {
        let mut s = Summary::default();
        let mut r = call("roctxRangePop", 1, [0; 6], 0, 1);
        r.ret = 2;
        s.add(&r);
        assert_eq!((s.apis[&r.api].calls, s.apis[&r.api].errors), (1, 0));
    }
}
