//! Growing, filling and reading back the kernels' buffers (`kernel_buffers.rs`): device and
//! pinned host memory grown to a power of two, uploads through the pinned side, and the
//! mapped memory the one-pass restore publishes its counters into.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::MutexGuard;

use super::backend::{CudaBackend, check};
use super::ffi::*;
use super::kernel_buffers::{Buffer, Mapped, Scratch};
use crate::engine::backend::BackendError;

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
