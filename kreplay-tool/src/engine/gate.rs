//! The per-agent replay window: other dispatches and async copies to the agent hold it shared
//! from submission until they complete; a replay closes it, waits for them to drain, and holds
//! it exclusively until its last pass is done. Every wait is bounded.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    closed: bool,
    inflight: u64,
    /// In-flight async copies by id, with their dependency handles.
    copies: std::collections::BTreeMap<u64, Vec<u64>>,
    next_copy: u64,
}

/// One agent's gate.
#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    cv: Condvar,
}

/// How long in-flight work may make no progress before the window opens briefly.
pub const STALL_ROUND: Duration = Duration::from_millis(20);

/// How long a replay tries to drain the agent before declining.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters shared (a dispatch or copy on its way): waits while a replay holds the window.
    pub fn enter(&self) {
        let mut s = self.lock();
        while s.closed {
            s = match self.cv.wait_timeout(s, Duration::from_millis(100)) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        s.inflight += 1;
    }

    /// Leaves shared (the dispatch or copy completed).
    pub fn exit(&self) {
        let mut s = self.lock();
        s.inflight = s.inflight.saturating_sub(1);
        drop(s);
        self.cv.notify_all();
    }

    /// Enters a copy with dependency handles `deps` (waits while the window is closed);
    /// returns its id for [`Gate::exit_copy`].
    pub fn enter_copy(&self, deps: Vec<u64>) -> u64 {
        let mut s = self.lock();
        while s.closed {
            s = self.wait(s, Duration::from_millis(100));
        }
        s.next_copy += 1;
        let id = s.next_copy;
        s.copies.insert(id, deps);
        id
    }

    /// The copy `id` completed.
    pub fn exit_copy(&self, id: u64) {
        self.lock().copies.remove(&id);
        self.cv.notify_all();
    }

    /// Work entered and not yet exited.
    pub fn inflight(&self) -> u64 {
        self.lock().inflight
    }

    /// Closes the window once nothing is in flight; false if the agent did not drain within
    /// `limit` (the window is then left open). While in-flight work makes progress the window
    /// stays closed; when it stalls for a round (it may wait on work the closed window holds
    /// back, e.g. a copy depending on a dispatch not yet submitted) the window opens briefly
    /// so that work can enter.
    ///
    /// A copy does not hold the window while `blocked(deps)` says it still waits on one of its
    /// dependencies: those complete only after the window (the replayed dispatch's own signal,
    /// or dispatches the window holds back), so the copy cannot run inside it.
    pub fn close(&self, limit: Duration, blocked: &dyn Fn(&[u64]) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        let mut s = self.lock();
        loop {
            while s.closed {
                if Instant::now() >= deadline {
                    return false;
                }
                s = self.wait(s, Duration::from_millis(100));
            }
            s.closed = true;
            loop {
                let pending = |s: &State| {
                    s.inflight + s.copies.values().filter(|d| !blocked(d)).count() as u64
                };
                let before = pending(&s);
                let round = Instant::now() + STALL_ROUND;
                while pending(&s) > 0 {
                    let now = Instant::now();
                    if now >= round {
                        break;
                    }
                    let step = if s.copies.is_empty() {
                        round - now
                    } else {
                        (round - now).min(Duration::from_millis(1))
                    };
                    s = self.wait(s, step);
                }
                let left = pending(&s);
                if left == 0 {
                    return true;
                }
                if left >= before || Instant::now() >= deadline {
                    break; // stalled: let held-back work in
                }
            }
            s.closed = false;
            self.cv.notify_all();
            if Instant::now() >= deadline {
                return false;
            }
            drop(s);
            std::thread::sleep(Duration::from_micros(500));
            s = self.lock();
        }
    }

    fn wait<'a>(&self, s: MutexGuard<'a, State>, d: Duration) -> MutexGuard<'a, State> {
        match self.cv.wait_timeout(s, d) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }

    /// Reopens the window after a replay.
    pub fn open(&self) {
        self.lock().closed = false;
        self.cv.notify_all();
    }
}

