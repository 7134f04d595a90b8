//! How kreplay sees the application's CUDA driver calls.
//!
//! The choice: kreplay-tool is preloaded (`LD_PRELOAD`, set by `kreplay replay`) and interposes
//! at three points, because none alone sees every call (docs/runtime-abi.md, "CUDA"):
//! - the driver-API symbols themselves (`cuLaunchKernel`, `cuMemAlloc_v2`, ...), for programs
//!   linked against libcuda;
//! - `dlsym`, because the CUDA runtime (static or shared) dlopens libcuda and looks up
//!   `cuGetProcAddress_v2` by handle, which no symbol interposition reaches;
//! - `cuGetProcAddress(_v2)`, through which the runtime gets every other entry (with version,
//!   flags and `_ptsz` variants: the wrapper keeps whichever real pointer the driver returned).
//!
//! `CUDA_INJECTION64_PATH` was not chosen: the driver calls `InitializeInjection` inside
//! `cuInit`, after the runtime may already hold its entry points, and offers no way to wrap
//! them short of CUPTI callbacks — inside which NVIDIA does not support the driver calls a replay
//! makes (launches, copies). Each wrapped entry has a few slots, one per distinct real pointer
//! (legacy and per-thread-stream variants); a wrapper only ever calls its own slot's real entry.
//!
//! The driver symbols kreplay exports for programs linked against libcuda are in
//! [`super::exports`].
//!
//! `dlsym(RTLD_NEXT, ...)` depends on its caller's address, so the exported `dlsym` is a
//! two-instruction trampoline that tail-jumps to the real one for `RTLD_NEXT`, leaving the
//! caller's return address in place; other lookups go through [`dlsym_hook`].

use core::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ffi::*;
use super::hooks;
use super::real_dlsym::{DlsymFn, REAL_DLSYM, resolve_real_dlsym};

/// The exported `dlsym`.
///
/// # Safety
/// As glibc's `dlsym`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "jne 2f",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "jmp {hook}",
        real = sym REAL_DLSYM,
        hook = sym dlsym_hook,
    )
}

/// `dlsym` for every handle but `RTLD_NEXT`: wraps the CUDA entries kreplay watches when they
/// resolve into libcuda, passes everything else through.
///
/// # Safety
/// As glibc's `dlsym`.
pub unsafe extern "C" fn dlsym_hook(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    let p = resolve_real_dlsym();
    if p == 0 || name.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: p is glibc's dlsym; arguments are the caller's.
    let real = unsafe { core::mem::transmute::<usize, DlsymFn>(p)(handle, name) };
    // SAFETY: name is a NUL-terminated string (dlsym's contract).
    let n = unsafe { CStr::from_ptr(name) }.to_bytes();
    if real.is_null() || !n.starts_with(b"cu") {
        return real;
    }
    crate::fault::guard(|| {
        crate::fault::point("cuda.dlsym");
        match by_symbol(n) {
            Some(h) if in_libcuda(real) => h.wrap(real as usize),
            _ => real,
        }
    })
    .unwrap_or(real)
}

/// Whether `p` lies in a library named libcuda.
fn in_libcuda(p: *mut c_void) -> bool {
    // SAFETY: Dl_info is plain data (pointers and integers), for which zero is valid.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; info is a valid out-struct.
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let f = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    f.rsplit(|&c| c == b'/')
        .next()
        .is_some_and(|base| base.starts_with(b"libcuda.so"))
}

/// Number of distinct real pointers one entry may have (legacy, `_ptsz`, spares).
pub const SLOTS: usize = 4;

/// Real pointers of one wrapped entry, one per slot.
pub struct Slots([AtomicUsize; SLOTS]);

impl Slots {
    const fn new() -> Self {
        Slots([const { AtomicUsize::new(0) }; SLOTS])
    }

    /// The real pointer of slot `i` (0 if unclaimed).
    #[inline]
    pub fn get(&self, i: usize) -> usize {
        self.0[i].load(Ordering::Acquire)
    }

