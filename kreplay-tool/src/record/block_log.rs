//! A single-producer log of fixed-size blocks: the owning thread appends with plain stores
//! (no lock, no read-modify-write), and a drainer on another thread moves out what has been
//! published. The owner takes a lock only when it hands a full block over (once per
//! [`BLOCK_LEN`] records), and the log is capped with counted drops. Drained blocks are
//! kept for reuse (within the cap), so a steady state neither allocates nor faults in pages.
//! Each push also asks the CPU to own the lines of the slot `PREFETCH_AHEAD` slots on
//! (`prefetchw`): writing rows is bound by fetching their lines, and without the hint the log
//! is no faster than pushing to a plain `Vec`; with it, it is faster (docs/bench/contention.md,
//! "Why the per-record path is built as it is").

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::lock;

/// Records per block.
pub const BLOCK_LEN: usize = 256;

/// `BLOCK_LEN` slots; `[0, taken)` moved out by the drainer, `[taken, len)` live. The slots
/// sit in the block itself, so the owner reaches slot `n` with no load beyond the block's.
#[repr(C)]
struct Block<T> {
    /// Published slots. Stored only by the owner (Release), loaded by the drainer (Acquire).
    len: AtomicUsize,
    /// Slots already moved out. Touched only by the drainer, under the drain lock.
    taken: AtomicUsize,
    slots: [UnsafeCell<MaybeUninit<T>>; BLOCK_LEN],
}

impl<T> Block<T> {
    fn new_raw() -> *mut Self {
        let mut block = Box::<Self>::new_uninit();
        let p = block.as_mut_ptr();
        // SAFETY: `p` points to the box's memory, valid for writes of a whole `Block`; the two
        // counters are initialized here and the slots are `MaybeUninit`, which needs no
        // initialization, so the block is then fully initialized.
        unsafe {
            (&raw mut (*p).len).write(AtomicUsize::new(0));
            (&raw mut (*p).taken).write(AtomicUsize::new(0));
            Box::into_raw(block.assume_init())
        }
    }

    /// Slot `n` as a pointer to `T`.
    ///
    /// # Safety
    /// `n < BLOCK_LEN`.
    #[inline(always)]
    unsafe fn slot(&self, n: usize) -> *mut T {
        // SAFETY: the caller guarantees `n` is in bounds; `UnsafeCell<MaybeUninit<T>>` has
        // `T`'s layout.
        unsafe { self.slots.get_unchecked(n).get().cast::<T>() }
    }

    /// Moves the published, not yet taken slots into `sink`. Drainer only, under the drain lock.
    fn take_published(&self, sink: &mut impl FnMut(T)) {
        let len = self.len.load(Ordering::Acquire);
        let taken = self.taken.load(Ordering::Relaxed);
        for slot in &self.slots[taken..len] {
            // SAFETY: slots below `len` were fully written before the owner's Release store of
            // `len` (which our Acquire load saw) and the owner never touches them again; slots
            // at or above `taken` have not been moved out (only this drainer moves, under the
            // drain lock, and records the new `taken` below).
            sink(unsafe { (*slot.get()).assume_init_read() });
        }
        self.taken.store(len, Ordering::Relaxed);
    }
}

