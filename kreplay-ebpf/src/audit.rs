//! The audit programs: per-(pid, API) latency histograms aggregated in the kernel.
//!
//! `audit_enter` saves the entry time per (thread, API) (in place when the thread's slot from
//! its previous call is still there); `audit_return` adds the latency to
//! this CPU's [`AuditStats`] of the (pid, API). No record leaves the kernel; userspace reads
//! the per-CPU map at its own pace.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, uprobe, uretprobe},
    maps::{HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use kreplay_common::{
    audit::{
        AUDIT_COMMS_ENTRIES, AUDIT_STARTS_ENTRIES, AUDIT_STATS_ENTRIES, AuditKey, AuditStats,
        HIST_BUCKETS, audit_counter, bucket_of,
    },
    probe::EntryKey,
};

/// Entry times of calls in flight. LRU so that threads killed mid-call cannot fill it.
#[map]
static AUDIT_STARTS: LruHashMap<EntryKey, u64> =
    LruHashMap::with_max_entries(AUDIT_STARTS_ENTRIES, 0);

/// BPF_F_NO_PREALLOC: per-CPU values are allocated for the (pid, API) pairs really seen.
const NO_PREALLOC: u32 = 1;

/// Per-(pid, API) aggregates, one copy per CPU.
#[map]
static AUDIT_STATS: PerCpuHashMap<AuditKey, AuditStats> =
    PerCpuHashMap::with_max_entries(AUDIT_STATS_ENTRIES, NO_PREALLOC);

/// The command name of each audited process, taken at its first call of each API, so that
/// processes that exit between two reads still have a name.
#[map]
static AUDIT_COMMS: HashMap<u32, [u8; 16]> =
    HashMap::with_max_entries(AUDIT_COMMS_ENTRIES, NO_PREALLOC);

/// Loss counters, indexed by `kreplay_common::audit::audit_counter`.
#[map]
static AUDIT_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(audit_counter::COUNT, 0);

#[inline(always)]
fn bump(index: u32) {
    if let Some(slot) = AUDIT_COUNTERS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot of this CPU; BPF programs do not migrate while running.
        unsafe { *slot += 1 };
    }
}

/// Entry of any audited API: remember when it started.
#[uprobe]
pub fn audit_enter(ctx: ProbeContext) -> u32 {
    let key = EntryKey {
        pid_tgid: bpf_get_current_pid_tgid(),
        api: crate::cookie(&ctx).api() as u32,
        _pad: 0,
    };
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    // A thread calling the same API again finds its slot from the previous call (the return
    // program leaves it, zeroed): a store in place instead of a map update.
    match AUDIT_STARTS.get_ptr_mut(key) {
        // SAFETY: the pointer is to this thread's own live map value.
        Some(p) => unsafe { *p = now },
        None => {
            if AUDIT_STARTS.insert(key, now, 0).is_err() {
                bump(audit_counter::STARTS_FULL);
            }
        }
    }
    0
}

/// Return of any audited API: add its latency to the (pid, API) histogram of this CPU.
#[uretprobe]
pub fn audit_return(ctx: RetProbeContext) -> u32 {
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    let api = crate::cookie(&ctx).api() as u32;
    let key = EntryKey {
        pid_tgid,
        api,
        _pad: 0,
    };
    // The slot stays in the map for the thread's next call (LRU evicts those of threads
    // that are gone); 0 marks it consumed.
    let start = match AUDIT_STARTS.get_ptr_mut(key) {
        // SAFETY: the pointer is to this thread's own live map value.
        Some(p) => unsafe { core::mem::replace(&mut *p, 0) },
        None => 0,
    };
    if start == 0 {
        bump(audit_counter::MISSING_ENTRY);
        return 0;
    }
    let ns = now.saturating_sub(start);
    let skey = AuditKey {
        pid: (pid_tgid >> 32) as u32,
        api,
    };
    let slot = match AUDIT_STATS.get_ptr_mut(skey) {
        Some(s) => s,
        None => {
            // First call of this (pid, API): create the entry (zero on every CPU), then
            // update this CPU's copy like any later call.
            let _ = AUDIT_STATS.insert(skey, AuditStats::ZERO, 1 /* BPF_NOEXIST */);
            if let Ok(comm) = bpf_get_current_comm() {
                let _ = AUDIT_COMMS.insert(skey.pid, comm, 0);
            }
            match AUDIT_STATS.get_ptr_mut(skey) {
                Some(s) => s,
                None => {
                    bump(audit_counter::STATS_FULL);
                    return 0;
                }
            }
        }
    };
    // black_box hides bucket_of's range from the compiler so that the bounds check below
    // stays in the program: the verifier needs it to accept the indexed store.
    let b = core::hint::black_box(bucket_of(ns));
    // SAFETY: slot points at this CPU's copy of the value, which only this program on this
    // CPU writes while it runs (no migration, no preemption of BPF programs by themselves).
    unsafe {
        (*slot).count += 1;
        (*slot).total_ns += ns;
        if b < HIST_BUCKETS {
            (*slot).buckets[b] += 1;
        }
    }
    0
}
