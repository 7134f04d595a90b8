//! The records the BPF probes produce and the keys of their maps.
//!
//! One uprobe program and one uretprobe program serve every API: the attach cookie
//! ([`Cookie`]) tells them which API fired and which arguments need reading. Arguments are
//! saved at entry in the calling thread's [`ThreadSlot`] (a stack of [`Frame`]s, one per
//! nested call) and one [`CallRecord`] per completed call goes to the ring buffer at return.

/// Stack words captured at entry at most (enough for `cuLaunchKernel`'s five stack arguments).
pub const EXTRA_WORDS: usize = 5;

/// Bytes of a kernel name a [`NameRecord`] carries at most (NUL included); longer names are cut.
pub const NAME_BYTES: usize = 256;

/// The ring buffers carrying [`CallRecord`]s and [`NameRecord`]s, as one name for sizing: the
/// loader gives each ring in use ([`EVENTS_MAPS`]) the bytes given for it.
pub const EVENTS_MAP: &str = "EVENTS";
/// Ring buffers in the object, one per CPU up to this many (more CPUs share them by modulo).
pub const RING_SHARDS: usize = 16;
/// The ring buffer maps' names; the first `RING_COUNT` are in use.
pub const EVENTS_MAPS: [&str; RING_SHARDS] = [
    "EVENTS0", "EVENTS1", "EVENTS2", "EVENTS3", "EVENTS4", "EVENTS5", "EVENTS6", "EVENTS7",
    "EVENTS8", "EVENTS9", "EVENTS10", "EVENTS11", "EVENTS12", "EVENTS13", "EVENTS14", "EVENTS15",
];
/// Name of the BPF global holding the number of rings in use (CPU `c` writes ring
/// `c % RING_COUNT`).
pub const RING_COUNT_GLOBAL: &str = "RING_COUNT";
/// Name of the per-CPU counter array (indexes in [`counter`]).
pub const COUNTERS_MAP: &str = "COUNTERS";
/// Name of the array of [`ThreadSlot`]s (calls in flight), indexed by `tid & SLOT_MASK`.
pub const THREADS_MAP: &str = "THREADS";
/// Name of the BPF global holding the slot-index mask (the array's length - 1).
pub const SLOT_MASK_GLOBAL: &str = "SLOT_MASK";
/// Default number of [`ThreadSlot`]s (a power of two): about 7 MiB of kernel memory.
pub const DEFAULT_THREAD_SLOTS: u32 = 16384;
/// Nested probed calls one thread can be inside at once with their arguments saved
/// (hipMalloc → hsa_amd_memory_pool_allocate is two); deeper calls are counted, not recorded.
pub const FRAME_DEPTH: usize = 4;
/// Name of the live device-allocation inventory ([`AllocKey`] → [`AllocInfo`]).
pub const ALLOCS_MAP: &str = "ALLOCS";
/// Name of the uprobe (entry) program.
pub const ENTRY_PROGRAM: &str = "call_enter";
/// Name of the uretprobe (return) program.
pub const RETURN_PROGRAM: &str = "call_return";
/// Name of the empty uprobe program (benchmark baseline).
pub const BARE_ENTRY_PROGRAM: &str = "bare_enter";
/// Name of the empty uretprobe program (benchmark baseline).
pub const BARE_RETURN_PROGRAM: &str = "bare_return";

/// Name of the set of followed processes (tgid → 1) when a trace follows a process tree.
pub const TRACED_MAP: &str = "TRACED";
/// Processes [`TRACED_MAP`] holds at most.
pub const TRACED_MAX: u32 = 65536;
/// Name of the BPF global that turns the process-tree filter on (non-zero): the recording
/// programs then skip calls of processes not in [`TRACED_MAP`].
pub const FOLLOW_GLOBAL: &str = "FOLLOW";
/// Name of the BPF global holding the byte offset of `tgid` in the kernel's `task_struct`.
pub const TASK_TGID_GLOBAL: &str = "TASK_TGID_OFFSET";
/// Name of the BPF global holding the byte offset of `pid` in the kernel's `task_struct`.
pub const TASK_PID_GLOBAL: &str = "TASK_PID_OFFSET";
/// Name of the raw-tracepoint program (`sched_process_fork`) that adds a followed process's
/// children to [`TRACED_MAP`].
pub const FORK_PROGRAM: &str = "follow_fork";
/// Name of the raw-tracepoint program (`sched_process_free`) that removes a process from
/// [`TRACED_MAP`] once it is gone, so that its pid, reused, is not followed.
pub const FREE_PROGRAM: &str = "follow_free";