impl<T> Drop for Block<T> {
    fn drop(&mut self) {
        let (taken, len) = (*self.taken.get_mut(), *self.len.get_mut());
        for slot in &mut self.slots[taken..len] {
            // SAFETY: `[taken, len)` holds initialized values nobody moved out; `&mut self`
            // means no other thread can see the block any more.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// Copies the value at `src` into `dst` in pieces of at most 64 bytes.
///
/// A plain `write` of a record larger than 128 bytes (an `ApiCall` row is 144) compiles to
/// a call to libc's `memmove`; fixed-size pieces are inlined as moves. They also let the
/// compiler, once the push is inlined where the row is built, store the row's fields straight
/// into the slot instead of building it on the stack and copying it.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of one `T`, and they must not overlap.
/// The value is duplicated bitwise: the caller must make sure only one copy is ever dropped.
#[inline(always)]
unsafe fn copy_into<T>(dst: *mut T, src: *const T) {
    const PIECE: usize = 64;
    let src = src.cast::<u8>();
    let dst = dst.cast::<u8>();
    let size = size_of::<T>();
    let mut off = 0;
    while off + PIECE <= size {
        // SAFETY: `[off, off + PIECE)` is inside both objects, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), PIECE) };
        off += PIECE;
    }
    // SAFETY: as above, for the remaining `size - off` bytes.
    unsafe { std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), size - off) };
}

/// Slots ahead of the one just written whose lines a push asks the CPU to own already (about
/// 2.3 KiB at 144-byte rows: 4 was too close to help, 12–24 did equally well).
const PREFETCH_AHEAD: usize = 16;

/// Asks the CPU for every cache line of slot `n` of `block` in a writable state (x86
/// `prefetchw`), when it is in the block: a hint, never a fault.
#[inline(always)]
fn prefetch_for_write<T>(block: &Block<T>, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n < BLOCK_LEN {
        const LINE: usize = 64;
        // SAFETY: `n < BLOCK_LEN`.
        let start = unsafe { block.slot(n) } as usize;
        let mut line = start & !(LINE - 1);
        while line < start + size_of::<T>() {
            // SAFETY: `line` is a line of slot `n`; a prefetch reads nothing and cannot fault.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(
                    line as *const i8,
                );
            }
            line += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (block, n);
}

/// What [`BlockLog::push`] did with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Stored in the current block.
    Stored,
    /// Stored after handing a full block to the drainer; that many full blocks now wait.
    HandedOff(usize),
    /// Dropped and counted: the log is at its cap.
    Dropped,
}

/// The log. One owner thread pushes (see [`BlockLog::push`]); any thread may drain.
pub struct BlockLog<T> {
    /// The block the owner appends to. Replaced only by the owner, under the lists' lock.
    current: AtomicPtr<Block<T>>,
    /// Full blocks the owner handed over, and drained blocks kept for reuse.
    lists: Mutex<Lists<T>>,
    /// `lists.full.len()`, readable by the owner without the lock.
    full_count: AtomicUsize,
    /// Most full blocks that may wait before the owner drops records; full and spare blocks
    /// together never exceed it, so the log holds at most `max_full + 1` blocks. The current
    /// block's free slots plus `max_full` whole blocks always leave room for `cap` values.
    max_full: usize,
    /// Records dropped at the cap. Written only by the owner (load + store, no RMW).
    dropped: AtomicU64,
    /// Serializes drains, so a block a drain is reading is never freed under it.
    drain_lock: Mutex<()>,
}

/// The block lists behind the log's one lock.
struct Lists<T> {
    /// Handed over by the owner, oldest first; recycled or freed only by the drainer.
    full: Vec<NonNull<Block<T>>>,
    /// Drained, empty blocks the owner reuses instead of allocating (and faulting in) more.
    spare: Vec<NonNull<Block<T>>>,
}

// SAFETY: the log hands values of `T` from the owner thread to a drainer thread, so `T: Send`
// is required; all shared state is behind atomics or mutexes, and block slots are accessed
// under the publication protocol documented on `Block`.
unsafe impl<T: Send> Send for BlockLog<T> {}
// SAFETY: as above; `&BlockLog` allows only `push` (owner-only by its contract) and drains
// (serialized by `drain_lock`).
unsafe impl<T: Send> Sync for BlockLog<T> {}

impl<T> BlockLog<T> {
    /// A log that accepts at least `cap` values between drains, and holds at most `cap`
    /// rounded up to whole blocks plus one block (at least two blocks).
    pub fn new(cap: usize) -> Self {
        Self {
            current: AtomicPtr::new(Block::new_raw()),
            lists: Mutex::new(Lists {
                full: Vec::new(),
                spare: Vec::new(),
            }),
            full_count: AtomicUsize::new(0),
            max_full: cap.div_ceil(BLOCK_LEN).max(1),
            dropped: AtomicU64::new(0),
            drain_lock: Mutex::new(()),
        }
    }

    /// Values dropped at the cap since the log was made.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Full blocks waiting for a drain.
    pub fn full_blocks(&self) -> usize {
        self.full_count.load(Ordering::Relaxed)
    }

    /// Appends `value`.
    ///
    /// # Safety
    /// Only one thread, the log's owner, may ever call `push` on a given log.
    #[inline]
    pub unsafe fn push(&self, value: T) -> Pushed {
        let value = std::mem::ManuallyDrop::new(value);
        // SAFETY: the caller upholds `push_from`'s contract, and `value` is valid and is
        // never used again once the log took it.
        let pushed = unsafe { self.push_from(&*value) };
        if pushed == Pushed::Dropped {
            drop(std::mem::ManuallyDrop::into_inner(value));
        }
        pushed
    }

