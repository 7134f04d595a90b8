//! Raw HSA ABI: handles, constants, AQL packets, `hsa_amd_pointer_info_t` and the API tables a
//! tool receives in `OnLoad`, laid out exactly as the official ROCm headers (checked by
//! `tests/tests/hsa_layout.rs` against `/usr/include/hsa` and current ROCR for newer entries).
#![expect(
    non_camel_case_types,
    reason = "the C ABI's type names, as in the HSA headers"
)]

use core::ffi::{c_char, c_int, c_void};

#[path = "ffi/amd_tables.rs"]
mod amd_tables;
#[path = "ffi/core_table.rs"]
mod core_table;
pub use amd_tables::{AmdExtTable, AmdExtTableV1};
pub use core_table::CoreApiTable;

/// `hsa_status_t` (a C enum: 32 bits).
pub type hsa_status_t = u32;
/// `hsa_signal_value_t` on 64-bit (large model) targets.
pub type hsa_signal_value_t = i64;

macro_rules! handle {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name {
            /// Opaque handle value.
            pub handle: u64,
        }
    )*};
}
handle!(
    /// An agent (CPU or GPU).
    hsa_agent_t,
    /// A signal.
    hsa_signal_t,
    /// A memory region (`hsa_memory_allocate`).
    hsa_region_t,
    /// An AMD memory pool.
    hsa_amd_memory_pool_t,
    /// An executable.
    hsa_executable_t,
    /// A symbol of an executable.
    hsa_executable_symbol_t,
    /// A code object reader.
    hsa_code_object_reader_t,
    /// A loaded code object.
    hsa_loaded_code_object_t,
    /// A vmem physical allocation handle (ROCm 6+).
    hsa_amd_vmem_alloc_handle_t,
);

/// Version header of every API table: `minor_id` is the table's size in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApiTableVersion {
    /// Major version: bumped when entries move.
    pub major_id: u32,
    /// Size of the table in bytes; check `offset_of!(field) < minor_id` before use.
    pub minor_id: u32,
    /// Step version.
    pub step_id: u32,
    /// Reserved.
    pub reserved: u32,
}

/// Tables kreplay never reads (finalizer, image, tools, pc sampling): only the version.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OpaqueExtTable {
    /// Table version.
    pub version: ApiTableVersion,
}

/// Root table passed to `OnLoad` (`HsaApiTable`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsaApiTable {
    /// Root version; `minor_id` says which sub-table pointers exist.
    pub version: ApiTableVersion,
    /// Core API table.
    pub core_: *mut CoreApiTable,
    /// AMD extension table; layout depends on its `version.major_id` (1: `AmdExtTableV1`).
    pub amd_ext_: *mut AmdExtTable,
    /// Finalizer extension table.
    pub finalizer_ext_: *mut OpaqueExtTable,
    /// Image extension table.
    pub image_ext_: *mut OpaqueExtTable,
    /// Tools table (ROCm 6+; absent when `minor_id` is smaller).
    pub tools_: *mut OpaqueExtTable,
    /// PC sampling table (ROCm 6.2+; absent when `minor_id` is smaller).
    pub pc_sampling_ext_: *mut OpaqueExtTable,
}

/// `hsa_queue_t` (large model).
#[repr(C)]
#[derive(Debug)]
pub struct hsa_queue_t {
    /// Queue type (`HSA_QUEUE_TYPE_*`).
    pub type_: u32,
    /// Feature bits.
    pub features: u32,
    /// Ring buffer of 64-byte AQL packets.
    pub base_address: *mut c_void,
    /// Doorbell signal: store the packet id after publishing a packet.
    pub doorbell_signal: hsa_signal_t,
    /// Number of packets in the ring (a power of two).
    pub size: u32,
    /// Reserved.
    pub reserved1: u32,
    /// Queue id.
    pub id: u64,
}

