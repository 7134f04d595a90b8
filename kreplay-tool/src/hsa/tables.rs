//! The runtime's original (un-wrapped) entries, saved at `OnLoad` before kreplay installs its
//! wrappers, and the size-checked reading and writing of table members.

use core::ffi::c_void;

use super::ffi::{AmdExtTable, AmdExtTableV1, ApiTableVersion, CoreApiTable};

/// A saved copy of the AMD extension table, in the layout its major version says.
#[derive(Clone, Copy)]
pub enum AmdTable {
    /// Current ROCR (major 2): has the vmem entries.
    V2(AmdExtTable),
    /// ROCm 5.x (major 1).
    V1(AmdExtTableV1),
}

/// The original entries kreplay calls (never its own wrappers).
#[derive(Clone, Copy)]
pub struct Next {
    /// Core table as it was before wrapping (members past the runtime's size are zero).
    pub core: CoreApiTable,
    /// AMD extension table as it was before wrapping.
    pub amd: AmdTable,
}

// SAFETY: the tables hold function pointers into the runtime, callable from any thread.
unsafe impl Send for Next {}
// SAFETY: as above; the copies are never mutated after OnLoad.
unsafe impl Sync for Next {}

/// Reads one member of the AMD table from whichever layout was saved.
#[macro_export]
macro_rules! amd_next {
    ($next:expr, $field:ident) => {
        match &$next.amd {
            $crate::hsa::tables::AmdTable::V2(t) => t.$field,
            $crate::hsa::tables::AmdTable::V1(t) => t.$field,
        }
    };
}

/// Copies a table of type `T` whose version says it is `minor_id` bytes long: members beyond
/// that size stay zero (None / null).
///
/// # Safety
/// `table` must point to a readable table of at least `version.minor_id` bytes.
pub unsafe fn copy_table<T: Copy>(table: *const T) -> T {
    let mut out = core::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: every table starts with its ApiTableVersion (caller's contract).
    let len = unsafe { (*(table as *const ApiTableVersion)).minor_id } as usize;
    let n = len.min(core::mem::size_of::<T>());
    // SAFETY: n bytes are readable at table (caller's contract) and writable in out.
    unsafe {
        core::ptr::copy_nonoverlapping(table as *const u8, out.as_mut_ptr() as *mut u8, n);
        out.assume_init()
    }
}

/// Whether a member at `offset` with `size` bytes lies inside a table of `minor_id` bytes.
pub fn has_member(minor_id: u32, offset: usize, size: usize) -> bool {
    offset < minor_id as usize && offset + size <= minor_id as usize
}

/// Replaces the member at `offset` of `table` with `f` if the table is large enough; returns
/// whether it did.
///
/// # Safety
/// `table` must point to a writable table starting with its version; `offset` must be the
/// offset of a function-pointer member of its type.
pub unsafe fn put(table: *mut c_void, offset: usize, f: *const c_void) -> bool {
    // SAFETY: the table starts with its version (caller's contract).
    let minor = unsafe { (*(table as *const ApiTableVersion)).minor_id };
    if !has_member(minor, offset, core::mem::size_of::<*const c_void>()) {
        return false;
    }
    // SAFETY: the member lies inside the table (checked) and is pointer-sized and aligned.
    unsafe { *((table as *mut u8).add(offset) as *mut *const c_void) = f };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_past_the_runtime_table_size_are_refused() {
        assert!(has_member(24, 16, 8));
        assert!(!has_member(24, 24, 8));
        assert!(!has_member(20, 16, 8));
    }
}
