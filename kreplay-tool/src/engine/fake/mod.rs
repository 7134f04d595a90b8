//! A fake backend for the engine's tests: device memory in host vectors, module variables,
//! and failure knobs like the sim's (nth D2H copy, symbol iteration, host allocation size),
//! plus the optional device capabilities (device memory for snapshots, device hashing, device
//! comparison), each switchable, and a hook that forces a chunk's device hash to a constant.

mod device;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::backend::{
    Backend, BackendError, DeviceChunks, DeviceRestore, HostBuf, ModuleVar, PointerInfo,
};

struct Alloc {
    bytes: Vec<u8>,
    owner: u64,
    flags: Option<u32>,
}

/// The fake device.
#[derive(Default)]
pub struct FakeBackend {
    mem: Mutex<BTreeMap<u64, Alloc>>,
    vars: Mutex<Vec<ModuleVar>>,
    queries: AtomicU64,
    d2h: AtomicU64,
    host_live: AtomicU64,
    /// Fail the nth device-to-host copy (1-based; 0 never).
    pub fail_d2h_nth: AtomicU64,
    h2d: AtomicU64,
    /// Fail the nth host-to-device copy (1-based; 0 never).
    pub fail_h2d_nth: AtomicU64,
    /// Fail every host-to-device copy from the nth on (1-based; 0 never).
    pub fail_h2d_from: AtomicU64,
    submits: AtomicU64,
    /// The GPU time `submit_wait_timed` reports for the nth submission: this value plus n
    /// (0: it measures none, as a backend without timers).
    pub gpu_ns_base: AtomicU64,
    /// The nth `submit_wait` runs the dispatch, then reports a failure, as a kernel that
    /// faulted after writing would (1-based; 0 never).
    pub fail_submit_nth: AtomicU64,
    /// Fail host allocations above this many bytes (0 never).
    pub fail_host_alloc_above: AtomicU64,
    /// Fail module variable enumeration.
    pub fail_symbols: AtomicBool,
    host_peak: AtomicU64,
    /// Calls of `host_alloc` that returned a buffer.
    pub host_allocs: AtomicU64,
    next_device: AtomicU64,
    device_used: AtomicU64,
    /// Device bytes `device_alloc` may hand out (0: device allocation unsupported).
    pub device_room: AtomicU64,
    /// `hash_chunks_on_device` supported.
    pub device_hash: AtomicBool,
    /// `hash_chunks_into_device` and `changed_chunks_on_device` unsupported (the device hash
    /// then comes back to the host and is compared there).
    pub no_resident_hashes: AtomicBool,
    /// `changed_chunks_on_device` calls made.
    pub resident_checks: AtomicU64,
    /// `restore_changed_on_device` unsupported (checks and writes are then separate calls).
    pub no_one_pass_restore: AtomicBool,
    /// `restore_changed_on_device` calls made.
    pub one_pass_restores: AtomicU64,
    /// `prepare_restore_on_device` calls made.
    pub one_pass_prepares: AtomicU64,
    /// A `restore_changed_on_device` call whose jobs were not among the two tables last
    /// prepared first sleeps this many microseconds (its one-time setup: buffers, the job
    /// table).
    pub one_pass_setup_delay_us: AtomicU64,
    /// Every `restore_changed_on_device` call sleeps this many microseconds (a slow pass over
    /// the footprint).
    pub one_pass_delay_us: AtomicU64,
    prepared: Mutex<Vec<Vec<DeviceRestore>>>,
    /// The first `restore_changed_on_device` call fails when it reaches the job of the region
    /// at this address, after it restored the jobs before it, as a kernel failing part-way
    /// would (0: never).
    pub fail_one_pass_before: AtomicU64,
    /// `compare_chunks_on_device` supported.
    pub device_compare: AtomicBool,
    /// Test hook: the device hash of any chunk containing this address is a constant, so the
    /// chunk's snapshot-time and restore-time hashes are equal whatever it holds (0: off).
    pub force_collision_at: AtomicU64,
    /// Bytes moved host-to-device, device-to-device, and read device-to-host.
    pub h2d_bytes: AtomicU64,
    /// See `h2d_bytes`.
    pub d2d_bytes: AtomicU64,
    /// Offers `copy_d2d_runs`.
    pub device_batch: AtomicBool,
    /// `copy_d2d_runs` calls made.
    pub d2d_batches: AtomicU64,
    /// Offers `copy_and_hash_regions_on_device` (and counts its calls here).
    pub copy_and_hash: AtomicBool,
    /// `copy_and_hash_regions_on_device` calls made.
    pub copy_and_hash_calls: AtomicU64,
    /// `copy_pinned_runs` calls made.
    pub h2d_batches: AtomicU64,
    /// `hash_regions_into_device` calls made with `device_batch` on (one operation each).
    pub hash_batches: AtomicU64,
    /// Each device hashing call first sleeps this many microseconds (a slow hashing pass).
    pub device_hash_delay_us: AtomicU64,
    /// Each device-to-device copy first sleeps this many microseconds (a slow copy engine).
    pub d2d_delay_us: AtomicU64,
    /// The first device hashing call with data sleeps this many microseconds (one-time setup,
    /// as a GPU's first launch of a kernel and its first output buffers).
    pub device_hash_first_delay_us: AtomicU64,
    /// See `h2d_bytes`.
    pub d2h_bytes: AtomicU64,
}

