//! `CoreApiTable` (hsa_api_trace.h) as a `#[repr(C)]` struct of function pointers, in header
//! order; entries kreplay calls carry real signatures, the rest are position-keeping placeholders.

use super::*;

/// HSA core API table (`CoreApiTable`), in header order.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CoreApiTable {
    /// Table version; `minor_id` is the table size in bytes.
    pub version: ApiTableVersion,
    /// `hsa_init`.
    pub hsa_init_fn: Option<unsafe extern "C" fn() -> hsa_status_t>,
    /// `hsa_shut_down`.
    pub hsa_shut_down_fn: Option<unsafe extern "C" fn() -> hsa_status_t>,
    /// `hsa_system_get_info`.
    pub hsa_system_get_info_fn:
        Option<unsafe extern "C" fn(attribute: u32, value: *mut c_void) -> hsa_status_t>,
    /// `hsa_system_extension_supported` (not called by kreplay; position only).
    pub hsa_system_extension_supported_fn: *const c_void,
    /// `hsa_system_get_extension_table` (not called by kreplay; position only).
    pub hsa_system_get_extension_table_fn: *const c_void,
    /// `hsa_iterate_agents`.
    pub hsa_iterate_agents_fn: Option<
        unsafe extern "C" fn(callback: hsa_agent_callback, data: *mut c_void) -> hsa_status_t,
    >,
    /// `hsa_agent_get_info`.
    pub hsa_agent_get_info_fn: Option<
        unsafe extern "C" fn(
            agent: hsa_agent_t,
            attribute: u32,
            value: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_queue_create`.
    pub hsa_queue_create_fn: Option<
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
    /// `hsa_soft_queue_create` (not called by kreplay; position only).
    pub hsa_soft_queue_create_fn: *const c_void,
    /// `hsa_queue_destroy`.
    pub hsa_queue_destroy_fn: Option<unsafe extern "C" fn(queue: *mut hsa_queue_t) -> hsa_status_t>,
    /// `hsa_queue_inactivate` (not called by kreplay; position only).
    pub hsa_queue_inactivate_fn: *const c_void,
    /// `hsa_queue_load_read_index_scacquire`.
    pub hsa_queue_load_read_index_scacquire_fn:
        Option<unsafe extern "C" fn(queue: *const hsa_queue_t) -> u64>,
    /// `hsa_queue_load_read_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_load_read_index_relaxed_fn: *const c_void,
    /// `hsa_queue_load_write_index_scacquire`.
    pub hsa_queue_load_write_index_scacquire_fn:
        Option<unsafe extern "C" fn(queue: *const hsa_queue_t) -> u64>,
    /// `hsa_queue_load_write_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_load_write_index_relaxed_fn: *const c_void,
    /// `hsa_queue_store_write_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_store_write_index_relaxed_fn: *const c_void,
    /// `hsa_queue_store_write_index_screlease`.
    pub hsa_queue_store_write_index_screlease_fn:
        Option<unsafe extern "C" fn(queue: *const hsa_queue_t, value: u64)>,
    /// `hsa_queue_cas_write_index_scacq_screl` (not called by kreplay; position only).
    pub hsa_queue_cas_write_index_scacq_screl_fn: *const c_void,
    /// `hsa_queue_cas_write_index_scacquire` (not called by kreplay; position only).
    pub hsa_queue_cas_write_index_scacquire_fn: *const c_void,
    /// `hsa_queue_cas_write_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_cas_write_index_relaxed_fn: *const c_void,
    /// `hsa_queue_cas_write_index_screlease` (not called by kreplay; position only).
    pub hsa_queue_cas_write_index_screlease_fn: *const c_void,
    /// `hsa_queue_add_write_index_scacq_screl`.
    pub hsa_queue_add_write_index_scacq_screl_fn:
        Option<unsafe extern "C" fn(queue: *const hsa_queue_t, value: u64) -> u64>,
    /// `hsa_queue_add_write_index_scacquire` (not called by kreplay; position only).
    pub hsa_queue_add_write_index_scacquire_fn: *const c_void,
    /// `hsa_queue_add_write_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_add_write_index_relaxed_fn: *const c_void,
    /// `hsa_queue_add_write_index_screlease` (not called by kreplay; position only).
    pub hsa_queue_add_write_index_screlease_fn: *const c_void,
    /// `hsa_queue_store_read_index_relaxed` (not called by kreplay; position only).
    pub hsa_queue_store_read_index_relaxed_fn: *const c_void,
    /// `hsa_queue_store_read_index_screlease` (not called by kreplay; position only).
    pub hsa_queue_store_read_index_screlease_fn: *const c_void,
    /// `hsa_agent_iterate_regions` (not called by kreplay; position only).
    pub hsa_agent_iterate_regions_fn: *const c_void,
    /// `hsa_region_get_info` (not called by kreplay; position only).
    pub hsa_region_get_info_fn: *const c_void,
    /// `hsa_agent_get_exception_policies` (not called by kreplay; position only).
    pub hsa_agent_get_exception_policies_fn: *const c_void,
    /// `hsa_agent_extension_supported` (not called by kreplay; position only).
    pub hsa_agent_extension_supported_fn: *const c_void,
    /// `hsa_memory_register` (not called by kreplay; position only).
    pub hsa_memory_register_fn: *const c_void,
    /// `hsa_memory_deregister` (not called by kreplay; position only).
    pub hsa_memory_deregister_fn: *const c_void,
    /// `hsa_memory_allocate`.
    pub hsa_memory_allocate_fn: Option<
        unsafe extern "C" fn(
            region: hsa_region_t,
            size: usize,
            ptr: *mut *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_memory_free`.
    pub hsa_memory_free_fn: Option<unsafe extern "C" fn(ptr: *mut c_void) -> hsa_status_t>,
    /// `hsa_memory_copy`.
    pub hsa_memory_copy_fn: Option<
        unsafe extern "C" fn(dst: *mut c_void, src: *const c_void, size: usize) -> hsa_status_t,
    >,
    /// `hsa_memory_assign_agent` (not called by kreplay; position only).
    pub hsa_memory_assign_agent_fn: *const c_void,
    /// `hsa_signal_create`.
    pub hsa_signal_create_fn: Option<
        unsafe extern "C" fn(
            initial_value: hsa_signal_value_t,
            num_consumers: u32,
            consumers: *const hsa_agent_t,
            signal: *mut hsa_signal_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_signal_destroy`.
    pub hsa_signal_destroy_fn: Option<unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_status_t>,
    /// `hsa_signal_load_relaxed`.
    pub hsa_signal_load_relaxed_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_signal_value_t>,
    /// `hsa_signal_load_scacquire`.
    pub hsa_signal_load_scacquire_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_signal_value_t>,
    /// `hsa_signal_store_relaxed`.
    pub hsa_signal_store_relaxed_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t)>,
    /// `hsa_signal_store_screlease`.
    pub hsa_signal_store_screlease_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t)>,
    /// `hsa_signal_wait_relaxed`.
    pub hsa_signal_wait_relaxed_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            condition: u32,
            compare_value: hsa_signal_value_t,
            timeout_hint: u64,
            wait_state_hint: u32,
        ) -> hsa_signal_value_t,
    >,
    /// `hsa_signal_wait_scacquire`.
    pub hsa_signal_wait_scacquire_fn: Option<
        unsafe extern "C" fn(
            signal: hsa_signal_t,
            condition: u32,
            compare_value: hsa_signal_value_t,
            timeout_hint: u64,
            wait_state_hint: u32,
        ) -> hsa_signal_value_t,
    >,
    /// `hsa_signal_and_relaxed` (not called by kreplay; position only).
    pub hsa_signal_and_relaxed_fn: *const c_void,
    /// `hsa_signal_and_scacquire` (not called by kreplay; position only).
    pub hsa_signal_and_scacquire_fn: *const c_void,
    /// `hsa_signal_and_screlease` (not called by kreplay; position only).
    pub hsa_signal_and_screlease_fn: *const c_void,
    /// `hsa_signal_and_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_and_scacq_screl_fn: *const c_void,
    /// `hsa_signal_or_relaxed` (not called by kreplay; position only).
    pub hsa_signal_or_relaxed_fn: *const c_void,
    /// `hsa_signal_or_scacquire` (not called by kreplay; position only).
    pub hsa_signal_or_scacquire_fn: *const c_void,
    /// `hsa_signal_or_screlease` (not called by kreplay; position only).
    pub hsa_signal_or_screlease_fn: *const c_void,
    /// `hsa_signal_or_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_or_scacq_screl_fn: *const c_void,
    /// `hsa_signal_xor_relaxed` (not called by kreplay; position only).
    pub hsa_signal_xor_relaxed_fn: *const c_void,
    /// `hsa_signal_xor_scacquire` (not called by kreplay; position only).
    pub hsa_signal_xor_scacquire_fn: *const c_void,
    /// `hsa_signal_xor_screlease` (not called by kreplay; position only).
    pub hsa_signal_xor_screlease_fn: *const c_void,
    /// `hsa_signal_xor_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_xor_scacq_screl_fn: *const c_void,
    /// `hsa_signal_exchange_relaxed` (not called by kreplay; position only).
    pub hsa_signal_exchange_relaxed_fn: *const c_void,
    /// `hsa_signal_exchange_scacquire` (not called by kreplay; position only).
    pub hsa_signal_exchange_scacquire_fn: *const c_void,
    /// `hsa_signal_exchange_screlease` (not called by kreplay; position only).
    pub hsa_signal_exchange_screlease_fn: *const c_void,
    /// `hsa_signal_exchange_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_exchange_scacq_screl_fn: *const c_void,
    /// `hsa_signal_add_relaxed` (not called by kreplay; position only).
    pub hsa_signal_add_relaxed_fn: *const c_void,
    /// `hsa_signal_add_scacquire` (not called by kreplay; position only).
    pub hsa_signal_add_scacquire_fn: *const c_void,
    /// `hsa_signal_add_screlease`.
    pub hsa_signal_add_screlease_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t)>,
    /// `hsa_signal_add_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_add_scacq_screl_fn: *const c_void,
    /// `hsa_signal_subtract_relaxed` (not called by kreplay; position only).
    pub hsa_signal_subtract_relaxed_fn: *const c_void,
    /// `hsa_signal_subtract_scacquire` (not called by kreplay; position only).
    pub hsa_signal_subtract_scacquire_fn: *const c_void,
    /// `hsa_signal_subtract_screlease`.
    pub hsa_signal_subtract_screlease_fn:
        Option<unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t)>,
    /// `hsa_signal_subtract_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_subtract_scacq_screl_fn: *const c_void,
    /// `hsa_signal_cas_relaxed` (not called by kreplay; position only).
    pub hsa_signal_cas_relaxed_fn: *const c_void,
    /// `hsa_signal_cas_scacquire` (not called by kreplay; position only).
    pub hsa_signal_cas_scacquire_fn: *const c_void,
    /// `hsa_signal_cas_screlease` (not called by kreplay; position only).
    pub hsa_signal_cas_screlease_fn: *const c_void,
    /// `hsa_signal_cas_scacq_screl` (not called by kreplay; position only).
    pub hsa_signal_cas_scacq_screl_fn: *const c_void,
    /// `hsa_isa_from_name` (not called by kreplay; position only).
    pub hsa_isa_from_name_fn: *const c_void,
    /// `hsa_isa_get_info` (not called by kreplay; position only).
    pub hsa_isa_get_info_fn: *const c_void,
    /// `hsa_isa_compatible` (not called by kreplay; position only).
    pub hsa_isa_compatible_fn: *const c_void,
    /// `hsa_code_object_serialize` (not called by kreplay; position only).
    pub hsa_code_object_serialize_fn: *const c_void,
    /// `hsa_code_object_deserialize` (not called by kreplay; position only).
    pub hsa_code_object_deserialize_fn: *const c_void,
    /// `hsa_code_object_destroy` (not called by kreplay; position only).
    pub hsa_code_object_destroy_fn: *const c_void,
    /// `hsa_code_object_get_info` (not called by kreplay; position only).
    pub hsa_code_object_get_info_fn: *const c_void,
    /// `hsa_code_object_get_symbol` (not called by kreplay; position only).
    pub hsa_code_object_get_symbol_fn: *const c_void,
    /// `hsa_code_symbol_get_info` (not called by kreplay; position only).
    pub hsa_code_symbol_get_info_fn: *const c_void,
    /// `hsa_code_object_iterate_symbols` (not called by kreplay; position only).
    pub hsa_code_object_iterate_symbols_fn: *const c_void,
    /// `hsa_executable_create` (not called by kreplay; position only).
    pub hsa_executable_create_fn: *const c_void,
    /// `hsa_executable_destroy`.
    pub hsa_executable_destroy_fn:
        Option<unsafe extern "C" fn(executable: hsa_executable_t) -> hsa_status_t>,
    /// `hsa_executable_load_code_object` (not called by kreplay; position only).
    pub hsa_executable_load_code_object_fn: *const c_void,
    /// `hsa_executable_freeze`.
    pub hsa_executable_freeze_fn: Option<
        unsafe extern "C" fn(executable: hsa_executable_t, options: *const c_char) -> hsa_status_t,
    >,
    /// `hsa_executable_get_info` (not called by kreplay; position only).
    pub hsa_executable_get_info_fn: *const c_void,
    /// `hsa_executable_global_variable_define` (not called by kreplay; position only).
    pub hsa_executable_global_variable_define_fn: *const c_void,
    /// `hsa_executable_agent_global_variable_define` (not called by kreplay; position only).
    pub hsa_executable_agent_global_variable_define_fn: *const c_void,
    /// `hsa_executable_readonly_variable_define` (not called by kreplay; position only).
    pub hsa_executable_readonly_variable_define_fn: *const c_void,
    /// `hsa_executable_validate` (not called by kreplay; position only).
    pub hsa_executable_validate_fn: *const c_void,
    /// `hsa_executable_get_symbol` (not called by kreplay; position only).
    pub hsa_executable_get_symbol_fn: *const c_void,
    /// `hsa_executable_symbol_get_info`.
    pub hsa_executable_symbol_get_info_fn: Option<
        unsafe extern "C" fn(
            symbol: hsa_executable_symbol_t,
            attribute: u32,
            value: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_executable_iterate_symbols` (not called by kreplay; position only).
    pub hsa_executable_iterate_symbols_fn: *const c_void,
    /// `hsa_status_string`.
    pub hsa_status_string_fn: Option<
        unsafe extern "C" fn(
            status: hsa_status_t,
            status_string: *mut *const c_char,
        ) -> hsa_status_t,
    >,
    /// `hsa_extension_get_name` (not called by kreplay; position only).
    pub hsa_extension_get_name_fn: *const c_void,
    /// `hsa_system_major_extension_supported` (not called by kreplay; position only).
    pub hsa_system_major_extension_supported_fn: *const c_void,
    /// `hsa_system_get_major_extension_table`.
    pub hsa_system_get_major_extension_table_fn: Option<
        unsafe extern "C" fn(
            extension: u16,
            version_major: u16,
            table_length: usize,
            table: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_agent_major_extension_supported` (not called by kreplay; position only).
    pub hsa_agent_major_extension_supported_fn: *const c_void,
    /// `hsa_cache_get_info` (not called by kreplay; position only).
    pub hsa_cache_get_info_fn: *const c_void,
    /// `hsa_agent_iterate_caches` (not called by kreplay; position only).
    pub hsa_agent_iterate_caches_fn: *const c_void,
    /// `hsa_signal_silent_store_relaxed` (not called by kreplay; position only).
    pub hsa_signal_silent_store_relaxed_fn: *const c_void,
    /// `hsa_signal_silent_store_screlease` (not called by kreplay; position only).
    pub hsa_signal_silent_store_screlease_fn: *const c_void,
    /// `hsa_signal_group_create` (not called by kreplay; position only).
    pub hsa_signal_group_create_fn: *const c_void,
    /// `hsa_signal_group_destroy` (not called by kreplay; position only).
    pub hsa_signal_group_destroy_fn: *const c_void,
    /// `hsa_signal_group_wait_any_scacquire` (not called by kreplay; position only).
    pub hsa_signal_group_wait_any_scacquire_fn: *const c_void,
    /// `hsa_signal_group_wait_any_relaxed` (not called by kreplay; position only).
    pub hsa_signal_group_wait_any_relaxed_fn: *const c_void,
    /// `hsa_agent_iterate_isas` (not called by kreplay; position only).
    pub hsa_agent_iterate_isas_fn: *const c_void,
    /// `hsa_isa_get_info_alt` (not called by kreplay; position only).
    pub hsa_isa_get_info_alt_fn: *const c_void,
    /// `hsa_isa_get_exception_policies` (not called by kreplay; position only).
    pub hsa_isa_get_exception_policies_fn: *const c_void,
    /// `hsa_isa_get_round_method` (not called by kreplay; position only).
    pub hsa_isa_get_round_method_fn: *const c_void,
    /// `hsa_wavefront_get_info` (not called by kreplay; position only).
    pub hsa_wavefront_get_info_fn: *const c_void,
    /// `hsa_isa_iterate_wavefronts` (not called by kreplay; position only).
    pub hsa_isa_iterate_wavefronts_fn: *const c_void,
    /// `hsa_code_object_get_symbol_from_name` (not called by kreplay; position only).
    pub hsa_code_object_get_symbol_from_name_fn: *const c_void,
    /// `hsa_code_object_reader_create_from_file` (not called by kreplay; position only).
    pub hsa_code_object_reader_create_from_file_fn: *const c_void,
    /// `hsa_code_object_reader_create_from_memory` (not called by kreplay; position only).
    pub hsa_code_object_reader_create_from_memory_fn: *const c_void,
    /// `hsa_code_object_reader_destroy` (not called by kreplay; position only).
    pub hsa_code_object_reader_destroy_fn: *const c_void,
    /// `hsa_executable_create_alt` (not called by kreplay; position only).
    pub hsa_executable_create_alt_fn: *const c_void,
    /// `hsa_executable_load_program_code_object` (not called by kreplay; position only).
    pub hsa_executable_load_program_code_object_fn: *const c_void,
    /// `hsa_executable_load_agent_code_object`.
    pub hsa_executable_load_agent_code_object_fn: Option<
        unsafe extern "C" fn(
            executable: hsa_executable_t,
            agent: hsa_agent_t,
            reader: hsa_code_object_reader_t,
            options: *const c_char,
            loaded_code_object: *mut hsa_loaded_code_object_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_executable_validate_alt` (not called by kreplay; position only).
    pub hsa_executable_validate_alt_fn: *const c_void,
    /// `hsa_executable_get_symbol_by_name`.
    pub hsa_executable_get_symbol_by_name_fn: Option<
        unsafe extern "C" fn(
            executable: hsa_executable_t,
            symbol_name: *const c_char,
            agent: *const hsa_agent_t,
            symbol: *mut hsa_executable_symbol_t,
        ) -> hsa_status_t,
    >,
    /// `hsa_executable_iterate_agent_symbols`.
    pub hsa_executable_iterate_agent_symbols_fn: Option<
        unsafe extern "C" fn(
            executable: hsa_executable_t,
            agent: hsa_agent_t,
            callback: hsa_agent_symbol_callback,
            data: *mut c_void,
        ) -> hsa_status_t,
    >,
    /// `hsa_executable_iterate_program_symbols` (not called by kreplay; position only).
    pub hsa_executable_iterate_program_symbols_fn: *const c_void,
}
