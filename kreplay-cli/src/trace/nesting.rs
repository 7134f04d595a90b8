//! Launches of two layers that are one launch: a driver launch (`cuLaunchKernel`) made inside a
//! runtime launch (`cudaLaunchKernel`) runs the runtime launch's kernel.
//!
//! Each call record says which probed call of its thread it was made from
//! ([`CallRecord::parent`], from the BPF programs' per-thread frame stack), and records arrive
//! in the order calls return, so the inner launch comes before its outer one. [`Held`] keeps an
//! inner launch until its outer launch's record arrives; the pair then counts as one launch,
//! and each takes the other's kernel name where its own is unknown (a `CUfunction` the driver
//! made before kreplay attached has no name of its own; the runtime launch's host stub does).
use std::collections::HashMap;

use kreplay_common::{
    api::{ApiKind, ApiSpec, NO_ARG, spec_of},
    probe::CallRecord,
};

/// Most inner launches held for one thread: more means their outer records were lost (a full
/// ring), and the oldest goes on as a launch of its own.
const MAX_HELD: usize = 64;

/// The launch call `r` was made from, if it was made from one.
pub fn parent_launch(r: &CallRecord) -> Option<&'static ApiSpec> {
    let parent = spec_of(r.parent.checked_sub(1)?)?;
    (parent.kind == ApiKind::Launch).then_some(parent)
}

/// How a kernel launch call counts in the per-kernel table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchRole {
    /// A launch of its own: counted.
    Own,
    /// Made inside a launch that names a kernel: held until that launch's record arrives,
    /// then counted as part of it.
    InsideKernelLaunch,
    /// Made inside a launch that names no kernel (a graph launch, whose kernels are not
    /// counted): not counted.
    InsideGraphLaunch,
}

/// The role of kernel launch call `r` ([`ApiSpec::kernel_arg`] set).
pub fn role_of(r: &CallRecord) -> LaunchRole {
    match parent_launch(r) {
        Some(p) if p.kernel_arg != NO_ARG => LaunchRole::InsideKernelLaunch,
        Some(_) => LaunchRole::InsideGraphLaunch,
        None => LaunchRole::Own,
    }
}

/// Inner launches waiting for their outer launch's record, per (pid, tid).
#[derive(Default)]
pub struct Held {
    by_thread: HashMap<(u32, u32), Vec<CallRecord>, foldhash::fast::RandomState>,
}

impl Held {
    /// Holds inner launch `r`; returns the thread's oldest held launch when the thread holds
    /// more than [`MAX_HELD`] (its outer record was lost).
    pub fn hold(&mut self, r: &CallRecord) -> Option<CallRecord> {
        let v = self.by_thread.entry((r.pid, r.tid)).or_default();
        v.push(*r);
        (v.len() > MAX_HELD).then(|| v.remove(0))
    }

    /// Takes the held launches `outer` was the outer call of: its thread's, within its time.
    pub fn children_of(&mut self, outer: &CallRecord) -> Vec<CallRecord> {
        self.take(outer, |c| {
            c.enter_ns >= outer.enter_ns && c.exit_ns <= outer.exit_ns
        })
    }

    /// Takes the held launches of `r`'s thread whose outer record can no longer come: `r` was
    /// entered with no probed call of the thread in flight, after they began, so their outer
    /// call had returned by then and its record, which would have come before `r`'s, was lost.
    pub fn orphans(&mut self, r: &CallRecord) -> Vec<CallRecord> {
        if r.parent != 0 {
            return Vec::new();
        }
        self.take(r, |c| c.enter_ns < r.enter_ns)
    }

    /// Takes every held launch (the trace ends), oldest first per thread.
    pub fn drain(&mut self) -> Vec<CallRecord> {
        let mut all: Vec<CallRecord> = self.by_thread.drain().flat_map(|(_, v)| v).collect();
        all.sort_by_key(|c| (c.exit_ns, c.pid, c.tid));
        all
    }

