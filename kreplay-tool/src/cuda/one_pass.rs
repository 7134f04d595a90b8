//! The one-pass restore of a device-resident snapshot (`kreplay_restore_regions` in
//! `kernels.cu`): one launch over every region's chunks hashes each live chunk, compares it
//! with the snapshot's hash and copies it back from the device copy when it differs, counting
//! per region what it wrote. Only the counters come back (16 bytes per region): a flag per
//! chunk cost more to read and count on the host than the check spared (the pinned buffer
//! reads at about 2 GB/s from the CPU on the H200 host). The region table goes up once per
//! snapshot and the counters are never reset on the device: each call reads their growth.

use core::ffi::c_void;

use super::backend::{CudaBackend, check};
use super::device_ops::{RESTORE_CALL, hash_seed};
use super::kernel_buffers::OnePassBuffers;
use crate::engine::backend::{BackendError, DeviceRestore, Written};

/// Words per region in the kernel's table.
const JOB_WORDS: usize = 6;

impl CudaBackend<'_> {
    /// [`Backend::restore_changed_on_device`]: every job restored by one kernel launch, then
    /// one read of the per-region counters. `Ok(false)` when the kernel is unavailable.
    ///
    /// [`Backend::restore_changed_on_device`]: crate::engine::backend::Backend::restore_changed_on_device
    pub fn restore_changed(
        &self,
        jobs: &[DeviceRestore],
        chunk: usize,
        written: &mut [Written],
    ) -> Result<bool, BackendError> {
        let Some(kernel) = self.kernels().and_then(|k| k.restore) else {
            return Ok(false);
        };
        if chunk == 0 {
            return Ok(false);
        }
        if written.len() < jobs.len() {
            return Err(BackendError::Unsupported("fewer results than jobs"));
        }
        let (table, total) = job_table(jobs, chunk);
        written.iter_mut().for_each(|w| *w = Written::default());
        if total == 0 {
            return Ok(true);
        }
        let (mut all, ctx) = self.scratch()?;
        let b = &mut all.entry(ctx).or_default().one_pass;
        let grown = match self.run_one_pass(b, kernel, &table, total, chunk) {
            Ok(g) => g,
            Err(e) => {
                b.synced = false;
                return Err(e);
            }
        };
        let mut grown = grown.into_iter();
        for (j, w) in jobs.iter().zip(written.iter_mut()) {
            if j.len > 0 {
                let [chunks, bytes] = grown.next().unwrap_or_default();
                *w = Written { chunks, bytes };
            }
        }
        Ok(true)
    }

    /// [`Backend::prepare_restore_on_device`]: the buffers, zeroed counters and job table of
    /// [`Self::restore_changed`] for `jobs`, ready before the first restore.
    ///
    /// [`Backend::prepare_restore_on_device`]: crate::engine::backend::Backend::prepare_restore_on_device
    pub fn prepare_restore(&self, jobs: &[DeviceRestore], chunk: usize) {
        if chunk == 0 || self.kernels().and_then(|k| k.restore).is_none() {
            return;
        }
        let (table, _) = job_table(jobs, chunk);
        let ready = self.scratch().and_then(|(mut all, ctx)| {
            let b = &mut all.entry(ctx).or_default().one_pass;
            let r = self.ready(b, &table);
            if r.is_err() {
                b.synced = false;
            }
            r
        });
        if let Err(e) = ready {
            tracing::debug!(
                "kreplay: readying the one-pass restore failed ({e}); the first restore will"
            );
        }
    }

    /// Makes `b`'s counters known (zeroed when they are not) and its table `table`.
    fn ready(&self, b: &mut OnePassBuffers, table: &[u64]) -> Result<(), BackendError> {
        let counters = 2 * (table.len() / JOB_WORDS);
        if !b.synced || b.counts.cap < counters * 8 {
            self.reserve(&mut b.counts, counters * 8)?;
            let zeros = vec![0u64; b.counts.cap / 8];
            self.upload(&mut b.counts, &zeros)?;
            b.seen = zeros;
            b.synced = true;
        }
        if b.uploaded != table {
            b.uploaded.clear();
            self.upload(&mut b.jobs, table)?;
            b.uploaded.extend_from_slice(table);
        }
        Ok(())
    }

    /// Launches the kernel over `table` and returns each region's (chunks, bytes) written.
    fn run_one_pass(
        &self,
        b: &mut OnePassBuffers,
        kernel: usize,
        table: &[u64],
        total: u64,
        chunk: usize,
    ) -> Result<Vec<[u64; 2]>, BackendError> {
        let t0 = std::time::Instant::now();
        let regions = table.len() / JOB_WORDS;
        let counters = 2 * regions;
        self.ready(b, table)?;
        let t1 = std::time::Instant::now();
        self.launch_no_wait(
            kernel,
            RESTORE_CALL,
            total,
            &mut [
                b.jobs.dev,
                regions as u64,
                total,
                chunk as u64,
                hash_seed(),
                b.counts.dev,
            ],
        )?;
        let t2 = std::time::Instant::now();
        let mut now = vec![0u64; counters];
        // SAFETY: `now` holds counters * 8 bytes and the counters buffer at least as many.
        // The read, on the launch's stream, waits for the kernel and fails when it did.
        let dst = if b.counts.host.is_null() {
            now.as_mut_ptr() as *mut c_void
        } else {
            b.counts.host as *mut c_void
        };
        check("cuMemcpyDtoH_v2", unsafe {
            (self.tool().driver.memcpy_dtoh)(dst, b.counts.dev, counters * 8)
        })?;
        if !b.counts.host.is_null() {
            // SAFETY: the pinned buffer now holds counters * 8 initialized bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    b.counts.host as *const u64,
                    now.as_mut_ptr(),
                    counters,
                )
            };
        }
        let grown = now
            .chunks_exact(2)
            .zip(b.seen.chunks_exact(2))
            .map(|(n, s)| [n[0].wrapping_sub(s[0]), n[1].wrapping_sub(s[1])])
            .collect();
        b.seen[..counters].copy_from_slice(&now);
        tracing::debug!(
            "kreplay: one-pass restore of {regions} regions, {total} chunks: setup {:?}, launch {:?}, wait and read {:?}",
            t1 - t0,
            t2 - t1,
            t2.elapsed()
        );
        Ok(grown)
    }
}

/// The kernel's table for `jobs` (regions of length 0 have no chunks and stay out) and the
/// chunks it covers.
fn job_table(jobs: &[DeviceRestore], chunk: usize) -> (Vec<u64>, u64) {
    let mut table = Vec::with_capacity(jobs.len() * JOB_WORDS);
    let mut total = 0u64;
    for j in jobs.iter().filter(|j| j.len > 0) {
        table.extend([j.live, j.copy, j.len as u64, j.expected, total, 0]);
        total += j.len.div_ceil(chunk) as u64;
    }
    (table, total)
}
