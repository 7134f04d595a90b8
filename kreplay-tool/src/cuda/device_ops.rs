//! The CUDA backend's device-side capabilities for the replay engine: device-resident snapshot
//! copies (`cuMemAlloc_v2`, `cuMemcpyDtoD_v2`, with headroom left to the application), and the
//! per-chunk exact comparison and 128-bit hash kernels of `kernels.cu`, shipped as PTX and
//! loaded at run time (per context, once) with `cuModuleLoadData`.
//!
//! The hash: two NH lanes over the chunk's 32-bit words, keyed from the word's position and a
//! random per-process seed (see `kernels.cu` and docs/replay-restore.md for the collision
//! bound, about 2^-64 per changed chunk). Snapshot hashes stay in device memory and a check
//! compares them there (`chunks.rs`, `changed_chunks_on_device`): one flag per chunk comes back.
//! A device-resident snapshot is restored in one pass (`one_pass`). The kernels' output and the
//! restore's run table live in buffers kept per context (`kernel_buffers`).

use core::ffi::c_void;
use std::sync::OnceLock;

use super::backend::{CudaBackend, check};
use super::ffi::*;
use super::kernel_buffers::Kernels;
use crate::engine::backend::BackendError;

/// The PTX of `kernels.cu`.
const KERNELS_PTX: &str = concat!(include_str!("kernels.ptx"), "\0");
/// Threads per block of every kernel (a multiple of 32, at most 1024; `kernels.cu`'s
/// `KREPLAY_TABLE_BOUNDS` declares the table kernels for exactly this many).
const BLOCK: u32 = 256;
/// Most blocks launched (the kernels take further chunks in turn).
const MAX_BLOCKS: u64 = 65_535;
/// The one-pass restore kernel's launch, as errors name it.
pub(super) const RESTORE_CALL: &str = "cuLaunchKernel(kreplay_restore_regions)";
/// The launch of the kernel that publishes the one-pass restore's counters.
pub(super) const PUBLISH_CALL: &str = "cuLaunchKernel(kreplay_publish_counts)";
/// The batched hash's launch, as errors name it.
const HASH_REGIONS_CALL: &str = "cuLaunchKernel(kreplay_hash_regions)";
/// Longest piece one block of the run-copy kernel copies.
const MAX_RUN_PIECE: usize = 1 << 20;

/// The hash kernel's key seed: random, once per process, so that no fixed data pattern defeats
/// the hash (its collision bound holds for random keys; see kernels.cu). The snapshot's hashes
/// and every later check's come from this process, so they share it.
pub(super) fn hash_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let mut seed = 0u64;
        // SAFETY: getrandom writes at most 8 bytes into the u64 it is given.
        let n = unsafe { libc::getrandom((&raw mut seed).cast(), 8, libc::GRND_NONBLOCK) };
        if n != 8 {
            // No entropy yet (early boot): the clock and the pid still vary per process.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            seed = t ^ (u64::from(std::process::id()) << 32);
        }
        seed
    })
}

/// Sets each `dirty[i]` from the kernels' one-byte flag `flags[i]` (non-zero: changed).
pub(super) fn set_flags(dirty: &mut [bool], flags: &[u8]) {
    for (d, f) in dirty.iter_mut().zip(flags) {
        *d = *f != 0;
    }
}

/// Alignment of each carved piece (what `cuMemAlloc` gives, and the kernels' 16-byte loads
/// need).
const PIECE_ALIGN: usize = 256;