/// A process stopped for kreplay to attach before it goes on, as [`LOADS_MAP`] carries it:
/// a followed process in the loader's hook, or any process mapping a runtime library file not
/// probed yet (`--all`, [`discovery`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadStop {
    /// The process.
    pub tgid: u32,
    /// Why it was stopped ([`stop_kind`]).
    pub kind: u32,
    /// When it was stopped (CLOCK_MONOTONIC ns).
    pub stop_ns: u64,
    /// The new file, for [`stop_kind::NEW_FILE`] (zero otherwise).
    pub file: discovery::FileKey,
}
const _: () = assert!(core::mem::size_of::<LoadStop>() == 32);

/// Values of [`LoadStop::kind`].
pub mod stop_kind {
    /// A followed process in the loader's `_dl_debug_state`.
    pub const LOADER: u32 = 0;
    /// A process mapping, executable, a runtime library file not probed yet.
    pub const NEW_FILE: u32 = 1;
}

pub mod discovery;

/// Name of the ring of followed processes stopped in the loader's hook ([`LoadStop`] each).
pub const LOADS_MAP: &str = "LOADS";
/// Bytes of [`LOADS_MAP`]: room for a thousand stopped processes.
pub const LOADS_BYTES: u32 = 16 << 10;
/// Name of the uprobe program on the loader's `_dl_debug_state`.
pub const LOADER_PROGRAM: &str = "loader_hook";
/// The loader's function called once new libraries are mapped, before their code runs.
pub const LOADER_HOOK_SYMBOL: &str = "_dl_debug_state";
/// SIGSTOP on x86_64 Linux.
pub const SIGSTOP: u32 = 19;

/// Indexes into the per-CPU counter array.
pub mod counter {
    /// Records that did not fit in the ring buffer.
    pub const RINGBUF_DROPS: u32 = 0;
    /// Calls whose entry state could not be saved (nested deeper than [`super::FRAME_DEPTH`],
    /// or no slot for the thread).
    pub const ENTRY_MAP_FULL: u32 = 1;
    /// Returns seen without a saved entry (probe attached mid-call, or state lost).
    pub const MISSING_ENTRY: u32 = 2;
    /// Failed reads of user memory (stack words, out-pointers).
    pub const READ_FAULTS: u32 = 3;
    /// Allocations that did not fit in the live-allocation inventory.
    pub const ALLOC_MAP_FULL: u32 = 4;
    /// Calls not recorded because their thread's [`super::ThreadSlot`] was held by another
    /// thread (two thread ids equal modulo the number of slots) when they returned: their
    /// entry was skipped (the other thread had calls in flight), overwritten (both took an idle
    /// slot at the same instant) or taken over after [`super::STALE_NS`].
    pub const SLOT_CLASH: u32 = 5;
    /// Saved entries dropped because their return never fired (the thread left the call by
    /// longjmp or died in it): no record could exist for them.
    pub const ABANDONED: u32 = 6;
    /// Reader wake-ups the programs forced (not a loss: how often a probed call paid for one).
    pub const WAKEUPS: u32 = 7;
    /// Child processes of followed processes that could not be followed ([`super::TRACED_MAP`]
    /// full): their calls are not recorded.
    pub const FOLLOW_FULL: u32 = 8;
    /// Followed processes the loader's hook could not stop (its ring was full): libraries they
    /// map are attached at the next rescan, and calls made before it are missed.
    pub const LOADS_LOST: u32 = 9;
    /// Processes mapping a runtime library file not probed yet that could not be held (the
    /// ring of stops or the set of held processes was full): the file is attached at the next
    /// rescan, and their calls made before it are missed.
    pub const NEW_FILE_LOST: u32 = 10;
    /// Number of counters.
    pub const COUNT: u32 = 11;
}

/// Flag bits of the attach cookie's mode field.
pub mod mode {
    /// Capture `words` stack arguments at entry.
    pub const STACK_WORDS: u64 = 1;
    /// Capture `words` u64 from the struct that argument 0 points to (cuLaunchKernelEx).
    pub const ARG0_STRUCT: u64 = 2;
}

