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

use super::thread_buffer::ThreadBuffer;

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
mod tests {
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
