//! Which probed runtime calls were kreplay's own, not the application's.
//!
//! While the tool snapshots, replays and restores a dispatch it calls the GPU runtime itself,
//! on the thread it runs on, and the probes see those calls like any other. The tool's stream
//! says when: `ToolWindow` (a whole replay) and `Snapshot`/`ReplayPass`/`Restore` carry the pid
//! and tid of the thread that was inside kreplay and the span it was there. A probed call is
//! kreplay's when its `[enter, exit]` lies inside the union of those windows on the same
//! thread (bounds included; overlapping windows of one thread are one stretch of kreplay's
//! time). A call on another thread during a window is the application's, and so is a call
//! that encloses a window (the application's launch that kreplay replayed inside).
//!
//! An allocation made inside a window is kreplay's (its snapshot copies, scratch); its free
//! is kreplay's wherever it happens, so kreplay's buffers never count as the application's
//! live bytes or leaks.
//!
//! Ordering: the merge delivers records by their start time, and a window's start is earlier
//! than every call it covers, so the window is known before those calls arrive even though
//! the tool writes its record when the window ends (the merge's per-stream reorder window
//! puts it back in place). A window record delivered late (further out of order than that
//! window) is still used for the calls after it and counted in
//! [`OwnCalls::late_windows`]. Memory: windows are kept until the merge is
//! [`KEEP_AFTER_NS`] past their end (late probe records may still need them), and the
//! addresses kreplay holds allocated.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{FastMap, FastSet};

use kreplay_common::api::{ApiKind, Library, NO_ARG, spec_of};
use kreplay_common::stream::ApiCall;

/// How long past its end a window is kept for probe records delivered late.
pub const KEEP_AFTER_NS: u64 = 1_000_000_000;

/// kreplay's windows per thread and the addresses it allocated.
#[derive(Default)]
pub struct OwnCalls {
    /// Per (pid, tid): disjoint `[start, end]` stretches, sorted by start.
    windows: FastMap<(u32, u32), Vec<(u64, u64)>>,
    /// `(end, pid, tid)` of every window added, to forget them once the merge is past them.
    expiry: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// (pid, layer, pointer) of allocations made inside a window and not yet freed.
    allocs: FastSet<(u32, Library, u64)>,
    /// Window records that arrived after a record their stream had already delivered.
    pub late_windows: u64,
}

impl OwnCalls {
    /// Notes that thread `(pid, tid)` was inside kreplay over `[start, end]`. A record without a
    /// thread (pid or tid 0: a version-1 stream) says nothing and is ignored.
    pub fn add_window(&mut self, pid: u32, tid: u32, start: u64, end: u64, late: bool) {
        if pid == 0 || tid == 0 || end < start {
            return;
        }
        if late {
            self.late_windows += 1;
        }
        let v = self.windows.entry((pid, tid)).or_default();
        // First stretch that ends at or after `start`: everything before it stays.
        let i = v.partition_point(|&(_, e)| e < start);
        // Stretches from i that begin at or before `end` overlap and are merged into one.
        let j = i + v[i..].partition_point(|&(s, _)| s <= end);
        let merged = v[i..j]
            .iter()
            .fold((start, end), |(s, e), &(a, b)| (s.min(a), e.max(b)));
        v.splice(i..j, [merged]);
        self.expiry.push(Reverse((end, pid, tid)));
    }

    /// True when `c` was kreplay's call: inside a window on its thread, or the free of an
    /// address kreplay allocated. Keeps the allocation bookkeeping; call once per call.
    pub fn is_own(&mut self, c: &ApiCall) -> bool {
        let inside = self.inside(c);
        let Some(spec) = spec_of(c.api) else {
            return inside;
        };
        let ok = c.ret as u32 == 0;
        match spec.kind {
            ApiKind::Alloc if inside && ok && c.out != 0 => {
                self.allocs.insert((c.pid, spec.library, c.out));
                true
            }
            ApiKind::Free if spec.ptr_arg != NO_ARG => {
                let ptr = c.word(spec.ptr_arg);
                // A failed free leaves the memory allocated.
                let ours = if self.allocs.is_empty() {
                    false
                } else if ok {
                    self.allocs.remove(&(c.pid, spec.library, ptr))
                } else {
                    self.allocs.contains(&(c.pid, spec.library, ptr))
                };
                inside || ours
            }
            _ => inside,
        }
    }

    /// Forgets windows that ended more than [`KEEP_AFTER_NS`] before merge time `now`.
    pub fn forget(&mut self, now: u64) {
        let horizon = now.saturating_sub(KEEP_AFTER_NS);
        while let Some(&Reverse((end, pid, tid))) = self.expiry.peek() {
            if end >= horizon {
                break;
            }
            self.expiry.pop();
            if let Some(v) = self.windows.get_mut(&(pid, tid)) {
                v.retain(|&(_, e)| e >= horizon);
                if v.is_empty() {
                    self.windows.remove(&(pid, tid));
                }
            }
        }
    }

    /// Windows held now, over all threads (merged stretches).
    pub fn held(&self) -> usize {
        self.windows.values().map(Vec::len).sum()
    }

    /// Allocations of kreplay's not yet freed.
    pub fn live_allocations(&self) -> usize {
        self.allocs.len()
    }