/// The 64-bit attach cookie: what one attachment of the shared programs needs to know.
///
/// Layout: bits 0–15 API id, 16–23 out-argument index + 1 (0: none), 24–25 extra-capture
/// mode ([`mode`]), 26 the function returns void, 28–31 number of extra words, 32–39
/// inventory role (0 none, 1 alloc, 2 free), 40–47 size-argument index + 1, 48–55
/// pointer-argument index + 1, 56–59 name-argument index + 1 (0: no name to read), 60–63
/// handle-argument index + 1 (0: the name belongs to the out-pointer's value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie(pub u64);

/// Inventory role of a call: how it changes the live-allocation map.
pub mod role {
    /// Leaves the inventory alone.
    pub const NONE: u64 = 0;
    /// Inserts `out` (or the return value) with the size argument.
    pub const ALLOC: u64 = 1;
    /// Removes the pointer argument.
    pub const FREE: u64 = 2;
}

impl Cookie {
    /// Packs a cookie. Index arguments use [`crate::api::NO_ARG`] for "none".
    pub const fn new(
        api: u16,
        out_arg: u8,
        mode: u64,
        words: u8,
        role: u64,
        size_arg: u8,
        ptr_arg: u8,
    ) -> Self {
        const fn plus_one(i: u8) -> u64 {
            if i == crate::api::NO_ARG {
                0
            } else {
                i as u64 + 1
            }
        }
        Cookie(
            api as u64
                | plus_one(out_arg) << 16
                | (mode & 3) << 24
                | ((words as u64) & 0xf) << 28
                | (role & 0xff) << 32
                | plus_one(size_arg) << 40
                | plus_one(ptr_arg) << 48,
        )
    }

    /// Adds what a naming call needs: the argument holding the name string, the argument
    /// holding the handle ([`crate::api::NO_ARG`]: the out-pointer's value), and whether the
    /// function returns void. Indexes above 14 do not fit and leave the cookie unchanged.
    pub const fn with_name(self, name_arg: u8, handle_arg: u8, void_ret: bool) -> Self {
        const fn nibble(i: u8) -> u64 {
            if i == crate::api::NO_ARG || i >= 15 {
                0
            } else {
                i as u64 + 1
            }
        }
        let void = if void_ret { 1u64 << 26 } else { 0 };
        Cookie(self.0 | void | nibble(name_arg) << 56 | nibble(handle_arg) << 60)
    }
    /// The API id.
    pub const fn api(self) -> u16 {
        self.0 as u16
    }
    /// Out-argument index + 1, 0 for none.
    pub const fn out_plus_one(self) -> u64 {
        (self.0 >> 16) & 0xff
    }
    /// Extra-capture mode ([`mode`]).
    pub const fn mode(self) -> u64 {
        (self.0 >> 24) & 3
    }
    /// Number of extra words to capture.
    pub const fn words(self) -> u64 {
        (self.0 >> 28) & 0xf
    }
    /// Inventory role ([`role`]).
    pub const fn role(self) -> u64 {
        (self.0 >> 32) & 0xff
    }
    /// Size-argument index + 1, 0 for none.
    pub const fn size_plus_one(self) -> u64 {
        (self.0 >> 40) & 0xff
    }
    /// Pointer-argument index + 1, 0 for none.
    pub const fn ptr_plus_one(self) -> u64 {
        (self.0 >> 48) & 0xff
    }
    /// Name-argument index + 1, 0 when the call names nothing.
    pub const fn name_plus_one(self) -> u64 {
        (self.0 >> 56) & 0xf
    }
    /// Handle-argument index + 1, 0 for "the out-pointer's value".
    pub const fn handle_plus_one(self) -> u64 {
        (self.0 >> 60) & 0xf
    }
    /// The function returns void (no status to check).
    pub const fn void_ret(self) -> bool {
        self.0 & (1 << 26) != 0
    }

