//! Progress counters `kreplay replay` shows while the application runs: dispatches replayed,
//! passes run and nanoseconds spent inside kreplay, added after each replay to the three words
//! of the file the CLI created and names in [`ENV`] ([`kreplay_common::progress`]), mapped
//! shared (every process of the application adds to the same words; the CLI maps the file too
//! and reads them). Without the variable, or when the file cannot be mapped, nothing is
//! counted there. The same counts are kept in the process too ([`totals`]): the session of a
//! kreplay attached to the process reports them over its control channel.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

pub use kreplay_common::progress::{ENV, LEN};

fn counters() -> Option<&'static [AtomicU64; 3]> {
    static MAPPED: OnceLock<Option<usize>> = OnceLock::new();
    let addr = (*MAPPED.get_or_init(map))?;
    // SAFETY: `map` returned a shared, writable mapping of LEN bytes, page-aligned, never
    // unmapped; AtomicU64 has the layout of u64, and every access to it is atomic.
    Some(unsafe { &*(addr as *const [AtomicU64; 3]) })
}

/// Maps the file named by [`ENV`], when there is one of [`LEN`] bytes or more.
fn map() -> Option<usize> {
    let path = std::env::var_os(ENV)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()?;
    if file.metadata().ok()?.len() < LEN as u64 {
        return None;
    }
    use std::os::fd::AsRawFd as _;
    // SAFETY: a new shared mapping of LEN bytes of an open file; the result is checked.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

/// This process's counts since it started (dispatches replayed, passes, ns inside kreplay).
static TOTALS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// This process's counts since it started: dispatches replayed, passes, ns inside kreplay.
pub fn totals() -> [u64; 3] {
    std::array::from_fn(|i| TOTALS[i].load(Ordering::Relaxed))
}

/// Counts one replay that kept its thread `inside_ns` inside kreplay and, when it ran all
/// its passes, the dispatch and its `passes`.
pub fn note(passes: Option<u32>, inside_ns: u64) {
    for c in std::iter::once(&TOTALS).chain(counters()) {
        if let Some(p) = passes {
            c[0].fetch_add(1, Ordering::Relaxed);
            c[1].fetch_add(u64::from(p), Ordering::Relaxed);
        }
        c[2].fetch_add(inside_ns, Ordering::Relaxed);
    }
}
