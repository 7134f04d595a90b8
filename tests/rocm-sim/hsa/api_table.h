/* api_table.h - the sim's C definition of the HSA API table (HsaApiTable and sub-tables).
 *
 * Layout: CoreApiTable, FinalizerExtTable and ImageExtTable exactly as Debian's ROCm 5.2
 * /usr/include/hsa/hsa_api_trace.h; AmdExtTable as current ROCR-Runtime (table major 2),
 * which inserted hsa_amd_memory_async_copy_on_engine/_copy_engine_status after
 * hsa_amd_memory_async_copy and the spm entries before hsa_amd_queue_cu_get_mask, then
 * appended dmabuf, vmem and later entries. HsaApiTable carries tools_ and pc_sampling_ext_
 * as current ROCR does. Every layout here is checked by tests/tests/hsa_layout.rs.
 */
#ifndef KRSIM_API_TABLE_H
#define KRSIM_API_TABLE_H

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "krsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Versions the sim reports (current ROCR values: table major 3, core 2, amd ext 2 step 4). */
#define KRSIM_API_TABLE_MAJOR 3u
#define KRSIM_API_TABLE_STEP 1u
#define KRSIM_CORE_TABLE_MAJOR 2u
#define KRSIM_AMD_EXT_TABLE_MAJOR 2u
#define KRSIM_AMD_EXT_TABLE_STEP 4u
#define KRSIM_FINALIZER_TABLE_MAJOR 2u
#define KRSIM_IMAGE_TABLE_MAJOR 2u
#define KRSIM_TOOLS_TABLE_MAJOR 1u
#define KRSIM_PC_SAMPLING_TABLE_MAJOR 1u

typedef struct krsim_api_table_version {
  uint32_t major_id;
  uint32_t minor_id; /* sizeof(the table) */
  uint32_t step_id;
  uint32_t reserved;
} krsim_api_table_version;

typedef void (*krsim_queue_intercept_writer)(const void* pkts, uint64_t pkt_count);
typedef void (*krsim_queue_intercept_handler)(const void* pkts, uint64_t pkt_count,
                                              uint64_t user_pkt_index, void* data,
                                              krsim_queue_intercept_writer writer);
typedef void (*krsim_runtime_queue_notifier)(const hsa_queue_t* queue, hsa_agent_t agent,
                                             void* data);
#ifndef HSA_RUNTIME_INC_HSA_API_TRACE_H /* the official C++ header declares these */
/* Not exported (table only), as in the real runtime. */
hsa_status_t hsa_amd_queue_intercept_create(
    hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
    void (*callback)(hsa_status_t status, hsa_queue_t* source, void* data), void* data,
    uint32_t private_segment_size, uint32_t group_segment_size, hsa_queue_t** queue);
hsa_status_t hsa_amd_queue_intercept_register(hsa_queue_t* queue,
                                              krsim_queue_intercept_handler callback,
                                              void* user_data);
hsa_status_t hsa_amd_runtime_queue_create_register(krsim_runtime_queue_notifier callback,
                                                   void* user_data);
#endif

