//! The driver-API symbols kreplay-tool exports, for programs linked against libcuda: with the
//! library preloaded, their calls bind here first. Each export claims the slot of the next
//! definition (libcuda's, through `RTLD_NEXT`) and runs the same wrapper as calls that came
//! through `dlsym` or `cuGetProcAddress` (see [`super::interpose`]).

use core::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ffi::*;
use super::interpose::*;
use super::real_dlsym::real_dlsym;

/// The real (libcuda) definition of an exported symbol: the next one after kreplay.
fn next_symbol(cache: &AtomicUsize, name: &CStr) -> usize {
    let p = cache.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    // SAFETY: RTLD_NEXT from this library finds the definition kreplay's export shadows.
    let p = unsafe { real_dlsym(libc::RTLD_NEXT, name) } as usize;
    cache.store(p, Ordering::Release);
    p
}

/// Exports a driver symbol for programs linked against libcuda: the export claims the slot of
/// the next definition and calls the same wrapper code.
macro_rules! export {
    ($sym:ident, $slots:ident, $wrap:ident, ($($a:ident : $t:ty),*)) => {
        #[doc = concat!("kreplay's `", stringify!($sym), "` (the real one is libcuda's).")]
        ///
        /// # Safety
        /// As the driver entry.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym($($a: $t),*) -> CUresult {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let real = next_symbol(&NEXT, const { match CStr::from_bytes_with_nul(concat!(stringify!($sym), "\0").as_bytes()) { Ok(c) => c, Err(_) => panic!() } });
            if real == 0 {
                return ERROR_NOT_INITIALIZED;
            }
            let Some(i) = $slots.claim(real) else {
                return ERROR_NOT_INITIALIZED;
            };
            let w = wrappers!($wrap)[i];
            // SAFETY: w is the wrapper of slot i, whose real entry has this signature.
            unsafe { core::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> CUresult>(w)($($a),*) }
        }
    };
}

export!(cuLaunchKernel, LAUNCH, w_launch,
    (f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
     shm: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void));
export!(cuLaunchKernelEx, LAUNCH_EX, w_launch_ex,
    (cfg: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void));
export!(cuMemAlloc_v2, ALLOC, w_alloc, (dptr: *mut CUdeviceptr, size: usize));
export!(cuMemFree_v2, FREE, w_free, (dptr: CUdeviceptr));
export!(cuMemMap, MEM_MAP, w_mem_map,
    (ptr: CUdeviceptr, size: usize, offset: usize, handle: u64, flags: u64));
export!(cuMemCreate, MEM_CREATE, w_mem_create,
    (handle: *mut u64, size: usize, prop: *const c_void, flags: u64));
export!(cuMemUnmap, MEM_UNMAP, w_mem_unmap, (ptr: CUdeviceptr, size: usize));
export!(cuMemAllocPitch_v2, ALLOC_PITCH, w_alloc_pitch,
    (dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, elem: c_uint));
export!(cuMemAllocAsync, ALLOC_ASYNC, w_alloc_async,
    (dptr: *mut CUdeviceptr, size: usize, stream: CUstream));
export!(cuMemFreeAsync, FREE_ASYNC, w_free_async, (dptr: CUdeviceptr, stream: CUstream));
export!(cuMemAllocManaged, ALLOC_MANAGED, w_alloc_managed,
    (dptr: *mut CUdeviceptr, size: usize, flags: c_uint));
export!(cuModuleLoadData, MOD_LOAD, w_mod_load, (m: *mut CUmodule, image: *const c_void));
export!(cuModuleLoadDataEx, MOD_LOAD_EX, w_mod_load_ex,
    (m: *mut CUmodule, image: *const c_void, n: c_uint, opts: *mut c_int, vals: *mut *mut c_void));
export!(cuModuleLoadFatBinary, MOD_LOAD_FAT, w_mod_load_fat,
    (m: *mut CUmodule, image: *const c_void));
export!(cuLibraryLoadData, LIB_LOAD, w_lib_load,
    (l: *mut CUlibrary, code: *const c_void, jo: *mut c_int, jv: *mut *mut c_void, nj: c_uint,
     lo: *mut c_int, lv: *mut *mut c_void, nl: c_uint));
export!(cuModuleUnload, MOD_UNLOAD, w_mod_unload, (m: CUmodule));
export!(cuLibraryUnload, LIB_UNLOAD, w_lib_unload, (l: CUlibrary));
export!(cuGraphLaunch, GRAPH_LAUNCH, w_graph_launch, (g: CUgraphExec, stream: CUstream));
export!(cuGetProcAddress_v2, GET_PROC_V2, w_get_proc_v2,
    (sym: *const c_char, pfn: *mut *mut c_void, ver: c_int, flags: u64, st: *mut c_int));
