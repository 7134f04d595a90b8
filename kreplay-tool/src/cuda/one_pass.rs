//! The one-pass restore of a device-resident snapshot (`kreplay_restore_regions` in
//! `kernels.cu`): one launch over every region's chunks hashes each live chunk, compares it
//! with the snapshot's hash and copies it back from the device copy when it differs, counting
//! per region what it wrote and how many chunks differ from the reference hashes it was given.
//! Only the counters come back (24 bytes per region): a flag per chunk costs more to read and
//! count on the host than the check spares. `kreplay_publish_counts` runs right behind it and
//! writes the counters and a sequence number into mapped pinned memory; the host watches that
//! number rather than copying the counters back after the kernel, a copy that is a large
//! share of a small restore (`docs/gpu/h200-replay-cost.md`). The two kernels are captured
//! once per snapshot as one graph (`graph.rs`). The region table goes up once per snapshot and
//! the counters are never reset on the device: each call reads their growth.

use super::backend::{CudaBackend, check};
use super::device_ops::{PUBLISH_CALL, RESTORE_CALL, hash_seed};
use super::ffi::{ERROR_NOT_READY, SUCCESS};
use super::kernel_buffers::OnePassBuffers;
use crate::engine::backend::{BackendError, DeviceRestore, OnePassRestore, Written};

/// Words per region in the kernel's table.
const JOB_WORDS: usize = 7;
/// Counters per region the kernel adds to: chunks and bytes written back, chunks that differ
/// from the reference.
const COUNTERS: usize = 3;