    /// Appends the value at `src` by copying it, once, straight into its slot: the log then
    /// owns it, unless the result is [`Pushed::Dropped`] (nothing copied, `*src` still the
    /// caller's). Taking a pointer instead of a value spares a 144-byte row the extra copy
    /// that moving it through a by-value parameter costs.
    ///
    /// # Safety
    /// Only one thread, the log's owner, may ever push to a given log. `src` must be valid for
    /// reads of one `T`; unless the result is `Dropped`, the caller must not use or drop
    /// `*src` afterwards (`mem::forget` it).
    #[inline(always)]
    pub unsafe fn push_from(&self, src: *const T) -> Pushed {
        let mut outcome = Pushed::Stored;
        // SAFETY: `current` always points to a live block: only the owner (us) replaces it,
        // and a replaced block lives on in `full` until a drain frees it.
        let mut block = unsafe { &*self.current.load(Ordering::Relaxed) };
        let mut n = block.len.load(Ordering::Relaxed);
        if n == BLOCK_LEN {
            match self.hand_off() {
                Some((fresh, waiting)) => {
                    // SAFETY: as above: `fresh` is now the current block.
                    block = unsafe { &*fresh };
                    n = 0;
                    outcome = Pushed::HandedOff(waiting);
                }
                None => {
                    self.count_drop();
                    return Pushed::Dropped;
                }
            }
        }
        // SAFETY: `n < BLOCK_LEN` (a block's `len` never exceeds it, and a full one was just
        // replaced); slot `n` is unpublished (`n == len`), so no drainer reads it, and only the
        // owner writes slots. `src` is valid and cannot overlap a slot the log owns; the
        // caller gives the value up (contract), and the Release store publishes it.
        unsafe {
            copy_into(block.slot(n), src);
            block.len.store(n + 1, Ordering::Release);
        }
        prefetch_for_write(block, n + PREFETCH_AHEAD);
        outcome
    }

    /// Appends the value `make` returns; `make` is not called when the value would be
    /// dropped at the cap. `make` may itself push to this log: the slot is chosen after it
    /// returns.
    ///
    /// # Safety
    /// As [`BlockLog::push`]: only the log's owner thread may call it.
    #[inline]
    pub unsafe fn push_with(&self, make: impl FnOnce() -> T) -> Pushed {
        // SAFETY: as in `push`, `current` is live and only this owner thread writes it.
        let full = unsafe {
            (*self.current.load(Ordering::Relaxed))
                .len
                .load(Ordering::Relaxed)
        };
        if full == BLOCK_LEN && self.full_count.load(Ordering::Relaxed) >= self.max_full {
            self.count_drop();
            return Pushed::Dropped;
        }
        // SAFETY: the caller upholds `push`'s contract.
        unsafe { self.push(make()) }
    }

    /// Owner only: counts one dropped value (load + store: no other thread writes it).
    fn count_drop(&self) {
        let d = self.dropped.load(Ordering::Relaxed);
        self.dropped.store(d + 1, Ordering::Relaxed);
    }

    /// Owner only: moves the full current block to `full` and installs a spare or new one.
    #[cold]
    #[inline(never)]
    fn hand_off(&self) -> Option<(*mut Block<T>, usize)> {
        if self.full_count.load(Ordering::Relaxed) >= self.max_full {
            return None;
        }
        let mut lists = lock(&self.lists);
        let fresh = lists
            .spare
            .pop()
            .map_or_else(Block::new_raw, NonNull::as_ptr);
        let old = self.current.swap(fresh, Ordering::AcqRel);
        lists
            .full
            .push(NonNull::new(old).expect("current block is never null"));
        self.full_count.store(lists.full.len(), Ordering::Relaxed);
        Some((fresh, lists.full.len()))
    }