typedef struct krsim_core_table {
  krsim_api_table_version version;
  __typeof__(hsa_init)* hsa_init_fn;
  __typeof__(hsa_shut_down)* hsa_shut_down_fn;
  __typeof__(hsa_system_get_info)* hsa_system_get_info_fn;
  __typeof__(hsa_system_extension_supported)* hsa_system_extension_supported_fn;
  __typeof__(hsa_system_get_extension_table)* hsa_system_get_extension_table_fn;
  __typeof__(hsa_iterate_agents)* hsa_iterate_agents_fn;
  __typeof__(hsa_agent_get_info)* hsa_agent_get_info_fn;
  __typeof__(hsa_queue_create)* hsa_queue_create_fn;
  __typeof__(hsa_soft_queue_create)* hsa_soft_queue_create_fn;
  __typeof__(hsa_queue_destroy)* hsa_queue_destroy_fn;
  __typeof__(hsa_queue_inactivate)* hsa_queue_inactivate_fn;
  __typeof__(hsa_queue_load_read_index_scacquire)* hsa_queue_load_read_index_scacquire_fn;
  __typeof__(hsa_queue_load_read_index_relaxed)* hsa_queue_load_read_index_relaxed_fn;
  __typeof__(hsa_queue_load_write_index_scacquire)* hsa_queue_load_write_index_scacquire_fn;
  __typeof__(hsa_queue_load_write_index_relaxed)* hsa_queue_load_write_index_relaxed_fn;
  __typeof__(hsa_queue_store_write_index_relaxed)* hsa_queue_store_write_index_relaxed_fn;
  __typeof__(hsa_queue_store_write_index_screlease)* hsa_queue_store_write_index_screlease_fn;
  __typeof__(hsa_queue_cas_write_index_scacq_screl)* hsa_queue_cas_write_index_scacq_screl_fn;
  __typeof__(hsa_queue_cas_write_index_scacquire)* hsa_queue_cas_write_index_scacquire_fn;
  __typeof__(hsa_queue_cas_write_index_relaxed)* hsa_queue_cas_write_index_relaxed_fn;
  __typeof__(hsa_queue_cas_write_index_screlease)* hsa_queue_cas_write_index_screlease_fn;
  __typeof__(hsa_queue_add_write_index_scacq_screl)* hsa_queue_add_write_index_scacq_screl_fn;
  __typeof__(hsa_queue_add_write_index_scacquire)* hsa_queue_add_write_index_scacquire_fn;
  __typeof__(hsa_queue_add_write_index_relaxed)* hsa_queue_add_write_index_relaxed_fn;
  __typeof__(hsa_queue_add_write_index_screlease)* hsa_queue_add_write_index_screlease_fn;
  __typeof__(hsa_queue_store_read_index_relaxed)* hsa_queue_store_read_index_relaxed_fn;
  __typeof__(hsa_queue_store_read_index_screlease)* hsa_queue_store_read_index_screlease_fn;
  __typeof__(hsa_agent_iterate_regions)* hsa_agent_iterate_regions_fn;
  __typeof__(hsa_region_get_info)* hsa_region_get_info_fn;
  __typeof__(hsa_agent_get_exception_policies)* hsa_agent_get_exception_policies_fn;
  __typeof__(hsa_agent_extension_supported)* hsa_agent_extension_supported_fn;
  __typeof__(hsa_memory_register)* hsa_memory_register_fn;
  __typeof__(hsa_memory_deregister)* hsa_memory_deregister_fn;
  __typeof__(hsa_memory_allocate)* hsa_memory_allocate_fn;
  __typeof__(hsa_memory_free)* hsa_memory_free_fn;
  __typeof__(hsa_memory_copy)* hsa_memory_copy_fn;
  __typeof__(hsa_memory_assign_agent)* hsa_memory_assign_agent_fn;
  __typeof__(hsa_signal_create)* hsa_signal_create_fn;
  __typeof__(hsa_signal_destroy)* hsa_signal_destroy_fn;
  __typeof__(hsa_signal_load_relaxed)* hsa_signal_load_relaxed_fn;
  __typeof__(hsa_signal_load_scacquire)* hsa_signal_load_scacquire_fn;
  __typeof__(hsa_signal_store_relaxed)* hsa_signal_store_relaxed_fn;
  __typeof__(hsa_signal_store_screlease)* hsa_signal_store_screlease_fn;
  __typeof__(hsa_signal_wait_relaxed)* hsa_signal_wait_relaxed_fn;
  __typeof__(hsa_signal_wait_scacquire)* hsa_signal_wait_scacquire_fn;
  __typeof__(hsa_signal_and_relaxed)* hsa_signal_and_relaxed_fn;
  __typeof__(hsa_signal_and_scacquire)* hsa_signal_and_scacquire_fn;
  __typeof__(hsa_signal_and_screlease)* hsa_signal_and_screlease_fn;
  __typeof__(hsa_signal_and_scacq_screl)* hsa_signal_and_scacq_screl_fn;
  __typeof__(hsa_signal_or_relaxed)* hsa_signal_or_relaxed_fn;
  __typeof__(hsa_signal_or_scacquire)* hsa_signal_or_scacquire_fn;
  __typeof__(hsa_signal_or_screlease)* hsa_signal_or_screlease_fn;
  __typeof__(hsa_signal_or_scacq_screl)* hsa_signal_or_scacq_screl_fn;
  __typeof__(hsa_signal_xor_relaxed)* hsa_signal_xor_relaxed_fn;
  __typeof__(hsa_signal_xor_scacquire)* hsa_signal_xor_scacquire_fn;
  __typeof__(hsa_signal_xor_screlease)* hsa_signal_xor_screlease_fn;
  __typeof__(hsa_signal_xor_scacq_screl)* hsa_signal_xor_scacq_screl_fn;
  __typeof__(hsa_signal_exchange_relaxed)* hsa_signal_exchange_relaxed_fn;
  __typeof__(hsa_signal_exchange_scacquire)* hsa_signal_exchange_scacquire_fn;
  __typeof__(hsa_signal_exchange_screlease)* hsa_signal_exchange_screlease_fn;
  __typeof__(hsa_signal_exchange_scacq_screl)* hsa_signal_exchange_scacq_screl_fn;
  __typeof__(hsa_signal_add_relaxed)* hsa_signal_add_relaxed_fn;
  __typeof__(hsa_signal_add_scacquire)* hsa_signal_add_scacquire_fn;
  __typeof__(hsa_signal_add_screlease)* hsa_signal_add_screlease_fn;
  __typeof__(hsa_signal_add_scacq_screl)* hsa_signal_add_scacq_screl_fn;
  __typeof__(hsa_signal_subtract_relaxed)* hsa_signal_subtract_relaxed_fn;
  __typeof__(hsa_signal_subtract_scacquire)* hsa_signal_subtract_scacquire_fn;
  __typeof__(hsa_signal_subtract_screlease)* hsa_signal_subtract_screlease_fn;
  __typeof__(hsa_signal_subtract_scacq_screl)* hsa_signal_subtract_scacq_screl_fn;
  __typeof__(hsa_signal_cas_relaxed)* hsa_signal_cas_relaxed_fn;
  __typeof__(hsa_signal_cas_scacquire)* hsa_signal_cas_scacquire_fn;
  __typeof__(hsa_signal_cas_screlease)* hsa_signal_cas_screlease_fn;
  __typeof__(hsa_signal_cas_scacq_screl)* hsa_signal_cas_scacq_screl_fn;
  __typeof__(hsa_isa_from_name)* hsa_isa_from_name_fn;
  __typeof__(hsa_isa_get_info)* hsa_isa_get_info_fn;
  __typeof__(hsa_isa_compatible)* hsa_isa_compatible_fn;
  __typeof__(hsa_code_object_serialize)* hsa_code_object_serialize_fn;
  __typeof__(hsa_code_object_deserialize)* hsa_code_object_deserialize_fn;
  __typeof__(hsa_code_object_destroy)* hsa_code_object_destroy_fn;
  __typeof__(hsa_code_object_get_info)* hsa_code_object_get_info_fn;
  __typeof__(hsa_code_object_get_symbol)* hsa_code_object_get_symbol_fn;
  __typeof__(hsa_code_symbol_get_info)* hsa_code_symbol_get_info_fn;
  __typeof__(hsa_code_object_iterate_symbols)* hsa_code_object_iterate_symbols_fn;
  __typeof__(hsa_executable_create)* hsa_executable_create_fn;
  __typeof__(hsa_executable_destroy)* hsa_executable_destroy_fn;
  __typeof__(hsa_executable_load_code_object)* hsa_executable_load_code_object_fn;
  __typeof__(hsa_executable_freeze)* hsa_executable_freeze_fn;
  __typeof__(hsa_executable_get_info)* hsa_executable_get_info_fn;
  __typeof__(hsa_executable_global_variable_define)* hsa_executable_global_variable_define_fn;
  __typeof__(hsa_executable_agent_global_variable_define)* hsa_executable_agent_global_variable_define_fn;
  __typeof__(hsa_executable_readonly_variable_define)* hsa_executable_readonly_variable_define_fn;
  __typeof__(hsa_executable_validate)* hsa_executable_validate_fn;
  __typeof__(hsa_executable_get_symbol)* hsa_executable_get_symbol_fn;
  __typeof__(hsa_executable_symbol_get_info)* hsa_executable_symbol_get_info_fn;
  __typeof__(hsa_executable_iterate_symbols)* hsa_executable_iterate_symbols_fn;
  __typeof__(hsa_status_string)* hsa_status_string_fn;
  __typeof__(hsa_extension_get_name)* hsa_extension_get_name_fn;
  __typeof__(hsa_system_major_extension_supported)* hsa_system_major_extension_supported_fn;
  __typeof__(hsa_system_get_major_extension_table)* hsa_system_get_major_extension_table_fn;
  __typeof__(hsa_agent_major_extension_supported)* hsa_agent_major_extension_supported_fn;
  __typeof__(hsa_cache_get_info)* hsa_cache_get_info_fn;
  __typeof__(hsa_agent_iterate_caches)* hsa_agent_iterate_caches_fn;
  __typeof__(hsa_signal_silent_store_relaxed)* hsa_signal_silent_store_relaxed_fn;
  __typeof__(hsa_signal_silent_store_screlease)* hsa_signal_silent_store_screlease_fn;
  __typeof__(hsa_signal_group_create)* hsa_signal_group_create_fn;
  __typeof__(hsa_signal_group_destroy)* hsa_signal_group_destroy_fn;
  __typeof__(hsa_signal_group_wait_any_scacquire)* hsa_signal_group_wait_any_scacquire_fn;
  __typeof__(hsa_signal_group_wait_any_relaxed)* hsa_signal_group_wait_any_relaxed_fn;
  __typeof__(hsa_agent_iterate_isas)* hsa_agent_iterate_isas_fn;
  __typeof__(hsa_isa_get_info_alt)* hsa_isa_get_info_alt_fn;
  __typeof__(hsa_isa_get_exception_policies)* hsa_isa_get_exception_policies_fn;
  __typeof__(hsa_isa_get_round_method)* hsa_isa_get_round_method_fn;
  __typeof__(hsa_wavefront_get_info)* hsa_wavefront_get_info_fn;
  __typeof__(hsa_isa_iterate_wavefronts)* hsa_isa_iterate_wavefronts_fn;
  __typeof__(hsa_code_object_get_symbol_from_name)* hsa_code_object_get_symbol_from_name_fn;
  __typeof__(hsa_code_object_reader_create_from_file)* hsa_code_object_reader_create_from_file_fn;
  __typeof__(hsa_code_object_reader_create_from_memory)* hsa_code_object_reader_create_from_memory_fn;
  __typeof__(hsa_code_object_reader_destroy)* hsa_code_object_reader_destroy_fn;
  __typeof__(hsa_executable_create_alt)* hsa_executable_create_alt_fn;
  __typeof__(hsa_executable_load_program_code_object)* hsa_executable_load_program_code_object_fn;
  __typeof__(hsa_executable_load_agent_code_object)* hsa_executable_load_agent_code_object_fn;
  __typeof__(hsa_executable_validate_alt)* hsa_executable_validate_alt_fn;
  __typeof__(hsa_executable_get_symbol_by_name)* hsa_executable_get_symbol_by_name_fn;
  __typeof__(hsa_executable_iterate_agent_symbols)* hsa_executable_iterate_agent_symbols_fn;
  __typeof__(hsa_executable_iterate_program_symbols)* hsa_executable_iterate_program_symbols_fn;
} krsim_core_table;

