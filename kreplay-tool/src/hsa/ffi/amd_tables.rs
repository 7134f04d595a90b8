//! `AmdExtTable` in its two layouts: current ROCm (table major 2, with vmem) and ROCm 5.x
//! (major 1). Entries kreplay calls carry real signatures; the rest keep positions only.

use super::*;

/// AMD extension table (`AmdExtTable`) of current ROCm (table major 2): the layout with the vmem entries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AmdExtTable {
    /// Table version; `minor_id` is the table size in bytes.
    pub version: ApiTableVersion,
    /// `hsa_amd_coherency_get_type` (not called by kreplay; position only).
    pub hsa_amd_coherency_get_type_fn: *const c_void,
    /// `hsa_amd_coherency_set_type` (not called by kreplay; position only).
    pub hsa_amd_coherency_set_type_fn: *const c_void,
    /// `hsa_amd_profiling_set_profiler_enabled`.
    pub hsa_amd_profiling_set_profiler_enabled_fn:
        Option<unsafe extern "C" fn(queue: *mut hsa_queue_t, enable: c_int) -> hsa_status_t>,
    /// `hsa_amd_profiling_async_copy_enable`.
    pub hsa_amd_profiling_async_copy_enable_fn:
        Option<unsafe extern "C" fn(enable: bool) -> hsa_status_t>,
    /// `hsa_amd_profiling_get_dispatch_time`.
    pub hsa_amd_profiling_get_dispatch_time_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            signal: hsa_signal_t,
            time: *mut hsa_amd_profiling_dispatch_time_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_profiling_get_async_copy_time`.
    pub hsa_amd_profiling_get_async_copy_time_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            time: *mut hsa_amd_profiling_async_copy_time_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_profiling_convert_tick_to_system_domain`.
    pub hsa_amd_profiling_convert_tick_to_system_domain_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            agent_tick: u64,
            system_tick: *mut u64,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_signal_async_handler`.
    pub hsa_amd_signal_async_handler_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            cond: u32,
            value: hsa_signal_value_t,
            handler: hsa_amd_signal_handler,
            arg: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_async_function` (not called by kreplay; position only).
    pub hsa_amd_async_function_fn: *const c_void,
    /// `hsa_amd_signal_wait_any` (not called by kreplay; position only).
    pub hsa_amd_signal_wait_any_fn: *const c_void,
    /// `hsa_amd_queue_cu_set_mask` (not called by kreplay; position only).
    pub hsa_amd_queue_cu_set_mask_fn: *const c_void,
    /// `hsa_amd_memory_pool_get_info`.
    pub hsa_amd_memory_pool_get_info_fn: Option<
        unsafe extern "C" fn(
            pool: hsa_amd_memory_pool_t,
            attribute: u32,
            value: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_agent_iterate_memory_pools`.
    pub hsa_amd_agent_iterate_memory_pools_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            callback: Option<
                unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t,
            >,
            data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_allocate`.
    pub hsa_amd_memory_pool_allocate_fn: Option<
        unsafe extern "C" fn(
            pool: hsa_amd_memory_pool_t,
            size: usize,
            flags: u32,
            ptr: *mut *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_free`.
    pub hsa_amd_memory_pool_free_fn: Option<unsafe extern "C" fn(ptr: *mut c_void) -> hsa_status_t>,
    /// `hsa_amd_memory_async_copy`.
    pub hsa_amd_memory_async_copy_fn: Option<
        unsafe extern "C" fn(
            dst: *mut c_void,
            dst_agent: hsa_agent_t,
            src: *const c_void,
            src_agent: hsa_agent_t,
            size: usize,
            num_dep_signals: u32,
            dep_signals: *const hsa_signal_t,
            completion_signal: hsa_signal_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_async_copy_on_engine` (not called by kreplay; position only).
    pub hsa_amd_memory_async_copy_on_engine_fn: *const c_void,
    /// `hsa_amd_memory_copy_engine_status` (not called by kreplay; position only).
    pub hsa_amd_memory_copy_engine_status_fn: *const c_void,
    /// `hsa_amd_agent_memory_pool_get_info` (not called by kreplay; position only).
    pub hsa_amd_agent_memory_pool_get_info_fn: *const c_void,
    /// `hsa_amd_agents_allow_access`.
    pub hsa_amd_agents_allow_access_fn: Option<
        unsafe extern "C" fn(
            num_agents: u32,
            agents: *const hsa_agent_t,
            flags: *const u32,
            ptr: *const c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_can_migrate` (not called by kreplay; position only).
    pub hsa_amd_memory_pool_can_migrate_fn: *const c_void,
    /// `hsa_amd_memory_migrate` (not called by kreplay; position only).
    pub hsa_amd_memory_migrate_fn: *const c_void,
    /// `hsa_amd_memory_lock`.
    pub hsa_amd_memory_lock_fn: Option<
        unsafe extern "C" fn(
            host_ptr: *mut c_void,
            size: usize,
            agents: *mut hsa_agent_t,
            num_agent: c_int,
            agent_ptr: *mut *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_unlock`.
    pub hsa_amd_memory_unlock_fn:
        Option<unsafe extern "C" fn(host_ptr: *mut c_void) -> hsa_status_t>,
    /// `hsa_amd_memory_fill` (not called by kreplay; position only).
    pub hsa_amd_memory_fill_fn: *const c_void,
    /// `hsa_amd_interop_map_buffer` (not called by kreplay; position only).
    pub hsa_amd_interop_map_buffer_fn: *const c_void,
    /// `hsa_amd_interop_unmap_buffer` (not called by kreplay; position only).
    pub hsa_amd_interop_unmap_buffer_fn: *const c_void,
    /// `hsa_amd_image_create` (not called by kreplay; position only).
    pub hsa_amd_image_create_fn: *const c_void,
    /// `hsa_amd_pointer_info`.
    pub hsa_amd_pointer_info_fn: Option<
        unsafe extern "C" fn(
            ptr: *const c_void,
            info: *mut hsa_amd_pointer_info_t,
            alloc: hsa_alloc_callback,
            num_agents_accessible: *mut u32,
            accessible: *mut *mut hsa_agent_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_pointer_info_set_userdata` (not called by kreplay; position only).
    pub hsa_amd_pointer_info_set_userdata_fn: *const c_void,
    /// `hsa_amd_ipc_memory_create` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_create_fn: *const c_void,
    /// `hsa_amd_ipc_memory_attach` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_attach_fn: *const c_void,
    /// `hsa_amd_ipc_memory_detach` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_detach_fn: *const c_void,
    /// `hsa_amd_signal_create` (not called by kreplay; position only).
    pub hsa_amd_signal_create_fn: *const c_void,
    /// `hsa_amd_ipc_signal_create` (not called by kreplay; position only).
    pub hsa_amd_ipc_signal_create_fn: *const c_void,
    /// `hsa_amd_ipc_signal_attach` (not called by kreplay; position only).
    pub hsa_amd_ipc_signal_attach_fn: *const c_void,
    /// `hsa_amd_register_system_event_handler` (not called by kreplay; position only).
    pub hsa_amd_register_system_event_handler_fn: *const c_void,
    /// `hsa_amd_queue_intercept_create`.
    pub hsa_amd_queue_intercept_create_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            size: u32,
            queue_type: u32,
            callback: hsa_queue_error_callback,
            data: *mut c_void,
            private_segment_size: u32,
            group_segment_size: u32,
            queue: *mut *mut hsa_queue_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_queue_intercept_register`.
    pub hsa_amd_queue_intercept_register_fn: Option<
        unsafe extern "C" fn(
            queue: *mut hsa_queue_t,
            callback: hsa_amd_queue_intercept_handler,
            user_data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_queue_set_priority` (not called by kreplay; position only).
    pub hsa_amd_queue_set_priority_fn: *const c_void,
    /// `hsa_amd_memory_async_copy_rect` (not called by kreplay; position only).
    pub hsa_amd_memory_async_copy_rect_fn: *const c_void,
    /// `hsa_amd_runtime_queue_create_register` (not called by kreplay; position only).
    pub hsa_amd_runtime_queue_create_register_fn: *const c_void,
    /// `hsa_amd_memory_lock_to_pool` (not called by kreplay; position only).
    pub hsa_amd_memory_lock_to_pool_fn: *const c_void,
    /// `hsa_amd_register_deallocation_callback` (not called by kreplay; position only).
    pub hsa_amd_register_deallocation_callback_fn: *const c_void,
    /// `hsa_amd_deregister_deallocation_callback` (not called by kreplay; position only).
    pub hsa_amd_deregister_deallocation_callback_fn: *const c_void,
    /// `hsa_amd_signal_value_pointer` (not called by kreplay; position only).
    pub hsa_amd_signal_value_pointer_fn: *const c_void,
    /// `hsa_amd_svm_attributes_set` (not called by kreplay; position only).
    pub hsa_amd_svm_attributes_set_fn: *const c_void,
    /// `hsa_amd_svm_attributes_get` (not called by kreplay; position only).
    pub hsa_amd_svm_attributes_get_fn: *const c_void,
    /// `hsa_amd_svm_prefetch_async` (not called by kreplay; position only).
    pub hsa_amd_svm_prefetch_async_fn: *const c_void,
    /// `hsa_amd_spm_acquire` (not called by kreplay; position only).
    pub hsa_amd_spm_acquire_fn: *const c_void,
    /// `hsa_amd_spm_release` (not called by kreplay; position only).
    pub hsa_amd_spm_release_fn: *const c_void,
    /// `hsa_amd_spm_set_dest_buffer` (not called by kreplay; position only).
    pub hsa_amd_spm_set_dest_buffer_fn: *const c_void,
    /// `hsa_amd_queue_cu_get_mask` (not called by kreplay; position only).
    pub hsa_amd_queue_cu_get_mask_fn: *const c_void,
    /// `hsa_amd_portable_export_dmabuf` (not called by kreplay; position only).
    pub hsa_amd_portable_export_dmabuf_fn: *const c_void,
    /// `hsa_amd_portable_close_dmabuf` (not called by kreplay; position only).
    pub hsa_amd_portable_close_dmabuf_fn: *const c_void,
    /// `hsa_amd_vmem_address_reserve`.
    pub hsa_amd_vmem_address_reserve_fn: Option<
        unsafe extern "C" fn(
            va: *mut *mut c_void,
            size: usize,
            address: u64,
            flags: u64,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_vmem_address_free`.
    pub hsa_amd_vmem_address_free_fn:
        Option<unsafe extern "C" fn(va: *mut c_void, size: usize) -> hsa_status_t>,
    /// `hsa_amd_vmem_handle_create`.
    pub hsa_amd_vmem_handle_create_fn: Option<
        unsafe extern "C" fn(
            pool: hsa_amd_memory_pool_t,
            size: usize,
            memory_type: u32,
            flags: u64,
            handle: *mut hsa_amd_vmem_alloc_handle_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_vmem_handle_release`.
    pub hsa_amd_vmem_handle_release_fn:
        Option<unsafe extern "C" fn(handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t>,
    /// `hsa_amd_vmem_map`.
    pub hsa_amd_vmem_map_fn: Option<
        unsafe extern "C" fn(
            va: *mut c_void,
            size: usize,
            in_offset: usize,
            handle: hsa_amd_vmem_alloc_handle_t,
            flags: u64,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_vmem_unmap`.
    pub hsa_amd_vmem_unmap_fn:
        Option<unsafe extern "C" fn(va: *mut c_void, size: usize) -> hsa_status_t>,
    /// `hsa_amd_vmem_set_access` (not called by kreplay; position only).
    pub hsa_amd_vmem_set_access_fn: *const c_void,
    /// `hsa_amd_vmem_get_access` (not called by kreplay; position only).
    pub hsa_amd_vmem_get_access_fn: *const c_void,
    /// `hsa_amd_vmem_export_shareable_handle` (not called by kreplay; position only).
    pub hsa_amd_vmem_export_shareable_handle_fn: *const c_void,
    /// `hsa_amd_vmem_import_shareable_handle` (not called by kreplay; position only).
    pub hsa_amd_vmem_import_shareable_handle_fn: *const c_void,
    /// `hsa_amd_vmem_retain_alloc_handle` (not called by kreplay; position only).
    pub hsa_amd_vmem_retain_alloc_handle_fn: *const c_void,
    /// `hsa_amd_vmem_get_alloc_properties_from_handle` (not called by kreplay; position only).
    pub hsa_amd_vmem_get_alloc_properties_from_handle_fn: *const c_void,
    /// `hsa_amd_agent_set_async_scratch_limit` (not called by kreplay; position only).
    pub hsa_amd_agent_set_async_scratch_limit_fn: *const c_void,
    /// `hsa_amd_queue_get_info` (not called by kreplay; position only).
    pub hsa_amd_queue_get_info_fn: *const c_void,
    /// `hsa_amd_vmem_address_reserve_align` (not called by kreplay; position only).
    pub hsa_amd_vmem_address_reserve_align_fn: *const c_void,
    /// `hsa_amd_enable_logging` (not called by kreplay; position only).
    pub hsa_amd_enable_logging_fn: *const c_void,
}
/// AMD extension table of ROCm 5.x (table major 1, e.g. Debian's 5.2 headers): no async_copy_on_engine, spm or vmem entries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AmdExtTableV1 {
    /// Table version; `minor_id` is the table size in bytes.
    pub version: ApiTableVersion,
    /// `hsa_amd_coherency_get_type` (not called by kreplay; position only).
    pub hsa_amd_coherency_get_type_fn: *const c_void,
    /// `hsa_amd_coherency_set_type` (not called by kreplay; position only).
    pub hsa_amd_coherency_set_type_fn: *const c_void,
    /// `hsa_amd_profiling_set_profiler_enabled`.
    pub hsa_amd_profiling_set_profiler_enabled_fn:
        Option<unsafe extern "C" fn(queue: *mut hsa_queue_t, enable: c_int) -> hsa_status_t>,
    /// `hsa_amd_profiling_async_copy_enable`.
    pub hsa_amd_profiling_async_copy_enable_fn:
        Option<unsafe extern "C" fn(enable: bool) -> hsa_status_t>,
    /// `hsa_amd_profiling_get_dispatch_time`.
    pub hsa_amd_profiling_get_dispatch_time_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            signal: hsa_signal_t,
            time: *mut hsa_amd_profiling_dispatch_time_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_profiling_get_async_copy_time`.
    pub hsa_amd_profiling_get_async_copy_time_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            time: *mut hsa_amd_profiling_async_copy_time_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_profiling_convert_tick_to_system_domain`.
    pub hsa_amd_profiling_convert_tick_to_system_domain_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            agent_tick: u64,
            system_tick: *mut u64,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_signal_async_handler`.
    pub hsa_amd_signal_async_handler_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            cond: u32,
            value: hsa_signal_value_t,
            handler: hsa_amd_signal_handler,
            arg: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_async_function` (not called by kreplay; position only).
    pub hsa_amd_async_function_fn: *const c_void,
    /// `hsa_amd_signal_wait_any` (not called by kreplay; position only).
    pub hsa_amd_signal_wait_any_fn: *const c_void,
    /// `hsa_amd_queue_cu_set_mask` (not called by kreplay; position only).
    pub hsa_amd_queue_cu_set_mask_fn: *const c_void,
    /// `hsa_amd_memory_pool_get_info`.
    pub hsa_amd_memory_pool_get_info_fn: Option<
        unsafe extern "C" fn(
            pool: hsa_amd_memory_pool_t,
            attribute: u32,
            value: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_agent_iterate_memory_pools`.
    pub hsa_amd_agent_iterate_memory_pools_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            callback: Option<
                unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t,
            >,
            data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_allocate`.
    pub hsa_amd_memory_pool_allocate_fn: Option<
        unsafe extern "C" fn(
            pool: hsa_amd_memory_pool_t,
            size: usize,
            flags: u32,
            ptr: *mut *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_free`.
    pub hsa_amd_memory_pool_free_fn: Option<unsafe extern "C" fn(ptr: *mut c_void) -> hsa_status_t>,
    /// `hsa_amd_memory_async_copy`.
    pub hsa_amd_memory_async_copy_fn: Option<
        unsafe extern "C" fn(
            dst: *mut c_void,
            dst_agent: hsa_agent_t,
            src: *const c_void,
            src_agent: hsa_agent_t,
            size: usize,
            num_dep_signals: u32,
            dep_signals: *const hsa_signal_t,
            completion_signal: hsa_signal_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_agent_memory_pool_get_info` (not called by kreplay; position only).
    pub hsa_amd_agent_memory_pool_get_info_fn: *const c_void,
    /// `hsa_amd_agents_allow_access`.
    pub hsa_amd_agents_allow_access_fn: Option<
        unsafe extern "C" fn(
            num_agents: u32,
            agents: *const hsa_agent_t,
            flags: *const u32,
            ptr: *const c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_pool_can_migrate` (not called by kreplay; position only).
    pub hsa_amd_memory_pool_can_migrate_fn: *const c_void,
    /// `hsa_amd_memory_migrate` (not called by kreplay; position only).
    pub hsa_amd_memory_migrate_fn: *const c_void,
    /// `hsa_amd_memory_lock`.
    pub hsa_amd_memory_lock_fn: Option<
        unsafe extern "C" fn(
            host_ptr: *mut c_void,
            size: usize,
            agents: *mut hsa_agent_t,
            num_agent: c_int,
            agent_ptr: *mut *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_memory_unlock`.
    pub hsa_amd_memory_unlock_fn:
        Option<unsafe extern "C" fn(host_ptr: *mut c_void) -> hsa_status_t>,
    /// `hsa_amd_memory_fill` (not called by kreplay; position only).
    pub hsa_amd_memory_fill_fn: *const c_void,
    /// `hsa_amd_interop_map_buffer` (not called by kreplay; position only).
    pub hsa_amd_interop_map_buffer_fn: *const c_void,
    /// `hsa_amd_interop_unmap_buffer` (not called by kreplay; position only).
    pub hsa_amd_interop_unmap_buffer_fn: *const c_void,
    /// `hsa_amd_image_create` (not called by kreplay; position only).
    pub hsa_amd_image_create_fn: *const c_void,
    /// `hsa_amd_pointer_info`.
    pub hsa_amd_pointer_info_fn: Option<
        unsafe extern "C" fn(
            ptr: *const c_void,
            info: *mut hsa_amd_pointer_info_t,
            alloc: hsa_alloc_callback,
            num_agents_accessible: *mut u32,
            accessible: *mut *mut hsa_agent_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_pointer_info_set_userdata` (not called by kreplay; position only).
    pub hsa_amd_pointer_info_set_userdata_fn: *const c_void,
    /// `hsa_amd_ipc_memory_create` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_create_fn: *const c_void,
    /// `hsa_amd_ipc_memory_attach` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_attach_fn: *const c_void,
    /// `hsa_amd_ipc_memory_detach` (not called by kreplay; position only).
    pub hsa_amd_ipc_memory_detach_fn: *const c_void,
    /// `hsa_amd_signal_create` (not called by kreplay; position only).
    pub hsa_amd_signal_create_fn: *const c_void,
    /// `hsa_amd_ipc_signal_create` (not called by kreplay; position only).
    pub hsa_amd_ipc_signal_create_fn: *const c_void,
    /// `hsa_amd_ipc_signal_attach` (not called by kreplay; position only).
    pub hsa_amd_ipc_signal_attach_fn: *const c_void,
    /// `hsa_amd_register_system_event_handler` (not called by kreplay; position only).
    pub hsa_amd_register_system_event_handler_fn: *const c_void,
    /// `hsa_amd_queue_intercept_create`.
    pub hsa_amd_queue_intercept_create_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            size: u32,
            queue_type: u32,
            callback: hsa_queue_error_callback,
            data: *mut c_void,
            private_segment_size: u32,
            group_segment_size: u32,
            queue: *mut *mut hsa_queue_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_queue_intercept_register`.
    pub hsa_amd_queue_intercept_register_fn: Option<
        unsafe extern "C" fn(
            queue: *mut hsa_queue_t,
            callback: hsa_amd_queue_intercept_handler,
            user_data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_amd_queue_set_priority` (not called by kreplay; position only).
    pub hsa_amd_queue_set_priority_fn: *const c_void,
    /// `hsa_amd_memory_async_copy_rect` (not called by kreplay; position only).
    pub hsa_amd_memory_async_copy_rect_fn: *const c_void,
    /// `hsa_amd_runtime_queue_create_register` (not called by kreplay; position only).
    pub hsa_amd_runtime_queue_create_register_fn: *const c_void,
    /// `hsa_amd_memory_lock_to_pool` (not called by kreplay; position only).
    pub hsa_amd_memory_lock_to_pool_fn: *const c_void,
    /// `hsa_amd_register_deallocation_callback` (not called by kreplay; position only).
    pub hsa_amd_register_deallocation_callback_fn: *const c_void,
    /// `hsa_amd_deregister_deallocation_callback` (not called by kreplay; position only).
    pub hsa_amd_deregister_deallocation_callback_fn: *const c_void,
    /// `hsa_amd_signal_value_pointer` (not called by kreplay; position only).
    pub hsa_amd_signal_value_pointer_fn: *const c_void,
    /// `hsa_amd_svm_attributes_set` (not called by kreplay; position only).
    pub hsa_amd_svm_attributes_set_fn: *const c_void,
    /// `hsa_amd_svm_attributes_get` (not called by kreplay; position only).
    pub hsa_amd_svm_attributes_get_fn: *const c_void,
    /// `hsa_amd_svm_prefetch_async` (not called by kreplay; position only).
    pub hsa_amd_svm_prefetch_async_fn: *const c_void,
    /// `hsa_amd_queue_cu_get_mask` (not called by kreplay; position only).
    pub hsa_amd_queue_cu_get_mask_fn: *const c_void,
}