    /// Moves every published value, oldest first, into `sink`; returns how many.
    pub fn drain(&self, mut sink: impl FnMut(T)) -> usize {
        let _drain = lock(&self.drain_lock);
        let (blocks, current) = {
            let mut lists = lock(&self.lists);
            self.full_count.store(0, Ordering::Relaxed);
            (
                std::mem::take(&mut lists.full),
                self.current.load(Ordering::Acquire),
            )
        };
        let mut n = 0;
        let mut count = |v| {
            n += 1;
            sink(v)
        };
        for block in &blocks {
            // SAFETY: blocks taken from `full` are live until recycled or freed below; the
            // owner no longer writes them, and no other drain runs (drain lock).
            let b = unsafe { block.as_ref() };
            b.take_published(&mut count);
            b.len.store(0, Ordering::Relaxed);
            b.taken.store(0, Ordering::Relaxed);
        }
        if !blocks.is_empty() {
            let mut lists = lock(&self.lists);
            let room = self
                .max_full
                .saturating_sub(lists.full.len() + lists.spare.len());
            let keep = room.min(blocks.len());
            lists.spare.extend_from_slice(&blocks[..keep]);
            drop(lists);
            for block in &blocks[keep..] {
                // SAFETY: an emptied block no list holds any more; `Block::new_raw` made it
                // with `Box::into_raw`, and it is freed once, here.
                drop(unsafe { Box::from_raw(block.as_ptr()) });
            }
        }
        // SAFETY: `current` was the owner's block when we held the lists' lock; if the owner
        // hands it off since, it sits in `full` until a later drain, which the drain lock
        // orders after this one. Only published slots are read.
        unsafe { (*current).take_published(&mut count) };
        n
    }
}