/// AQL kernel dispatch packet (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct hsa_kernel_dispatch_packet_t {
    /// Packet header: type, barrier bit, fence scopes.
    pub header: u16,
    /// Dimensions in bits 0-1.
    pub setup: u16,
    /// Work-group size x.
    pub workgroup_size_x: u16,
    /// Work-group size y.
    pub workgroup_size_y: u16,
    /// Work-group size z.
    pub workgroup_size_z: u16,
    /// Reserved.
    pub reserved0: u16,
    /// Grid size x.
    pub grid_size_x: u32,
    /// Grid size y.
    pub grid_size_y: u32,
    /// Grid size z.
    pub grid_size_z: u32,
    /// Private segment bytes per work-item.
    pub private_segment_size: u32,
    /// Group segment bytes per work-group.
    pub group_segment_size: u32,
    /// Kernel object (code descriptor address).
    pub kernel_object: u64,
    /// Kernel arguments.
    pub kernarg_address: *mut c_void,
    /// Reserved.
    pub reserved2: u64,
    /// Completion signal (decremented when the dispatch finishes).
    pub completion_signal: hsa_signal_t,
}

impl Default for hsa_queue_t {
    fn default() -> Self {
        Self {
            type_: 0,
            features: 0,
            base_address: core::ptr::null_mut(),
            doorbell_signal: hsa_signal_t::default(),
            size: 0,
            reserved1: 0,
            id: 0,
        }
    }
}

/// AQL barrier-AND packet (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct hsa_barrier_and_packet_t {
    /// Packet header.
    pub header: u16,
    /// Reserved.
    pub reserved0: u16,
    /// Reserved.
    pub reserved1: u32,
    /// Up to five dependency signals (0 = none).
    pub dep_signal: [hsa_signal_t; 5],
    /// Reserved.
    pub reserved2: u64,
    /// Completion signal.
    pub completion_signal: hsa_signal_t,
}

/// `hsa_amd_pointer_info_t`; set `size` before the call, check the returned `size` before
/// reading `global_flags`.
#[expect(non_snake_case, reason = "field names as in hsa_ext_amd.h")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hsa_amd_pointer_info_t {
    /// In: the caller's struct size; out: the bytes the runtime filled.
    pub size: u32,
    /// `HSA_EXT_POINTER_TYPE_*`.
    pub type_: u32,
    /// Base address as seen by agents.
    pub agentBaseAddress: *mut c_void,
    /// Base address as seen by the host.
    pub hostBaseAddress: *mut c_void,
    /// Allocation size.
    pub sizeInBytes: usize,
    /// Application data (`hsa_amd_pointer_info_set_userdata`).
    pub userData: *mut c_void,
    /// Owning agent.
    pub agentOwner: hsa_agent_t,
    /// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*` (recent runtimes).
    pub global_flags: u32,
}

/// `hsa_amd_profiling_dispatch_time_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_profiling_dispatch_time_t {
    /// Start tick.
    pub start: u64,
    /// End tick.
    pub end: u64,
}

/// `hsa_amd_profiling_async_copy_time_t`: an async copy's start and end in the system domain.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_profiling_async_copy_time_t {
    /// Start tick.
    pub start: u64,
    /// End tick.
    pub end: u64,
}

/// Writer handed to an intercept handler: submits packets to the next stage.
pub type hsa_amd_queue_intercept_packet_writer =
    Option<unsafe extern "C" fn(pkts: *const c_void, pkt_count: u64)>;
/// Queue intercept handler (`hsa_amd_queue_intercept_register`).
pub type hsa_amd_queue_intercept_handler = Option<
    unsafe extern "C" fn(
        pkts: *const c_void,
        pkt_count: u64,
        user_pkt_index: u64,
        data: *mut c_void,
        writer: hsa_amd_queue_intercept_packet_writer,
    ),
>;