/// A window [`Gate::close_window`] closed, opened again when dropped: also when a panic unwinds
/// past it, so that no other thread of the application waits on it forever.
pub struct Window<'a>(&'a Gate);

impl Drop for Window<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A launch [`Gate::entered`] the gate with, leaving it when dropped (a panic included).
pub struct Entered<'a>(&'a Gate);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.exit();
    }
}

impl Gate {
    /// Waits, at most `limit`, until no replay window is closed (for work that runs outside
    /// the gate's count and must not run inside a window).
    pub fn wait_open(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut s = self.lock();
        while s.closed {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            s = self.wait(s, (deadline - now).min(Duration::from_millis(100)));
        }
    }

    /// [`Gate::close`], as a [`Window`] that opens when dropped; `None` when it did not drain.
    pub fn close_window(
        &self,
        limit: Duration,
        blocked: &dyn Fn(&[u64]) -> bool,
    ) -> Option<Window<'_>> {
        self.close(limit, blocked).then_some(Window(self))
    }

    /// [`Gate::enter`], as an [`Entered`] that exits when dropped.
    pub fn entered(&self) -> Entered<'_> {
        self.enter();
        Entered(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_closed_window_holds_entrants_until_it_opens() {
        let g = Arc::new(Gate::default());
        assert!(g.close(DRAIN_LIMIT, &|_| false));
        let entered = Arc::new(AtomicBool::new(false));
        let (g2, e2) = (g.clone(), entered.clone());
        let t = std::thread::spawn(move || {
            g2.enter();
            e2.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            !entered.load(Ordering::SeqCst),
            "entered during the replay window"
        );
        g.open();
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(g.inflight(), 1);
    }

    #[test]
    fn close_waits_for_in_flight_work_and_gives_up_when_it_never_drains() {
        let g = Arc::new(Gate::default());
        g.enter();
        let g2 = g.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(80));
            g2.exit();
        });
        assert!(g.close(DRAIN_LIMIT, &|_| false));
        t.join().unwrap();
        g.open();
        g.enter();
        assert!(!g.close(Duration::from_millis(120), &|_| false));
        assert_eq!(g.inflight(), 1);
    }

    #[test]
    fn a_copy_blocked_on_its_dependencies_does_not_hold_the_window() {
        let g = Gate::default();
        let id = g.enter_copy(vec![42]);
        assert!(g.close(Duration::from_millis(100), &|deps| deps == [42]));
        g.open();
        assert!(
            !g.close(Duration::from_millis(100), &|_| false),
            "a runnable copy holds it"
        );
        g.exit_copy(id);
        assert!(g.close(Duration::from_millis(100), &|_| false));
    }

    #[test]
    fn a_window_or_a_launch_unwound_by_a_panic_lets_the_others_in() {
        let g = std::sync::Arc::new(Gate::default());
        let g2 = g.clone();
        let r = std::thread::spawn(move || {
            let _w = g2.close_window(Duration::from_secs(1), &|_| false).unwrap();
            panic!("inside the window");
        })
        .join();
        assert!(r.is_err());
        assert!(!g.lock().closed, "the window stayed closed");
        let g3 = g.clone();
        let r = std::thread::spawn(move || {
            let _e = g3.entered();
            panic!("inside a launch");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(g.inflight(), 0);
        assert!(g.close(Duration::from_millis(200), &|_| false));
    }

    #[test]
    fn wait_open_returns_once_the_window_opens_and_gives_up_at_its_limit() {
        let g = std::sync::Arc::new(Gate::default());
        assert!(g.close(Duration::from_millis(200), &|_| false));
        // Closed: waiting gives up at the limit.
        let t0 = Instant::now();
        g.wait_open(Duration::from_millis(50));
        assert!(t0.elapsed() >= Duration::from_millis(50));
        assert!(g.lock().closed);
        // Opened by another thread meanwhile: the wait ends then, long before its limit.
        let g2 = g.clone();
        let opener = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            g2.open();
        });
        let t0 = Instant::now();
        g.wait_open(Duration::from_secs(10));
        assert!(!g.lock().closed);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        opener.join().unwrap();
    }
}