/// Where the fake puts `device_alloc` memory (far from the tests' allocations).
const DEVICE_HEAP: u64 = 0x7000_0000_0000;

/// A dispatch on the fake: a closure run on each pass.
pub type FakeDispatch = Box<dyn Fn(&FakeBackend)>;

impl FakeBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an allocation of `size` zero bytes at `base` owned by `owner` (agent 7 is a GPU).
    pub fn add_alloc(&self, base: u64, size: usize, owner: u64, flags: Option<u32>) -> u64 {
        self.mem.lock().unwrap().insert(
            base,
            Alloc {
                bytes: vec![0; size],
                owner,
                flags,
            },
        );
        base
    }

    pub fn remove_alloc(&self, base: u64) {
        self.mem.lock().unwrap().remove(&base);
    }

    /// Adds a module variable backed by a fresh allocation.
    pub fn add_var(&self, addr: u64, size: usize, constant: bool, name: &str) {
        self.add_alloc(addr, size, 7, Some(4));
        self.vars.lock().unwrap().push(ModuleVar {
            addr,
            size: size as u64,
            constant,
            name: name.into(),
        });
    }

    pub fn pointer_queries(&self) -> u64 {
        self.queries.load(Ordering::SeqCst)
    }

    pub fn host_bytes_live(&self) -> u64 {
        self.host_live.load(Ordering::SeqCst)
    }

    /// Most pinned host bytes live at once.
    pub fn host_bytes_peak(&self) -> u64 {
        self.host_peak.load(Ordering::SeqCst)
    }

    /// Device bytes held by `device_alloc` now.
    pub fn device_bytes_live(&self) -> u64 {
        self.device_used.load(Ordering::SeqCst)
    }

    /// Turns on device memory (`room` bytes) and the device hash / compare capabilities.
    pub fn enable_device(&self, room: u64, hash: bool, compare: bool) {
        self.device_room.store(room, Ordering::SeqCst);
        self.device_hash.store(hash, Ordering::SeqCst);
        self.device_compare.store(compare, Ordering::SeqCst);
    }

    /// Reads device bytes.
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.copy_d2h_raw(out.as_mut_ptr(), addr, len).unwrap();
        out
    }

    /// Writes device bytes (never a fault knob's copy: the tests' and dispatches' own writes).
    pub fn write(&self, addr: u64, data: &[u8]) {
        self.copy_h2d_unfaulted(addr, data.as_ptr(), data.len())
            .unwrap();
    }

    fn copy_h2d_unfaulted(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        self.h2d_bytes.fetch_add(len as u64, Ordering::SeqCst);
        self.with_range(dst, len, |d| {
            // SAFETY: the caller gives a src of len readable bytes, disjoint from the fake's memory.
            unsafe { std::ptr::copy_nonoverlapping(src, d.as_mut_ptr(), len) }
        })
    }

    fn with_range<R>(
        &self,
        addr: u64,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, BackendError> {
        let mut mem = self.mem.lock().unwrap();
        let (base, a) = mem
            .range_mut(..=addr)
            .next_back()
            .ok_or(BackendError::Call {
                call: "fake copy",
                status: 1,
            })?;
        let off = (addr - *base) as usize;
        if off + len > a.bytes.len() {
            return Err(BackendError::Call {
                call: "fake copy",
                status: 2,
            });
        }
        Ok(f(&mut a.bytes[off..off + len]))
    }

    fn copy_d2h_raw(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        self.with_range(src, len, |s| {
            // SAFETY: the caller gives a dst of len writable bytes, disjoint from the fake's memory.
            unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), dst, len) }
        })
    }
}

