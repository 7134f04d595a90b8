//! The operations the engine needs from a GPU runtime, as one trait, so the engine runs on
//! HSA (and later CUDA) and on a fake backend in tests that injects failures.

/// A failed backend call, naming it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// A runtime call returned an error status (named as the runtime names it).
    #[error("{call} failed with {}", crate::status::describe(call, *status))]
    Call {
        /// The failing runtime function.
        call: &'static str,
        /// Its status code.
        status: u32,
    },
    /// A runtime entry the engine needs is missing from the tables it was given.
    #[error("{0} is not available in the runtime's tables")]
    Missing(&'static str),
    /// An optional capability this backend does not implement.
    #[error("{0} is not supported by this backend")]
    Unsupported(&'static str),
}

/// What the runtime says about an address (`hsa_amd_pointer_info`, `cuPointerGetAttributes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// Runtime pointer type (HSA: `hsa_amd_pointer_type_t`).
    pub kind: u32,
    /// Base address of the allocation containing the pointer.
    pub base: u64,
    /// Size of that allocation in bytes.
    pub size: u64,
    /// The owning agent's handle.
    pub owner: u64,
    /// The pool's global flags, when the runtime reports them.
    pub global_flags: Option<u32>,
}

/// A module-scope (`__device__`/`__constant__`) variable of a loaded code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleVar {
    /// Device address.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// Declared constant (kernels cannot write it).
    pub constant: bool,
    /// Symbol name, for logs.
    pub name: String,
}

/// A host buffer the backend allocated (pinned where the runtime offers it).
#[derive(Debug)]
pub struct HostBuf {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Length in bytes.
    pub len: usize,
}

// SAFETY: a HostBuf is an owned allocation; nothing else aliases it while the engine holds it.
unsafe impl Send for HostBuf {}

/// One region of [`OnePassRestore::restore_changed_on_device`]: the live bytes, their device-resident
/// snapshot copy, and the snapshot's per-chunk hashes in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRestore {
    /// Device address of the live region.
    pub live: u64,
    /// Device address of its snapshot copy (`len` bytes).
    pub copy: u64,
    /// Bytes in the region.
    pub len: usize,
    /// Device address of the snapshot's hashes ([`DeviceChunks::hash_chunks_into_device`]).
    pub expected: u64,
    /// Device address where the live chunks' hashes (as found, before any is written back)
    /// are kept, 16 bytes per chunk: the determinism check of the pass that wrote them reads
    /// them instead of hashing again (0: not kept).
    pub seen: u64,
    /// Device address of reference hashes (16 bytes per chunk) the live chunks' hashes are
    /// compared with as they are found: the determinism check's comparison of the pass that
    /// wrote them, counted in [`Written::differ`] (0: not compared).
    pub reference: u64,
}

/// What [`OnePassRestore::restore_changed_on_device`] wrote back in one region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Chunks written back.
    pub chunks: u64,
    /// Their bytes (the region's last chunk may be short).
    pub bytes: u64,
    /// Chunks whose hash, as found, differs from the job's reference hashes (0 without a
    /// reference).
    pub differ: u64,
}

/// The narrow runtime interface of the replay engine: what every backend provides, plus the
/// device-side abilities a backend may have ([`DeviceChunks`], [`OnePassRestore`], whose
/// methods report "unsupported" unless implemented).
pub trait Backend: DeviceChunks + OnePassRestore {
    /// One dispatch as the backend submits it (HSA: the AQL packet and the queue's writer).
    type Dispatch;

    /// Allocates `len` host bytes (pinned where possible); `None` when the runtime refuses.
    fn host_alloc(&self, len: usize) -> Option<HostBuf>;
    /// Frees a buffer from [`Backend::host_alloc`].
    fn host_free(&self, buf: HostBuf);
    /// Copies `len` device bytes at `src` into host memory at `dst`.
    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError>;
    /// Copies `len` host bytes at `src` to device address `dst`.
    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError>;
    /// The module-scope variables of every executable loaded for `agent`.
    fn module_variables(&self, agent: u64) -> Result<Vec<ModuleVar>, BackendError>;
    /// Submits `d` once (with the engine's own completion signal) and waits for it.
    fn submit_wait(&self, d: &Self::Dispatch) -> Result<(), BackendError>;
    /// [`Backend::submit_wait`], also measuring the GPU's own time of the dispatch (ns) where
    /// the backend can; `Ok(None)` where it cannot (the default), and the dispatch ran.
    fn submit_wait_timed(&self, d: &Self::Dispatch) -> Result<Option<u64>, BackendError> {
        self.submit_wait(d).map(|()| None)
    }