impl CudaBackend<'_> {
    /// kreplay's kernels in the current context, loading them on first use.
    pub(super) fn kernels(&self) -> Option<Kernels> {
        let d = &self.tool().driver;
        let mut ctx: CUcontext = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        if unsafe { (d.ctx_get_current)(&mut ctx) } != SUCCESS || ctx.is_null() {
            return None;
        }
        let mut cache = self
            .tool()
            .kernels
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *cache.entry(ctx as usize).or_insert_with(|| {
            let mut m: CUmodule = core::ptr::null_mut();
            // SAFETY: a NUL-terminated PTX image; valid out-pointer.
            let r = unsafe { (d.module_load_data)(&mut m, KERNELS_PTX.as_ptr() as *const c_void) };
            if r != SUCCESS {
                tracing::warn!("kreplay: loading its comparison kernels failed ({r}); restores check chunks on the host");
                return None;
            }
            let get = |name: &core::ffi::CStr| {
                let mut f: CUfunction = core::ptr::null_mut();
                // SAFETY: m is the module just loaded; valid out-pointer.
                let r = unsafe { (d.module_get_function)(&mut f, m, name.as_ptr()) };
                (r == SUCCESS).then_some(f as usize)
            };
            let k = Kernels {
                compare: get(c"kreplay_compare_chunks")?,
                hash: get(c"kreplay_hash_chunks")?,
                copy_runs: get(c"kreplay_copy_runs")?,
                hash_regions: get(c"kreplay_hash_regions"),
                restore: get(c"kreplay_restore_regions"),
                publish: get(c"kreplay_publish_counts"),
            };
            self.prime(&k);
            Some(k)
        })
    }

    /// Launches each kernel once over nothing: with lazy module loading (CUDA 12's default) a
    /// function's code is loaded at its first launch, which would otherwise land in the first
    /// restore's time. Every kernel's loop is empty at length 0.
    fn prime(&self, k: &Kernels) {
        let mut launches: Vec<(usize, &'static str, Vec<u64>)> = vec![
            (
                k.hash,
                "cuLaunchKernel(kreplay_hash_chunks)",
                vec![0, 0, 1, 0, 0],
            ),
            (
                k.compare,
                "cuLaunchKernel(kreplay_compare_chunks)",
                vec![0, 0, 0, 1, 0],
            ),
            (k.copy_runs, "cuLaunchKernel(kreplay_copy_runs)", vec![0, 0]),
        ];
        if let Some(f) = k.hash_regions {
            launches.push((f, HASH_REGIONS_CALL, vec![0, 0, 0, 1, 0]));
        }
        if let Some(f) = k.restore {
            launches.push((f, RESTORE_CALL, vec![0, 0, 0, 1, 0, 0]));
        }
        if let Some(f) = k.publish {
            launches.push((f, PUBLISH_CALL, vec![0, 0, 0]));
        }
        for (f, call, mut params) in launches {
            if let Err(e) = self.launch_no_wait(f, call, 1, &mut params) {
                tracing::debug!("kreplay: priming its kernels: {e}");
            }
        }
        if let Err(e) = self.synchronize() {
            tracing::debug!("kreplay: priming its kernels: {e}");
        }
    }

    /// Device memory for one copy of each of `lens`, carved from one allocation (each piece
    /// aligned to 256 bytes): one `cuMemAlloc` instead of one per region. Each piece is freed
    /// with [`Self::device_free_piece`]; the allocation goes when its last piece does.
    pub fn device_alloc_pieces(&self, lens: &[usize]) -> Option<Vec<u64>> {
        let mut offsets = Vec::with_capacity(lens.len());
        let mut total = 0usize;
        for &len in lens {
            offsets.push(total);
            total = total.checked_add(len.max(1).next_multiple_of(PIECE_ALIGN))?;
        }
        let base = self.device_alloc_copy(total)?;
        let pieces: Vec<u64> = offsets.iter().map(|&o| base + o as u64).collect();
        let mut slabs = self
            .tool()
            .kernels
            .slabs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for &p in &pieces {
            slabs.base_of.insert(p, base);
        }
        slabs.live.insert(base, pieces.len());
        Some(pieces)
    }

    /// Frees a piece from [`Self::device_alloc_pieces`] (the whole allocation with its last
    /// piece), or memory from [`Self::device_alloc_copy`].
    pub fn device_free_piece(&self, p: u64) {
        let base = {
            let mut slabs = self
                .tool()
                .kernels
                .slabs
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match slabs.base_of.remove(&p) {
                None => Some(p),
                Some(base) => {
                    let left = slabs.live.get_mut(&base).map(|n| {
                        *n -= 1;
                        *n
                    });
                    (left == Some(0)).then(|| {
                        slabs.live.remove(&base);
                        base
                    })
                }
            }
        };
        if let Some(b) = base {
            self.device_free_copy(b);
        }
    }

    /// Device memory for a snapshot copy, while the device keeps a tenth of its memory (at
    /// least 1 GiB) free for the application.
    pub fn device_alloc_copy(&self, len: usize) -> Option<u64> {
        let d = &self.tool().driver;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        if unsafe { (d.mem_get_info)(&mut free, &mut total) } != SUCCESS {
            return None;
        }
        let headroom = (total / 10).max(1 << 30);
        if len.saturating_add(headroom) > free {
            return None;
        }
        let mut p: CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the real driver entry, so kreplay's copy is never tracked.
        (unsafe { (d.mem_alloc)(&mut p, len.max(1)) } == SUCCESS).then_some(p)
    }

    /// Frees a snapshot copy.
    pub fn device_free_copy(&self, p: u64) {
        // SAFETY: p came from device_alloc_copy.
        let _ = unsafe { (self.tool().driver.mem_free)(p) };
    }

    /// Device-to-device copy, complete when it returns.
    pub fn dtod(&self, dst: u64, src: u64, len: usize) -> Result<(), BackendError> {
        // SAFETY: both ranges are live device memory of len bytes (engine's contract).
        check("cuMemcpyDtoD_v2", unsafe {
            (self.tool().driver.memcpy_dtod)(dst, src, len)
        })?;
        self.synchronize()
    }

    /// Launches one of kreplay's kernels over `blocks` blocks (at most [`MAX_BLOCKS`]; the
    /// kernels stride over the rest) with `params` (every parameter is a 64-bit value), and
    /// waits for it.
    pub(super) fn launch(
        &self,
        kernel: usize,
        call: &'static str,
        blocks: u64,
        params: &mut [u64],
    ) -> Result<(), BackendError> {
        self.launch_no_wait(kernel, call, blocks, params)?;
        self.synchronize()
    }

    /// [`Self::launch`] without the wait: a later launch on the same (default) stream runs
    /// after it.
    pub(super) fn launch_no_wait(
        &self,
        kernel: usize,
        call: &'static str,
        blocks: u64,
        params: &mut [u64],
    ) -> Result<(), BackendError> {
        self.launch_on(kernel, call, blocks, params, core::ptr::null_mut())
    }

    /// [`Self::launch_no_wait`] on `stream` (null: the legacy default stream).
    pub(super) fn launch_on(
        &self,
        kernel: usize,
        call: &'static str,
        blocks: u64,
        params: &mut [u64],
        stream: CUstream,
    ) -> Result<(), BackendError> {
        let mut args: Vec<*mut c_void> = params
            .iter_mut()
            .map(|p| p as *mut u64 as *mut c_void)
            .collect();
        // SAFETY: kernel is kreplay's function in this context; every parameter it declares is
        // a 64-bit value, one per entry of `args`, which outlives the call; `stream` is the
        // legacy stream or one of kreplay's own in this context.
        let r = unsafe {
            (self.tool().driver.launch_kernel)(
                kernel as CUfunction,
                blocks.clamp(1, MAX_BLOCKS) as u32,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                stream,
                args.as_mut_ptr(),
                core::ptr::null_mut(),
            )
        };
        check(call, r)
    }

    /// Runs a per-chunk kernel whose parameters are `inputs` followed by its output buffer
    /// (the context's scratch, grown to at least `reserve` bytes), and reads `out.len()` bytes
    /// of output into `out`.
    pub(super) fn run_chunk_kernel(
        &self,
        kernel: usize,
        call: &'static str,
        inputs: &[u64],
        chunks: usize,
        out: &mut [u8],
        reserve: usize,
    ) -> Result<(), BackendError> {
        let (mut all, ctx) = self.scratch()?;
        let s = &mut all.entry(ctx).or_default().out;
        self.reserve(s, out.len().max(reserve))?;
        let mut params: Vec<u64> = inputs.iter().copied().chain([s.dev]).collect();
        let t0 = std::time::Instant::now();
        self.launch(kernel, call, chunks as u64, &mut params)?;
        let t1 = std::time::Instant::now();
        self.read_back(s, s.dev, out)?;
        tracing::debug!(
            "kreplay: {call} over {chunks} chunks: launch and wait {:?}, {} result bytes read in {:?}",
            t1 - t0,
            out.len(),
            t1.elapsed()
        );
        Ok(())
    }

    /// The kernels and chunk count of a per-chunk operation over `len` bytes, or what the
    /// operation returns without launching anything: `false` when the kernels are unavailable,
    /// `true` when there is nothing to do (a zero-length call only reports support).
    pub(super) fn chunk_job(&self, len: usize, chunk: usize) -> Result<(Kernels, usize), bool> {
        let k = self.kernels().ok_or(false)?;
        if len == 0 || chunk == 0 {
            return Err(true);
        }
        Ok((k, len.div_ceil(chunk)))
    }

    /// [`DeviceChunks::hash_chunks_into_device`] for every `(addr, len, dst)` of `regions` in
    /// one launch of `kreplay_hash_regions` and one wait. `Ok(None)`: the PTX has no such
    /// kernel (the caller hashes region by region); `Ok(Some(false))`: the kernels are
    /// unavailable.
    ///
    /// [`DeviceChunks::hash_chunks_into_device`]: crate::engine::backend::DeviceChunks::hash_chunks_into_device
    pub(super) fn hash_regions_into(
        &self,
        regions: &[(u64, usize, u64)],
        chunk: usize,
    ) -> Result<Option<bool>, BackendError> {
        let jobs: Vec<(u64, u64, usize, u64)> =
            regions.iter().map(|&(a, len, d)| (a, 0, len, d)).collect();
        self.copy_hash_regions_into(&jobs, chunk)
    }

    /// [`Self::hash_regions_into`] for every `(addr, copy, len, dst)`, copying each region to
    /// `copy` (0: not copied) from the same loads that hash it: a snapshot taken and hashed
    /// in one read of the footprint. The return values are [`Self::hash_regions_into`]'s.
    pub(super) fn copy_hash_regions_into(
        &self,
        regions: &[(u64, u64, usize, u64)],
        chunk: usize,
    ) -> Result<Option<bool>, BackendError> {
        let Some(k) = self.kernels() else {
            return Ok(Some(false));
        };
        let Some(f) = k.hash_regions else {
            return Ok(None);
        };
        if chunk == 0 {
            return Ok(Some(true));
        }
        let mut table = Vec::with_capacity(regions.len() * 6);
        let mut total = 0u64;
        for &(addr, copy, len, dst) in regions.iter().filter(|r| r.2 > 0) {
            table.extend([addr, copy, len as u64, dst, total, 0]);
            total += len.div_ceil(chunk) as u64;
        }
        if total == 0 {
            return Ok(Some(true));
        }
        let (mut all, ctx) = self.scratch()?;
        let b = &mut all.entry(ctx).or_default().hash_jobs;
        self.upload(b, &table)?;
        self.launch(
            f,
            HASH_REGIONS_CALL,
            total,
            &mut [
                b.dev,
                (table.len() / 6) as u64,
                total,
                chunk as u64,
                hash_seed(),
            ],
        )?;
        Ok(Some(true))
    }

    /// Copies every `(dst, src, len)` device range with one kernel launch (runs split into
    /// pieces of at most 1 MiB, one block each); `Ok(false)` when the kernels are unavailable.
    pub fn copy_runs_on_device(&self, runs: &[(u64, u64, usize)]) -> Result<bool, BackendError> {
        let Some(k) = self.kernels() else {
            return Ok(false);
        };
        let mut table: Vec<u64> = Vec::with_capacity(runs.len() * 3);
        for &(dst, src, len) in runs {
            let mut off = 0;
            while off < len {
                let n = (len - off).min(MAX_RUN_PIECE);
                table.extend([dst + off as u64, src + off as u64, n as u64]);
                off += n;
            }
        }
        let pieces = (table.len() / 3) as u64;
        if pieces == 0 {
            return Ok(true);
        }
        let (mut all, ctx) = self.scratch()?;
        let b = &mut all.entry(ctx).or_default().runs;
        self.upload(b, &table)?;
        self.launch(
            k.copy_runs,
            "cuLaunchKernel(kreplay_copy_runs)",
            pieces,
            &mut [b.dev, pieces],
        )?;
        Ok(true)
    }
}
