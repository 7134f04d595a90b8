//! Snapshot buffers kept between replays, so the next snapshot of the same footprint reuses
//! them instead of allocating fresh memory.
//!
//! Why: fresh host memory is faulted in and zeroed by the kernel on its first write, so a
//! snapshot into fresh buffers runs at about half the speed of a memcpy into memory already
//! touched, and into kept buffers at about memcpy's (docs/bench/restore.md, `replay`); pinned
//! allocations add the runtime's page registration on top. Kernels are usually
//! replayed many times over the same allocations.
//!
//! Policy: a snapshot takes the arena's buffers only when they cover every region exactly
//! (same placement, same sizes, all or nothing); whatever it does not take is freed before
//! it allocates anything, and a finished snapshot gives its buffers back. So the memory held
//! is at most the current footprint once (plus the hash scratch), during and between replays;
//! between replays it is the last snapshot's footprint. [`SnapshotArena::clear`] frees it.
//!
//! Device hash buffers (the snapshot's chunk hashes, the restores' pass hashes, the
//! determinism check's two sets: 16 bytes per chunk each, all of one length for one footprint)
//! are kept apart and reused by length, since allocating and freeing them per replay cost
//! device allocations and frees (each of which may wait for the device) in every replay's
//! window. A backend whose copies live in memory the application allocates from (CUDA's
//! device memory) gives them back when the application runs short (`cuda/room.rs`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::backend::Backend;
use super::placement::{Placement, Store};

/// Buffers of finished snapshots: (placement, length, buffer), and device hash buffers.
pub struct SnapshotArena {
    free: Mutex<Vec<(Placement, usize, Store)>>,
    /// Device hash buffers: (length, device address).
    hashes: Mutex<Vec<(usize, u64)>>,
}

impl Default for SnapshotArena {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotArena {
    /// An empty arena.
    pub const fn new() -> Self {
        Self {
            free: Mutex::new(Vec::new()),
            hashes: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(Placement, usize, Store)>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_hashes(&self) -> MutexGuard<'_, Vec<(usize, u64)>> {
        self.hashes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A kept device hash buffer of exactly `len` bytes, if there is one: the one at the
    /// lowest address, so a replay that takes its buffers in the same order as the last one
    /// gets each back in the same role (the snapshot's hashes, the pass hashes, pass 0's),
    /// and the device restore's table, which names them, is the same as the last replay's.
    pub fn take_hash_buf(&self, len: usize) -> Option<u64> {
        let mut h = self.lock_hashes();
        let i = (0..h.len())
            .filter(|&i| h[i].0 == len)
            .min_by_key(|&i| h[i].1)?;
        Some(h.swap_remove(i).1)
    }

    /// Keeps device hash buffer `ptr` (`len` bytes) for a later replay.
    pub fn give_hash_buf(&self, len: usize, ptr: u64) {
        self.lock_hashes().push((len, ptr));
    }

    /// Frees every kept device hash buffer whose length is not `len` (a new footprint's
    /// buffers are all `len` bytes: the others would never be taken again).
    pub fn retain_hash_bufs<B: Backend>(&self, len: usize, backend: &B) {
        let mut h = self.lock_hashes();
        h.retain(|&(l, p)| {
            if l != len {
                backend.device_free(p);
            }
            l == len
        });
    }

    /// Buffers of exactly `sizes` (in order) in the first placement of `order` that has them
    /// all; `None` (and nothing taken) when no placement does.
    pub fn take_all(
        &self,
        order: &[Placement],
        sizes: &[usize],
    ) -> Option<(Placement, Vec<Store>)> {
        let mut free = self.lock();
        for &p in order {
            let mut by_len: HashMap<usize, Vec<usize>> = HashMap::new();
            // Latest first, so each length's buffers pop in the order they were given: a
            // snapshot of the same regions gets each region's copy back where it was (the
            // device restore's table, and the graph captured for it, stay the same).
            for (i, (fp, len, _)) in free.iter().enumerate().rev() {
                if *fp == p {
                    by_len.entry(*len).or_default().push(i);
                }
            }
            let mut slot_of = vec![usize::MAX; free.len()];
            let all = sizes.iter().enumerate().all(|(slot, len)| {
                by_len
                    .get_mut(len)
                    .and_then(Vec::pop)
                    .map(|i| slot_of[i] = slot)
                    .is_some()
            });
            if !all {
                continue;
            }
            let mut out: Vec<Option<Store>> = (0..sizes.len()).map(|_| None).collect();
            for (i, e) in std::mem::take(&mut *free).into_iter().enumerate() {
                match out.get_mut(slot_of[i]) {
                    Some(slot) => *slot = Some(e.2),
                    None => free.push(e),
                }
            }
            return Some((p, out.into_iter().flatten().collect()));
        }
        None
    }

    /// A host buffer (pinned or pageable) of exactly `len` bytes, if one is kept.
    pub fn take_host(&self, len: usize) -> Option<Store> {
        let mut free = self.lock();
        let i = free
            .iter()
            .position(|(p, l, _)| *l == len && *p != Placement::Device)?;
        Some(free.swap_remove(i).2)
    }

    /// Keeps `store` (`len` bytes in `p`) for a later snapshot.
    pub fn give(&self, p: Placement, len: usize, store: Store) {
        self.lock().push((p, len, store));
    }

    /// Frees every kept region copy and host scratch buffer (not the device hash buffers).
    pub fn clear_copies<B: Backend>(&self, backend: &B) {
        let all = std::mem::take(&mut *self.lock());
        for (_, _, s) in all {
            s.free(backend);
        }
    }

    /// Frees every kept buffer.
    pub fn clear<B: Backend>(&self, backend: &B) {
        self.clear_copies(backend);
        for (_, p) in std::mem::take(&mut *self.lock_hashes()) {
            backend.device_free(p);
        }
    }

    /// Bytes of region copies and host scratch kept.
    pub fn copy_bytes(&self) -> usize {
        self.lock().iter().map(|(_, l, _)| l).sum::<usize>()
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.lock().iter().map(|(_, l, _)| l).sum::<usize>()
            + self.lock_hashes().iter().map(|(l, _)| l).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::{Placement, SnapshotArena, Store};

    #[test]
    fn buffers_of_one_length_come_back_in_the_order_they_were_given() {
        let arena = SnapshotArena::new();
        for p in [0x100, 0x200, 0x300] {
            arena.give(Placement::Device, 16, Store::Device(p));
        }
        arena.give(Placement::Device, 32, Store::Device(0x400));
        let (placement, stores) = arena
            .take_all(&[Placement::Device], &[16, 32, 16, 16])
            .expect("all kept");
        assert_eq!(placement, Placement::Device);
        let got: Vec<u64> = stores
            .iter()
            .map(|s| match s {
                Store::Device(p) => *p,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, [0x100, 0x400, 0x200, 0x300]);
        assert_eq!(arena.bytes(), 0);
    }
}
