//! Holding a process for kreplay: it is named in `LOADS` and in `HELD`, then stopped
//! (SIGSTOP, taken on its return to user space); kreplay attaches what it needs, resumes it
//! and removes it from `HELD`. A guardian process resumes whatever `HELD` still names if
//! kreplay dies first.
use aya_ebpf::{
    bindings::BPF_RB_FORCE_WAKEUP,
    helpers::{bpf_ktime_get_ns, generated::bpf_send_signal},
    macros::map,
    maps::{Array, HashMap, RingBuf},
};
use kreplay_common::probe::{
    LOADS_BYTES, LoadStop, SIGSTOP,
    discovery::{FileKey, HELD_MAX},
};

/// Processes stopped for kreplay, in the order they stopped.
#[map]
static LOADS: RingBuf = RingBuf::with_byte_size(LOADS_BYTES, 0);

/// 1 while kreplay serves the stops (see `SWITCH_MAP`).
#[map]
static HOLDING: Array<u32> = Array::with_max_entries(1, 0);

/// Processes stopped and not yet resumed (tgid → stop time).
#[map]
static HELD: HashMap<u32, u64> = HashMap::with_max_entries(HELD_MAX, 0);

/// Stops the calling process `tgid` for kreplay; false (and no stop) when holding is off or
/// kreplay could not be told, since nothing else would resume it.
#[inline(always)]
pub fn hold(tgid: u32, kind: u32, file: FileKey) -> bool {
    if HOLDING.get(0).copied() != Some(1) {
        return false;
    }
    // SAFETY: plain helper call.
    let stop_ns = unsafe { bpf_ktime_get_ns() };
    if HELD.insert(tgid, stop_ns, 0).is_err() {
        return false;
    }
    let stop = LoadStop {
        tgid,
        kind,
        stop_ns,
        file,
    };
    if LOADS
        .output::<LoadStop>(&stop, BPF_RB_FORCE_WAKEUP as u64)
        .is_err()
    {
        let _ = HELD.remove(tgid);
        return false;
    }
    // SAFETY: plain helper call; the signal goes to the calling process.
    unsafe { bpf_send_signal(SIGSTOP) };
    true
}
