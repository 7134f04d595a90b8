//! Exiting at once on an interrupt while kreplay is ending.
//!
//! Once a trace or an audit stops, kreplay still detaches its probes. uprobe-multi links close
//! in a moment, all at once; but where the kernel has none, each function has a perf event,
//! which the kernel tears down under one global lock, waiting for RCU grace periods each time:
//! about a tenth of a second per probe, seconds in all. That cost is paid by whichever process
//! drops the last reference to the probes' descriptors, also on exit. [`detach_in_child`]
//! leaves that last reference to a child process, so that after [`arm`] an interrupt can end
//! kreplay at once while the child finishes the teardown in the background.
//!
//! `kreplay replay --probes` runs `kreplay trace` as a child and waits for it: there
//! [`arm_after_first`] lets the first interrupt (which stops the command and the probes' trace)
//! pass and ends kreplay at the next, as [`arm`] does; the child, told to [`silence`] its note,
//! exits at the same interrupt, leaving the note to its parent, which knows every file the run
//! left.
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The note printed by the handler (a leaked buffer; null: none).
static NOTE: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// The temporary file of a trace being written, which the handler removes (a leaked C string;
/// null: none).
static PENDING: AtomicPtr<std::ffi::CString> = AtomicPtr::new(std::ptr::null_mut());

/// The line [`arm_after_first`]'s first interrupt prints (a leaked buffer; null: none).
static FIRST_NOTE: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// Whether the first interrupt after [`arm_after_first`] has come.
static FIRST_SEEN: AtomicBool = AtomicBool::new(false);
/// Whether the exit on an interrupt prints nothing ([`silence`]).
static SILENT: AtomicBool = AtomicBool::new(false);

/// Names the temporary file an exit from the handler must remove (`None`: none now).
pub fn set_pending(tmp: Option<&std::path::Path>) {
    use std::os::unix::ffi::OsStrExt;
    let ptr = tmp
        .and_then(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
        .map_or(std::ptr::null_mut(), |c| Box::leak(Box::new(c)) as *mut _);
    // Leaked like the notes: the handler may be reading the previous one.
    PENDING.store(ptr, Ordering::Release);
}

/// A line (newline added) in a buffer the handlers may read at any time: leaked, never freed.
fn leaked_line(text: &str) -> *mut Vec<u8> {
    // The previous one is leaked too, not freed: a handler may be reading it. A few short
    // lines per run.
    Box::leak(Box::new(format!("{text}\n").into_bytes()))
}

/// Sets the note the handler prints (a line, newline added) before exiting.
pub fn set_note(note: &str) {
    NOTE.store(leaked_line(note), Ordering::Release);
}

/// From now on the exit on an interrupt prints no note: a parent kreplay that runs this one
/// says what the run left.
pub fn silence() {
    SILENT.store(true, Ordering::Release);
}

/// From now on SIGINT and SIGTERM remove the file of [`set_pending`], print the note of
/// [`set_note`] and exit with 128 + the signal's number.
pub fn arm(note: &str) {
    set_note(note);
    install(on_signal);
}

/// From now on the first SIGINT or SIGTERM only prints `first` (a line; the interrupt goes on
/// to stop what it stops, such as a child in the same process group), and any later one ends
/// kreplay as after [`arm`], printing `note`. [`arm`] afterwards makes the next one end it.
pub fn arm_after_first(first: &str, note: &str) {
    FIRST_NOTE.store(leaked_line(first), Ordering::Release);
    set_note(note);
    install(on_first_signal);
}

/// Whether the first interrupt after [`arm_after_first`] has come.
pub fn first_seen() -> bool {
    FIRST_SEEN.load(Ordering::Acquire)
}

/// Installs `handler` for SIGINT and SIGTERM.
fn install(handler: extern "C" fn(libc::c_int)) {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: both handlers call only async-signal-safe functions (see them); the
        // sigaction struct is fully initialized (zeroed, then the handler and an empty mask).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_first_signal(sig: libc::c_int) {
    if FIRST_SEEN.swap(true, Ordering::AcqRel) {
        on_signal(sig);
    }
    // SAFETY: write is async-signal-safe; the line is leaked, never freed, so the pointer
    // stays valid.
    unsafe {
        let first = FIRST_NOTE.load(Ordering::Acquire);
        if !first.is_null() {
            let b = &*first;
            libc::write(2, b.as_ptr().cast(), b.len());
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: write, unlink and _exit are async-signal-safe; the note and the path are
    // leaked, never freed, so the pointers stay valid.
    unsafe {
        let pending = PENDING.load(Ordering::Acquire);
        if !pending.is_null() {
            libc::unlink((*pending).as_ptr());
        }
        let note = NOTE.load(Ordering::Acquire);
        if !note.is_null() && !SILENT.load(Ordering::Acquire) {
            let b = &*note;
            libc::write(2, b.as_ptr().cast(), b.len());
        }
        libc::_exit(128 + sig);
    }
}

/// What [`detach_in_child`] tears down: the part that closes fast is closed here first (on
/// threads, which a forked child may not start), the rest is left to the child.
pub trait Teardown {
    /// Closes now what closes fast when closed all at once.
    fn close_fast(&mut self);
}

/// Drops `held` (the loaded probes) and returns once the kernel has torn them down: what
/// [`Teardown::close_fast`] closes first, the rest by a child process that holds the last
/// references to their descriptors:
/// if kreplay exits first (an interrupt after [`arm`]), the child finishes the teardown on
/// its own, in a session of its own and with its standard streams closed. Without a child
/// (fork failed), `held` is dropped here.
pub fn detach_in_child<T: Teardown>(mut held: T) {
    held.close_fast();
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        drop(held);
        return;
    }
    let [r, w] = fds;
    // SAFETY: the child calls only async-signal-safe functions (`background_teardown`), as a
    // child of a multi-threaded process must.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: this is the forked child.
        unsafe { background_teardown(r, w) }
    }
    // SAFETY: closing descriptors this function created, once each.
    unsafe { libc::close(r) };
    // The child (if any) holds the descriptors too: this only drops references.
    drop(held);
    // SAFETY: as above; the child sees end of file once no write end is left open here.
    unsafe { libc::close(w) };
    if pid > 0 {
        let mut status = 0;
        // SAFETY: waits for the child forked above; `status` is a valid out-pointer.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
    } else {
        tracing::debug!(error = %std::io::Error::last_os_error(), "fork failed: detaching here");
    }
}

/// The child's side: out of the terminal's reach, it waits until kreplay has dropped its
/// references (end of file on the pipe `r`, whose write end `w` only kreplay then holds),
/// then exits, the teardown happening as its descriptors close.
///
/// # Safety
/// Called only in the child forked by [`detach_in_child`]; async-signal-safe calls only.
unsafe fn background_teardown(r: libc::c_int, w: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls on valid arguments (see the caller).
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(s, &ignore, std::ptr::null_mut());
        }
        libc::setsid();
        for fd in 0..=2 {
            libc::close(fd);
        }
        libc::close(w);
        let mut b = 0u8;
        loop {
            let n = libc::read(r, (&raw mut b).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        libc::_exit(0)
    }
}