typedef struct krsim_amd_ext_table {
  krsim_api_table_version version;
  __typeof__(hsa_amd_coherency_get_type)* hsa_amd_coherency_get_type_fn;
  __typeof__(hsa_amd_coherency_set_type)* hsa_amd_coherency_set_type_fn;
  __typeof__(hsa_amd_profiling_set_profiler_enabled)* hsa_amd_profiling_set_profiler_enabled_fn;
  __typeof__(hsa_amd_profiling_async_copy_enable)* hsa_amd_profiling_async_copy_enable_fn;
  __typeof__(hsa_amd_profiling_get_dispatch_time)* hsa_amd_profiling_get_dispatch_time_fn;
  __typeof__(hsa_amd_profiling_get_async_copy_time)* hsa_amd_profiling_get_async_copy_time_fn;
  __typeof__(hsa_amd_profiling_convert_tick_to_system_domain)* hsa_amd_profiling_convert_tick_to_system_domain_fn;
  __typeof__(hsa_amd_signal_async_handler)* hsa_amd_signal_async_handler_fn;
  __typeof__(hsa_amd_async_function)* hsa_amd_async_function_fn;
  __typeof__(hsa_amd_signal_wait_any)* hsa_amd_signal_wait_any_fn;
  __typeof__(hsa_amd_queue_cu_set_mask)* hsa_amd_queue_cu_set_mask_fn;
  __typeof__(hsa_amd_memory_pool_get_info)* hsa_amd_memory_pool_get_info_fn;
  __typeof__(hsa_amd_agent_iterate_memory_pools)* hsa_amd_agent_iterate_memory_pools_fn;
  __typeof__(hsa_amd_memory_pool_allocate)* hsa_amd_memory_pool_allocate_fn;
  __typeof__(hsa_amd_memory_pool_free)* hsa_amd_memory_pool_free_fn;
  __typeof__(hsa_amd_memory_async_copy)* hsa_amd_memory_async_copy_fn;
  void* hsa_amd_memory_async_copy_on_engine_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_memory_copy_engine_status_fn; /* newer than the 5.2 headers; not provided by the sim */
  __typeof__(hsa_amd_agent_memory_pool_get_info)* hsa_amd_agent_memory_pool_get_info_fn;
  __typeof__(hsa_amd_agents_allow_access)* hsa_amd_agents_allow_access_fn;
  __typeof__(hsa_amd_memory_pool_can_migrate)* hsa_amd_memory_pool_can_migrate_fn;
  __typeof__(hsa_amd_memory_migrate)* hsa_amd_memory_migrate_fn;
  __typeof__(hsa_amd_memory_lock)* hsa_amd_memory_lock_fn;
  __typeof__(hsa_amd_memory_unlock)* hsa_amd_memory_unlock_fn;
  __typeof__(hsa_amd_memory_fill)* hsa_amd_memory_fill_fn;
  __typeof__(hsa_amd_interop_map_buffer)* hsa_amd_interop_map_buffer_fn;
  __typeof__(hsa_amd_interop_unmap_buffer)* hsa_amd_interop_unmap_buffer_fn;
  __typeof__(hsa_amd_image_create)* hsa_amd_image_create_fn;
  __typeof__(hsa_amd_pointer_info)* hsa_amd_pointer_info_fn;
  __typeof__(hsa_amd_pointer_info_set_userdata)* hsa_amd_pointer_info_set_userdata_fn;
  __typeof__(hsa_amd_ipc_memory_create)* hsa_amd_ipc_memory_create_fn;
  __typeof__(hsa_amd_ipc_memory_attach)* hsa_amd_ipc_memory_attach_fn;
  __typeof__(hsa_amd_ipc_memory_detach)* hsa_amd_ipc_memory_detach_fn;
  __typeof__(hsa_amd_signal_create)* hsa_amd_signal_create_fn;
  __typeof__(hsa_amd_ipc_signal_create)* hsa_amd_ipc_signal_create_fn;
  __typeof__(hsa_amd_ipc_signal_attach)* hsa_amd_ipc_signal_attach_fn;
  __typeof__(hsa_amd_register_system_event_handler)* hsa_amd_register_system_event_handler_fn;
  __typeof__(hsa_amd_queue_intercept_create)* hsa_amd_queue_intercept_create_fn;
  __typeof__(hsa_amd_queue_intercept_register)* hsa_amd_queue_intercept_register_fn;
  __typeof__(hsa_amd_queue_set_priority)* hsa_amd_queue_set_priority_fn;
  __typeof__(hsa_amd_memory_async_copy_rect)* hsa_amd_memory_async_copy_rect_fn;
  __typeof__(hsa_amd_runtime_queue_create_register)* hsa_amd_runtime_queue_create_register_fn;
  __typeof__(hsa_amd_memory_lock_to_pool)* hsa_amd_memory_lock_to_pool_fn;
  __typeof__(hsa_amd_register_deallocation_callback)* hsa_amd_register_deallocation_callback_fn;
  __typeof__(hsa_amd_deregister_deallocation_callback)* hsa_amd_deregister_deallocation_callback_fn;
  __typeof__(hsa_amd_signal_value_pointer)* hsa_amd_signal_value_pointer_fn;
  __typeof__(hsa_amd_svm_attributes_set)* hsa_amd_svm_attributes_set_fn;
  __typeof__(hsa_amd_svm_attributes_get)* hsa_amd_svm_attributes_get_fn;
  __typeof__(hsa_amd_svm_prefetch_async)* hsa_amd_svm_prefetch_async_fn;
  void* hsa_amd_spm_acquire_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_spm_release_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_spm_set_dest_buffer_fn; /* newer than the 5.2 headers; not provided by the sim */
  __typeof__(hsa_amd_queue_cu_get_mask)* hsa_amd_queue_cu_get_mask_fn;
  void* hsa_amd_portable_export_dmabuf_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_portable_close_dmabuf_fn; /* newer than the 5.2 headers; not provided by the sim */
  __typeof__(hsa_amd_vmem_address_reserve)* hsa_amd_vmem_address_reserve_fn;
  __typeof__(hsa_amd_vmem_address_free)* hsa_amd_vmem_address_free_fn;
  __typeof__(hsa_amd_vmem_handle_create)* hsa_amd_vmem_handle_create_fn;
  __typeof__(hsa_amd_vmem_handle_release)* hsa_amd_vmem_handle_release_fn;
  __typeof__(hsa_amd_vmem_map)* hsa_amd_vmem_map_fn;
  __typeof__(hsa_amd_vmem_unmap)* hsa_amd_vmem_unmap_fn;
  void* hsa_amd_vmem_set_access_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_get_access_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_export_shareable_handle_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_import_shareable_handle_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_retain_alloc_handle_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_get_alloc_properties_from_handle_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_agent_set_async_scratch_limit_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_queue_get_info_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_vmem_address_reserve_align_fn; /* newer than the 5.2 headers; not provided by the sim */
  void* hsa_amd_enable_logging_fn; /* newer than the 5.2 headers; not provided by the sim */
} krsim_amd_ext_table;

