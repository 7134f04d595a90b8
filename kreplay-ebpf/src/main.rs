//! kreplay's BPF programs: one uprobe and one uretprobe shared by every probed API.
//!
//! The attach cookie names the API and the arguments to capture ([`Cookie`]). The entry
//! program saves the argument registers (and stack words or a struct where the API needs
//! them) in the thread's slot ([`slots`]); the return program turns them into one
//! [`CallRecord`] in its CPU's ring buffer ([`rings`]), reads the out-pointer, and keeps the
//! live-allocation inventory. Every record that cannot be delivered is counted in `COUNTERS`,
//! and said with its reason through aya-log at debug level. The loader sets `AYA_LOG_LEVEL`:
//! to debug with `--debug-probes`, else to off, and then the verifier drops those branches as
//! dead code.
//!
//! On the host target (clippy, `cargo check --workspace`) the crate builds as an ordinary
//! binary with an empty `main`, so the workspace can be linted as a whole.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

mod audit;
mod discovery;
mod follow;
mod hold;
mod rings;
mod slots;

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RB_RING_SIZE},
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::{map, uprobe, uretprobe},
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext},
};
use aya_log_ebpf::debug;
use kreplay_common::probe::{
    AllocInfo, AllocKey, CallRecord, Cookie, EXTRA_WORDS, EntryState, FLAG_OUT_VALID, NAME_BYTES,
    NameRecord, counter, mode, role,
};

/// Live device allocations per process.
#[map]
static ALLOCS: HashMap<AllocKey, AllocInfo> = HashMap::with_max_entries(262144, 0);

/// Loss and fault counters, indexed by `kreplay_common::probe::counter`.
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

#[inline(always)]
fn bump(index: u32) {
    bump_by(index, 1);
}

#[inline(always)]
fn bump_by(index: u32, n: u64) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot of this CPU; BPF programs do not migrate while running.
        unsafe { *slot += n };
    }
}

#[inline(always)]
fn cookie<C: EbpfContext>(ctx: &C) -> Cookie {
    // SAFETY: the helper only reads the cookie of the link this program runs for.
    Cookie(unsafe { aya_ebpf::helpers::generated::bpf_get_attach_cookie(ctx.as_ptr()) })
}

/// Entry of any probed API.
#[uprobe]
pub fn call_enter(ctx: ProbeContext) -> u32 {
    try_call_enter(&ctx);
    0
}

#[inline(always)]
fn try_call_enter(ctx: &ProbeContext) {
    // SAFETY: plain helper call.
    let enter_ns = unsafe { bpf_ktime_get_ns() };
    let c = cookie(ctx);
    let pid_tgid = bpf_get_current_pid_tgid();
    if !follow::wanted((pid_tgid >> 32) as u32) {
        return;
    }
    let tid = pid_tgid as u32;
    let Some(frame) = slots::push(tid, c.api(), enter_ns) else {
        debug!(
            ctx,
            "api {} tid {}: entry not saved (calls nested too deep, or the thread's slot is held by another thread)",
            c.api(),
            tid
        );
        return;
    };
    // SAFETY: `frame` points into this thread's slot of THREADS (see `slots::push`), valid for
    // the whole program run.
    let state = unsafe { &mut (*frame).state };
    state.enter_ns = enter_ns;
    let mut i = 0;
    while i < 6 {
        state.args[i] = ctx.arg::<u64>(i).unwrap_or(0);
        i += 1;
    }
    let src = match c.mode() {
        // SAFETY: regs points at this probe's pt_regs for the program's whole run. At entry
        // rsp points at the return address; stack arguments start one word above it.
        mode::STACK_WORDS => (unsafe { (*ctx.regs).rsp }) + 8,
        mode::ARG0_STRUCT => state.args[0],
        _ => 0,
    };
    // Only an API with extra words reads them back (see `clear_unused_extra`): the others leave
    // the frame's words as they were, which saves clearing them here.
    if c.mode() != 0 {
        state.extra = if src == 0 {
            [0; EXTRA_WORDS]
        } else {
            // SAFETY: bpf_probe_read_user validates the user address and fails cleanly.
            unsafe { bpf_probe_read_user(src as *const [u64; EXTRA_WORDS]) }.unwrap_or_else(|_| {
                bump(counter::READ_FAULTS);
                [0; EXTRA_WORDS]
            })
        };
    }
}

