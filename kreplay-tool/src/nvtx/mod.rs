//! kreplay-tool as NVTX's injection library: the application's NVTX ranges and marks, recorded
//! through the tool's per-thread buffers into its stream file as `Annotation` records.
//!
//! NVTX v3 is header-only: each copy of it in a process (the application's, PyTorch's, a
//! library's) loads the library named by `NVTX_INJECTION64_PATH` at its first NVTX call,
//! calls its `InitializeInjectionNvtx2` with the copy's `nvtxGetExportTable`, and from then on
//! calls whatever the library wrote into the copy's function-pointer slots
//! (`nvtxDetail/nvtxInit.h`, `nvtxDetail/nvtxTypes.h`). Slots left alone become no-ops. Each
//! copy calls the entry point once, so it may run several times in one process.
//!
//! Under `kreplay trace -- CMD` this is the only thing the tool does in the traced process:
//! nothing else of it runs unless `kreplay replay` also injected it. The callbacks
//! ([`callbacks`]) never panic across the boundary, take no lock once the calling thread's
//! buffer is registered (its first record takes the registry's lock once), and allocate only
//! the message they copy.

mod callbacks;
mod ffi;

use core::ffi::c_uint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ffi::{
    CB_MODULE_CORE, CB_MODULE_CORE2, ETID_CALLBACKS, ExportTableCallbacks, FunctionPointer,
    FunctionTable, GetExportTableFn,
};

/// How often the flusher writes the recorded annotations to the stream when nothing else asks.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The entry point NVTX looks up in the injection library. Returns 1 when the callbacks are
/// installed, 0 when this copy of NVTX offers no callback table (NVTX then unloads nothing
/// else of ours and makes every call a no-op).
///
/// # Safety
/// `get_export_table` is a copy of NVTX's `nvtxGetExportTable` (or null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: GetExportTableFn) -> i32 {
    std::panic::catch_unwind(|| {
        // SAFETY: the caller's contract.
        let ok = unsafe { install(get_export_table) };
        if ok {
            start_recording();
        }
        i32::from(ok)
    })
    .unwrap_or(0)
}

/// Fills this NVTX copy's core and core2 slots with [`callbacks`]; false when it has no
/// callback table.
///
/// # Safety
/// As [`InitializeInjectionNvtx2`].
unsafe fn install(get_export_table: GetExportTableFn) -> bool {
    let Some(get) = get_export_table else {
        return false;
    };
    // SAFETY: NVTX's getter takes any id and returns null for unknown ones.
    let table = unsafe { get(ETID_CALLBACKS) }.cast::<ExportTableCallbacks>();
    if table.is_null() {
        return false;
    }
    // SAFETY: a non-null callbacks table is NVTX's static `NvtxExportTableCallbacks`.
    let t = unsafe { &*table };
    let Some(get_module) = t.get_module_function_table else {
        return false;
    };
    if t.struct_size < core::mem::size_of::<ExportTableCallbacks>() {
        return false;
    }
    // SAFETY: `get_module` is NVTX's and the slot lists are this copy's globals.
    let core = unsafe { fill(get_module, CB_MODULE_CORE, &callbacks::CORE) };
    // SAFETY: as above.
    let core2 = unsafe { fill(get_module, CB_MODULE_CORE2, &callbacks::CORE2) };
    core || core2
}

/// Writes each `(slot, function)` of `slots` that the module's table has; false when NVTX
/// does not know the module.
///
/// # Safety
/// `get_module` is NVTX's `GetModuleFunctionTable`.
unsafe fn fill(
    get_module: ffi::GetModuleFunctionTableFn,
    module: u32,
    slots: &[(usize, FunctionPointer)],
) -> bool {
    let mut table: FunctionTable = core::ptr::null_mut();
    let mut size: c_uint = 0;
    // SAFETY: both out-pointers are valid for writing.
    if unsafe { get_module(module, &mut table, &mut size) } == 0 || table.is_null() {
        return false;
    }
    for &(slot, f) in slots {
        if slot >= size as usize {
            continue;
        }
        // SAFETY: `table` has `size + 1` entries (NVTX's `functionTable_X[SIZE + 1]`); entry
        // `slot` < size is null or points at this copy's function-pointer variable.
        let p = unsafe { *table.add(slot) };
        if !p.is_null() {
            // SAFETY: `p` is the address of a function-pointer variable of NVTX's globals,
            // which NVTX reads only after this entry point returns.
            unsafe { *p = f };
        }
    }
    true
}

/// Starts what recording needs, once per process: the stream flusher and the exit flush.
fn start_recording() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::logging::init_logging();
    if let Err(e) = crate::record::start_global_flusher(FLUSH_EVERY) {
        tracing::warn!("kreplay: no stream flusher for NVTX annotations: {e}");
    }
    if !crate::record::install_exit_flush() {
        tracing::warn!("kreplay: no exit flush: NVTX annotations of the last moments may be lost");
    }
}

#[cfg(test)]
mod tests;
