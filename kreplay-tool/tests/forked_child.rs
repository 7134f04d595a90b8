//! A forked child of a recording process records nothing and takes no lock (its parent's
//! other threads, which may hold them, are gone), and its thread and process ids are its own.

mod support;

use kreplay_tool::record;
use support::call;

#[test]
fn a_forked_child_records_nothing_and_knows_its_own_tid_and_pid() {
    let rec = record::global();
    assert!(record::install_exit_flush());
    (0..100).for_each(|i| rec.record(call(i)));
    rec.merge();
    assert_eq!(rec.stats().rows, 100);
    let parent_tid = record::current_tid();
    // Cached from here on; the child must not see this value.
    assert_eq!(record::current_pid(), std::process::id());

    // SAFETY: the child only reads atomics and thread-locals, checks, and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = if rec.is_enabled() {
            10
        } else if record::current_tid() == parent_tid {
            11
        } else if record::current_tid() != std::process::id() {
            12
        } else if record::current_pid() != std::process::id() {
            14
        } else {
            rec.record(call(7));
            rec.record_correlation(1, 2);
            rec.set_per_thread(true);
            if rec.is_enabled() { 13 } else { 0 }
        };
        // SAFETY: `_exit` ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "child check failed");
    // The parent keeps recording.
    assert!(rec.is_enabled());
    assert_eq!(record::current_pid(), std::process::id());
    rec.record(call(100));
    rec.merge();
    assert_eq!(rec.stats().rows, 101);
}
