//! One application thread's buffers and the thread-local slot that finds them: the hot path
//! of per-thread recording.
//!
//! The calling thread's slot: the one thread-local the recording hot path reads (the buffer
//! it last used and the cached thread id), kept in initial-exec TLS on x86-64 Linux.
//!
//! A `thread_local!` in a shared library uses the general-dynamic TLS model: every access
//! calls `__tls_get_addr` (several times an initial-exec access: docs/bench/contention.md),
//! while the same code linked into an executable, as the benchmarks are,
//! reads the thread pointer directly. So a benchmark would time a cheaper path than
//! `libkreplay_tool.so` runs. Here the slot is a hidden `.tbss` symbol reached through its
//! GOT entry (`@GOTTPOFF`) plus `%fs:0`: two loads in the library, and in an executable the
//! linker relaxes the GOT load into a constant. The library is preloaded (`LD_PRELOAD`), so
//! its static TLS is laid out at startup; a `dlopen` takes these 24 bytes from glibc's
//! reserve for such libraries. Other targets use a plain `thread_local!`.

use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kreplay_common::stream::{Correlation, Record};

use super::block_log::BlockLog;

/// A thread's rows and correlation records; the thread owns the push side of both logs.
pub struct ThreadBuffer {
    /// Kernel thread id of the owner.
    pub tid: u32,
    /// The owner's name when it registered.
    pub name: String,
    /// Recorded rows.
    pub rows: BlockLog<Record>,
    /// Recorded external correlation ids.
    pub correlations: BlockLog<Correlation>,
    /// In its recorder's registry. The registry writes it (under its lock); the owner reads it.
    pub registered: AtomicBool,
    /// The owner thread has exited: after one more drain the buffer can be freed.
    pub exited: AtomicBool,
    /// The thread's name was queued for the stream. Registry only, under its lock.
    pub announced: AtomicBool,
    /// The recorder was dropped: the owner's table may forget this buffer.
    pub orphaned: AtomicBool,
}

impl ThreadBuffer {
    /// A buffer for the calling thread, each log capped at `cap` entries.
    pub fn for_current_thread(cap: usize) -> Self {
        Self {
            tid: current_tid(),
            name: current_thread_name(),
            rows: BlockLog::new(cap),
            correlations: BlockLog::new(cap),
            registered: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            announced: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
        }
    }
}

/// One row of the thread-local table: a recorder's buffer for this thread.
struct LocalEntry {
    recorder: u64,
    buffer: Arc<ThreadBuffer>,
}

impl Drop for LocalEntry {
    fn drop(&mut self) {
        // The fast path must never see a buffer whose table entry is gone.
        let slot = slot();
        // SAFETY: entries are dropped on their own thread (the table is thread-local), and
        // the slot is that thread's, valid for its whole life and used by it alone.
        unsafe {
            if (*slot).buffer == Arc::as_ptr(&self.buffer) {
                (*slot).recorder = 0;
                (*slot).buffer = std::ptr::null();
            }
        }
        // The thread is exiting (or the recorder is gone): the registry's reference keeps the
        // buffer, and its rows, until the next merge drains and frees it.
        self.buffer.exited.store(true, Ordering::Release);
    }
}

thread_local! {
    /// This thread's buffers, one per recorder. The hot path does not read it: it reads the
    /// buffer last returned from the thread's [`slot`], which an entry's drop clears.
    static LOCAL: RefCell<Vec<LocalEntry>> = const { RefCell::new(Vec::new()) };
}

/// This thread's buffer for recorder `id`, creating it with `make` and passing a fresh or
/// unregistered one to `register` first. `None` when thread-local storage is gone (the
/// thread is exiting) or re-entered: the caller falls back to the shared path.
///
/// The pointer stays valid until this thread calls `local_buffer` again or exits: the
/// table's `Arc` keeps the buffer alive, and only those two ever remove table entries.
#[inline]
pub fn local_buffer(
    id: u64,
    make: impl FnOnce() -> ThreadBuffer,
    register: impl FnOnce(&Arc<ThreadBuffer>),
) -> Option<NonNull<ThreadBuffer>> {
    let slot = slot();
    // SAFETY: the slot is this thread's, valid for its whole life and used by it alone; its
    // buffer, when not null, is kept alive by this thread's `LOCAL` entry for it (the entry's
    // drop clears the slot first).
    unsafe {
        if (*slot).recorder == id
            && let Some(buffer) = (*slot).buffer.as_ref()
            && buffer.registered.load(Ordering::Relaxed)
        {
            return Some(NonNull::from(buffer));
        }
    }
    local_buffer_slow(id, make, register)
}