/// Clears the extra words of an API without them, word by word: a plain zero fill becomes a
/// call of the BPF object's byte-wise memset, about 30 ns.
#[inline(always)]
fn clear_unused_extra(c: Cookie, state: &mut EntryState) {
    if c.mode() == 0 {
        for w in state.extra.iter_mut() {
            // SAFETY: `w` is a valid, aligned u64 of the caller's stack copy.
            unsafe { core::ptr::write_volatile(w, 0) };
        }
    }
}

/// Return of any probed API.
#[uretprobe]
pub fn call_return(ctx: RetProbeContext) -> u32 {
    try_call_return(&ctx);
    0
}

#[inline(always)]
fn try_call_return(ctx: &RetProbeContext) {
    // SAFETY: plain helper call.
    let exit_ns = unsafe { bpf_ktime_get_ns() };
    let c = cookie(ctx);
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    if !follow::wanted(pid) {
        return;
    }
    let tid = pid_tgid as u32;
    let Some(found) = slots::find(tid, c.api()) else {
        debug!(
            ctx,
            "api {} tid {}: return without a saved entry (the entry was not saved, or the probe was attached while the call ran)",
            c.api(),
            tid
        );
        return;
    };
    // Copied to the stack: the verifier tracks a frame's variable offset in the slot too loosely
    // to allow the argument indexing below on the map value itself.
    // SAFETY: `found.frame` points into this thread's slot of THREADS (see `slots::find`); it
    // stays saved until `commit` below.
    let mut copy = unsafe { (*found.frame).state };
    clear_unused_extra(c, &mut copy);
    let state = &copy;
    let ret: u64 = ctx.ret();

    let mut out = 0u64;
    let mut flags = 0u16;
    let out_idx = c.out_plus_one();
    if out_idx != 0 {
        let ptr = arg_at(state, out_idx - 1);
        if ptr != 0 {
            // SAFETY: bpf_probe_read_user validates the user address and fails cleanly.
            match unsafe { bpf_probe_read_user(ptr as *const u64) } {
                Ok(v) => {
                    out = v;
                    flags |= FLAG_OUT_VALID;
                }
                Err(_) => {
                    bump(counter::READ_FAULTS);
                    debug!(
                        ctx,
                        "api {} tid {}: out-pointer {:x} not readable",
                        c.api(),
                        tid,
                        ptr
                    );
                }
            }
        }
    }
    track_inventory(c, state, pid, tid, ret, out, flags, exit_ns);

    let ring = rings::ring();
    match ring.reserve::<CallRecord>(0) {
        Some(mut entry) => {
            entry.write(CallRecord {
                enter_ns: state.enter_ns,
                exit_ns,
                pid,
                tid,
                api: c.api(),
                flags,
                parent: found.parent_plus_one(),
                _pad: 0,
                args: state.args,
                extra: state.extra,
                ret,
                out,
            });
            entry.submit(wake_flags(ring, &found, ring_bytes::<CallRecord>()));
        }
        None => {
            bump(counter::RINGBUF_DROPS);
            debug!(
                ctx,
                "api {} tid {}: ring buffer full, record dropped",
                c.api(),
                tid
            );
        }
    }
    if c.name_plus_one() != 0 && (c.void_ret() || ret as u32 == 0) {
        send_name(ring, c, state, pid, tid, out, flags, exit_ns, &found);
    }
    found.commit();
}