    // Optional capabilities. The defaults say "unsupported"; the engine then falls back to
    // host memory and host-side hashing. A backend that implements them lets snapshots live
    // in device memory and the dirty check run on the device (see `engine::placement`).

    /// Allocates `len` bytes of device memory on the replaying agent for a device-resident
    /// snapshot copy; `None` when unsupported or when the device has no room.
    fn device_alloc(&self, len: usize) -> Option<u64> {
        let _ = len;
        None
    }
    /// Frees memory from [`Backend::device_alloc`] or [`Backend::device_alloc_each`].
    fn device_free(&self, ptr: u64) {
        let _ = ptr;
    }
    /// Device memory for one copy of each of `lens` (a snapshot's regions), each freed with
    /// [`Backend::device_free`]; all or nothing. A backend may carve them from one allocation
    /// (on CUDA each `cuMemAlloc` is a driver call of its own, and a snapshot may have hundreds
    /// of small regions). The default allocates each alone.
    fn device_alloc_each(&self, lens: &[usize]) -> Option<Vec<u64>> {
        let mut out = Vec::with_capacity(lens.len());
        for &len in lens {
            match self.device_alloc(len) {
                Some(p) => out.push(p),
                None => {
                    out.into_iter().for_each(|p| self.device_free(p));
                    return None;
                }
            }
        }
        Some(out)
    }
    /// Copies `len` bytes from device address `src` to device address `dst` (synchronous:
    /// complete when it returns). Only called on backends whose `device_alloc` succeeded.
    fn copy_d2d(&self, dst: u64, src: u64, len: usize) -> Result<(), BackendError> {
        let _ = (dst, src, len);
        Err(BackendError::Unsupported("copy_d2d"))
    }
    /// Copies every `(dst, src, len)` range device to device in one operation (complete when
    /// it returns): a restore's dirty runs, which may number thousands, cost one call instead
    /// of one synchronous copy each. `Ok(false)`: unsupported (the engine then calls
    /// [`Backend::copy_d2d`] per range), nothing copied.
    fn copy_d2d_runs(&self, runs: &[(u64, u64, usize)]) -> Result<bool, BackendError> {
        let _ = runs;
        Ok(false)
    }
    /// Copies every `(dst, src, len)` range from pinned host memory (a buffer from
    /// [`Backend::host_alloc`]) to the device in one operation, complete when it returns.
    /// `Ok(false)`: unsupported (the engine then calls [`Backend::copy_h2d`] per range).
    fn copy_pinned_runs(&self, runs: &[(u64, *const u8, usize)]) -> Result<bool, BackendError> {
        let _ = runs;
        Ok(false)
    }
}