typedef struct krsim_finalizer_ext_table {
  krsim_api_table_version version;
  __typeof__(hsa_ext_program_create)* hsa_ext_program_create_fn;
  __typeof__(hsa_ext_program_destroy)* hsa_ext_program_destroy_fn;
  __typeof__(hsa_ext_program_add_module)* hsa_ext_program_add_module_fn;
  __typeof__(hsa_ext_program_iterate_modules)* hsa_ext_program_iterate_modules_fn;
  __typeof__(hsa_ext_program_get_info)* hsa_ext_program_get_info_fn;
  __typeof__(hsa_ext_program_finalize)* hsa_ext_program_finalize_fn;
} krsim_finalizer_ext_table;

typedef struct krsim_image_ext_table {
  krsim_api_table_version version;
  __typeof__(hsa_ext_image_get_capability)* hsa_ext_image_get_capability_fn;
  __typeof__(hsa_ext_image_data_get_info)* hsa_ext_image_data_get_info_fn;
  __typeof__(hsa_ext_image_create)* hsa_ext_image_create_fn;
  __typeof__(hsa_ext_image_import)* hsa_ext_image_import_fn;
  __typeof__(hsa_ext_image_export)* hsa_ext_image_export_fn;
  __typeof__(hsa_ext_image_copy)* hsa_ext_image_copy_fn;
  __typeof__(hsa_ext_image_clear)* hsa_ext_image_clear_fn;
  __typeof__(hsa_ext_image_destroy)* hsa_ext_image_destroy_fn;
  __typeof__(hsa_ext_sampler_create)* hsa_ext_sampler_create_fn;
  __typeof__(hsa_ext_sampler_destroy)* hsa_ext_sampler_destroy_fn;
  __typeof__(hsa_ext_image_get_capability_with_layout)* hsa_ext_image_get_capability_with_layout_fn;
  __typeof__(hsa_ext_image_data_get_info_with_layout)* hsa_ext_image_data_get_info_with_layout_fn;
  __typeof__(hsa_ext_image_create_with_layout)* hsa_ext_image_create_with_layout_fn;
} krsim_image_ext_table;
typedef struct krsim_tools_table {
  krsim_api_table_version version;
  void* hsa_amd_tool_scratch_event_alloc_start_fn;
  void* hsa_amd_tool_scratch_event_alloc_end_fn;
  void* hsa_amd_tool_scratch_event_free_start_fn;
  void* hsa_amd_tool_scratch_event_free_end_fn;
  void* hsa_amd_tool_scratch_event_async_reclaim_start_fn;
  void* hsa_amd_tool_scratch_event_async_reclaim_end_fn;
} krsim_tools_table;

typedef struct krsim_pc_sampling_table {
  krsim_api_table_version version;
  void* fns[7];
} krsim_pc_sampling_table;

typedef struct krsim_hsa_api_table {
  krsim_api_table_version version;
  krsim_core_table* core_;
  krsim_amd_ext_table* amd_ext_;
  krsim_finalizer_ext_table* finalizer_ext_;
  krsim_image_ext_table* image_ext_;
  krsim_tools_table* tools_;
  krsim_pc_sampling_table* pc_sampling_ext_;
} krsim_hsa_api_table;

#ifdef __cplusplus
}
#endif

#endif /* KRSIM_API_TABLE_H */