    /// Launches held now.
    pub fn len(&self) -> usize {
        self.by_thread.values().map(Vec::len).sum()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.by_thread.is_empty()
    }

    fn take(&mut self, r: &CallRecord, pick: impl Fn(&CallRecord) -> bool) -> Vec<CallRecord> {
        let key = (r.pid, r.tid);
        let Some(v) = self.by_thread.get_mut(&key) else {
            return Vec::new();
        };
        let (taken, kept): (Vec<CallRecord>, Vec<CallRecord>) = v.drain(..).partition(pick);
        if kept.is_empty() {
            self.by_thread.remove(&key);
        } else {
            *v = kept;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::api::id_of;

    fn call(api: &str, parent: &str, enter_ns: u64, exit_ns: u64) -> CallRecord {
        CallRecord {
            enter_ns,
            exit_ns,
            pid: 7,
            tid: 8,
            api: id_of(api).unwrap(),
            flags: 0,
            parent: id_of(parent).map_or(0, |p| p + 1),
            _pad: 0,
            args: [0; 6],
            extra: [0; 5],
            ret: 0,
            out: 0,
        }
    }

    #[test]
    fn roles_follow_the_parent_call() {
        assert_eq!(role_of(&call("cuLaunchKernel", "", 1, 2)), LaunchRole::Own);
        assert_eq!(
            role_of(&call("cuLaunchKernel", "cudaLaunchKernel", 1, 2)),
            LaunchRole::InsideKernelLaunch
        );
        assert_eq!(
            role_of(&call("cuLaunchKernelEx", "cudaLaunchKernelExC", 1, 2)),
            LaunchRole::InsideKernelLaunch
        );
        assert_eq!(
            role_of(&call("cuLaunchKernel", "cudaGraphLaunch", 1, 2)),
            LaunchRole::InsideGraphLaunch
        );
        // Made inside a call that launches nothing (a synchronization): a launch of its own.
        assert_eq!(
            role_of(&call("cuLaunchKernel", "cudaDeviceSynchronize", 1, 2)),
            LaunchRole::Own
        );
    }

    #[test]
    fn an_outer_launch_takes_the_launches_within_it_and_a_later_top_level_call_the_orphans() {
        let mut h = Held::default();
        let inner1 = call("cuLaunchKernel", "cudaLaunchKernel", 11, 12);
        let inner2 = call("cuLaunchKernel", "cudaLaunchKernel", 21, 22);
        assert_eq!(h.hold(&inner1), None);
        assert_eq!(h.hold(&inner2), None);
        // A nested call in between (parent set) orphans nothing.
        let nested = call("cuMemAlloc_v2", "cudaMalloc", 30, 31);
        assert!(h.orphans(&nested).is_empty());
        let outer2 = call("cudaLaunchKernel", "", 20, 23);
        assert_eq!(h.children_of(&outer2), vec![inner2]);
        assert_eq!(h.len(), 1);
        // inner1's outer record never came; a top-level call entered after it says so.
        let later = call("cudaMalloc", "", 40, 41);
        assert_eq!(h.orphans(&later), vec![inner1]);
        assert!(h.is_empty());
    }

    #[test]
    fn a_thread_holds_at_most_max_held_launches() {
        let mut h = Held::default();
        let mut first = None;
        for i in 0..MAX_HELD as u64 {
            let c = call("cuLaunchKernel", "cudaLaunchKernel", 10 * i, 10 * i + 1);
            first.get_or_insert(c);
            assert_eq!(h.hold(&c), None);
        }
        let over = call("cuLaunchKernel", "cudaLaunchKernel", 10_000, 10_001);
        assert_eq!(h.hold(&over), first);
        assert_eq!(h.len(), MAX_HELD);
        assert_eq!(h.drain().len(), MAX_HELD);
        assert!(h.is_empty());
    }
}