impl<T> Drop for BlockLog<T> {
    fn drop(&mut self) {
        let lists = self.lists.get_mut().unwrap_or_else(|p| p.into_inner());
        for block in lists.full.drain(..).chain(lists.spare.drain(..)) {
            // SAFETY: `&mut self`: no owner or drainer is left; every block came from
            // `Box::into_raw` and is freed once, here.
            drop(unsafe { Box::from_raw(block.as_ptr()) });
        }
        // SAFETY: as above, for the current block.
        drop(unsafe { Box::from_raw(*self.current.get_mut()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn drains_in_order_across_blocks_and_partial_blocks() {
        let log = BlockLog::new(10 * BLOCK_LEN);
        let mut got = Vec::new();
        for i in 0..300u32 {
            // SAFETY: this test thread is the only pusher.
            unsafe { log.push(i) };
        }
        assert_eq!(log.drain(|v| got.push(v)), 300);
        for i in 300..700u32 {
            // SAFETY: as above.
            unsafe { log.push(i) };
        }
        assert_eq!(log.drain(|v| got.push(v)), 400);
        assert_eq!(log.drain(|v| got.push(v)), 0);
        assert_eq!(got, (0..700).collect::<Vec<_>>());
    }

    #[test]
    fn the_cap_drops_and_counts_then_recovers_after_a_drain() {
        // Two whole blocks may wait, plus the current one: 3 blocks fit from empty.
        let log = BlockLog::new(2 * BLOCK_LEN);
        let mut outcomes = Vec::new();
        for i in 0..(3 * BLOCK_LEN + 10) {
            // SAFETY: this test thread is the only pusher.
            outcomes.push(unsafe { log.push(i) });
        }
        assert_eq!(outcomes[BLOCK_LEN], Pushed::HandedOff(1));
        assert_eq!(outcomes[2 * BLOCK_LEN], Pushed::HandedOff(2));
        assert_eq!(
            outcomes.iter().filter(|o| **o == Pushed::Dropped).count(),
            10
        );
        assert_eq!(log.dropped(), 10);
        let mut n = 0;
        assert_eq!(log.drain(|_| n += 1), 3 * BLOCK_LEN);
        // SAFETY: as above.
        assert_eq!(unsafe { log.push(0) }, Pushed::HandedOff(1));
    }

    #[test]
    fn after_a_drain_of_a_partial_block_cap_more_values_still_fit() {
        let cap = 3 * BLOCK_LEN;
        let log = BlockLog::new(cap);
        for i in 0..(BLOCK_LEN - 1) {
            // SAFETY: this test thread is the only pusher.
            unsafe { log.push(i) };
        }
        log.drain(drop);
        for i in 0..cap {
            // SAFETY: as above.
            assert_ne!(unsafe { log.push(i) }, Pushed::Dropped, "value {i}");
        }
        assert_eq!(log.dropped(), 0);
        let mut n = 0;
        assert_eq!(log.drain(|_| n += 1), cap);
    }

    #[test]
    fn values_larger_than_a_copy_piece_arrive_whole_and_are_dropped_once() {
        // 17 words + an Arc + a String: 168 bytes, moved as two 64-byte pieces and a tail.
        type Big = ([u64; 17], Arc<()>, String);
        assert!(size_of::<Big>() > 128 && !size_of::<Big>().is_multiple_of(64));
        let marker = Arc::new(());
        let make = |i: u64| -> Big {
            (
                std::array::from_fn(|w| i * 100 + w as u64),
                Arc::clone(&marker),
                format!("row {i}"),
            )
        };
        let log = BlockLog::new(4 * BLOCK_LEN);
        for i in 0..300 {
            // SAFETY: this test thread is the only pusher.
            unsafe { log.push(make(i)) };
        }
        let mut got = Vec::new();
        assert_eq!(log.drain(|v| got.push(v)), 300);
        for (i, (words, _, name)) in got.iter().enumerate() {
            let i = i as u64;
            assert_eq!(*words, std::array::from_fn(|w| i * 100 + w as u64));
            assert_eq!(*name, format!("row {i}"));
        }
        assert_eq!(Arc::strong_count(&marker), 1 + 300);
        drop(got);
        drop(log);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn values_left_undrained_are_dropped_with_the_log() {
        let marker = Arc::new(());
        let log = BlockLog::new(4 * BLOCK_LEN);
        for _ in 0..(BLOCK_LEN + 5) {
            // SAFETY: this test thread is the only pusher.
            unsafe { log.push(Arc::clone(&marker)) };
        }
        let mut taken = Vec::new();
        log.drain(|v| taken.push(v));
        for _ in 0..7 {
            // SAFETY: as above.
            unsafe { log.push(Arc::clone(&marker)) };
        }
        assert_eq!(Arc::strong_count(&marker), 1 + BLOCK_LEN + 5 + 7);
        drop(log);
        assert_eq!(Arc::strong_count(&marker), 1 + BLOCK_LEN + 5);
        drop(taken);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn push_from_takes_a_value_only_when_it_stores_it() {
        // One block may wait plus the current one: 2 * BLOCK_LEN values fit.
        let log = BlockLog::new(BLOCK_LEN);
        let marker = Arc::new(());
        let mut outcomes = Vec::new();
        for _ in 0..(2 * BLOCK_LEN + 3) {
            let value = Arc::clone(&marker);
            // SAFETY: this test thread is the only pusher; `value` is valid, and forgotten
            // exactly when the log took it.
            let pushed = unsafe { log.push_from(&value) };
            if pushed == Pushed::Dropped {
                drop(value);
            } else {
                std::mem::forget(value);
            }
            outcomes.push(pushed);
        }
        assert_eq!(
            outcomes.iter().filter(|o| **o == Pushed::Dropped).count(),
            3
        );
        assert_eq!(outcomes[BLOCK_LEN], Pushed::HandedOff(1));
        assert_eq!(log.dropped(), 3);
        // The log holds one reference per stored value; refused ones went back to the caller.
        assert_eq!(Arc::strong_count(&marker), 1 + 2 * BLOCK_LEN);
        let mut taken = Vec::new();
        assert_eq!(log.drain(|v| taken.push(v)), 2 * BLOCK_LEN);
        drop(taken);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn push_drops_a_value_refused_at_the_cap_exactly_once() {
        let log = BlockLog::new(BLOCK_LEN);
        let marker = Arc::new(());
        let mut dropped = 0;
        for _ in 0..(2 * BLOCK_LEN + 5) {
            // SAFETY: this test thread is the only pusher.
            if unsafe { log.push(Arc::clone(&marker)) } == Pushed::Dropped {
                dropped += 1;
            }
        }
        assert_eq!(dropped, 5);
        assert_eq!(Arc::strong_count(&marker), 1 + 2 * BLOCK_LEN);
        drop(log);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn a_concurrent_drainer_sees_every_value_exactly_once() {
        let log = Arc::new(BlockLog::new(usize::MAX));
        let producer = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..200_000u64 {
                    // SAFETY: this spawned thread is the log's only pusher.
                    unsafe { log.push(i) };
                }
            })
        };
        let mut got = Vec::new();
        while !producer.is_finished() {
            log.drain(|v| got.push(v));
        }
        producer.join().unwrap();
        log.drain(|v| got.push(v));
        assert_eq!(got, (0..200_000).collect::<Vec<_>>());
    }
}
