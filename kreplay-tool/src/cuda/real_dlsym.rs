//! glibc's own `dlsym`, found without going through kreplay's exported `dlsym` (which wraps
//! the CUDA lookups, `interpose.rs`): resolved by `dlvsym` on libc's handle from an ELF
//! constructor, before any application code runs.

use core::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The real `dlsym` (glibc's), set by the constructor before any application code runs.
pub(super) static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

pub(super) type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// Resolves glibc's `dlsym` through `dlvsym` on libc's own handle (never through ourselves).
pub(super) fn resolve_real_dlsym() -> usize {
    let cur = REAL_DLSYM.load(Ordering::Acquire);
    if cur != 0 {
        return cur;
    }
    // SAFETY: RTLD_NOLOAD only returns libc's handle (always loaded); dlvsym is not wrapped.
    let libc_h = unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if libc_h.is_null() {
        return 0;
    }
    let mut p = 0usize;
    for ver in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
        // SAFETY: valid handle and NUL-terminated strings.
        p = unsafe { libc::dlvsym(libc_h, c"dlsym".as_ptr(), ver.as_ptr()) } as usize;
        if p != 0 {
            break;
        }
    }
    REAL_DLSYM.store(p, Ordering::Release);
    p
}

/// Runs at load time (ELF constructor): the real `dlsym` is known before anyone calls ours.
extern "C" fn init_real_dlsym() {
    resolve_real_dlsym();
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT_REAL_DLSYM: extern "C" fn() = init_real_dlsym;

/// glibc's `dlsym(handle, name)`, bypassing kreplay's wrapper.
///
/// # Safety
/// As `dlsym`: `handle` is a live handle or pseudo-handle.
pub unsafe fn real_dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let p = resolve_real_dlsym();
    if p == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: p is glibc's dlsym.
    let f: DlsymFn = unsafe { core::mem::transmute(p) };
    // SAFETY: caller's contract.
    unsafe { f(handle, name.as_ptr()) }
}