    /// Builds the cookie for a known API from its [`crate::api::ApiSpec`].
    pub const fn for_spec(id: u16, s: &crate::api::ApiSpec) -> Self {
        let (m, words) = match s.geometry {
            crate::api::Geometry::ConfigStruct => (mode::ARG0_STRUCT, EXTRA_WORDS as u8),
            _ if s.stack_words > 0 => (mode::STACK_WORDS, s.stack_words),
            _ => (0, 0),
        };
        let r = match s.kind {
            crate::api::ApiKind::Alloc => role::ALLOC,
            crate::api::ApiKind::Free => role::FREE,
            _ => role::NONE,
        };
        Cookie::new(id, s.out_arg, m, words, r, s.size_arg, s.ptr_arg).with_name(
            s.name_arg,
            s.handle_arg,
            s.void_ret,
        )
    }
}

/// Key of a call in flight: the thread and the API (nested calls of different APIs coexist).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryKey {
    /// `bpf_get_current_pid_tgid()`: tgid << 32 | tid.
    pub pid_tgid: u64,
    /// API id.
    pub api: u32,
    /// Padding, zero.
    pub _pad: u32,
}

/// What the entry probe saves for the return probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryState {
    /// CLOCK_MONOTONIC ns at entry.
    pub enter_ns: u64,
    /// The six argument registers.
    pub args: [u64; 6],
    /// Stack arguments or struct words, per the cookie's mode.
    pub extra: [u64; EXTRA_WORDS],
}

/// A slot whose newest call in flight is older than this (ns) may be taken over by another
/// thread: its owner most likely died mid-call. Until then the other thread's calls are
/// counted in [`counter::SLOT_CLASH`] and not recorded.
pub const STALE_NS: u64 = 10_000_000_000;

/// One saved call in flight: which API, and what its entry saw.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// API id.
    pub api: u16,
    /// Padding, zero.
    pub _pad: [u16; 3],
    /// The entry's time, arguments and extra words.
    pub state: EntryState,
}

/// The calls in flight of the thread that owns the slot (array index `tid & SLOT_MASK`).
///
/// Only the owning thread writes its slot, so the probes take no lock. A thread that enters a
/// probed call while another thread owns the slot takes it over when the owner has no call in
/// flight (or only calls older than [`STALE_NS`]: a thread killed mid-call does not keep its
/// slot for good); otherwise its call is not saved. A return whose thread does not own the
/// slot is counted in [`counter::SLOT_CLASH`] and dropped, never matched with another thread's
/// entry. Two threads taking one idle slot at the same instant (no atomics) can leave the
/// winner with the loser's frame for one call: that call's record carries the other thread's
/// entry time and arguments; the loser's call is counted.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadSlot {
    /// The owning thread's id (0: never used).
    pub tid: u32,
    /// Frames in use, innermost last (at most [`FRAME_DEPTH`]).
    pub depth: u32,
    /// Calls entered beyond [`FRAME_DEPTH`] and not yet returned (their returns are skipped).
    pub overflow: u32,
    /// 1 once the owner's first record has woken the reader (so it names the thread from /proc
    /// while it lives).
    pub woke: u32,
    /// The saved calls, outermost first.
    pub frames: [Frame; FRAME_DEPTH],
}

/// One completed call, as the return probe sends it through the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// CLOCK_MONOTONIC ns at entry.
    pub enter_ns: u64,
    /// CLOCK_MONOTONIC ns at return.
    pub exit_ns: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// API id.
    pub api: u16,
    /// Bit 0: `out` holds a value read through the out-pointer.
    pub flags: u16,
    /// The API id + 1 of the thread's innermost probed call in flight when this one was
    /// entered (the call it was made from: `cuLaunchKernel` inside `cudaLaunchKernel`), 0 when
    /// none was.
    pub parent: u16,
    /// Padding, zero.
    pub _pad: u16,
    /// The six argument registers at entry.
    pub args: [u64; 6],
    /// Stack arguments or struct words captured at entry.
    pub extra: [u64; EXTRA_WORDS],
    /// Return value (rax).
    pub ret: u64,
    /// Value read through the out-pointer at return (allocated pointer, queue, ...).
    pub out: u64,
}

/// A name a process gave a handle (a kernel function handle or a host stub address), read
/// from the naming call's string argument when it returned; sent after that call's
/// [`CallRecord`]. Told apart from a [`CallRecord`] in the ring buffer by its size.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameRecord {
    /// CLOCK_MONOTONIC ns at the naming call's return.
    pub ts_ns: u64,
    /// The handle named.
    pub handle: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The naming API.
    pub api: u16,
    /// Bytes of `name` the helper wrote, NUL included (`NAME_BYTES`: possibly cut).
    pub len: u16,
    /// Padding, zero.
    pub _pad: u32,
    /// The name, NUL-terminated.
    pub name: [u8; NAME_BYTES],
}