    /// The slot holding `real`, claiming a free one if needed.
    pub(super) fn claim(&self, real: usize) -> Option<usize> {
        for (i, s) in self.0.iter().enumerate() {
            match s.compare_exchange(0, real, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(i),
                Err(cur) if cur == real => return Some(i),
                Err(_) => {}
            }
        }
        None
    }
}

/// One wrapped entry.
pub struct Hooked {
    /// The name given to `cuGetProcAddress`.
    pub base: &'static str,
    /// The exact symbol names `dlsym` may be asked for.
    pub symbols: &'static [&'static str],
    /// Lowest `cudaVersion` for which `cuGetProcAddress(base)` returns this signature.
    pub min_version: c_int,
    /// Real pointers.
    pub slots: &'static Slots,
    /// The wrapper of each slot.
    pub wrappers: fn() -> [usize; SLOTS],
}

impl Hooked {
    /// The wrapper standing for `real` (or `real` itself when every slot is taken).
    fn wrap(&self, real: usize) -> *mut c_void {
        match self.slots.claim(real) {
            Some(i) => (self.wrappers)()[i] as *mut c_void,
            None => {
                tracing::warn!(
                    "kreplay: more than {SLOTS} variants of {}; one is not wrapped",
                    self.base
                );
                real as *mut c_void
            }
        }
    }
}

/// Defines one wrapped entry: its slots, a wrapper per slot calling `$handler(real, args...)`.
macro_rules! hooked {
    ($slots:ident, $wrap:ident, $ty:ty, $handler:path, ($($a:ident : $t:ty),*)) => {
        pub(super) static $slots: Slots = Slots::new();
        pub(super) unsafe extern "C" fn $wrap<const S: usize>($($a: $t),*) -> CUresult {
            let p = $slots.get(S);
            if p == 0 {
                return ERROR_NOT_INITIALIZED;
            }
            // SAFETY: slot S holds a real driver entry of type $ty (claimed by name).
            let real: $ty = unsafe { core::mem::transmute::<usize, $ty>(p) };
            // SAFETY: the application's arguments, with the real entry they were meant for.
            unsafe { $handler(real, $($a),*) }
        }
    };
}

macro_rules! wrappers {
    ($wrap:ident) => {
        [
            $wrap::<0> as *const () as usize,
            $wrap::<1> as *const () as usize,
            $wrap::<2> as *const () as usize,
            $wrap::<3> as *const () as usize,
        ]
    };
}
pub(super) use wrappers;

hooked!(LAUNCH, w_launch, LaunchKernelFn, hooks::launch_kernel,
    (f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
     shm: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void));
hooked!(LAUNCH_EX, w_launch_ex, LaunchKernelExFn, hooks::launch_kernel_ex,
    (cfg: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void));
hooked!(ALLOC, w_alloc, MemAllocFn, hooks::mem_alloc, (dptr: *mut CUdeviceptr, size: usize));
hooked!(FREE, w_free, MemFreeFn, hooks::mem_free, (dptr: CUdeviceptr));
hooked!(MEM_MAP, w_mem_map, MemMapFn, hooks::mem_map,
    (ptr: CUdeviceptr, size: usize, offset: usize, handle: u64, flags: u64));
hooked!(MEM_CREATE, w_mem_create, MemCreateFn, super::room::mem_create,
    (handle: *mut u64, size: usize, prop: *const c_void, flags: u64));
hooked!(MEM_UNMAP, w_mem_unmap, MemUnmapFn, hooks::mem_unmap, (ptr: CUdeviceptr, size: usize));
hooked!(ALLOC_PITCH, w_alloc_pitch, MemAllocPitchFn, hooks::mem_alloc_pitch,
    (dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, elem: c_uint));
hooked!(ALLOC_ASYNC, w_alloc_async, MemAllocAsyncFn, hooks::mem_alloc_async,
    (dptr: *mut CUdeviceptr, size: usize, stream: CUstream));
hooked!(ALLOC_POOL, w_alloc_pool, MemAllocFromPoolAsyncFn, hooks::mem_alloc_from_pool_async,
    (dptr: *mut CUdeviceptr, size: usize, pool: CUmemoryPool, stream: CUstream));
