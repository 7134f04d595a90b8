//! Process lifecycle hooks for the global recorder: a last flush at exit, no recording (and
//! no lock taken) in a forked child, whose inherited locks may be held by threads that do
//! not exist there, and the cached process id, which a forked child reads afresh.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Once, OnceLock};

use super::sink::{flush_global, global_if_started};
use super::thread_buffer::forget_cached_tid;

/// Registers, once, an `atexit` handler that flushes the global recorder; false if libc
/// refused it.
pub fn install_exit_flush() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    // SAFETY: `exit_flush` is an `extern "C" fn()` that never unwinds (it catches panics).
    *INSTALLED.get_or_init(|| unsafe { libc::atexit(exit_flush) } == 0)
}

/// Set once the exit flush starts: from then on nothing logs through `tracing` (the main
/// thread's thread-locals, the log subscriber's among them, are destroyed before `atexit`
/// handlers run, and a log event would panic and abandon the flush).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether the process is in its exit flush (or the tool is unloading).
pub(super) fn exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// Marks the tool's teardown (`OnUnload`, often called from the application's exit path):
/// the flushes that follow log nothing through `tracing`.
pub fn enter_teardown() {
    EXITING.store(true, Ordering::Relaxed);
}

extern "C" fn exit_flush() {
    enter_teardown();
    let _ = std::panic::catch_unwind(|| {
        crate::fault::point("exit_flush");
        crate::warn_once::print_repeated_once();
        // In a forked child the recorder is disabled: its locks may be held by threads that
        // were not copied, so touch nothing.
        if global_if_started().is_some_and(|r| r.is_enabled())
            && let Err(e) = flush_global()
        {
            eprintln!("kreplay: the exit flush of the tool stream failed: {e}");
        }
    });
}

/// Registers, once, a fork handler that disables the global recorder in the child.
pub(super) fn install_fork_guard() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `in_forked_child` is an `extern "C" fn()` that never unwinds; no prepare or
        // parent handler is passed.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
        if rc != 0 {
            tracing::warn!("kreplay: pthread_atfork failed ({rc}); a forked child would record");
        }
    });
}

/// The process id once read (0: not read yet, or forgotten in a forked child).
static PID: AtomicU32 = AtomicU32::new(0);

/// The calling process's id, cached: `getpid` is a real system call, several times the whole
/// cost of recording a row (docs/bench/contention.md), and rows carry the pid.
#[inline]
pub fn current_pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => read_pid(),
        pid => pid,
    }
}

#[cold]
fn read_pid() -> u32 {
    // The fork handler forgets the cached value in a child; install it before caching.
    install_fork_guard();
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

extern "C" fn in_forked_child() {
    // Only atomics and thread-locals here: the child has one thread and maybe held locks.
    if let Some(r) = global_if_started() {
        r.disable();
    }
    PID.store(0, Ordering::Relaxed);
    forget_cached_tid();
}
