//! The per-thread slot table: where the entry program saves a call and the return program
//! finds it again.
//!
//! An array indexed by `tid & SLOT_MASK` (the verifier inlines array lookups: no hashing, no
//! bucket lock, no allocation, unlike the LRU hash map this replaces, whose insert at entry
//! and lookup + delete at return cost more than the rest of both programs together). Each
//! slot holds a small stack of frames, so a thread inside two probed calls at once (hipMalloc
//! → hsa_amd_memory_pool_allocate) keeps both. Ownership rules: `kreplay_common::probe::ThreadSlot`.
use aya_ebpf::{Global, macros::map, maps::Array};
use kreplay_common::probe::{
    DEFAULT_THREAD_SLOTS, FRAME_DEPTH, Frame, STALE_NS, ThreadSlot, counter,
};

use crate::{bump, bump_by};

/// Calls in flight, one slot per thread id modulo the array's length (set at load time).
#[map]
static THREADS: Array<ThreadSlot> = Array::with_max_entries(DEFAULT_THREAD_SLOTS, 0);

/// The array's length - 1 (a power of two minus one), set by the loader with the length.
#[unsafe(no_mangle)]
static SLOT_MASK: Global<u32> = Global::new(DEFAULT_THREAD_SLOTS - 1);

/// The slot of thread `tid`, or `None` (counted by the caller) when the array is shorter than
/// the mask says.
#[inline(always)]
fn slot_of(tid: u32) -> Option<*mut ThreadSlot> {
    THREADS.get_ptr_mut(tid & SLOT_MASK.load())
}

/// Saves a new innermost call of `api` for thread `tid` entered at `now_ns`: returns its frame
/// (with `api` set) for the caller to fill, or `None` when the call cannot be saved (counted
/// here, or at its return when another thread holds the slot).
#[inline(always)]
pub fn push(tid: u32, api: u16, now_ns: u64) -> Option<*mut Frame> {
    let Some(p) = slot_of(tid) else {
        bump(counter::ENTRY_MAP_FULL);
        return None;
    };
    // SAFETY: `p` points at a live element of THREADS for the whole program run. Only the
    // owning thread writes a slot (others read it to decide whether they may take it), so the
    // worst a clash of two threads can do is a torn read, which the owner checks below catch.
    let s = unsafe { &mut *p };
    if s.tid != tid {
        let depth = s.depth;
        if depth != 0 {
            let newest = s.frames[((depth - 1) as usize) & (FRAME_DEPTH - 1)]
                .state
                .enter_ns;
            if now_ns.wrapping_sub(newest) < STALE_NS {
                // Counted at the return, which finds the slot not its own: every lost call is
                // counted exactly there, also when two threads race for an idle slot.
                return None;
            }
            // The owner has not returned for STALE_NS: most likely it died mid-call (if not,
            // its returns find the slot taken and are counted).
        }
        s.tid = tid;
        s.depth = 0;
        s.overflow = 0;
        s.woke = 0;
    }
    let d = s.depth as usize;
    if d >= FRAME_DEPTH {
        s.overflow += 1;
        bump(counter::ENTRY_MAP_FULL);
        return None;
    }
    let f = &mut s.frames[d];
    f.api = api;
    s.depth = d as u32 + 1;
    Some(f as *mut Frame)
}

/// A call found by [`find`]: its frame stays saved until [`Found::commit`].
pub struct Found {
    slot: *mut ThreadSlot,
    /// The call's frame, valid until the thread's next entry.
    pub frame: *const Frame,
    level: u32,
}

/// Finds thread `tid`'s innermost saved call of `api` without removing it, so that no other
/// thread can take the slot over while the caller reads the frame (another thread may take a
/// slot only while it holds no call, see `push`). `None` when there is none (counted): a
/// return without an entry, or one skipped at entry.
#[inline(always)]
pub fn find(tid: u32, api: u16) -> Option<Found> {
    let Some(p) = slot_of(tid) else {
        bump(counter::MISSING_ENTRY);
        return None;
    };
    // SAFETY: as in `push`.
    let s = unsafe { &mut *p };
    if s.tid != tid {
        // Another thread holds the slot: this call's entry was skipped, or overwritten when
        // both threads took an idle slot at the same instant (tid 0: never used, the call
        // began before the probes were attached).
        bump(if s.tid == 0 {
            counter::MISSING_ENTRY
        } else {
            counter::SLOT_CLASH
        });
        return None;
    }
    if s.overflow != 0 {
        // The innermost calls are the ones entered beyond FRAME_DEPTH (counted at entry).
        s.overflow -= 1;
        return None;
    }
    let mut d = s.depth;
    let mut i = 0;
    while i < FRAME_DEPTH {
        if d == 0 {
            break;
        }
        d -= 1;
        let f = &s.frames[(d as usize) & (FRAME_DEPTH - 1)];
        if f.api == api {
            return Some(Found {
                slot: p,
                frame: f as *const Frame,
                level: d,
            });
        }
        i += 1;
    }
    bump(counter::MISSING_ENTRY);
    None
}

impl Found {
    /// Marks the reader woken for the slot's owner; returns true the first time.
    #[inline(always)]
    pub fn first_wake(&self) -> bool {
        // SAFETY: `slot` came from `find` in this program run and is written only by its owner.
        let s = unsafe { &mut *self.slot };
        if s.woke == 0 {
            s.woke = 1;
            true
        } else {
            false
        }
    }

    /// The API id + 1 of the frame below this call's (the probed call of the same thread it
    /// was made from), 0 when it was the thread's outermost call in flight.
    #[inline(always)]
    pub fn parent_plus_one(&self) -> u16 {
        if self.level == 0 {
            return 0;
        }
        // SAFETY: as in `first_wake`; the index is masked into the frame array.
        let s = unsafe { &*self.slot };
        s.frames[((self.level - 1) as usize) & (FRAME_DEPTH - 1)]
            .api
            .wrapping_add(1)
    }

    /// Removes the call (and any frames above it, whose return never fired). Call it after the
    /// last read of the frame and after a helper call (the ring buffer submit), which keeps the
    /// compiler from moving the frame's reads below this store.
    #[inline(always)]
    pub fn commit(self) {
        // SAFETY: as in `first_wake`.
        let s = unsafe { &mut *self.slot };
        let skipped = s.depth.wrapping_sub(self.level + 1);
        if skipped != 0 && skipped < FRAME_DEPTH as u32 {
            bump_by(counter::ABANDONED, skipped as u64);
        }
        s.depth = self.level;
    }
}
