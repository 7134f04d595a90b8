//! Panics inside the tool's FFI entries. Each entry runs its own work through [`guard`], which
//! catches a panic and stops replay for the rest of the process: the work it interrupted may
//! have left allocation tracking incomplete, and replaying over memory kreplay does not know
//! would change what the application computes. From then on every launch runs once, as
//! without kreplay.
//!
//! For the tests that check this, each guarded region calls [`point`] first. A site panics
//! only when armed: through the environment variable [`ENV`] (`SITE[,SITE...]`, or `all`) of
//! the process the tool is loaded into, and, in this crate's unit tests, through `arm` for the
//! calling thread. Unarmed, a site costs
//! one relaxed atomic load.

use std::panic::UnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// The environment variable naming the sites to panic at (comma-separated, or `all`).
pub const ENV: &str = kreplay_common::replay_config::FORCE_PANIC;

/// Every site, by the entry (or entries) it sits in.
pub const SITES: &[&str] = &[
    "cuda.dlsym",
    "cuda.get_proc",
    "cuda.launch",
    "cuda.passed",
    "cuda.replayed",
    "cuda.alloc",
    "cuda.free",
    "cuda.untracked",
    "cuda.module_load",
    "cuda.module_unload",
    "cuda.graph_launch",
    "hsa.on_load",
    "hsa.on_unload",
    "hsa.alloc",
    "hsa.free",
    "hsa.vmem_map",
    "hsa.vmem_unmap",
    "hsa.queue_create",
    "hsa.dispatch",
    "hsa.replayed",
    "hsa.doorbell",
    "hsa.async_copy",
    "hsa.copy_done",
    "exit_flush",
];

/// Set once a guarded region panicked.
static CAUGHT: AtomicBool = AtomicBool::new(false);

/// Runs `f`, catching a panic: like `std::panic::catch_unwind`, and a caught panic stops
/// replay for the rest of the process (see [`stopped`]).
pub fn guard<R>(f: impl FnOnce() -> R + UnwindSafe) -> std::thread::Result<R> {
    let r = std::panic::catch_unwind(f);
    if r.is_err() && !CAUGHT.swap(true, Ordering::Relaxed) {
        let _ = std::panic::catch_unwind(|| {
            tracing::warn!(
                "kreplay: a panic inside kreplay was caught; launches are no longer replayed"
            )
        });
    }
    r
}

/// Why replay is stopped, once a guarded region panicked.
pub fn stopped() -> Option<&'static str> {
    CAUGHT
        .load(Ordering::Relaxed)
        .then_some("a panic inside kreplay left its tracking incomplete")
}

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);
static ARMED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The message of a forced panic at `site`.
pub fn message(site: &str) -> String {
    format!("kreplay: forced panic at {site}")
}

/// Panics when `site` is armed.
#[inline]
pub fn point(site: &'static str) {
    if cfg!(test) || MODE.load(Ordering::Relaxed) != OFF {
        armed_point(site);
    }
}

#[cold]
fn armed_point(site: &'static str) {
    let armed = ARMED.get_or_init(|| std::env::var(ENV).unwrap_or_default());
    MODE.store(if armed.is_empty() { OFF } else { ON }, Ordering::Relaxed);
    let by_env = armed == "all" || armed.split(',').any(|s| s == site);
    if by_env || armed_here(site) {
        panic!("{}", message(site));
    }
}

#[cfg(test)]
thread_local! {
    static HERE: std::cell::RefCell<Option<&'static str>> = const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
fn armed_here(site: &str) -> bool {
    HERE.with(|h| h.borrow().is_some_and(|a| a == "all" || a == site))
}

#[cfg(not(test))]
fn armed_here(_: &str) -> bool {
    false
}

/// Arms `site` (or `all`) on the calling thread until the guard drops.
#[cfg(test)]
pub fn arm(site: &'static str) -> Armed {
    HERE.with(|h| *h.borrow_mut() = Some(site));
    Armed
}

/// Disarms the calling thread's site when dropped.
#[cfg(test)]
pub struct Armed;

#[cfg(test)]
impl Drop for Armed {
    fn drop(&mut self) {
        HERE.with(|h| *h.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_armed_site_panics_with_its_name_and_others_do_not() {
        let _a = arm("cuda.free");
        point("cuda.alloc");
        let err = std::panic::catch_unwind(|| point("cuda.free")).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some("kreplay: forced panic at cuda.free")
        );
        drop(_a);
        point("cuda.free");
    }
}