hooked!(FREE_ASYNC, w_free_async, MemFreeAsyncFn, hooks::mem_free_async,
    (dptr: CUdeviceptr, stream: CUstream));
hooked!(ALLOC_MANAGED, w_alloc_managed, MemAllocManagedFn, hooks::mem_alloc_managed,
    (dptr: *mut CUdeviceptr, size: usize, flags: c_uint));
hooked!(MOD_LOAD, w_mod_load, ModuleLoadDataFn, hooks::module_load_data,
    (m: *mut CUmodule, image: *const c_void));
hooked!(MOD_LOAD_EX, w_mod_load_ex, ModuleLoadDataExFn, hooks::module_load_data_ex,
    (m: *mut CUmodule, image: *const c_void, n: c_uint, opts: *mut c_int, vals: *mut *mut c_void));
hooked!(MOD_LOAD_FAT, w_mod_load_fat, ModuleLoadDataFn, hooks::module_load_data,
    (m: *mut CUmodule, image: *const c_void));
hooked!(LIB_LOAD, w_lib_load, LibraryLoadDataFn, hooks::library_load_data,
    (l: *mut CUlibrary, code: *const c_void, jo: *mut c_int, jv: *mut *mut c_void, nj: c_uint,
     lo: *mut c_int, lv: *mut *mut c_void, nl: c_uint));
hooked!(MOD_UNLOAD, w_mod_unload, ModuleUnloadFn, hooks::module_unload, (m: CUmodule));
hooked!(LIB_UNLOAD, w_lib_unload, LibraryUnloadFn, hooks::library_unload, (l: CUlibrary));
hooked!(GRAPH_LAUNCH, w_graph_launch, GraphLaunchFn, hooks::graph_launch,
    (g: CUgraphExec, stream: CUstream));
hooked!(GET_PROC, w_get_proc, GetProcAddressFn, get_proc_address,
    (sym: *const c_char, pfn: *mut *mut c_void, ver: c_int, flags: u64));
hooked!(GET_PROC_V2, w_get_proc_v2, GetProcAddressV2Fn, get_proc_address_v2,
    (sym: *const c_char, pfn: *mut *mut c_void, ver: c_int, flags: u64, st: *mut c_int));