impl NameRecord {
    /// The name's bytes up to its NUL.
    pub fn name_bytes(&self) -> &[u8] {
        let n = (self.len as usize).min(NAME_BYTES);
        let bytes = &self.name[..n];
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        &bytes[..end]
    }
}

/// One item of the ring buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// A completed call.
    Call(CallRecord),
    /// A name given to a handle.
    Name(NameRecord),
}

impl Sample {
    /// Decodes an item by its size; `None` for a size that is neither record's.
    pub fn from_bytes(b: &[u8]) -> Option<Sample> {
        if b.len() == core::mem::size_of::<NameRecord>() {
            // SAFETY: the length was checked, NameRecord is plain integers (any bit pattern
            // is valid), and read_unaligned makes no alignment assumption about the buffer.
            return Some(Sample::Name(unsafe {
                core::ptr::read_unaligned(b.as_ptr().cast::<NameRecord>())
            }));
        }
        if b.len() == core::mem::size_of::<CallRecord>() {
            return CallRecord::from_bytes(b).map(Sample::Call);
        }
        None
    }
}

/// [`CallRecord::flags`] bit: `out` is valid.
pub const FLAG_OUT_VALID: u16 = 1;

/// Key of the live-allocation inventory.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocKey {
    /// Process id.
    pub pid: u32,
    /// Padding, zero.
    pub _pad: u32,
    /// Allocated address.
    pub ptr: u64,
}

/// Value of the live-allocation inventory.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocInfo {
    /// Bytes allocated.
    pub size: u64,
    /// CLOCK_MONOTONIC ns of the allocation's return.
    pub ts_ns: u64,
    /// Allocating thread.
    pub tid: u32,
    /// Allocating API.
    pub api: u16,
    /// Padding, zero.
    pub _pad: u16,
}

const _: () = assert!(core::mem::size_of::<EntryKey>() == 16);
const _: () = assert!(core::mem::size_of::<EntryState>() == 8 + 48 + 8 * EXTRA_WORDS);
const _: () = assert!(core::mem::size_of::<CallRecord>() == 136);
const _: () = assert!(core::mem::size_of::<Frame>() == 8 + core::mem::size_of::<EntryState>());
const _: () =
    assert!(core::mem::size_of::<ThreadSlot>() == 16 + FRAME_DEPTH * core::mem::size_of::<Frame>());
const _: () = assert!(core::mem::size_of::<AllocKey>() == 16);
const _: () = assert!(core::mem::size_of::<AllocInfo>() == 24);
const _: () = assert!(core::mem::size_of::<NameRecord>() == 32 + NAME_BYTES);
const _: () = assert!(core::mem::size_of::<NameRecord>() != core::mem::size_of::<CallRecord>());

#[cfg(feature = "user")]
mod pod {
    // SAFETY: each type is #[repr(C)], made only of integers and arrays of integers, with
    // explicit padding fields, so every bit pattern is a valid value and no byte is uninit.
    unsafe impl aya::Pod for super::EntryKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::EntryState {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::CallRecord {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Frame {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::ThreadSlot {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AllocKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AllocInfo {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::NameRecord {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::discovery::FileKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::discovery::Config {}
}

impl CallRecord {
    /// Decodes a record from ring-buffer bytes; `None` if the slice is too short.
    pub fn from_bytes(b: &[u8]) -> Option<CallRecord> {
        if b.len() < core::mem::size_of::<CallRecord>() {
            return None;
        }
        // SAFETY: the length was checked, CallRecord is plain integers (any bit pattern is
        // valid), and read_unaligned makes no alignment assumption about the buffer.
        Some(unsafe { core::ptr::read_unaligned(b.as_ptr().cast::<CallRecord>()) })
    }

    /// Argument `i` in the x86-64 numbering: 0–5 registers, 6.. stack words.
    pub fn arg(&self, i: u8) -> Option<u64> {
        let i = i as usize;
        if i < 6 {
            Some(self.args[i])
        } else {
            self.extra.get(i - 6).copied()
        }
    }
}

#[cfg(test)]
mod tests;