/// `local_buffer` when the slot does not hold a registered buffer for `id`: the table search,
/// creation and registration, out of line so that the hot path stays small.
#[cold]
#[inline(never)]
fn local_buffer_slow(
    id: u64,
    make: impl FnOnce() -> ThreadBuffer,
    register: impl FnOnce(&Arc<ThreadBuffer>),
) -> Option<NonNull<ThreadBuffer>> {
    LOCAL
        .try_with(|table| {
            let mut table = table.try_borrow_mut().ok()?;
            let idx = match table.iter().position(|e| e.recorder == id) {
                Some(i) => i,
                None => add_entry(&mut table, id, make()),
            };
            let buffer = &table[idx].buffer;
            if !buffer.registered.load(Ordering::Relaxed) {
                register(buffer);
            }
            let slot = slot();
            // SAFETY: the slot is this thread's and used by it alone; the buffer stays alive
            // while its table entry exists, and removing the entry clears the slot.
            unsafe {
                (*slot).recorder = id;
                (*slot).buffer = Arc::as_ptr(buffer);
            }
            Some(NonNull::from(&**buffer))
        })
        .ok()
        .flatten()
}

#[cold]
fn add_entry(table: &mut Vec<LocalEntry>, id: u64, buffer: ThreadBuffer) -> usize {
    table.retain(|e| !e.buffer.orphaned.load(Ordering::Relaxed));
    table.push(LocalEntry {
        recorder: id,
        buffer: Arc::new(buffer),
    });
    table.len() - 1
}

/// The calling thread's kernel thread id (cached per thread: gettid is a real syscall).
#[inline]
pub fn current_tid() -> u32 {
    let slot = slot();
    // SAFETY: the slot is this thread's, valid for its whole life and used by it alone.
    unsafe {
        if (*slot).tid == 0 {
            (*slot).tid = gettid();
        }
        (*slot).tid
    }
}

/// Forgets the cached thread id (in a forked child the surviving thread has a new one).
pub fn forget_cached_tid() {
    // SAFETY: as in `current_tid`.
    unsafe { (*slot()).tid = 0 };
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// The calling thread's name: Rust's name if it has one, else the kernel's `comm`.
fn current_thread_name() -> String {
    if let Some(name) = std::thread::current().name() {
        return name.to_owned();
    }
    std::fs::read_to_string("/proc/thread-self/comm")
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

// The calling thread's slot (see the module comment on the TLS model).

/// What the hot path keeps per thread. All zero in a new thread.
#[repr(C)]
pub struct Slot {
    /// Id of the recorder `buffer` belongs to (0: none).
    pub recorder: u64,
    /// The buffer `local_buffer` last returned for `recorder`, or null. Points only at a
    /// buffer this thread's table keeps alive: removing the table entry clears it first.
    pub buffer: *const ThreadBuffer,
    /// The thread's kernel id once read (0: not read yet).
    pub tid: u32,
}

const _: () = assert!(size_of::<Slot>() == 24 && align_of::<Slot>() == 8);

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
std::arch::global_asm!(
    ".pushsection .tbss.kreplay_thread_slot,\"awT\",@nobits",
    ".p2align 3",
    ".globl kreplay_thread_slot",
    ".hidden kreplay_thread_slot",
    ".type kreplay_thread_slot,@object",
    ".size kreplay_thread_slot,24",
    "kreplay_thread_slot:",
    ".zero 24",
    ".popsection",
);

/// The calling thread's slot. Valid for the thread's whole life, thread-local destructors
/// included; only the calling thread may use it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn slot() -> *mut Slot {
    let offset: usize;
    let thread_pointer: usize;
    // SAFETY: both loads read memory that always exists: the GOT entry the dynamic linker
    // (or, in an executable, the linker) filled with the slot's offset from the thread
    // pointer, and `%fs:0`, which the x86-64 TLS ABI defines as the thread pointer itself.
    // Neither writes memory, uses the stack or changes flags.
    unsafe {
        std::arch::asm!(
            "movq kreplay_thread_slot@GOTTPOFF(%rip), {offset}",
            "movq %fs:0, {tp}",
            offset = out(reg) offset,
            tp = out(reg) thread_pointer,
            options(att_syntax, nostack, preserves_flags, readonly),
        );
    }
    thread_pointer.wrapping_add(offset) as *mut Slot
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
thread_local! {
    static SLOT: std::cell::UnsafeCell<Slot> = const {
        std::cell::UnsafeCell::new(Slot { recorder: 0, buffer: std::ptr::null(), tid: 0 })
    };
}

/// The calling thread's slot. Valid for the thread's whole life (the slot has no destructor,
/// so the thread-local is never torn down); only the calling thread may use it.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline(always)]
pub fn slot() -> *mut Slot {
    SLOT.with(std::cell::UnsafeCell::get)
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_zeroed_slot() {
        let here = slot();
        // SAFETY: the slot is this thread's, valid for its life, and used by it alone.
        let saved = unsafe { std::mem::replace(&mut (*here).tid, 77) };
        let (there, tid_there) = std::thread::spawn(|| {
            let s = slot();
            // SAFETY: as above, for the spawned thread's slot.
            let tid = unsafe { (*s).tid };
            (s as usize, tid)
        })
        .join()
        .unwrap();
        assert_ne!(there, here as usize);
        assert_eq!(tid_there, 0);
        assert_eq!(slot(), here);
        // SAFETY: as above.
        assert_eq!(unsafe { std::mem::replace(&mut (*here).tid, saved) }, 77);
    }
}