/// The one-pass restore with `kreplay_restore_regions` (and `kreplay_publish_counts`).
impl OnePassRestore for CudaBackend<'_> {
    fn restore_changed_on_device(
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
        let b = all.entry(ctx).or_default().one_pass_for(&table);
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
                let [chunks, bytes, differ] = grown.next().unwrap_or_default();
                *w = Written {
                    chunks,
                    bytes,
                    differ,
                };
            }
        }
        Ok(true)
    }

    fn prepare_restore_on_device(&self, jobs: &[DeviceRestore], chunk: usize) {
        let Some(kernel) = self.kernels().and_then(|k| k.restore) else {
            return;
        };
        if chunk == 0 {
            return;
        }
        let (table, total) = job_table(jobs, chunk);
        let ready = self.scratch().and_then(|(mut all, ctx)| {
            let b = all.entry(ctx).or_default().one_pass_for(&table);
            let r = self.ready(b, kernel, &table, total, chunk, true);
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

    fn can_restore_on_device(&self) -> bool {
        self.kernels().is_some_and(|k| k.restore.is_some())
    }
}

impl CudaBackend<'_> {
    /// Makes `b`'s counters known (zeroed when they are not, with the sequence number after
    /// them) and its table `table`; where mapped memory and graphs can be had and `capture`
    /// asks for it, the restore and the publication of its counters captured as one graph for
    /// this table. A table first seen by a restore (a write set, new with every replay) is not
    /// captured: the capture would cost more than the launches it would spare.
    fn ready(
        &self,
        b: &mut OnePassBuffers,
        kernel: usize,
        table: &[u64],
        total: u64,
        chunk: usize,
        capture: bool,
    ) -> Result<(), BackendError> {
        let regions = table.len() / JOB_WORDS;
        let counters = COUNTERS * regions;
        // A new table starts from zeroed counters: its sequence word (after its counters) may
        // sit where an earlier, longer table kept a counter.
        let new_table = b.uploaded != table;
        if !b.synced || new_table || b.counts.cap < (counters + 1) * 8 {
            self.reserve(&mut b.counts, (counters + 1) * 8)?;
            let zeros = vec![0u64; b.counts.cap / 8];
            self.upload(&mut b.counts, &zeros)?;
            b.seen = zeros;
            b.seq = 0;
            if !b.mapped.host.is_null() {
                // SAFETY: the mapped buffer holds `words` words; the upload above waited for
                // every earlier launch on the legacy stream, so no kernel writes it now.
                unsafe { core::ptr::write_bytes(b.mapped.host, 0, b.mapped.words) };
            }
            b.synced = true;
        }
        if new_table {
            b.uploaded.clear();
            self.upload(&mut b.jobs, table)?;
            b.uploaded.extend_from_slice(table);
        }
        let publish = self.kernels().and_then(|k| k.publish);
        let Some(publish) = publish.filter(|_| !b.mapped_broken) else {
            return Ok(());
        };
        if self.tool().driver.stream_query.is_none()
            || !self.reserve_mapped(&mut b.mapped, counters + 1)
        {
            return Ok(());
        }
        let restore = restore_params(b, regions, total, chunk);
        let publication = [b.counts.dev, counters as u64, b.mapped.dev];
        let key: Vec<u64> = restore.iter().chain(&publication).copied().collect();
        if b.pair.as_ref().is_some_and(|p| p.key == key) {
            return Ok(());
        }
        if let Some(old) = b.pair.take() {
            self.release(old);
        }
        if !capture {
            return Ok(());
        }
        let mut launches = [
            (kernel, RESTORE_CALL, total, restore.to_vec()),
            (publish, PUBLISH_CALL, 1, publication.to_vec()),
        ];
        match self.capture(&mut launches, key) {
            Ok(c) => b.pair = Some(c),
            Err(e) => tracing::debug!(
                "kreplay: capturing the restore as a graph failed ({e}); its counters are copied back"
            ),
        }
        Ok(())
    }

    /// Restores every region of `table` on the device and returns each region's (chunks,
    /// bytes) written. With the captured pair, one graph launch runs the restore and the
    /// publication of its counters, and the host watches the sequence number that follows
    /// them in mapped memory; otherwise the restore kernel is launched and its counters are
    /// copied back.
    fn run_one_pass(
        &self,
        b: &mut OnePassBuffers,
        kernel: usize,
        table: &[u64],
        total: u64,
        chunk: usize,
    ) -> Result<Vec<[u64; COUNTERS]>, BackendError> {
        let t0 = std::time::Instant::now();
        let regions = table.len() / JOB_WORDS;
        let counters = COUNTERS * regions;
        // Only tables readied ahead (`prepare_restore`) have a graph.
        self.ready(b, kernel, table, total, chunk, false)?;
        let t1 = std::time::Instant::now();
        let graph = b.pair.as_ref().filter(|_| !b.mapped_broken);
        match graph {
            Some(pair) => self.launch_captured(pair)?,
            None => self.launch_no_wait(
                kernel,
                RESTORE_CALL,
                total,
                &mut restore_params(b, regions, total, chunk),
            )?,
        }
        let t2 = std::time::Instant::now();
        let mut now = vec![0u64; counters];
        let want = b.seq + 1;
        // SAFETY: the pair exists only with a mapped buffer of more than `counters` words
        // (`ready`), so the sequence word at index `counters` is in bounds.
        let published =
            graph.is_some() && self.watch(unsafe { b.mapped.host.add(counters) }, want)?;
        if published {
            b.seq = want;
            for (i, n) in now.iter_mut().enumerate() {
                // SAFETY: i < counters < b.mapped.words; the publishing kernel wrote these
                // words before the sequence word `watch` saw (it fences between them).
                *n = unsafe { core::ptr::read_volatile(b.mapped.host.add(i)) };
            }
        } else {
            if graph.is_some() {
                tracing::debug!(
                    "kreplay: the restore's counters were not published; copying them back from now on"
                );
                b.mapped_broken = true;
            }
            self.copy_counters(b, &mut now)?;
        }
        let grown = now
            .chunks_exact(COUNTERS)
            .zip(b.seen.chunks_exact(COUNTERS))
            .map(|(n, s)| core::array::from_fn(|k| n[k].wrapping_sub(s[k])))
            .collect();
        b.seen[..counters].copy_from_slice(&now);
        tracing::debug!(
            "kreplay: one-pass restore of {regions} regions, {total} chunks: setup {:?}, launch {:?}, wait and read {:?} ({})",
            t1 - t0,
            t2 - t1,
            t2.elapsed(),
            if published { "graph, mapped" } else { "copied" }
        );
        Ok(grown)
    }

    /// Waits for the default stream's work, watching `word` for `want` (the publishing kernel
    /// writes it): true once it reads `want`, false when the stream finished without it.
    /// Errors of the stream's work come back from `cuStreamQuery`.
    fn watch(&self, word: *const u64, want: u64) -> Result<bool, BackendError> {
        /// Reads of the word between two queries of the stream (about 10 us of spinning).
        const SPINS: u32 = 256;
        let Some(query) = self.tool().driver.stream_query else {
            return Ok(false);
        };
        let seen = || {
            // SAFETY: `word` is mapped pinned memory the caller owns, valid for the whole
            // call; the device writes it, hence the volatile read.
            unsafe { core::ptr::read_volatile(word) == want }
        };
        loop {
            for _ in 0..SPINS {
                if seen() {
                    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
                    return Ok(true);
                }
                core::hint::spin_loop();
            }
            // SAFETY: the legacy default stream, where the kernel was launched.
            match unsafe { query(core::ptr::null_mut()) } {
                ERROR_NOT_READY => continue,
                SUCCESS => {
                    let done = seen();
                    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
                    return Ok(done);
                }
                r => return check("cuStreamQuery", r).map(|()| false),
            }
        }
    }

    /// Copies the counters back from the device into `now` (the read waits for the kernel).
    fn copy_counters(&self, b: &OnePassBuffers, now: &mut [u64]) -> Result<(), BackendError> {
        let mut bytes = vec![0u8; now.len() * 8];
        self.read_back(&b.counts, b.counts.dev, &mut bytes)?;
        for (n, c) in now.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            *n = u64::from_ne_bytes(w);
        }
        Ok(())
    }
}

/// `kreplay_restore_regions`'s parameters over `b`'s table of `regions` regions and `total`
/// chunks of `chunk` bytes.
fn restore_params(b: &OnePassBuffers, regions: usize, total: u64, chunk: usize) -> [u64; 6] {
    [
        b.jobs.dev,
        regions as u64,
        total,
        chunk as u64,
        hash_seed(),
        b.counts.dev,
    ]
}

/// The kernel's table for `jobs` (regions of length 0 have no chunks and stay out) and the
/// chunks it covers.
fn job_table(jobs: &[DeviceRestore], chunk: usize) -> (Vec<u64>, u64) {
    let mut table = Vec::with_capacity(jobs.len() * JOB_WORDS);
    let mut total = 0u64;
    for j in jobs.iter().filter(|j| j.len > 0) {
        table.extend([
            j.live,
            j.copy,
            j.len as u64,
            j.expected,
            total,
            j.seen,
            j.reference,
        ]);
        total += j.len.div_ceil(chunk) as u64;
    }
    (table, total)
}
