//! The device and pinned host buffers kreplay's CUDA kernels use, kept per context between
//! checks and restores (allocating and freeing them around every call cost more than the
//! kernels): the per-chunk kernels' output and the run-copy kernel's table, grown to a power of
//! two, and reading results back through the pinned side.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::MutexGuard;

use super::backend::{CudaBackend, check};
use super::ffi::*;
use crate::engine::backend::BackendError;

/// Buffers kreplay's kernels use in one context, kept for the process's life (a few bytes per
/// chunk of the largest region checked, 24 bytes per piece of the largest restore).
#[derive(Default)]
pub struct Scratch {
    /// The per-chunk kernels' output.
    pub out: Buffer,
    /// The run-copy kernel's table of runs.
    pub runs: Buffer,
    /// The batched hash kernel's table of regions.
    pub hash_jobs: Buffer,
    /// The one-pass restore's job tables and counters: three sets, a snapshot's table, its
    /// first restore's sample (`engine/sample.rs`) and the later restores' write set
    /// (`Snapshot::write_set`) all kept ready.
    pub one_pass: [OnePassBuffers; 3],
    /// Stamps `one_pass`'s last uses.
    pub one_pass_clock: u64,
}

impl Scratch {
    /// The one-pass buffers holding `table` (the least recently used set when neither does).
    pub fn one_pass_for(&mut self, table: &[u64]) -> &mut OnePassBuffers {
        self.one_pass_clock += 1;
        let i = match self.one_pass.iter().position(|b| b.uploaded == table) {
            Some(i) => i,
            None => (0..self.one_pass.len())
                .min_by_key(|&i| self.one_pass[i].used)
                .unwrap_or(0),
        };
        let b = &mut self.one_pass[i];
        b.used = self.one_pass_clock;
        b
    }
}

/// The one-pass restore kernel's buffers (`one_pass`).
#[derive(Default)]
pub struct OnePassBuffers {
    /// Its table of regions on the device.
    pub jobs: Buffer,
    /// The table last uploaded into `jobs` (empty: none): a replay restores the same
    /// snapshot after every pass, so the table goes up once.
    pub uploaded: Vec<u64>,
    /// Its per-region counters, which the kernel only adds to.
    pub counts: Buffer,
    /// The counters' values as last read.
    pub seen: Vec<u64>,
    /// Whether the counters on the device equal `seen` (false at first and after a failed
    /// call: they are zeroed before the next use).
    pub synced: bool,
    /// Where `kreplay_publish_counts` publishes the counters and its sequence number (when
    /// mapped memory could be had).
    pub mapped: Mapped,
    /// Publications since the counters were last zeroed: the sequence number the device
    /// holds (one word after the counters).
    pub seq: u64,
    /// The restore and the publication captured as one graph, for the current table.
    pub pair: Option<super::graph::Captured>,
    /// A restore once finished without its publication: the counters are copied back from
    /// then on.
    pub mapped_broken: bool,
    /// When these buffers were last picked (`Scratch::one_pass_clock`).
    pub used: u64,
}

/// Pinned host memory mapped into the device's address space (`cuMemHostAlloc` with
/// `CU_MEMHOSTALLOC_DEVICEMAP`): a kernel writes it, the host reads it with no copy.
pub struct Mapped {
    /// The host's view, zeroed when allocated.
    pub host: *mut u64,
    /// The device's address of the same memory.
    pub dev: u64,
    /// Words it holds.
    pub words: usize,
}

impl Default for Mapped {
    fn default() -> Self {
        Self {
            host: core::ptr::null_mut(),
            dev: 0,
            words: 0,
        }
    }
}

// SAFETY: `host` is pinned memory owned by this buffer, used only under the scratch lock.
unsafe impl Send for Mapped {}

/// Device memory and a pinned host buffer of `cap` bytes each.
pub struct Buffer {
    /// Device memory.
    pub dev: u64,
    /// Pinned host memory, or null when pinning failed (copies then use pageable memory).
    pub host: *mut u8,
    /// Bytes each side holds.
    pub cap: usize,
}

impl Default for Buffer {
    fn default() -> Self {
        Self {
            dev: 0,
            host: core::ptr::null_mut(),
            cap: 0,
        }
    }
}

// SAFETY: `host` is pinned memory owned by this buffer, used only under the scratch lock.
unsafe impl Send for Buffer {}