/// Every wrapped entry.
static HOOKED: &[Hooked] = &[
    Hooked {
        base: "cuLaunchKernel",
        symbols: &["cuLaunchKernel", "cuLaunchKernel_ptsz"],
        min_version: 4000,
        slots: &LAUNCH,
        wrappers: || wrappers!(w_launch),
    },
    Hooked {
        base: "cuLaunchKernelEx",
        symbols: &["cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"],
        min_version: 11060,
        slots: &LAUNCH_EX,
        wrappers: || wrappers!(w_launch_ex),
    },
    Hooked {
        base: "cuMemAlloc",
        symbols: &["cuMemAlloc_v2"],
        min_version: 3020,
        slots: &ALLOC,
        wrappers: || wrappers!(w_alloc),
    },
    Hooked {
        base: "cuMemMap",
        symbols: &["cuMemMap"],
        min_version: 10020,
        slots: &MEM_MAP,
        wrappers: || wrappers!(w_mem_map),
    },
    Hooked {
        base: "cuMemCreate",
        symbols: &["cuMemCreate"],
        min_version: 10020,
        slots: &MEM_CREATE,
        wrappers: || wrappers!(w_mem_create),
    },
    Hooked {
        base: "cuMemUnmap",
        symbols: &["cuMemUnmap"],
        min_version: 10020,
        slots: &MEM_UNMAP,
        wrappers: || wrappers!(w_mem_unmap),
    },
    Hooked {
        base: "cuMemAllocPitch",
        symbols: &["cuMemAllocPitch_v2"],
        min_version: 3020,
        slots: &ALLOC_PITCH,
        wrappers: || wrappers!(w_alloc_pitch),
    },
    Hooked {
        base: "cuMemFree",
        symbols: &["cuMemFree_v2"],
        min_version: 3020,
        slots: &FREE,
        wrappers: || wrappers!(w_free),
    },
    Hooked {
        base: "cuMemAllocAsync",
        symbols: &["cuMemAllocAsync", "cuMemAllocAsync_ptsz"],
        min_version: 11020,
        slots: &ALLOC_ASYNC,
        wrappers: || wrappers!(w_alloc_async),
    },
    Hooked {
        base: "cuMemAllocFromPoolAsync",
        symbols: &["cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"],
        min_version: 11020,
        slots: &ALLOC_POOL,
        wrappers: || wrappers!(w_alloc_pool),
    },
    Hooked {
        base: "cuMemFreeAsync",
        symbols: &["cuMemFreeAsync", "cuMemFreeAsync_ptsz"],
        min_version: 11020,
        slots: &FREE_ASYNC,
        wrappers: || wrappers!(w_free_async),
    },
    Hooked {
        base: "cuMemAllocManaged",
        symbols: &["cuMemAllocManaged"],
        min_version: 6000,
        slots: &ALLOC_MANAGED,
        wrappers: || wrappers!(w_alloc_managed),
    },
    Hooked {
        base: "cuModuleLoadData",
        symbols: &["cuModuleLoadData"],
        min_version: 2000,
        slots: &MOD_LOAD,
        wrappers: || wrappers!(w_mod_load),
    },
    Hooked {
        base: "cuModuleLoadDataEx",
        symbols: &["cuModuleLoadDataEx"],
        min_version: 2010,
        slots: &MOD_LOAD_EX,
        wrappers: || wrappers!(w_mod_load_ex),
    },
    Hooked {
        base: "cuModuleLoadFatBinary",
        symbols: &["cuModuleLoadFatBinary"],
        min_version: 2000,
        slots: &MOD_LOAD_FAT,
        wrappers: || wrappers!(w_mod_load_fat),
    },
    Hooked {
        base: "cuLibraryLoadData",
        symbols: &["cuLibraryLoadData"],
        min_version: 12000,
        slots: &LIB_LOAD,
        wrappers: || wrappers!(w_lib_load),
    },
    Hooked {
        base: "cuModuleUnload",
        symbols: &["cuModuleUnload"],
        min_version: 2000,
        slots: &MOD_UNLOAD,
        wrappers: || wrappers!(w_mod_unload),
    },
    Hooked {
        base: "cuLibraryUnload",
        symbols: &["cuLibraryUnload"],
        min_version: 12000,
        slots: &LIB_UNLOAD,
        wrappers: || wrappers!(w_lib_unload),
    },
    Hooked {
        base: "cuGraphLaunch",
        symbols: &["cuGraphLaunch", "cuGraphLaunch_ptsz"],
        min_version: 10000,
        slots: &GRAPH_LAUNCH,
        wrappers: || wrappers!(w_graph_launch),
    },
    Hooked {
        base: "cuGetProcAddress",
        symbols: &["cuGetProcAddress"],
        min_version: 11030,
        slots: &GET_PROC,
        wrappers: || wrappers!(w_get_proc),
    },
    Hooked {
        base: "cuGetProcAddress_v2",
        symbols: &["cuGetProcAddress_v2"],
        min_version: 12000,
        slots: &GET_PROC_V2,
        wrappers: || wrappers!(w_get_proc_v2),
    },
];

/// The entry `dlsym` was asked for by exact symbol name.
fn by_symbol(name: &[u8]) -> Option<&'static Hooked> {
    HOOKED
        .iter()
        .find(|h| h.symbols.iter().any(|s| s.as_bytes() == name))
}

/// The entry `cuGetProcAddress(name, version)` returns, when kreplay wraps it.
fn by_base(name: &[u8], version: c_int) -> Option<&'static Hooked> {
    // cuGetProcAddress("cuGetProcAddress") at CUDA >= 12.0 returns the _v2 signature.
    let h = match name {
        b"cuGetProcAddress" if version >= 12000 => {
            HOOKED.iter().find(|h| h.base == "cuGetProcAddress_v2")
        }
        _ => HOOKED.iter().find(|h| h.base.as_bytes() == name),
    }?;
    (version >= h.min_version).then_some(h)
}

