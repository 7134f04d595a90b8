//! The NVTX v3 injection ABI, as `nvtxDetail/nvtxTypes.h` and `nvToolsExt.h` define it: the
//! export-table protocol, the module and slot ids, and the event attribute structure.

use core::ffi::{c_char, c_uint, c_void};

/// `NvtxFunctionPointer`: an uncallable function pointer, cast to the slot's real type.
pub type FunctionPointer = unsafe extern "C" fn();
/// `NvtxFunctionTable`: an array of pointers to NVTX's function-pointer variables.
pub type FunctionTable = *mut *mut FunctionPointer;
/// `NvtxGetExportTableFunc_t`.
pub type GetExportTableFn = Option<unsafe extern "C" fn(u32) -> *const c_void>;
/// `NvtxExportTableCallbacks::GetModuleFunctionTable`.
pub type GetModuleFunctionTableFn =
    unsafe extern "C" fn(module: u32, out_table: *mut FunctionTable, out_size: *mut c_uint) -> i32;

/// `NVTX_ETID_CALLBACKS`.
pub const ETID_CALLBACKS: u32 = 1;
/// `NVTX_CB_MODULE_CORE`.
pub const CB_MODULE_CORE: u32 = 1;
/// `NVTX_CB_MODULE_CORE2`.
pub const CB_MODULE_CORE2: u32 = 5;

/// `NvtxExportTableCallbacks`.
#[repr(C)]
pub struct ExportTableCallbacks {
    /// `sizeof(NvtxExportTableCallbacks)`.
    pub struct_size: usize,
    /// Returns a module's slot table and its number of slots.
    pub get_module_function_table: Option<GetModuleFunctionTableFn>,
}

/// `NvtxCallbackIdCore` slots.
pub mod core_slot {
    pub const MARK_EX: usize = 1;
    pub const MARK_A: usize = 2;
    pub const MARK_W: usize = 3;
    pub const RANGE_START_EX: usize = 4;
    pub const RANGE_START_A: usize = 5;
    pub const RANGE_START_W: usize = 6;
    pub const RANGE_END: usize = 7;
    pub const RANGE_PUSH_EX: usize = 8;
    pub const RANGE_PUSH_A: usize = 9;
    pub const RANGE_PUSH_W: usize = 10;
    pub const RANGE_POP: usize = 11;
    pub const NAME_CATEGORY_A: usize = 12;
    pub const NAME_CATEGORY_W: usize = 13;
}

/// `NvtxCallbackIdCore2` slots.
pub mod core2_slot {
    pub const DOMAIN_MARK_EX: usize = 1;
    pub const DOMAIN_RANGE_START_EX: usize = 2;
    pub const DOMAIN_RANGE_END: usize = 3;
    pub const DOMAIN_RANGE_PUSH_EX: usize = 4;
    pub const DOMAIN_RANGE_POP: usize = 5;
    pub const DOMAIN_NAME_CATEGORY_A: usize = 8;
    pub const DOMAIN_NAME_CATEGORY_W: usize = 9;
    pub const DOMAIN_REGISTER_STRING_A: usize = 10;
    pub const DOMAIN_REGISTER_STRING_W: usize = 11;
    pub const DOMAIN_CREATE_A: usize = 12;
    pub const DOMAIN_CREATE_W: usize = 13;
}

/// `nvtxMessageType_t` values.
pub mod message_type {
    pub const ASCII: i32 = 1;
    pub const UNICODE: i32 = 2;
    pub const REGISTERED: i32 = 3;
}

/// `nvtxEventAttributes_v2` (48 bytes on LP64).
#[repr(C)]
pub struct EventAttributes {
    /// `NVTX_VERSION`.
    pub version: u16,
    /// `NVTX_EVENT_ATTRIB_STRUCT_SIZE`: the fields up to this size are valid.
    pub size: u16,
    /// User category (0: none).
    pub category: u32,
    /// `nvtxColorType_t`.
    pub color_type: i32,
    /// ARGB color.
    pub color: u32,
    /// `nvtxPayloadType_t`.
    pub payload_type: i32,
    /// Reserved.
    pub reserved0: i32,
    /// The payload's 8 bytes.
    pub payload: u64,
    /// `nvtxMessageType_t`.
    pub message_type: i32,
    /// `nvtxMessageValue_t`: an ASCII, wide or registered string pointer.
    pub message: *const c_void,
}

const _: () = assert!(core::mem::size_of::<EventAttributes>() == 48);
const _: () = assert!(core::mem::offset_of!(EventAttributes, message) == 40);

/// `wchar_t` on Linux: a UTF-32 code unit.
pub type WChar = i32;
/// A C string pointer.
pub type CStrPtr = *const c_char;
