//! The Rust side of the layout test: every offset and size kreplay-tool's HSA FFI defines,
//! keyed exactly as `tests/rocm-sim/tests/layout.c` prints them.

use core::mem::{offset_of, size_of};

use super::ffi::*;

/// Appends `"<src> <c_struct> <field>" -> offset_of!(<rust type>, <field>)` for each field.
macro_rules! fields {
    ($out:ident, $src:literal, $cname:literal, $ty:ty, [$($f:ident),* $(,)?]) => {
        $($out.push((format!("{} {} {}", $src, $cname, stringify!($f)), offset_of!($ty, $f)));)*
    };
}
macro_rules! size {
    ($out:ident, $src:literal, $cname:literal, $ty:ty) => {
        $out.push((format!("{} {} sizeof", $src, $cname), size_of::<$ty>()));
    };
}

#[rustfmt::skip] // one field per line would triple this file
/// All expectations: (key as printed by layout.c, value computed from the Rust definitions).
pub fn expectations() -> Vec<(String, usize)> {
    let mut v = Vec::new();
    size!(v, "official", "ApiTableVersion", ApiTableVersion);
    fields!(
        v,
        "official",
        "ApiTableVersion",
        ApiTableVersion,
        [major_id, minor_id, step_id, reserved]
    );
    // Debian's 5.2 root table ends after image_ext_ (no sizeof check: ROCm 6 appended fields).
    fields!(
        v,
        "official",
        "HsaApiTable",
        HsaApiTable,
        [version, core_, amd_ext_, finalizer_ext_, image_ext_]
    );
    size!(v, "official", "CoreApiTable", CoreApiTable);
    fields!(v, "official", "CoreApiTable", CoreApiTable, [version]);
    fields!(
        v,
        "official",
        "CoreApiTable",
        CoreApiTable,
        [
            hsa_init_fn, hsa_shut_down_fn, hsa_system_get_info_fn,
            hsa_system_extension_supported_fn, hsa_system_get_extension_table_fn,
            hsa_iterate_agents_fn, hsa_agent_get_info_fn, hsa_queue_create_fn,
            hsa_soft_queue_create_fn, hsa_queue_destroy_fn, hsa_queue_inactivate_fn,
            hsa_queue_load_read_index_scacquire_fn, hsa_queue_load_read_index_relaxed_fn,
            hsa_queue_load_write_index_scacquire_fn, hsa_queue_load_write_index_relaxed_fn,
            hsa_queue_store_write_index_relaxed_fn, hsa_queue_store_write_index_screlease_fn,
            hsa_queue_cas_write_index_scacq_screl_fn, hsa_queue_cas_write_index_scacquire_fn,
            hsa_queue_cas_write_index_relaxed_fn, hsa_queue_cas_write_index_screlease_fn,
            hsa_queue_add_write_index_scacq_screl_fn, hsa_queue_add_write_index_scacquire_fn,
            hsa_queue_add_write_index_relaxed_fn, hsa_queue_add_write_index_screlease_fn,
            hsa_queue_store_read_index_relaxed_fn, hsa_queue_store_read_index_screlease_fn,
            hsa_agent_iterate_regions_fn, hsa_region_get_info_fn,
            hsa_agent_get_exception_policies_fn, hsa_agent_extension_supported_fn,
            hsa_memory_register_fn, hsa_memory_deregister_fn, hsa_memory_allocate_fn,
            hsa_memory_free_fn, hsa_memory_copy_fn, hsa_memory_assign_agent_fn,
            hsa_signal_create_fn, hsa_signal_destroy_fn, hsa_signal_load_relaxed_fn,
            hsa_signal_load_scacquire_fn, hsa_signal_store_relaxed_fn,
            hsa_signal_store_screlease_fn, hsa_signal_wait_relaxed_fn,
            hsa_signal_wait_scacquire_fn, hsa_signal_and_relaxed_fn, hsa_signal_and_scacquire_fn,
            hsa_signal_and_screlease_fn, hsa_signal_and_scacq_screl_fn, hsa_signal_or_relaxed_fn,
            hsa_signal_or_scacquire_fn, hsa_signal_or_screlease_fn, hsa_signal_or_scacq_screl_fn,
            hsa_signal_xor_relaxed_fn, hsa_signal_xor_scacquire_fn, hsa_signal_xor_screlease_fn,
            hsa_signal_xor_scacq_screl_fn, hsa_signal_exchange_relaxed_fn,
            hsa_signal_exchange_scacquire_fn, hsa_signal_exchange_screlease_fn,
            hsa_signal_exchange_scacq_screl_fn, hsa_signal_add_relaxed_fn,
            hsa_signal_add_scacquire_fn, hsa_signal_add_screlease_fn,
            hsa_signal_add_scacq_screl_fn, hsa_signal_subtract_relaxed_fn,
            hsa_signal_subtract_scacquire_fn, hsa_signal_subtract_screlease_fn,
            hsa_signal_subtract_scacq_screl_fn, hsa_signal_cas_relaxed_fn,
            hsa_signal_cas_scacquire_fn, hsa_signal_cas_screlease_fn,
            hsa_signal_cas_scacq_screl_fn, hsa_isa_from_name_fn, hsa_isa_get_info_fn,
            hsa_isa_compatible_fn, hsa_code_object_serialize_fn, hsa_code_object_deserialize_fn,
            hsa_code_object_destroy_fn, hsa_code_object_get_info_fn, hsa_code_object_get_symbol_fn,
            hsa_code_symbol_get_info_fn, hsa_code_object_iterate_symbols_fn,
            hsa_executable_create_fn, hsa_executable_destroy_fn,
            hsa_executable_load_code_object_fn, hsa_executable_freeze_fn,
            hsa_executable_get_info_fn, hsa_executable_global_variable_define_fn,
            hsa_executable_agent_global_variable_define_fn,
            hsa_executable_readonly_variable_define_fn, hsa_executable_validate_fn,
            hsa_executable_get_symbol_fn, hsa_executable_symbol_get_info_fn,
            hsa_executable_iterate_symbols_fn, hsa_status_string_fn, hsa_extension_get_name_fn,
            hsa_system_major_extension_supported_fn, hsa_system_get_major_extension_table_fn,
            hsa_agent_major_extension_supported_fn, hsa_cache_get_info_fn,
            hsa_agent_iterate_caches_fn, hsa_signal_silent_store_relaxed_fn,
            hsa_signal_silent_store_screlease_fn, hsa_signal_group_create_fn,
            hsa_signal_group_destroy_fn, hsa_signal_group_wait_any_scacquire_fn,
            hsa_signal_group_wait_any_relaxed_fn, hsa_agent_iterate_isas_fn,
            hsa_isa_get_info_alt_fn, hsa_isa_get_exception_policies_fn,
            hsa_isa_get_round_method_fn, hsa_wavefront_get_info_fn, hsa_isa_iterate_wavefronts_fn,
            hsa_code_object_get_symbol_from_name_fn, hsa_code_object_reader_create_from_file_fn,
            hsa_code_object_reader_create_from_memory_fn, hsa_code_object_reader_destroy_fn,
            hsa_executable_create_alt_fn, hsa_executable_load_program_code_object_fn,
            hsa_executable_load_agent_code_object_fn, hsa_executable_validate_alt_fn,
            hsa_executable_get_symbol_by_name_fn, hsa_executable_iterate_agent_symbols_fn,
            hsa_executable_iterate_program_symbols_fn,
        ]
    );
    // ROCm 5.x AMD extension table (major 1), complete.
    size!(v, "official", "AmdExtTable", AmdExtTableV1);
    fields!(v, "official", "AmdExtTable", AmdExtTableV1, [version]);
    fields!(
        v,
        "official",
        "AmdExtTable",
        AmdExtTableV1,
        [
            hsa_amd_coherency_get_type_fn, hsa_amd_coherency_set_type_fn,
            hsa_amd_profiling_set_profiler_enabled_fn, hsa_amd_profiling_async_copy_enable_fn,
            hsa_amd_profiling_get_dispatch_time_fn, hsa_amd_profiling_get_async_copy_time_fn,
            hsa_amd_profiling_convert_tick_to_system_domain_fn, hsa_amd_signal_async_handler_fn,
            hsa_amd_async_function_fn, hsa_amd_signal_wait_any_fn, hsa_amd_queue_cu_set_mask_fn,
            hsa_amd_memory_pool_get_info_fn, hsa_amd_agent_iterate_memory_pools_fn,
            hsa_amd_memory_pool_allocate_fn, hsa_amd_memory_pool_free_fn,
            hsa_amd_memory_async_copy_fn, hsa_amd_agent_memory_pool_get_info_fn,
            hsa_amd_agents_allow_access_fn, hsa_amd_memory_pool_can_migrate_fn,
            hsa_amd_memory_migrate_fn, hsa_amd_memory_lock_fn, hsa_amd_memory_unlock_fn,
            hsa_amd_memory_fill_fn, hsa_amd_interop_map_buffer_fn, hsa_amd_interop_unmap_buffer_fn,
            hsa_amd_image_create_fn, hsa_amd_pointer_info_fn, hsa_amd_pointer_info_set_userdata_fn,
            hsa_amd_ipc_memory_create_fn, hsa_amd_ipc_memory_attach_fn,
            hsa_amd_ipc_memory_detach_fn, hsa_amd_signal_create_fn, hsa_amd_ipc_signal_create_fn,
            hsa_amd_ipc_signal_attach_fn, hsa_amd_register_system_event_handler_fn,
            hsa_amd_queue_intercept_create_fn, hsa_amd_queue_intercept_register_fn,
            hsa_amd_queue_set_priority_fn, hsa_amd_memory_async_copy_rect_fn,
            hsa_amd_runtime_queue_create_register_fn, hsa_amd_memory_lock_to_pool_fn,
            hsa_amd_register_deallocation_callback_fn, hsa_amd_deregister_deallocation_callback_fn,
            hsa_amd_signal_value_pointer_fn, hsa_amd_svm_attributes_set_fn,
            hsa_amd_svm_attributes_get_fn, hsa_amd_svm_prefetch_async_fn,
            hsa_amd_queue_cu_get_mask_fn,
        ]
    );
    size!(
            v,
        "official",
        "hsa_amd_pointer_info_t",
        hsa_amd_pointer_info_t
    );
    fields!(
        v,
        "official",
        "hsa_amd_pointer_info_t",
            hsa_amd_pointer_info_t,
        [
            size,
            agentBaseAddress,
            hostBaseAddress,
            sizeInBytes,
            userData,
            agentOwner,
            global_flags
        ]
    );
    v.push((
        "official hsa_amd_pointer_info_t type".into(),
        offset_of!(hsa_amd_pointer_info_t, type_),
    ));
    size!(
            v,
        "official",
        "hsa_kernel_dispatch_packet_t",
        hsa_kernel_dispatch_packet_t
    );
    fields!(
        v,
        "official",
        "hsa_kernel_dispatch_packet_t",
            hsa_kernel_dispatch_packet_t,
        [
            header, setup, workgroup_size_x, workgroup_size_y, workgroup_size_z, reserved0,
            grid_size_x, grid_size_y, grid_size_z, private_segment_size, group_segment_size,
            kernel_object, kernarg_address, reserved2, completion_signal,
        ]
    );
    size!(
            v,
        "official",
        "hsa_barrier_and_packet_t",
        hsa_barrier_and_packet_t
    );
    fields!(
        v,
        "official",
        "hsa_barrier_and_packet_t",
            hsa_barrier_and_packet_t,
        [
            header, reserved0, reserved1, dep_signal, reserved2,
            completion_signal
        ]
    );
    size!(v, "official", "hsa_queue_t", hsa_queue_t);
    fields!(
        v,
        "official",
        "hsa_queue_t",
            hsa_queue_t,
        [features, base_address, doorbell_signal, size, reserved1, id]
    );
    v.push((
        "official hsa_queue_t type".into(),
        offset_of!(hsa_queue_t, type_),
    ));
    size!(
            v,
        "official",
        "hsa_amd_profiling_dispatch_time_t",
        hsa_amd_profiling_dispatch_time_t
    );
    fields!(
        v,
        "official",
        "hsa_amd_profiling_dispatch_time_t",
            hsa_amd_profiling_dispatch_time_t,
        [start, end]
    );
    size!(v, "official", "hsa_agent_t", hsa_agent_t);
    fields!(v, "official", "hsa_agent_t", hsa_agent_t, [handle]);
    size!(v, "official", "hsa_signal_t", hsa_signal_t);
    fields!(v, "official", "hsa_signal_t", hsa_signal_t, [handle]);
    size!(
            v,
        "official",
        "hsa_ven_amd_loader_1_03_pfn_t",
        hsa_ven_amd_loader_1_03_pfn_t
    );
    fields!(
        v,
        "official",
        "hsa_ven_amd_loader_1_03_pfn_t",
            hsa_ven_amd_loader_1_03_pfn_t,
        [
            hsa_ven_amd_loader_query_host_address, hsa_ven_amd_loader_query_segment_descriptors,
            hsa_ven_amd_loader_query_executable,
            hsa_ven_amd_loader_executable_iterate_loaded_code_objects,
            hsa_ven_amd_loader_loaded_code_object_get_info,
            hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size,
            hsa_ven_amd_loader_iterate_executables,
        ]
    );
    // Current ROCR layout, checked against the sim's C definition.
    size!(v, "sim", "krsim_hsa_api_table", HsaApiTable);
    fields!(
        v,
        "sim",
        "krsim_hsa_api_table",
        HsaApiTable,
        [
            version, core_, amd_ext_, finalizer_ext_, image_ext_, tools_,
            pc_sampling_ext_
        ]
    );
    size!(v, "sim", "krsim_core_table", CoreApiTable);
    fields!(v, "sim", "krsim_core_table", CoreApiTable, [version]);
    fields!(
        v,
        "sim",
        "krsim_core_table",
        CoreApiTable,
        [
            hsa_init_fn, hsa_shut_down_fn, hsa_system_get_info_fn,
            hsa_system_extension_supported_fn, hsa_system_get_extension_table_fn,
            hsa_iterate_agents_fn, hsa_agent_get_info_fn, hsa_queue_create_fn,
            hsa_soft_queue_create_fn, hsa_queue_destroy_fn, hsa_queue_inactivate_fn,
            hsa_queue_load_read_index_scacquire_fn, hsa_queue_load_read_index_relaxed_fn,
            hsa_queue_load_write_index_scacquire_fn, hsa_queue_load_write_index_relaxed_fn,
            hsa_queue_store_write_index_relaxed_fn, hsa_queue_store_write_index_screlease_fn,
            hsa_queue_cas_write_index_scacq_screl_fn, hsa_queue_cas_write_index_scacquire_fn,
            hsa_queue_cas_write_index_relaxed_fn, hsa_queue_cas_write_index_screlease_fn,
            hsa_queue_add_write_index_scacq_screl_fn, hsa_queue_add_write_index_scacquire_fn,
            hsa_queue_add_write_index_relaxed_fn, hsa_queue_add_write_index_screlease_fn,
            hsa_queue_store_read_index_relaxed_fn, hsa_queue_store_read_index_screlease_fn,
            hsa_agent_iterate_regions_fn, hsa_region_get_info_fn,
            hsa_agent_get_exception_policies_fn, hsa_agent_extension_supported_fn,
            hsa_memory_register_fn, hsa_memory_deregister_fn, hsa_memory_allocate_fn,
            hsa_memory_free_fn, hsa_memory_copy_fn, hsa_memory_assign_agent_fn,
            hsa_signal_create_fn, hsa_signal_destroy_fn, hsa_signal_load_relaxed_fn,
            hsa_signal_load_scacquire_fn, hsa_signal_store_relaxed_fn,
            hsa_signal_store_screlease_fn, hsa_signal_wait_relaxed_fn,
            hsa_signal_wait_scacquire_fn, hsa_signal_and_relaxed_fn, hsa_signal_and_scacquire_fn,
            hsa_signal_and_screlease_fn, hsa_signal_and_scacq_screl_fn, hsa_signal_or_relaxed_fn,
            hsa_signal_or_scacquire_fn, hsa_signal_or_screlease_fn, hsa_signal_or_scacq_screl_fn,
            hsa_signal_xor_relaxed_fn, hsa_signal_xor_scacquire_fn, hsa_signal_xor_screlease_fn,
            hsa_signal_xor_scacq_screl_fn, hsa_signal_exchange_relaxed_fn,
            hsa_signal_exchange_scacquire_fn, hsa_signal_exchange_screlease_fn,
            hsa_signal_exchange_scacq_screl_fn, hsa_signal_add_relaxed_fn,
            hsa_signal_add_scacquire_fn, hsa_signal_add_screlease_fn,
            hsa_signal_add_scacq_screl_fn, hsa_signal_subtract_relaxed_fn,
            hsa_signal_subtract_scacquire_fn, hsa_signal_subtract_screlease_fn,
            hsa_signal_subtract_scacq_screl_fn, hsa_signal_cas_relaxed_fn,
            hsa_signal_cas_scacquire_fn, hsa_signal_cas_screlease_fn,
            hsa_signal_cas_scacq_screl_fn, hsa_isa_from_name_fn, hsa_isa_get_info_fn,
            hsa_isa_compatible_fn, hsa_code_object_serialize_fn, hsa_code_object_deserialize_fn,
            hsa_code_object_destroy_fn, hsa_code_object_get_info_fn, hsa_code_object_get_symbol_fn,
            hsa_code_symbol_get_info_fn, hsa_code_object_iterate_symbols_fn,
            hsa_executable_create_fn, hsa_executable_destroy_fn,
            hsa_executable_load_code_object_fn, hsa_executable_freeze_fn,
            hsa_executable_get_info_fn, hsa_executable_global_variable_define_fn,
            hsa_executable_agent_global_variable_define_fn,
            hsa_executable_readonly_variable_define_fn, hsa_executable_validate_fn,
            hsa_executable_get_symbol_fn, hsa_executable_symbol_get_info_fn,
            hsa_executable_iterate_symbols_fn, hsa_status_string_fn, hsa_extension_get_name_fn,
            hsa_system_major_extension_supported_fn, hsa_system_get_major_extension_table_fn,
            hsa_agent_major_extension_supported_fn, hsa_cache_get_info_fn,
            hsa_agent_iterate_caches_fn, hsa_signal_silent_store_relaxed_fn,
            hsa_signal_silent_store_screlease_fn, hsa_signal_group_create_fn,
            hsa_signal_group_destroy_fn, hsa_signal_group_wait_any_scacquire_fn,
            hsa_signal_group_wait_any_relaxed_fn, hsa_agent_iterate_isas_fn,
            hsa_isa_get_info_alt_fn, hsa_isa_get_exception_policies_fn,
            hsa_isa_get_round_method_fn, hsa_wavefront_get_info_fn, hsa_isa_iterate_wavefronts_fn,
            hsa_code_object_get_symbol_from_name_fn, hsa_code_object_reader_create_from_file_fn,
            hsa_code_object_reader_create_from_memory_fn, hsa_code_object_reader_destroy_fn,
            hsa_executable_create_alt_fn, hsa_executable_load_program_code_object_fn,
            hsa_executable_load_agent_code_object_fn, hsa_executable_validate_alt_fn,
            hsa_executable_get_symbol_by_name_fn, hsa_executable_iterate_agent_symbols_fn,
            hsa_executable_iterate_program_symbols_fn,
        ]
    );
    size!(v, "sim", "krsim_amd_ext_table", AmdExtTable);
    fields!(v, "sim", "krsim_amd_ext_table", AmdExtTable, [version]);
    fields!(
        v,
        "sim",
        "krsim_amd_ext_table",
        AmdExtTable,
        [
            hsa_amd_coherency_get_type_fn, hsa_amd_coherency_set_type_fn,
            hsa_amd_profiling_set_profiler_enabled_fn, hsa_amd_profiling_async_copy_enable_fn,
            hsa_amd_profiling_get_dispatch_time_fn, hsa_amd_profiling_get_async_copy_time_fn,
            hsa_amd_profiling_convert_tick_to_system_domain_fn, hsa_amd_signal_async_handler_fn,
            hsa_amd_async_function_fn, hsa_amd_signal_wait_any_fn, hsa_amd_queue_cu_set_mask_fn,
            hsa_amd_memory_pool_get_info_fn, hsa_amd_agent_iterate_memory_pools_fn,
            hsa_amd_memory_pool_allocate_fn, hsa_amd_memory_pool_free_fn,
            hsa_amd_memory_async_copy_fn, hsa_amd_memory_async_copy_on_engine_fn,
            hsa_amd_memory_copy_engine_status_fn, hsa_amd_agent_memory_pool_get_info_fn,
            hsa_amd_agents_allow_access_fn, hsa_amd_memory_pool_can_migrate_fn,
            hsa_amd_memory_migrate_fn, hsa_amd_memory_lock_fn, hsa_amd_memory_unlock_fn,
            hsa_amd_memory_fill_fn, hsa_amd_interop_map_buffer_fn, hsa_amd_interop_unmap_buffer_fn,
            hsa_amd_image_create_fn, hsa_amd_pointer_info_fn, hsa_amd_pointer_info_set_userdata_fn,
            hsa_amd_ipc_memory_create_fn, hsa_amd_ipc_memory_attach_fn,
            hsa_amd_ipc_memory_detach_fn, hsa_amd_signal_create_fn, hsa_amd_ipc_signal_create_fn,
            hsa_amd_ipc_signal_attach_fn, hsa_amd_register_system_event_handler_fn,
            hsa_amd_queue_intercept_create_fn, hsa_amd_queue_intercept_register_fn,
            hsa_amd_queue_set_priority_fn, hsa_amd_memory_async_copy_rect_fn,
            hsa_amd_runtime_queue_create_register_fn, hsa_amd_memory_lock_to_pool_fn,
            hsa_amd_register_deallocation_callback_fn, hsa_amd_deregister_deallocation_callback_fn,
            hsa_amd_signal_value_pointer_fn, hsa_amd_svm_attributes_set_fn,
            hsa_amd_svm_attributes_get_fn, hsa_amd_svm_prefetch_async_fn, hsa_amd_spm_acquire_fn,
            hsa_amd_spm_release_fn, hsa_amd_spm_set_dest_buffer_fn, hsa_amd_queue_cu_get_mask_fn,
            hsa_amd_portable_export_dmabuf_fn, hsa_amd_portable_close_dmabuf_fn,
            hsa_amd_vmem_address_reserve_fn, hsa_amd_vmem_address_free_fn,
            hsa_amd_vmem_handle_create_fn, hsa_amd_vmem_handle_release_fn, hsa_amd_vmem_map_fn,
            hsa_amd_vmem_unmap_fn, hsa_amd_vmem_set_access_fn, hsa_amd_vmem_get_access_fn,
            hsa_amd_vmem_export_shareable_handle_fn, hsa_amd_vmem_import_shareable_handle_fn,
            hsa_amd_vmem_retain_alloc_handle_fn, hsa_amd_vmem_get_alloc_properties_from_handle_fn,
            hsa_amd_agent_set_async_scratch_limit_fn, hsa_amd_queue_get_info_fn,
            hsa_amd_vmem_address_reserve_align_fn, hsa_amd_enable_logging_fn,
        ]
    );
    v
}

#[rustfmt::skip]
/// The prefix of the current `AmdExtTable` that kept its ROCm 5.2 positions: each must equal
/// the official header's offset too.
pub fn shared_amd_prefix() -> Vec<(String, usize)> {
    let mut v = Vec::new();
    fields!(
        v,
        "official",
        "AmdExtTable",
        AmdExtTable,
        [
            hsa_amd_coherency_get_type_fn, hsa_amd_coherency_set_type_fn,
            hsa_amd_profiling_set_profiler_enabled_fn, hsa_amd_profiling_async_copy_enable_fn,
            hsa_amd_profiling_get_dispatch_time_fn, hsa_amd_profiling_get_async_copy_time_fn,
            hsa_amd_profiling_convert_tick_to_system_domain_fn, hsa_amd_signal_async_handler_fn,
            hsa_amd_async_function_fn, hsa_amd_signal_wait_any_fn, hsa_amd_queue_cu_set_mask_fn,
            hsa_amd_memory_pool_get_info_fn, hsa_amd_agent_iterate_memory_pools_fn,
            hsa_amd_memory_pool_allocate_fn, hsa_amd_memory_pool_free_fn,
            hsa_amd_memory_async_copy_fn,
        ]
    );
    v
}