/// Submit flags: no reader wake-up while the ring is less than a quarter full (the reader
/// drains on a short timer), a forced one when the unread data crosses a quarter of the ring and
/// each further eighth, and a forced one for a thread's first record (the reader names threads
/// and processes from /proc when it first sees them, which must happen while they live). A
/// wake-up is an irq_work on the probed thread's CPU (a self-IPI: a VM exit on a VM) plus a
/// context switch for the reader. Forcing one on every record above the threshold, as before,
/// made every probed call pay one for as long as the reader was kept off a CPU (a loaded host);
/// now a ring's worth of records pays at most eight. `rec_bytes` is the submitted record's size
/// with its 8-byte header, which the unread data already includes.
#[inline(always)]
fn wake_flags(ring: &RingBuf, found: &slots::Found, rec_bytes: u64) -> u64 {
    if found.first_wake() {
        bump(counter::WAKEUPS);
        return BPF_RB_FORCE_WAKEUP as u64;
    }
    let avail = ring.query(BPF_RB_AVAIL_DATA as u64);
    let size = ring.query(BPF_RB_RING_SIZE as u64);
    let step = size / 8;
    if step == 0 || avail < size / 4 || avail < rec_bytes {
        return BPF_RB_NO_WAKEUP as u64;
    }
    if avail / step != (avail - rec_bytes) / step {
        bump(counter::WAKEUPS);
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// A record's size in the ring: its bytes plus the 8-byte header, rounded up to 8.
const fn ring_bytes<T>() -> u64 {
    ((core::mem::size_of::<T>() as u64) + 8 + 7) & !7
}

/// Sends the name a naming call gave its handle (a kernel lookup's out-pointer value, or a
/// registration's handle argument): the string is read straight into the ring buffer, at most
/// `NAME_BYTES` bytes, so the program's stack stays small.
#[inline(always)]
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
fn send_name(
    ring: &RingBuf,
    c: Cookie,
    state: &EntryState,
    pid: u32,
    tid: u32,
    out: u64,
    flags: u16,
    ts: u64,
    found: &slots::Found,
) {
    let handle = match c.handle_plus_one() {
        0 if flags & FLAG_OUT_VALID != 0 => out,
        0 => return,
        h => arg_at(state, h - 1),
    };
    let src = arg_at(state, c.name_plus_one() - 1);
    if handle == 0 || src == 0 {
        return;
    }
    let Some(mut entry) = ring.reserve::<NameRecord>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let p = entry.as_mut_ptr();
    // SAFETY: `p` points at this reservation's NameRecord-sized memory, owned by this program
    // until it is submitted or discarded; fields are written through raw pointers without
    // forming references to the uninitialised bytes, and the helper writes at most NAME_BYTES
    // bytes into `name` and validates the user address itself.
    let n = unsafe {
        core::ptr::addr_of_mut!((*p).ts_ns).write(ts);
        core::ptr::addr_of_mut!((*p).handle).write(handle);
        core::ptr::addr_of_mut!((*p).pid).write(pid);
        core::ptr::addr_of_mut!((*p).tid).write(tid);
        core::ptr::addr_of_mut!((*p).api).write(c.api());
        core::ptr::addr_of_mut!((*p)._pad).write(0);
        aya_ebpf::helpers::generated::bpf_probe_read_user_str(
            core::ptr::addr_of_mut!((*p).name).cast(),
            NAME_BYTES as u32,
            src as *const core::ffi::c_void,
        )
    };
    if n <= 0 {
        bump(counter::READ_FAULTS);
        entry.discard(0);
        return;
    }
    // SAFETY: as above.
    unsafe { core::ptr::addr_of_mut!((*p).len).write(n as u16) };
    entry.submit(wake_flags(ring, found, ring_bytes::<NameRecord>()));
}

/// An empty entry program: the bare cost of a uprobe, the baseline of the overhead benchmarks.
#[uprobe]
pub fn bare_enter(_ctx: ProbeContext) -> u32 {
    0
}

/// An empty return program: the bare cost of a uretprobe.
#[uretprobe]
pub fn bare_return(_ctx: RetProbeContext) -> u32 {
    0
}

#[inline(always)]
fn arg_at(state: &EntryState, idx: u64) -> u64 {
    if idx < 6 {
        state.args[idx as usize]
    } else if idx - 6 < EXTRA_WORDS as u64 {
        state.extra[(idx - 6) as usize]
    } else {
        0
    }
}

/// Keeps ALLOCS in step with successful allocations and frees (return code 0 = success for
/// every runtime kreplay probes: hsa_status_t, hipError_t and CUresult alike).
#[inline(always)]
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
fn track_inventory(
    c: Cookie,
    state: &EntryState,
    pid: u32,
    tid: u32,
    ret: u64,
    out: u64,
    flags: u16,
    ts_ns: u64,
) {
    if ret as u32 != 0 {
        return;
    }
    match c.role() {
        role::ALLOC if flags & FLAG_OUT_VALID != 0 && out != 0 => {
            let size_idx = c.size_plus_one();
            let size = if size_idx == 0 {
                0
            } else {
                arg_at(state, size_idx - 1)
            };
            let key = AllocKey {
                pid,
                _pad: 0,
                ptr: out,
            };
            let info = AllocInfo {
                size,
                ts_ns,
                tid,
                api: c.api(),
                _pad: 0,
            };
            if ALLOCS.insert(key, info, 0).is_err() {
                bump(counter::ALLOC_MAP_FULL);
            }
        }
        role::FREE => {
            let ptr_idx = c.ptr_plus_one();
            if ptr_idx != 0 {
                let key = AllocKey {
                    pid,
                    _pad: 0,
                    ptr: arg_at(state, ptr_idx - 1),
                };
                let _ = ALLOCS.remove(key);
            }
        }
        _ => {}
    }
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[cfg(not(target_arch = "bpf"))]
fn main() {}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
