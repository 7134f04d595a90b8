/* system.c - system information, extension queries (AMD loader table), status strings. */
#include <hsa/hsa_ven_amd_loader.h>

#include "sim.h"

hsa_status_t sim_hsa_system_get_info(hsa_system_info_t attr, void* value) {
  SIM_CHECK_INIT();
  if (!value) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch ((int)attr) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR: *(uint16_t*)value = 1; break;
    case HSA_SYSTEM_INFO_VERSION_MINOR: *(uint16_t*)value = 1; break;
    case HSA_SYSTEM_INFO_TIMESTAMP: *(uint64_t*)value = sim_now_ns(); break;
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: *(uint64_t*)value = 1000000000ull; break;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT: *(uint64_t*)value = UINT64_MAX; break;
    case HSA_SYSTEM_INFO_ENDIANNESS: *(hsa_endianness_t*)value = HSA_ENDIANNESS_LITTLE; break;
    case HSA_SYSTEM_INFO_MACHINE_MODEL: *(hsa_machine_model_t*)value = HSA_MACHINE_MODEL_LARGE; break;
    case HSA_SYSTEM_INFO_EXTENSIONS: {
      uint8_t* bits = (uint8_t*)value;
      memset(bits, 0, 128);
      bits[HSA_EXTENSION_AMD_LOADER / 8] |= (uint8_t)(1u << (HSA_EXTENSION_AMD_LOADER % 8));
      break;
    }
    case HSA_AMD_SYSTEM_INFO_BUILD_VERSION: *(const char**)value = "krsim-1.0"; break;
    case HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED: *(bool*)value = false; break;
    case HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT: *(bool*)value = false; break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_system_extension_supported(uint16_t ext, uint16_t major, uint16_t minor,
                                                bool* result) {
  SIM_CHECK_INIT();
  if (!result) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *result = ext == HSA_EXTENSION_AMD_LOADER && major == 1 && minor <= 3;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_system_major_extension_supported(uint16_t ext, uint16_t major,
                                                      uint16_t* minor, bool* result) {
  SIM_CHECK_INIT();
  if (!result || !minor) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *result = ext == HSA_EXTENSION_AMD_LOADER && major == 1;
  *minor = *result ? 3 : 0;
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t loader_reader_from_file(hsa_file_t f, size_t off, size_t size,
                                            hsa_code_object_reader_t* r) {
  (void)f, (void)off, (void)size, (void)r;
  return HSA_STATUS_ERROR_INVALID_FILE;
}

static hsa_status_t loader_get_info(hsa_loaded_code_object_t lco,
                                    hsa_ven_amd_loader_loaded_code_object_info_t attr, void* v) {
  return sim_loader_loaded_code_object_get_info(lco, (int)attr, v);
}

static void fill_loader_table(void* table, size_t len) {
  hsa_ven_amd_loader_1_03_pfn_t t;
  memset(&t, 0, sizeof t);
  t.hsa_ven_amd_loader_query_host_address = sim_loader_query_host_address;
  t.hsa_ven_amd_loader_query_segment_descriptors = sim_loader_segment_descriptors;
  t.hsa_ven_amd_loader_query_executable = sim_loader_query_executable;
  t.hsa_ven_amd_loader_executable_iterate_loaded_code_objects =
      sim_loader_iterate_loaded_code_objects;
  t.hsa_ven_amd_loader_loaded_code_object_get_info = loader_get_info;
  t.hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size =
      loader_reader_from_file;
  t.hsa_ven_amd_loader_iterate_executables = sim_loader_iterate_executables;
  memcpy(table, &t, len < sizeof t ? len : sizeof t);
}

hsa_status_t sim_hsa_system_get_major_extension_table(uint16_t ext, uint16_t major, size_t len,
                                                      void* table) {
  SIM_CHECK_INIT();
  if (!table) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (ext != HSA_EXTENSION_AMD_LOADER || major != 1) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  fill_loader_table(table, len);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_system_get_extension_table(uint16_t ext, uint16_t major, uint16_t minor,
                                                void* table) {
  SIM_CHECK_INIT();
  if (!table) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (ext != HSA_EXTENSION_AMD_LOADER || major != 1) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  size_t len = minor >= 3   ? sizeof(hsa_ven_amd_loader_1_03_pfn_t)
               : minor == 2 ? sizeof(hsa_ven_amd_loader_1_02_pfn_t)
               : minor == 1 ? sizeof(hsa_ven_amd_loader_1_01_pfn_t)
                            : sizeof(hsa_ven_amd_loader_1_00_pfn_t);
  fill_loader_table(table, len);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_agent_extension_supported(uint16_t ext, hsa_agent_t agent, uint16_t major,
                                               uint16_t minor, bool* result) {
  SIM_CHECK_INIT();
  if (!result) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sim_agent_from(agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  (void)ext, (void)major, (void)minor;
  *result = false;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_agent_major_extension_supported(uint16_t ext, hsa_agent_t agent,
                                                     uint16_t major, uint16_t* minor,
                                                     bool* result) {
  SIM_CHECK_INIT();
  if (!result || !minor) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sim_agent_from(agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  (void)ext, (void)major;
  *result = false;
  *minor = 0;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_status_string(hsa_status_t status, const char** out) {
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const char* s;
  switch ((int)status) {
    case HSA_STATUS_SUCCESS: s = "HSA_STATUS_SUCCESS: The function has been executed successfully."; break;
    case HSA_STATUS_INFO_BREAK: s = "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted by the application before completing."; break;
    case HSA_STATUS_ERROR: s = "HSA_STATUS_ERROR: A generic error has occurred."; break;
    case HSA_STATUS_ERROR_INVALID_ARGUMENT: s = "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a precondition stated in the documentation of the corresponding formal argument."; break;
    case HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: s = "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: The requested queue creation is not valid."; break;
    case HSA_STATUS_ERROR_INVALID_ALLOCATION: s = "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid."; break;
    case HSA_STATUS_ERROR_INVALID_AGENT: s = "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_REGION: s = "HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_SIGNAL: s = "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_QUEUE: s = "HSA_STATUS_ERROR_INVALID_QUEUE: The queue is invalid."; break;
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES: s = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."; break;
    case HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: s = "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: The AQL packet is malformed."; break;
    case HSA_STATUS_ERROR_RESOURCE_FREE: s = "HSA_STATUS_ERROR_RESOURCE_FREE: An error has been detected while releasing a resource."; break;
    case HSA_STATUS_ERROR_NOT_INITIALIZED: s = "HSA_STATUS_ERROR_NOT_INITIALIZED: An API other than hsa_init has been invoked while the reference count of the HSA runtime is zero."; break;
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT: s = "HSA_STATUS_ERROR_INVALID_CODE_OBJECT: The code object is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE: s = "HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid."; break;
    case HSA_STATUS_ERROR_FROZEN_EXECUTABLE: s = "HSA_STATUS_ERROR_FROZEN_EXECUTABLE: The executable is frozen."; break;
    case HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: s = "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: There is no symbol with the given name."; break;
    case HSA_STATUS_ERROR_VARIABLE_UNDEFINED: s = "HSA_STATUS_ERROR_VARIABLE_UNDEFINED: The variable is undefined."; break;
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: s = "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: The executable symbol is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: s = "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: The code object reader is invalid."; break;
    case HSA_STATUS_ERROR_INVALID_MEMORY_POOL: s = "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid."; break;
    case HSA_STATUS_ERROR_MEMORY_FAULT: s = "HSA_STATUS_ERROR_MEMORY_FAULT: Agent attempted to access an inaccessible address."; break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  *out = s;
  return HSA_STATUS_SUCCESS;
}