/// `hsa_iterate_agents` callback.
pub type hsa_agent_callback =
    Option<unsafe extern "C" fn(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t>;
/// `hsa_amd_agent_iterate_memory_pools` callback.
pub type hsa_pool_callback =
    Option<unsafe extern "C" fn(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t>;
/// Queue error callback of `hsa_queue_create`.
pub type hsa_queue_error_callback =
    Option<unsafe extern "C" fn(status: hsa_status_t, queue: *mut hsa_queue_t, data: *mut c_void)>;
/// `hsa_amd_signal_async_handler` handler: return true to stay armed.
pub type hsa_amd_signal_handler =
    Option<unsafe extern "C" fn(value: hsa_signal_value_t, arg: *mut c_void) -> bool>;
/// `hsa_executable_iterate_agent_symbols` callback.
pub type hsa_agent_symbol_callback = Option<
    unsafe extern "C" fn(
        exec: hsa_executable_t,
        agent: hsa_agent_t,
        symbol: hsa_executable_symbol_t,
        data: *mut c_void,
    ) -> hsa_status_t,
>;
/// Allocator passed to `hsa_amd_pointer_info` for the accessible-agents list.
pub type hsa_alloc_callback = Option<unsafe extern "C" fn(size: usize) -> *mut c_void>;

/// AMD loader extension table, version 1.03 (`hsa_ven_amd_loader_1_03_pfn_t`), filled by
/// `hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, size, table)`; the 1.00
/// and 1.01 tables are its prefixes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hsa_ven_amd_loader_1_03_pfn_t {
    /// Host address of a loaded segment's device address.
    pub hsa_ven_amd_loader_query_host_address: Option<
        unsafe extern "C" fn(
            device_address: *const c_void,
            host_address: *mut *const c_void,
        ) -> hsa_status_t,
    >,
    /// Loaded segment descriptors (not called by kreplay; position only).
    pub hsa_ven_amd_loader_query_segment_descriptors: *const c_void,
    /// Executable that contains a device address.
    pub hsa_ven_amd_loader_query_executable: Option<
        unsafe extern "C" fn(
            device_address: *const c_void,
            executable: *mut hsa_executable_t,
        ) -> hsa_status_t,
    >,
    /// Iterates an executable's loaded code objects.
    pub hsa_ven_amd_loader_executable_iterate_loaded_code_objects: Option<
        unsafe extern "C" fn(
            executable: hsa_executable_t,
            callback: Option<
                unsafe extern "C" fn(
                    executable: hsa_executable_t,
                    loaded_code_object: hsa_loaded_code_object_t,
                    data: *mut c_void,
                ) -> hsa_status_t,
            >,
            data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// Attribute of a loaded code object (`HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_*`).
    pub hsa_ven_amd_loader_loaded_code_object_get_info: Option<
        unsafe extern "C" fn(
            loaded_code_object: hsa_loaded_code_object_t,
            attribute: u32,
            value: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// Code object reader from a file range (not called by kreplay; position only).
    pub hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size: *const c_void,
    /// Iterates every executable of the process (1.03).
    pub hsa_ven_amd_loader_iterate_executables: Option<
        unsafe extern "C" fn(
            callback: Option<
                unsafe extern "C" fn(
                    executable: hsa_executable_t,
                    data: *mut c_void,
                ) -> hsa_status_t,
            >,
            data: *mut c_void,
        ) -> hsa_status_t,
    >,
}

/// Status codes.
pub mod status {
    /// Success.
    pub const SUCCESS: u32 = 0x0;
    /// Iteration stopped by the callback.
    pub const INFO_BREAK: u32 = 0x1;
    /// Generic error.
    pub const ERROR: u32 = 0x1000;
    /// Invalid argument.
    pub const ERROR_INVALID_ARGUMENT: u32 = 0x1001;
    /// Invalid allocation.
    pub const ERROR_INVALID_ALLOCATION: u32 = 0x1003;
    /// Invalid agent.
    pub const ERROR_INVALID_AGENT: u32 = 0x1004;
    /// Invalid signal.
    pub const ERROR_INVALID_SIGNAL: u32 = 0x1006;
    /// Invalid queue.
    pub const ERROR_INVALID_QUEUE: u32 = 0x1007;
    /// Out of resources.
    pub const ERROR_OUT_OF_RESOURCES: u32 = 0x1008;
    /// Runtime not initialized.
    pub const ERROR_NOT_INITIALIZED: u32 = 0x100B;
    /// Invalid executable.
    pub const ERROR_INVALID_EXECUTABLE: u32 = 0x1011;
    /// Invalid symbol name.
    pub const ERROR_INVALID_SYMBOL_NAME: u32 = 0x1013;
    /// Invalid memory pool.
    pub const ERROR_INVALID_MEMORY_POOL: u32 = 40;
}

/// `hsa_amd_pointer_type_t`.
pub mod pointer_type {
    /// Not known to the runtime.
    pub const UNKNOWN: u32 = 0;
    /// Runtime allocation.
    pub const HSA: u32 = 1;
    /// Locked host memory.
    pub const LOCKED: u32 = 2;
    /// Graphics interop.
    pub const GRAPHICS: u32 = 3;
    /// IPC import.
    pub const IPC: u32 = 4;
    /// Reserved virtual range (vmem).
    pub const RESERVED_ADDR: u32 = 5;
}

/// Memory pool global flags.
pub mod pool_flags {
    /// Kernel-argument pool.
    pub const KERNARG_INIT: u32 = 1;
    /// Fine-grained.
    pub const FINE_GRAINED: u32 = 2;
    /// Coarse-grained.
    pub const COARSE_GRAINED: u32 = 4;
    /// Extended-scope fine-grained.
    pub const EXTENDED_SCOPE_FINE_GRAINED: u32 = 8;
}

/// `hsa_amd_memory_pool_allocate` flags.
pub mod alloc_flags {
    /// Standard.
    pub const STANDARD: u32 = 0;
    /// PCIe.
    pub const PCIE: u32 = 1;
    /// Physically contiguous.
    pub const CONTIGUOUS: u32 = 2;
    /// Executable (kernargs, profiler buffers).
    pub const EXECUTABLE: u32 = 4;
}

/// Memory pool / agent / system info attributes kreplay queries.
pub mod info {
    /// `HSA_AMD_MEMORY_POOL_INFO_SEGMENT`.
    pub const POOL_SEGMENT: u32 = 0;
    /// `HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS`.
    pub const POOL_GLOBAL_FLAGS: u32 = 1;
    /// `HSA_AMD_MEMORY_POOL_INFO_SIZE`.
    pub const POOL_SIZE: u32 = 2;
    /// `HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED`.
    pub const POOL_ALLOC_ALLOWED: u32 = 5;
    /// `HSA_AGENT_INFO_NAME` (`char[64]`).
    pub const AGENT_NAME: u32 = 0;
    /// `HSA_AMD_AGENT_INFO_PRODUCT_NAME` (`char[64]`, e.g. `AMD Instinct MI300X`).
    pub const AGENT_PRODUCT_NAME: u32 = 0xA009;
    /// `HSA_AGENT_INFO_NODE`.
    pub const AGENT_NODE: u32 = 16;
    /// `HSA_AGENT_INFO_DEVICE`.
    pub const AGENT_DEVICE: u32 = 17;
    /// `HSA_DEVICE_TYPE_CPU`.
    pub const DEVICE_TYPE_CPU: u32 = 0;
    /// `HSA_DEVICE_TYPE_GPU`.
    pub const DEVICE_TYPE_GPU: u32 = 1;
    /// `HSA_SYSTEM_INFO_TIMESTAMP` (u64, system-domain ticks).
    pub const SYSTEM_TIMESTAMP: u32 = 2;
    /// `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`.
    pub const SYSTEM_TIMESTAMP_FREQUENCY: u32 = 3;
    /// `HSA_EXTENSION_AMD_LOADER`.
    pub const EXTENSION_AMD_LOADER: u16 = 0x201;
}

/// `hsa_executable_symbol_info_t` and symbol kinds.
pub mod symbol_info {
    /// Symbol kind (variable 0, kernel 1).
    pub const TYPE: u32 = 0;
    /// Name length.
    pub const NAME_LENGTH: u32 = 1;
    /// Name (not NUL-terminated).
    pub const NAME: u32 = 2;
    /// Variable segment (global 0, readonly 1).
    pub const VARIABLE_SEGMENT: u32 = 7;
    /// Variable size (u32).
    pub const VARIABLE_SIZE: u32 = 9;
    /// Variable is const (bool).
    pub const VARIABLE_IS_CONST: u32 = 10;
    /// Kernarg segment size (u32).
    pub const KERNEL_KERNARG_SEGMENT_SIZE: u32 = 11;
    /// Variable address (u64).
    pub const VARIABLE_ADDRESS: u32 = 21;
    /// Kernel object (u64).
    pub const KERNEL_OBJECT: u32 = 22;
    /// `HSA_SYMBOL_KIND_VARIABLE`.
    pub const KIND_VARIABLE: u32 = 0;
    /// `HSA_SYMBOL_KIND_KERNEL`.
    pub const KIND_KERNEL: u32 = 1;
}

/// AQL packet header fields.
pub mod packet {
    /// Vendor-specific packet.
    pub const TYPE_VENDOR_SPECIFIC: u16 = 0;
    /// Invalid (free slot).
    pub const TYPE_INVALID: u16 = 1;
    /// Kernel dispatch.
    pub const TYPE_KERNEL_DISPATCH: u16 = 2;
    /// Barrier-AND.
    pub const TYPE_BARRIER_AND: u16 = 3;
    /// Agent dispatch.
    pub const TYPE_AGENT_DISPATCH: u16 = 4;
    /// Barrier-OR.
    pub const TYPE_BARRIER_OR: u16 = 5;
    /// Bit offset of the packet type.
    pub const HEADER_TYPE: u16 = 0;
    /// Bit offset of the barrier bit.
    pub const HEADER_BARRIER: u16 = 8;
    /// Bit offset of the acquire fence scope.
    pub const HEADER_ACQUIRE_FENCE_SCOPE: u16 = 9;
    /// Bit offset of the release fence scope.
    pub const HEADER_RELEASE_FENCE_SCOPE: u16 = 11;
    /// Fence scope none.
    pub const FENCE_SCOPE_NONE: u16 = 0;
    /// Fence scope agent.
    pub const FENCE_SCOPE_AGENT: u16 = 1;
    /// Fence scope system.
    pub const FENCE_SCOPE_SYSTEM: u16 = 2;
}

/// `hsa_signal_condition_t` and wait states.
pub mod signal_condition {
    /// Equal.
    pub const EQ: u32 = 0;
    /// Not equal.
    pub const NE: u32 = 1;
    /// Less than.
    pub const LT: u32 = 2;
    /// Greater or equal.
    pub const GTE: u32 = 3;
    /// `HSA_WAIT_STATE_BLOCKED`.
    pub const WAIT_STATE_BLOCKED: u32 = 0;
    /// `HSA_WAIT_STATE_ACTIVE`.
    pub const WAIT_STATE_ACTIVE: u32 = 1;
}

/// `hsa_ven_amd_loader_loaded_code_object_info_t`.
pub mod loaded_code_object_info {
    /// Owning executable.
    pub const EXECUTABLE: u32 = 1;
    /// Kind (program 1, agent 2).
    pub const KIND: u32 = 2;
    /// Agent of an agent code object.
    pub const AGENT: u32 = 3;
    /// Storage type (none 0, file 1, memory 2).
    pub const CODE_OBJECT_STORAGE_TYPE: u32 = 4;
    /// Base of the code object in memory.
    pub const CODE_OBJECT_STORAGE_MEMORY_BASE: u32 = 5;
    /// Size of the code object in memory.
    pub const CODE_OBJECT_STORAGE_MEMORY_SIZE: u32 = 6;
    /// Load delta.
    pub const LOAD_DELTA: u32 = 8;
    /// Load base.
    pub const LOAD_BASE: u32 = 9;
    /// Load size.
    pub const LOAD_SIZE: u32 = 10;
}