impl FakeBackend {
    /// Which chunks of `[addr, addr + len)` hash differently now from the 16-byte hashes the
    /// fake device holds at `expected`; `None` when device hashing is off.
    fn changed_against(
        &self,
        addr: u64,
        len: usize,
        chunk: usize,
        expected: u64,
    ) -> Result<Option<Vec<bool>>, BackendError> {
        let mut now = vec![[0u64; 2]; len.div_ceil(chunk)];
        if !self.hash_chunks_on_device(addr, len, chunk, &mut now)? {
            return Ok(None);
        }
        let was = self.with_range(expected, now.len() * 16, |s| s.to_vec())?;
        Ok(Some(
            now.iter()
                .zip(was.chunks_exact(16))
                .map(|(h, w)| {
                    let w = [
                        u64::from_le_bytes(w[..8].try_into().unwrap()),
                        u64::from_le_bytes(w[8..].try_into().unwrap()),
                    ];
                    *h != w
                })
                .collect(),
        ))
    }
}

impl Backend for FakeBackend {
    type Dispatch = FakeDispatch;

    fn host_alloc(&self, len: usize) -> Option<HostBuf> {
        let cap = self.fail_host_alloc_above.load(Ordering::SeqCst);
        if cap != 0 && len as u64 > cap {
            return None;
        }
        let b = vec![0u8; len].into_boxed_slice();
        self.host_allocs.fetch_add(1, Ordering::SeqCst);
        let live = self.host_live.fetch_add(len as u64, Ordering::SeqCst) + len as u64;
        self.host_peak.fetch_max(live, Ordering::SeqCst);
        Some(HostBuf {
            ptr: Box::into_raw(b) as *mut u8,
            len,
        })
    }

