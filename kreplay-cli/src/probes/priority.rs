//! The reader's scheduling priority. A traced application whose threads keep every core busy
//! leaves the thread that drains the ring buffer a fair share of one thread among many: 32 busy
//! threads calling a probed function on 2 cores overflow the default ring, though the reader
//! needs only 120–200 ns of CPU per record (`docs/trace.md`, "How records reach kreplay").
//! With root (CAP_SYS_NICE) the draining thread asks for a higher priority, [`READER_NICE`]:
//! only that thread (Linux keeps a nice value per thread), never the traced processes.

/// The nice value the draining thread asks for (a weight about nine times the default's).
pub const READER_NICE: i32 = -10;

/// Raises the calling thread's priority to [`READER_NICE`] unless it already has at least that
/// much; returns the nice value it runs at, or the error of `setpriority` (no CAP_SYS_NICE).
pub fn raise_current_thread() -> std::io::Result<i32> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority may return -1 as a value: errno tells an error apart.
    // SAFETY: errno is this thread's; getpriority reads only its arguments.
    let now = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    };
    // SAFETY: reads this thread's errno.
    if now == -1 && unsafe { *libc::__errno_location() } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if now <= READER_NICE {
        return Ok(now);
    }
    // SAFETY: plain system call on this thread's id; on Linux PRIO_PROCESS with a thread id
    // sets that thread's nice value only.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, READER_NICE) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(READER_NICE)
}

/// [`raise_current_thread`] for the thread that drains the ring, saying at debug level what it
/// got (without CAP_SYS_NICE the thread keeps its priority; that is not an error).
pub fn raise_reader_thread() {
    match raise_current_thread() {
        Ok(nice) => tracing::debug!("reader thread runs at nice {nice}"),
        Err(e) => tracing::debug!("reader thread keeps its priority: setpriority: {e}"),
    }
}
