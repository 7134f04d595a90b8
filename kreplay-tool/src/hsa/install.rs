//! Saving the runtime's entries and installing kreplay's wrappers, each member written only
//! when `offsetof(member) < version.minor_id`, the AMD layout picked by its major version.

use core::ffi::c_void;
use core::mem::offset_of;

use super::ffi::{AmdExtTable, AmdExtTableV1, CoreApiTable, HsaApiTable};
use super::hooks;
use super::intercept;
use super::submissions;
use super::tables::{AmdTable, Next, copy_table, put};

/// Copies the core and AMD tables as they are now (before any kreplay wrapper).
///
/// # Safety
/// `table` must be the runtime's live root table.
pub unsafe fn save_next(table: *mut HsaApiTable) -> Option<Next> {
    // SAFETY: the root table is live (caller's contract); its members are read, not written.
    let root = unsafe { &*table };
    let core_off = offset_of!(HsaApiTable, core_);
    let amd_off = offset_of!(HsaApiTable, amd_ext_);
    if !super::tables::has_member(root.version.minor_id, amd_off, 8)
        || root.core_.is_null()
        || root.amd_ext_.is_null()
    {
        let _ = core_off;
        return None;
    }
    // SAFETY: core_ points to the runtime's core table, which starts with its version.
    let core = unsafe { copy_table::<CoreApiTable>(root.core_) };
    // SAFETY: amd_ext_ points to the runtime's AMD table; its major id picks the layout.
    let amd = match unsafe { (*root.amd_ext_).version.major_id } {
        // SAFETY: a major-2 table has the current layout.
        2 => AmdTable::V2(unsafe { copy_table::<AmdExtTable>(root.amd_ext_) }),
        // SAFETY: a major-1 table has the ROCm 5.x layout.
        1 => AmdTable::V1(unsafe {
            copy_table::<AmdExtTableV1>(root.amd_ext_ as *const AmdExtTableV1)
        }),
        other => {
            tracing::error!("kreplay: unknown AmdExtTable major version {other}");
            return None;
        }
    };
    Some(Next { core, amd })
}

/// Installs the wrappers; returns how many members were replaced.
///
/// # Safety
/// `table` must be the runtime's live root table, and [`crate::hsa::state::tool`] must be set.
pub unsafe fn install(table: *mut HsaApiTable) -> u32 {
    // SAFETY: caller's contract.
    let root = unsafe { &*table };
    let core = root.core_ as *mut c_void;
    let amd = root.amd_ext_ as *mut c_void;
    let mut n = 0u32;
    let mut put_one = |t: *mut c_void, off: usize, f: *const c_void| {
        // SAFETY: t is a live table of the type whose member offset `off` is.
        if unsafe { put(t, off, f) } {
            n += 1;
        }
    };
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_memory_allocate_fn),
        hooks::memory_allocate as *const c_void,
    );
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_memory_free_fn),
        hooks::memory_free as *const c_void,
    );
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_queue_create_fn),
        intercept::queue_create as *const c_void,
    );
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_queue_destroy_fn),
        intercept::queue_destroy as *const c_void,
    );
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_signal_store_relaxed_fn),
        submissions::store_relaxed as *const c_void,
    );
    put_one(
        core,
        offset_of!(CoreApiTable, hsa_signal_store_screlease_fn),
        submissions::store_screlease as *const c_void,
    );
    // SAFETY: amd is the live AMD table; its major id was checked in save_next.
    let major = unsafe { (*(amd as *const super::ffi::ApiTableVersion)).major_id };
    macro_rules! amd_members {
        ($ty:ty) => {
            put_one(
                amd,
                offset_of!($ty, hsa_amd_memory_pool_allocate_fn),
                hooks::pool_allocate as *const c_void,
            );
            put_one(
                amd,
                offset_of!($ty, hsa_amd_memory_pool_free_fn),
                hooks::pool_free as *const c_void,
            );
            put_one(
                amd,
                offset_of!($ty, hsa_amd_memory_async_copy_fn),
                hooks::async_copy as *const c_void,
            );
        };
    }
    if major == 2 {
        amd_members!(AmdExtTable);
        put_one(
            amd,
            offset_of!(AmdExtTable, hsa_amd_vmem_map_fn),
            hooks::vmem_map as *const c_void,
        );
        put_one(
            amd,
            offset_of!(AmdExtTable, hsa_amd_vmem_unmap_fn),
            hooks::vmem_unmap as *const c_void,
        );
    } else {
        amd_members!(AmdExtTableV1);
    }
    n
}