/// Replaces `*pfn` by kreplay's wrapper when the driver returned an entry kreplay wraps.
///
/// # Safety
/// `sym` is NUL-terminated; `pfn` is valid and the driver just wrote it.
unsafe fn wrap_returned(sym: *const c_char, pfn: *mut *mut c_void, version: c_int) {
    if sym.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: caller's contract.
    let (name, real) = unsafe { (CStr::from_ptr(sym).to_bytes(), *pfn) };
    if real.is_null() {
        return;
    }
    if let Some(h) = by_base(name, version) {
        // SAFETY: pfn is valid (caller's contract).
        unsafe { *pfn = h.wrap(real as usize) };
    }
}

/// Handler of `cuGetProcAddress` (the CUDA 11.3–12.x four-argument form).
///
/// # Safety
/// The application's arguments and the real entry.
unsafe fn get_proc_address(
    real: GetProcAddressFn,
    sym: *const c_char,
    pfn: *mut *mut c_void,
    ver: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(sym, pfn, ver, flags) };
    if r == SUCCESS {
        // SAFETY: the driver succeeded, so pfn was written.
        let _ = crate::fault::guard(|| {
            crate::fault::point("cuda.get_proc");
            // SAFETY: as above.
            unsafe { wrap_returned(sym, pfn, ver) }
        });
    }
    r
}

/// Handler of `cuGetProcAddress_v2`.
///
/// # Safety
/// The application's arguments and the real entry.
unsafe fn get_proc_address_v2(
    real: GetProcAddressV2Fn,
    sym: *const c_char,
    pfn: *mut *mut c_void,
    ver: c_int,
    flags: u64,
    st: *mut c_int,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(sym, pfn, ver, flags, st) };
    if r == SUCCESS {
        // SAFETY: the driver succeeded, so pfn was written.
        let _ = crate::fault::guard(|| {
            crate::fault::point("cuda.get_proc");
            // SAFETY: as above.
            unsafe { wrap_returned(sym, pfn, ver) }
        });
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_by_symbol_and_by_versioned_base_name() {
        assert_eq!(
            by_symbol(b"cuLaunchKernel_ptsz").map(|h| h.base),
            Some("cuLaunchKernel")
        );
        assert_eq!(
            by_symbol(b"cuMemAlloc_v2").map(|h| h.base),
            Some("cuMemAlloc")
        );
        // The 32-bit v1 entry is never wrapped.
        assert!(by_symbol(b"cuMemAlloc").is_none());
        assert!(by_base(b"cuMemAlloc", 3010).is_none());
        assert_eq!(
            by_base(b"cuMemAlloc", 12000).map(|h| h.base),
            Some("cuMemAlloc")
        );
        assert_eq!(
            by_base(b"cuGetProcAddress", 12000).map(|h| h.base),
            Some("cuGetProcAddress_v2")
        );
        assert_eq!(
            by_base(b"cuGetProcAddress", 11080).map(|h| h.base),
            Some("cuGetProcAddress")
        );
        assert!(by_base(b"cuMemcpy", 12000).is_none());
    }

    #[test]
    fn slots_keep_one_wrapper_per_real_pointer() {
        static S: Slots = Slots::new();
        assert_eq!(S.claim(0x1000), Some(0));
        assert_eq!(S.claim(0x2000), Some(1));
        assert_eq!(S.claim(0x1000), Some(0));
        assert_eq!(S.claim(0x3000), Some(2));
        assert_eq!(S.claim(0x4000), Some(3));
        assert_eq!(S.claim(0x5000), None);
        assert_eq!(S.get(1), 0x2000);
    }

    #[test]
    fn the_real_dlsym_is_glibcs_and_plain_lookups_pass_through() {
        let real = resolve_real_dlsym();
        assert_ne!(real, 0);
        assert_ne!(real, dlsym as *const () as usize);
        // SAFETY: RTLD_DEFAULT lookup of a libc symbol.
        let via_hook = unsafe { dlsym_hook(libc::RTLD_DEFAULT, c"getpid".as_ptr()) };
        assert_eq!(via_hook as usize, libc::getpid as *const () as usize);
    }
}