/// Hashing and comparing device memory chunk by chunk on the device (CUDA's kernels). Every
/// method defaults to `Ok(false)`: unsupported, and the engine uses the host path.
pub trait DeviceChunks {
    /// Hashes `[addr, addr + len)` on the device in chunks of `chunk` bytes (the last one
    /// short when `len` is not a multiple), writing one 128-bit hash per chunk into
    /// `out[..len.div_ceil(chunk)]`. `Ok(false)`: unsupported, `out` untouched. A call with
    /// `len == 0` must only report support. The engine compares these hashes only with hashes
    /// from this same function (snapshot time vs restore time), never with host hashes, so
    /// the function may be any 128-bit hash the device computes cheaply, as long as it is
    /// deterministic and its collision probability is documented. `out` may be longer than
    /// needed: a backend may size the buffers it keeps between calls by `out.len()`, so a short
    /// first call readies them for the longest region.
    fn hash_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        out: &mut [[u64; 2]],
    ) -> Result<bool, BackendError> {
        let _ = (addr, len, chunk, out);
        Ok(false)
    }
    /// [`DeviceChunks::hash_chunks_on_device`]'s hashes of `[addr, addr + len)`, written to device
    /// memory at `dst` (16 bytes per chunk, from [`Backend::device_alloc`]) instead of host
    /// memory: the snapshot keeps them there for [`DeviceChunks::changed_chunks_on_device`].
    /// `Ok(false)`: unsupported.
    fn hash_chunks_into_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        dst: u64,
    ) -> Result<bool, BackendError> {
        let _ = (addr, len, chunk, dst);
        Ok(false)
    }
    /// Copies every `(src, copy, len, dst)` of `regions` from `src` to `copy` on the device and
    /// hashes it per chunk into `dst` as [`DeviceChunks::hash_regions_into_device`] does, reading
    /// each byte once, in one operation. `Ok(false)`: unsupported, nothing written (the
    /// caller copies, then hashes).
    fn copy_and_hash_regions_on_device(
        &self,
        regions: &[(u64, u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        let _ = (regions, chunk);
        Ok(false)
    }
    /// [`DeviceChunks::hash_chunks_into_device`] for every `(addr, len, dst)` of `regions`, in one
    /// operation where the backend can (one launch and one wait for all regions, instead of
    /// one each: with hundreds of small regions the waits cost far more than the hashing).
    /// `Ok(false)`: unsupported, nothing written. The default hashes region by region.
    fn hash_regions_into_device(
        &self,
        regions: &[(u64, usize, u64)],
        chunk: usize,
    ) -> Result<bool, BackendError> {
        for &(addr, len, dst) in regions {
            if !self.hash_chunks_into_device(addr, len, chunk, dst)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
    /// Hashes `[addr, addr + len)` as [`DeviceChunks::hash_chunks_into_device`] did into `expected`
    /// and sets `dirty_out[i]` to whether chunk `i`'s hash differs, comparing on the device:
    /// only a flag per chunk comes back to the host. `Ok(false)`: unsupported.
    fn changed_chunks_on_device(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        expected: u64,
        dirty_out: &mut [bool],
    ) -> Result<bool, BackendError> {
        let _ = (addr, len, chunk, expected, dirty_out);
        Ok(false)
    }
    /// Compares `len` device bytes at `a` with those at `b` chunk by chunk, setting
    /// `dirty_out[i]` to whether chunk `i` differs in any byte (exact, no hashing).
    /// `Ok(false)`: unsupported, `dirty_out` untouched. A call with `len == 0` must only report
    /// support.
    fn compare_chunks_on_device(
        &self,
        a: u64,
        b: u64,
        len: usize,
        chunk: usize,
        dirty_out: &mut [bool],
    ) -> Result<bool, BackendError> {
        let _ = (a, b, len, chunk, dirty_out);
        Ok(false)
    }
}

/// The one-pass restore on the device: hash, compare and copy back every changed chunk of
/// every region in one call. Defaults: unsupported.
pub trait OnePassRestore {
    /// Restores, for every job, the chunks of its live region whose hash (as
    /// [`DeviceChunks::hash_chunks_into_device`] computes it) differs from the snapshot's hashes at
    /// `expected`, copying them from the job's device copy, in one pass over the live bytes
    /// on the device: no hashes or runs go through the host. A job whose `seen` is set keeps
    /// every live chunk's hash there too; one whose `reference` is set counts the chunks whose
    /// hash differs from the reference. Sets `written[i]` to what job `i`
    /// wrote back. Complete when it returns. `Ok(false)`: unsupported, nothing written. On
    /// `Err` some chunks may have been written back already (with the snapshot's bytes, so
    /// checking and writing again is safe).
    fn restore_changed_on_device(
        &self,
        jobs: &[DeviceRestore],
        chunk: usize,
        written: &mut [Written],
    ) -> Result<bool, BackendError> {
        let _ = (jobs, chunk, written);
        Ok(false)
    }
    /// Whether [`OnePassRestore::restore_changed_on_device`] is available (it may still fail).
    fn can_restore_on_device(&self) -> bool {
        false
    }
    /// Readies what [`OnePassRestore::restore_changed_on_device`] needs for these jobs (buffers, the
    /// job table) ahead of the first restore, so that restore's time, which decides whether
    /// checking pays, holds no one-time setup. Best effort: a failure is logged and the first
    /// restore does the setup itself.
    fn prepare_restore_on_device(&self, jobs: &[DeviceRestore], chunk: usize) {
        let _ = (jobs, chunk);
    }
}