    fn host_free(&self, buf: HostBuf) {
        self.host_live.fetch_sub(buf.len as u64, Ordering::SeqCst);
        // SAFETY: buf came from host_alloc's Box<[u8]> of exactly buf.len bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.ptr, buf.len)) });
    }

    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        let n = self.d2h.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_d2h_nth.load(Ordering::SeqCst) {
            return Err(BackendError::Call {
                call: "hsa_memory_copy",
                status: 0x1000,
            });
        }
        self.d2h_bytes.fetch_add(len as u64, Ordering::SeqCst);
        self.copy_d2h_raw(dst, src, len)
    }

    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        let n = self.h2d.fetch_add(1, Ordering::SeqCst) + 1;
        let from = self.fail_h2d_from.load(Ordering::SeqCst);
        if n == self.fail_h2d_nth.load(Ordering::SeqCst) || (from != 0 && n >= from) {
            return Err(BackendError::Call {
                call: "hsa_memory_copy",
                status: 0x1000,
            });
        }
        self.copy_h2d_unfaulted(dst, src, len)
    }

    fn module_variables(&self, _agent: u64) -> Result<Vec<ModuleVar>, BackendError> {
        if self.fail_symbols.load(Ordering::SeqCst) {
            return Err(BackendError::Call {
                call: "hsa_executable_iterate_agent_symbols",
                status: 0x1000,
            });
        }
        Ok(self.vars.lock().unwrap().clone())
    }

    fn submit_wait(&self, d: &Self::Dispatch) -> Result<(), BackendError> {
        d(self);
        let n = self.submits.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_submit_nth.load(Ordering::SeqCst) {
            return Err(BackendError::Call {
                call: "hsa_signal_wait_scacquire",
                status: 0x1000,
            });
        }
        Ok(())
    }

    fn submit_wait_timed(&self, d: &Self::Dispatch) -> Result<Option<u64>, BackendError> {
        self.submit_wait(d)?;
        let base = self.gpu_ns_base.load(Ordering::SeqCst);
        Ok((base > 0).then(|| base + self.submits.load(Ordering::SeqCst)))
    }

    fn device_alloc(&self, len: usize) -> Option<u64> {
        let room = self.device_room.load(Ordering::SeqCst);
        let used = self.device_used.load(Ordering::SeqCst);
        if room == 0 || used + len as u64 > room {
            return None;
        }
        self.device_used.fetch_add(len as u64, Ordering::SeqCst);
        let at = DEVICE_HEAP
            + self
                .next_device
                .fetch_add(len as u64 + 4096, Ordering::SeqCst);
        Some(self.add_alloc(at, len, 0, None))
    }

    fn device_free(&self, ptr: u64) {
        if let Some(a) = self.mem.lock().unwrap().remove(&ptr) {
            self.device_used
                .fetch_sub(a.bytes.len() as u64, Ordering::SeqCst);
        }
    }

    fn copy_d2d(&self, dst: u64, src: u64, len: usize) -> Result<(), BackendError> {
        if self.device_room.load(Ordering::SeqCst) == 0 {
            return Err(BackendError::Unsupported("copy_d2d"));
        }
        self.d2d_bytes.fetch_add(len as u64, Ordering::SeqCst);
        let delay = self.d2d_delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        let bytes = self.with_range(src, len, |s| s.to_vec())?;
        self.with_range(dst, len, |d| d.copy_from_slice(&bytes))
    }

    fn copy_d2d_runs(&self, runs: &[(u64, u64, usize)]) -> Result<bool, BackendError> {
        if !self.device_batch.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.d2d_batches.fetch_add(1, Ordering::SeqCst);
        for &(dst, src, len) in runs {
            self.copy_d2d(dst, src, len)?;
        }
        Ok(true)
    }

    fn copy_pinned_runs(&self, runs: &[(u64, *const u8, usize)]) -> Result<bool, BackendError> {
        if !self.device_batch.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.h2d_batches.fetch_add(1, Ordering::SeqCst);
        for &(dst, src, len) in runs {
            self.copy_h2d(dst, src, len)?;
        }
        Ok(true)
    }
}

impl FakeBackend {
    /// What `hsa_amd_pointer_info` would say about `ptr` (counted in `pointer_queries`).
    pub fn pointer_info(&self, ptr: u64) -> Option<PointerInfo> {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let mem = self.mem.lock().unwrap();
        let (base, a) = mem.range(..=ptr).next_back()?;
        (ptr < base + a.bytes.len() as u64).then_some(PointerInfo {
            kind: 1,
            base: *base,
            size: a.bytes.len() as u64,
            owner: a.owner,
            global_flags: a.flags,
        })
    }

    /// Whether `agent` is a GPU (agent 7 is).
    pub fn agent_is_gpu(&self, agent: u64) -> bool {
        agent == 7
    }

    /// The job tables readied or used last (at most two, the latest last).
    pub fn prepared_tables(&self) -> Vec<Vec<DeviceRestore>> {
        self.prepared.lock().unwrap().clone()
    }
}

/// Keeps `jobs` among the two most recently readied job tables (the CUDA backend keeps two: a
/// snapshot's and its first restore's sample).
fn keep_prepared(prepared: &mut Vec<Vec<DeviceRestore>>, jobs: &[DeviceRestore]) {
    prepared.retain(|p| p != jobs);
    prepared.push(jobs.to_vec());
    if prepared.len() > 2 {
        prepared.remove(0);
    }
}