    fn inside(&self, c: &ApiCall) -> bool {
        // Without windows (no replay in the trace) no lookup: this runs for every call.
        if self.windows.is_empty() {
            return false;
        }
        let Some(v) = self.windows.get(&(c.pid, c.tid)) else {
            return false;
        };
        // The last stretch starting at or before the call's entry is the only candidate.
        let i = v.partition_point(|&(s, _)| s <= c.enter_ns);
        i > 0 && c.exit_ns.max(c.enter_ns) <= v[i - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::api::id_of;

    fn call(api: &str, tid: u32, enter_ns: u64, exit_ns: u64) -> ApiCall {
        ApiCall {
            pid: 9,
            tid,
            api: id_of(api).unwrap(),
            enter_ns,
            exit_ns,
            ret: 0,
            args: [0; 6],
            extra: [0; 5],
            out: 0,
        }
    }

    fn copy(tid: u32, enter_ns: u64, exit_ns: u64) -> ApiCall {
        call("cuMemcpyDtoH_v2", tid, enter_ns, exit_ns)
    }

    #[test]
    fn a_call_exactly_on_the_window_edges_is_kreplays_one_crossing_them_is_not() {
        let mut o = OwnCalls::default();
        o.add_window(9, 7, 100, 200, false);
        assert!(o.is_own(&copy(7, 100, 200)), "both edges included");
        assert!(o.is_own(&copy(7, 150, 150)));
        assert!(!o.is_own(&copy(7, 99, 150)), "entered before the window");
        assert!(!o.is_own(&copy(7, 150, 201)), "returned after it");
        assert!(
            !o.is_own(&copy(7, 50, 250)),
            "encloses it: the app's launch"
        );
        assert!(!o.is_own(&copy(7, 201, 210)));
    }

    #[test]
    fn a_call_on_another_thread_or_process_during_a_window_is_the_applications() {
        let mut o = OwnCalls::default();
        o.add_window(9, 7, 100, 200, false);
        assert!(!o.is_own(&copy(8, 120, 130)));
        let mut other = copy(7, 120, 130);
        other.pid = 10;
        assert!(!o.is_own(&other));
        assert!(o.is_own(&copy(7, 120, 130)));
    }

    #[test]
    fn overlapping_windows_of_a_thread_are_one_stretch_and_disjoint_ones_are_not() {
        let mut o = OwnCalls::default();
        // A replay's window and the snapshot and pass inside it, then a restore reaching
        // past the pass; a second replay later.
        o.add_window(9, 7, 100, 300, false);
        o.add_window(9, 7, 110, 150, false);
        o.add_window(9, 7, 160, 200, false);
        o.add_window(9, 7, 250, 320, false);
        o.add_window(9, 7, 400, 500, false);
        assert_eq!(o.held(), 2);
        assert!(
            o.is_own(&copy(7, 280, 310)),
            "from one window into the next"
        );
        assert!(o.is_own(&copy(7, 100, 320)));
        assert!(!o.is_own(&copy(7, 310, 410)), "spans the gap 320..400");
        assert!(o.is_own(&copy(7, 400, 500)));
        // Given out of order (a late record), a window bridging the gap joins both.
        o.add_window(9, 7, 315, 405, true);
        assert_eq!((o.held(), o.late_windows), (1, 1));
        assert!(o.is_own(&copy(7, 310, 410)));
    }

    #[test]
    fn windows_without_a_thread_are_ignored_and_old_ones_forgotten() {
        let mut o = OwnCalls::default();
        o.add_window(0, 0, 100, 200, false);
        o.add_window(9, 0, 100, 200, false);
        assert_eq!(o.held(), 0);
        assert!(!o.is_own(&copy(0, 150, 160)));
        o.add_window(9, 7, 100, 200, false);
        o.add_window(9, 8, 100, 5_000_000_000, false);
        o.forget(200 + KEEP_AFTER_NS);
        assert_eq!(
            o.held(),
            2,
            "kept until the merge is KEEP_AFTER_NS past the end"
        );
        o.forget(201 + KEEP_AFTER_NS);
        assert_eq!(o.held(), 1);
        assert!(!o.is_own(&copy(7, 150, 160)));
        assert!(o.is_own(&copy(8, 150, 160)));
    }

    #[test]
    fn kreplays_allocation_is_freed_as_kreplays_even_outside_its_windows() {
        let mut o = OwnCalls::default();
        o.add_window(9, 7, 100, 200, false);
        let mut alloc = call("cuMemAlloc_v2", 7, 110, 120);
        alloc.out = 0xd000;
        assert!(o.is_own(&alloc));
        let mut app_alloc = call("cuMemAlloc_v2", 7, 300, 310);
        app_alloc.out = 0xe000;
        assert!(!o.is_own(&app_alloc));
        assert_eq!(o.live_allocations(), 1);
        let free = |ptr: u64, t: u64, ret: u64| {
            let mut f = call("cuMemFree_v2", 8, t, t + 5);
            f.args[0] = ptr;
            f.ret = ret;
            f
        };
        assert!(!o.is_own(&free(0xe000, 400, 0)), "the app's pointer");
        assert!(
            o.is_own(&free(0xd000, 410, 1)),
            "a failed free of kreplay's"
        );
        assert_eq!(
            o.live_allocations(),
            1,
            "still allocated after a failed free"
        );
        assert!(
            o.is_own(&free(0xd000, 420, 0)),
            "freed on another thread, later"
        );
        assert_eq!(o.live_allocations(), 0);
        assert!(
            !o.is_own(&free(0xd000, 430, 0)),
            "the address is the app's again"
        );
    }
}
