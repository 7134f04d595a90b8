//! Following a process tree: the set of followed processes (`TRACED`), the check the recording
//! programs make when the filter is on (`FOLLOW`), and two raw tracepoints that keep the set:
//! a fork by a followed process adds the child at once, before it can run, and a process is
//! removed when the kernel frees it, so that its pid, once reused, is not followed.
//!
//! A followed process that maps libraries (the loader's `_dl_debug_state`, called once the
//! start-up libraries are mapped and around each `dlopen`, before any of their code runs) is
//! stopped and named in `LOADS` (`hold.rs`), so that kreplay attaches to new runtime libraries before
//! their first call and then resumes it.
//!
//! `task_struct` offsets come from the kernel's BTF, read by the loader (`TASK_*_OFFSET`).
use aya_ebpf::{
    Global,
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel},
    macros::{map, raw_tracepoint, uprobe},
    maps::HashMap,
    programs::{ProbeContext, RawTracePointContext},
};
use kreplay_common::probe::{TRACED_MAX, counter, discovery::FileKey, stop_kind};

/// The followed processes (tgid → 1).
#[map]
static TRACED: HashMap<u32, u8> = HashMap::with_max_entries(TRACED_MAX, 0);

/// Non-zero: record only the processes in `TRACED` (set by the loader; constant to the
/// verifier, which drops the check when it is zero).
#[unsafe(no_mangle)]
static FOLLOW: Global<u32> = Global::new(0);

/// Byte offset of `tgid` in `struct task_struct`.
#[unsafe(no_mangle)]
static TASK_TGID_OFFSET: Global<u32> = Global::new(0);

/// Byte offset of `pid` in `struct task_struct`.
#[unsafe(no_mangle)]
static TASK_PID_OFFSET: Global<u32> = Global::new(0);

/// Whether calls of process `tgid` are recorded.
#[inline(always)]
pub fn wanted(tgid: u32) -> bool {
    // SAFETY: a lookup in a map of plain integers; the value is not kept.
    FOLLOW.load() == 0 || unsafe { TRACED.get(tgid) }.is_some()
}

/// Reads the u32 at `offset` of the kernel task `task`.
#[inline(always)]
fn task_u32(task: u64, offset: u32) -> Option<u32> {
    if task == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel checks the address and fails cleanly.
    unsafe { bpf_probe_read_kernel((task + offset as u64) as *const u32) }.ok()
}

/// `sched_process_fork(parent, child)`: a child of a followed process is followed.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn follow_fork(ctx: RawTracePointContext) -> i32 {
    try_fork(&ctx);
    0
}

#[inline(always)]
fn try_fork(ctx: &RawTracePointContext) {
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: as in `wanted`.
    if unsafe { TRACED.get(parent) }.is_none() {
        return;
    }
    let child: u64 = ctx.arg(1);
    let Some(tgid) = task_u32(child, TASK_TGID_OFFSET.load()) else {
        return;
    };
    // A new thread shares its process's tgid: already followed.
    if tgid != parent && TRACED.insert(tgid, 1, 0).is_err() {
        super::bump(counter::FOLLOW_FULL);
    }
}

/// `sched_process_free(task)`: a process whose leader is freed is gone (every thread has
/// exited and it was reaped); it leaves the set.
#[raw_tracepoint(tracepoint = "sched_process_free")]
pub fn follow_free(ctx: RawTracePointContext) -> i32 {
    let task: u64 = ctx.arg(0);
    if let (Some(pid), Some(tgid)) = (
        task_u32(task, TASK_PID_OFFSET.load()),
        task_u32(task, TASK_TGID_OFFSET.load()),
    ) && pid == tgid
    {
        let _ = TRACED.remove(tgid);
    }
    0
}

/// The loader's `_dl_debug_state` in a followed process: stop it and say so.
#[uprobe]
pub fn loader_hook(_ctx: ProbeContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: as in `wanted`.
    if unsafe { TRACED.get(tgid) }.is_none() {
        return 0;
    }
    if !super::hold::hold(tgid, stop_kind::LOADER, FileKey::default()) {
        super::bump(counter::LOADS_LOST);
    }
    0
}
