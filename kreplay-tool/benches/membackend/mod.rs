//! A replay-engine backend whose "device" is host memory, shared by the replay and restore
//! benchmarks: its copies are plain memcpy, so the engine's own costs are what differ from
//! a memcpy of the same bytes. Host buffers come from the heap zeroed but untouched (like
//! fresh memory anywhere: faulted in on first write); it counts host bytes held.

use std::cell::Cell;

use kreplay_tool::engine::backend::{Backend, BackendError, HostBuf, ModuleVar};
use kreplay_tool::engine::inventory::Inventory;

/// The agent every region belongs to.
pub const AGENT: u64 = 7;

/// Host memory standing in for the device.
#[derive(Default)]
pub struct MemBackend {
    /// Host bytes held now.
    pub live: Cell<u64>,
    /// Most host bytes held at once.
    pub peak: Cell<u64>,
}

impl Backend for MemBackend {
    type Dispatch = Vec<(u64, usize)>;

    fn host_alloc(&self, len: usize) -> Option<HostBuf> {
        let b = vec![0u8; len].into_boxed_slice();
        self.live.set(self.live.get() + len as u64);
        self.peak.set(self.peak.get().max(self.live.get()));
        Some(HostBuf {
            ptr: Box::into_raw(b) as *mut u8,
            len,
        })
    }
    fn host_free(&self, buf: HostBuf) {
        self.live.set(self.live.get() - buf.len as u64);
        // SAFETY: buf came from host_alloc's boxed slice of buf.len bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.ptr, buf.len)) });
    }
    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        // SAFETY: src is a live region of the bench's device buffers, dst a host buffer of len.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst, len) };
        Ok(())
    }
    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        // SAFETY: as above, the other way.
        unsafe { std::ptr::copy_nonoverlapping(src, dst as *mut u8, len) };
        Ok(())
    }
    fn module_variables(&self, _agent: u64) -> Result<Vec<ModuleVar>, BackendError> {
        Ok(Vec::new())
    }
    fn submit_wait(&self, d: &Self::Dispatch) -> Result<(), BackendError> {
        // The "kernel": one word written in each region.
        for &(addr, _) in d {
            // SAFETY: addr is the start of a live bench region.
            unsafe { *(addr as *mut u64) += 1 };
        }
        Ok(())
    }
}

/// `total / each` "device" buffers of `each` bytes, recorded in `inv`.
pub fn regions(inv: &Inventory, total: usize, each: usize) -> Vec<Vec<u8>> {
    let bufs: Vec<Vec<u8>> = (0..total / each).map(|i| vec![i as u8 + 1; each]).collect();
    for b in &bufs {
        inv.record_alloc(b.as_ptr() as u64, each as u64, AGENT);
    }
    bufs
}

/// The fastest of `n` runs of `f`, in seconds.
pub fn best_of<F: FnMut()>(n: usize, mut f: F) -> f64 {
    (0..n)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

impl kreplay_tool::engine::backend::DeviceChunks for MemBackend {}

impl kreplay_tool::engine::backend::OnePassRestore for MemBackend {}