impl CudaBackend<'_> {
    /// The scratch buffers of every context, locked (the lock also serializes the kernels
    /// that use them), and the current context's key.
    pub(super) fn scratch(
        &self,
    ) -> Result<(MutexGuard<'_, HashMap<usize, Scratch>>, usize), BackendError> {
        let d = &self.tool().driver;
        let mut ctx: CUcontext = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("cuCtxGetCurrent", unsafe { (d.ctx_get_current)(&mut ctx) })?;
        let all = self
            .tool()
            .kernels
            .scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Ok((all, ctx as usize))
    }

    /// Reads `out.len()` bytes of device memory at `src` into `out`, through `b`'s pinned
    /// buffer when it has one (at least `out.len()` bytes: the caller reserved them).
    pub(super) fn read_back(
        &self,
        b: &Buffer,
        src: u64,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        let d = &self.tool().driver;
        let dst = if b.host.is_null() {
            out.as_mut_ptr()
        } else {
            b.host
        };
        // SAFETY: dst holds at least out.len() bytes (out itself, or the pinned buffer the
        // caller reserved); src is the caller's device range of that length.
        check("cuMemcpyDtoH_v2", unsafe {
            (d.memcpy_dtoh)(dst as *mut c_void, src, out.len())
        })?;
        if !b.host.is_null() {
            // SAFETY: the pinned buffer now holds out.len() initialized bytes; no overlap.
            unsafe { core::ptr::copy_nonoverlapping(b.host, out.as_mut_ptr(), out.len()) };
        }
        Ok(())
    }

    /// Grows `b` to at least `len` bytes (a power of two, so a run of growing regions
    /// reallocates rarely).
    pub(super) fn reserve(&self, b: &mut Buffer, len: usize) -> Result<(), BackendError> {
        if b.cap >= len {
            return Ok(());
        }
        let d = &self.tool().driver;
        if b.dev != 0 {
            self.device_free_copy(b.dev);
        }
        if !b.host.is_null() {
            // SAFETY: b.host came from cuMemAllocHost and nothing uses it any more.
            let _ = unsafe { (d.mem_free_host)(b.host as *mut c_void) };
        }
        *b = Buffer::default();
        let cap = len.next_power_of_two();
        b.dev = self.device_alloc_copy(cap).ok_or(BackendError::Call {
            call: "cuMemAlloc_v2(kreplay kernel buffer)",
            status: ERROR_OUT_OF_MEMORY,
        })?;
        let mut host: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; on failure host stays null and pageable memory is used.
        if unsafe { (d.mem_alloc_host)(&mut host, cap) } == SUCCESS {
            b.host = host as *mut u8;
        }
        b.cap = cap;
        Ok(())
    }

    /// Grows `m` to at least `words` zeroed words; false when the driver cannot map pinned
    /// memory (the caller then copies results back instead).
    pub(super) fn reserve_mapped(&self, m: &mut Mapped, words: usize) -> bool {
        if m.words >= words {
            return true;
        }
        let d = &self.tool().driver;
        let (Some(alloc), Some(dev_ptr)) = (d.mem_host_alloc, d.mem_host_get_device_pointer) else {
            return false;
        };
        if !m.host.is_null() {
            // SAFETY: m.host came from cuMemHostAlloc and no launch that writes it is pending
            // (each launch is waited for under the scratch lock).
            let _ = unsafe { (d.mem_free_host)(m.host as *mut c_void) };
        }
        *m = Mapped::default();
        let cap = words.next_power_of_two();
        let mut host: *mut c_void = core::ptr::null_mut();
        let mut dev: CUdeviceptr = 0;
        // SAFETY: valid out-pointers; `host` is the allocation just made.
        let ok = unsafe {
            alloc(&mut host, cap * 8, MEMHOSTALLOC_DEVICEMAP) == SUCCESS
                && dev_ptr(&mut dev, host, 0) == SUCCESS
        };
        if !ok {
            if !host.is_null() {
                // SAFETY: host came from cuMemHostAlloc above and was never handed out.
                let _ = unsafe { (d.mem_free_host)(host) };
            }
            tracing::debug!("kreplay: no mapped pinned memory; restore counters are copied back");
            return false;
        }
        // SAFETY: host holds cap * 8 bytes, just allocated.
        unsafe { core::ptr::write_bytes(host as *mut u8, 0, cap * 8) };
        *m = Mapped {
            host: host as *mut u64,
            dev,
            words: cap,
        };
        true
    }

    /// Copies `words` into `b`'s device memory (grown as needed), through its pinned side when
    /// it has one.
    pub(super) fn upload(&self, b: &mut Buffer, words: &[u64]) -> Result<(), BackendError> {
        let bytes = core::mem::size_of_val(words);
        self.reserve(b, bytes)?;
        let src = if b.host.is_null() {
            words.as_ptr() as *const c_void
        } else {
            // SAFETY: the pinned buffer holds at least `bytes` bytes; no overlap with `words`.
            unsafe { core::ptr::copy_nonoverlapping(words.as_ptr().cast::<u8>(), b.host, bytes) };
            b.host as *const c_void
        };
        // SAFETY: b.dev and src hold at least `bytes` bytes.
        check("cuMemcpyHtoD_v2", unsafe {
            (self.tool().driver.memcpy_htod)(b.dev, src, bytes)
        })
    }
}
