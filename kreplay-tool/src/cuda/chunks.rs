//! The engine's chunk hashing and comparison on the device ([`DeviceChunks`]) with kreplay's
//! kernels (`kernels.cu`), launched through `device_ops.rs`.

use super::backend::CudaBackend;
use super::device_ops::{hash_seed, set_flags};
use crate::engine::backend::{BackendError, DeviceChunks};

/// Hashing and comparing chunks with kreplay's kernels (`kernels.cu`).
impl DeviceChunks for CudaBackend<'_> {
    /// Per-chunk exact comparison of `a` and `b`; `Ok(false)` when the kernels are unavailable.
    fn compare_chunks_on_device(
        &self,
        a: u64,
        b: u64,
        len: usize,
        chunk: usize,
        dirty: &mut [bool],
    ) -> Result<bool, BackendError> {
        let (k, chunks) = match self.chunk_job(len, chunk) {
            Ok(job) => job,
            Err(done) => return Ok(done),
        };
        let mut flags = vec![0u8; chunks];
        self.run_chunk_kernel(
            k.compare,
            "cuLaunchKernel(kreplay_compare_chunks)",
            &[a, b, len as u64, chunk as u64],
            chunks,
            &mut flags,
            0,
        )?;
        set_flags(dirty, &flags);
        Ok(true)
    }

    /// Per-chunk 128-bit hashes of `[addr, addr + len)`; `Ok(false)` when unavailable.
    fn hash_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        out: &mut [[u64; 2]],
    ) -> Result<bool, BackendError> {
        let (k, chunks) = match self.chunk_job(len, chunk) {
            Ok(job) => job,
            Err(done) => return Ok(done),
        };
        if out.len() < chunks {
            // The kernel writes a hash for every chunk of `len`.
            return Err(BackendError::Unsupported(
                "hash output shorter than the chunk count",
            ));
        }
        // Room for `out.len()` chunks in `changed_on_device` too (16 bytes of hash and a flag
        // each), so a short first call readies the scratch for both.
        let reserve = out.len() * 17;
        // SAFETY: the first `chunks` entries of `out` are 16 * chunks initialized bytes, and
        // every byte pattern is a valid u64 (the device, like the host, is little-endian).
        let bytes =
            unsafe { core::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), chunks * 16) };
        self.run_chunk_kernel(
            k.hash,
            "cuLaunchKernel(kreplay_hash_chunks)",
            &[addr, len as u64, chunk as u64, hash_seed()],
            chunks,
            bytes,
            reserve,
        )?;
        Ok(true)
    }

    /// Per-chunk hashes of `[addr, addr + len)` into device memory at `dst` (16 bytes per
    /// chunk); `Ok(false)` when the kernels are unavailable.
    fn hash_chunks_into_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        dst: u64,
    ) -> Result<bool, BackendError> {
        let (k, chunks) = match self.chunk_job(len, chunk) {
            Ok(job) => job,
            Err(done) => return Ok(done),
        };
        self.launch(
            k.hash,
            "cuLaunchKernel(kreplay_hash_chunks)",
            chunks as u64,
            &mut [addr, len as u64, chunk as u64, hash_seed(), dst],
        )?;
        Ok(true)
    }

    /// Sets `dirty[i]` to whether chunk `i` of `[addr, addr + len)` hashes differently from
    /// the hashes at `expected` (from [`DeviceChunks::hash_chunks_into_device`]): the hash
    /// kernel writes the current hashes to the scratch, the comparison kernel compares them 16
    /// bytes per chunk with `expected`, and only the flags come back. `Ok(false)` when the kernels are
    /// unavailable.
    fn changed_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        expected: u64,
        dirty: &mut [bool],
    ) -> Result<bool, BackendError> {
        let (k, chunks) = match self.chunk_job(len, chunk) {
            Ok(job) => job,
            Err(done) => return Ok(done),
        };
        if dirty.len() < chunks {
            return Err(BackendError::Unsupported(
                "dirty flags shorter than the chunk count",
            ));
        }
        let (mut all, ctx) = self.scratch()?;
        let s = &mut all.entry(ctx).or_default().out;
        self.reserve(s, chunks * 17)?;
        let (now, flags) = (s.dev, s.dev + chunks as u64 * 16);
        self.launch_no_wait(
            k.hash,
            "cuLaunchKernel(kreplay_hash_chunks)",
            chunks as u64,
            &mut [addr, len as u64, chunk as u64, hash_seed(), now],
        )?;
        self.launch(
            k.compare,
            "cuLaunchKernel(kreplay_compare_chunks)",
            chunks as u64,
            &mut [now, expected, chunks as u64 * 16, 16, flags],
        )?;
        let mut bytes = vec![0u8; chunks];
        self.read_back(s, flags, &mut bytes)?;
        set_flags(dirty, &bytes);
        Ok(true)
    }

    fn copy_and_hash_regions_on_device(
        &self,
        regions: &[(u64, u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        Ok(self.copy_hash_regions_into(regions, chunk)? == Some(true))
    }

    fn hash_regions_into_device(
        &self,
        regions: &[(u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        match self.hash_regions_into(regions, chunk)? {
            Some(done) => Ok(done),
            // The PTX predates the batched kernel: one launch per region.
            None => {
                for &(addr, len, dst) in regions {
                    if !self.hash_chunks_into_device(addr, len, chunk, dst)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }
}
