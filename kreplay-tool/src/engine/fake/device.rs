//! The fake backend's device-side abilities: chunk hashing and comparison, and the one-pass
//! restore, computed on its host-side memory with the same results the CUDA kernels give.

use std::sync::atomic::Ordering;

use xxhash_rust::xxh3::xxh3_128_with_seed;

use super::{FakeBackend, keep_prepared};
use crate::engine::backend::{
    Backend, BackendError, DeviceChunks, DeviceRestore, OnePassRestore, Written,
};

impl DeviceChunks for FakeBackend {
    fn hash_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        out: &mut [[u64; 2]],
    ) -> Result<bool, BackendError> {
        if !self.device_hash.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if len == 0 {
            return Ok(true);
        }
        let delay = self.device_hash_delay_us.load(Ordering::SeqCst)
            + self.device_hash_first_delay_us.swap(0, Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        let forced = self.force_collision_at.load(Ordering::SeqCst);
        self.with_range(addr, len, |s| {
            for (i, (c, o)) in s.chunks(chunk).zip(out.iter_mut()).enumerate() {
                let start = addr + (i * chunk) as u64;
                let h = if forced >= start && forced < start + c.len() as u64 {
                    0xC011_1DED
                } else {
                    // A different function from the host's (seeded): the engine never mixes them.
                    xxh3_128_with_seed(c, 0x5eed)
                };
                *o = [h as u64, (h >> 64) as u64];
            }
        })?;
        Ok(true)
    }

    fn hash_chunks_into_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        dst: u64,
    ) -> Result<bool, BackendError> {
        if self.no_resident_hashes.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let mut hashes = vec![[0u64; 2]; len.div_ceil(chunk)];
        if !self.hash_chunks_on_device(addr, len, chunk, &mut hashes)? {
            return Ok(false);
        }
        let bytes: Vec<u8> = hashes
            .iter()
            .flat_map(|h| h.iter().flat_map(|w| w.to_le_bytes()))
            .collect();
        self.with_range(dst, bytes.len(), |d| d.copy_from_slice(&bytes))?;
        Ok(true)
    }

    fn copy_and_hash_regions_on_device(
        &self,
        regions: &[(u64, u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        if !self.copy_and_hash.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.copy_and_hash_calls.fetch_add(1, Ordering::SeqCst);
        for &(src, copy, len, dst) in regions {
            self.copy_d2d(copy, src, len)?;
            if !self.hash_chunks_into_device(src, len, chunk, dst)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn hash_regions_into_device(
        &self,
        regions: &[(u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        if self.device_batch.load(Ordering::SeqCst) {
            self.hash_batches.fetch_add(1, Ordering::SeqCst);
        }
        for &(addr, len, dst) in regions {
            if !self.hash_chunks_into_device(addr, len, chunk, dst)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn changed_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        expected: u64,
        dirty_out: &mut [bool],
    ) -> Result<bool, BackendError> {
        if self.no_resident_hashes.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let Some(changed) = self.changed_against(addr, len, chunk, expected)? else {
            return Ok(false);
        };
        self.resident_checks.fetch_add(1, Ordering::SeqCst);
        for (d, c) in dirty_out.iter_mut().zip(changed) {
            *d = c;
        }
        Ok(true)
    }

    fn compare_chunks_on_device(
        &self,
        a: u64,
        b: u64,
        len: usize,
        chunk: usize,
        dirty_out: &mut [bool],
    ) -> Result<bool, BackendError> {
        if !self.device_compare.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if len == 0 {
            return Ok(true);
        }
        let x = self.with_range(a, len, |s| s.to_vec())?;
        let y = self.with_range(b, len, |s| s.to_vec())?;
        for ((cx, cy), d) in x
            .chunks(chunk)
            .zip(y.chunks(chunk))
            .zip(dirty_out.iter_mut())
        {
            *d = cx != cy;
        }
        Ok(true)
    }
}

impl OnePassRestore for FakeBackend {
    fn restore_changed_on_device(
        &self,
        jobs: &[DeviceRestore],
        chunk: usize,
        written: &mut [Written],
    ) -> Result<bool, BackendError> {
        if self.no_one_pass_restore.load(Ordering::SeqCst)
            || self.no_resident_hashes.load(Ordering::SeqCst)
            || !self.device_hash.load(Ordering::SeqCst)
        {
            return Ok(false);
        }
        let first = self.one_pass_restores.fetch_add(1, Ordering::SeqCst) == 0;
        let mut prepared = self.prepared.lock().unwrap();
        if !prepared.iter().any(|p| p == jobs) {
            let delay = self.one_pass_setup_delay_us.load(Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_micros(delay));
            keep_prepared(&mut prepared, jobs);
        }
        drop(prepared);
        let delay = self.one_pass_delay_us.load(Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(delay));
        let fail_at = self.fail_one_pass_before.load(Ordering::SeqCst);
        for (j, out) in jobs.iter().zip(written.iter_mut()) {
            if first && j.live == fail_at {
                return Err(BackendError::Call {
                    call: "cuLaunchKernel(kreplay_restore_regions)",
                    status: 719,
                });
            }
            *out = Written::default();
            if j.seen != 0 || j.reference != 0 {
                let mut now = vec![[0u64; 2]; j.len.div_ceil(chunk)];
                self.hash_chunks_on_device(j.live, j.len, chunk, &mut now)?;
                let bytes: Vec<u8> = now
                    .iter()
                    .flat_map(|h| h.iter().flat_map(|w| w.to_le_bytes()))
                    .collect();
                if j.seen != 0 {
                    self.with_range(j.seen, bytes.len(), |d| d.copy_from_slice(&bytes))?;
                }
                if j.reference != 0 {
                    let reference = self.with_range(j.reference, bytes.len(), |r| r.to_vec())?;
                    out.differ = bytes
                        .chunks_exact(16)
                        .zip(reference.chunks_exact(16))
                        .filter(|(a, b)| a != b)
                        .count() as u64;
                }
            }
            let changed = self
                .changed_against(j.live, j.len, chunk, j.expected)?
                .unwrap_or_default();
            for (c, _) in changed.iter().enumerate().filter(|(_, d)| **d) {
                // One kernel: the copy engine's delay does not apply per chunk.
                let (off, len) = (c * chunk, chunk.min(j.len - c * chunk));
                let bytes = self.with_range(j.copy + off as u64, len, |s| s.to_vec())?;
                self.with_range(j.live + off as u64, len, |d| d.copy_from_slice(&bytes))?;
                self.d2d_bytes.fetch_add(len as u64, Ordering::SeqCst);
                out.chunks += 1;
                out.bytes += len as u64;
            }
        }
        Ok(true)
    }

    fn can_restore_on_device(&self) -> bool {
        !self.no_one_pass_restore.load(Ordering::SeqCst)
            && !self.no_resident_hashes.load(Ordering::SeqCst)
            && self.device_hash.load(Ordering::SeqCst)
    }

    fn prepare_restore_on_device(&self, jobs: &[DeviceRestore], _chunk: usize) {
        self.one_pass_prepares.fetch_add(1, Ordering::SeqCst);
        keep_prepared(&mut self.prepared.lock().unwrap(), jobs);
    }
}
