/* hip_tool.c - an HSA_TOOLS_LIB tool that watches what the sim's HIP asks of HSA, through the
 * API table as any tool would: allocations in the kernarg pool and their flags, vmem calls,
 * queue creation, executable freezes. Writes one line of counters to $HIP_TOOL_OUT at
 * OnUnload (HIP shuts HSA down at exit). Built against the sim's table layout (hsa/api_table.h). */
#include <stdio.h>
#include <stdlib.h>

#include "api_table.h"

#define EXPORT __attribute__((visibility("default")))

static krsim_hsa_api_table* table;
static __typeof__(hsa_amd_memory_pool_allocate)* next_allocate;
static __typeof__(hsa_amd_vmem_address_reserve)* next_reserve;
static __typeof__(hsa_amd_vmem_handle_create)* next_handle_create;
static __typeof__(hsa_amd_vmem_map)* next_map;
static __typeof__(hsa_amd_vmem_unmap)* next_unmap;
static __typeof__(hsa_queue_create)* next_queue_create;
static __typeof__(hsa_executable_freeze)* next_freeze;
static int kernarg_allocs, kernarg_exec, other_exec, reserves, handles, maps, unmaps, queues,
    freezes;

static void bump(int* counter) { __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST); }

static hsa_status_t my_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags,
                                void** ptr) {
  uint32_t global = 0;
  table->amd_ext_->hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                                   &global);
  bool exec = flags & HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG;
  if (global & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) {
    bump(&kernarg_allocs);
    if (exec) bump(&kernarg_exec);
  } else if (exec) {
    bump(&other_exec);
  }
  return next_allocate(pool, size, flags, ptr);
}

static hsa_status_t my_reserve(void** va, size_t size, uint64_t address, uint64_t flags) {
  bump(&reserves);
  return next_reserve(va, size, address, flags);
}

static hsa_status_t my_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                     hsa_amd_memory_type_t type, uint64_t flags,
                                     hsa_amd_vmem_alloc_handle_t* handle) {
  bump(&handles);
  return next_handle_create(pool, size, type, flags, handle);
}

static hsa_status_t my_map(void* va, size_t size, size_t offset, hsa_amd_vmem_alloc_handle_t h,
                           uint64_t flags) {
  bump(&maps);
  return next_map(va, size, offset, h, flags);
}

static hsa_status_t my_unmap(void* va, size_t size) {
  bump(&unmaps);
  return next_unmap(va, size);
}

static hsa_status_t my_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                    void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                    uint32_t ps, uint32_t gs, hsa_queue_t** q) {
  bump(&queues);
  return next_queue_create(agent, size, type, cb, data, ps, gs, q);
}

static hsa_status_t my_freeze(hsa_executable_t exec, const char* options) {
  bump(&freezes);
  return next_freeze(exec, options);
}

EXPORT bool OnLoad(void* t, uint64_t runtime_version, uint64_t failed_tool_count,
                   const char* const* failed_tool_names) {
  (void)runtime_version, (void)failed_tool_count, (void)failed_tool_names;
  table = t;
  krsim_amd_ext_table* amd = table->amd_ext_;
  next_allocate = amd->hsa_amd_memory_pool_allocate_fn;
  amd->hsa_amd_memory_pool_allocate_fn = my_allocate;
  next_reserve = amd->hsa_amd_vmem_address_reserve_fn;
  amd->hsa_amd_vmem_address_reserve_fn = my_reserve;
  next_handle_create = amd->hsa_amd_vmem_handle_create_fn;
  amd->hsa_amd_vmem_handle_create_fn = my_handle_create;
  next_map = amd->hsa_amd_vmem_map_fn;
  amd->hsa_amd_vmem_map_fn = my_map;
  next_unmap = amd->hsa_amd_vmem_unmap_fn;
  amd->hsa_amd_vmem_unmap_fn = my_unmap;
  next_queue_create = table->core_->hsa_queue_create_fn;
  table->core_->hsa_queue_create_fn = my_queue_create;
  next_freeze = table->core_->hsa_executable_freeze_fn;
  table->core_->hsa_executable_freeze_fn = my_freeze;
  return true;
}

EXPORT void OnUnload(void) {
  const char* path = getenv("HIP_TOOL_OUT");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f,
          "kernarg_allocs=%d kernarg_exec=%d other_exec=%d vmem_reserve=%d vmem_handle=%d "
          "vmem_map=%d vmem_unmap=%d queues=%d freezes=%d\n",
          kernarg_allocs, kernarg_exec, other_exec, reserves, handles, maps, unmaps, queues,
          freezes);
  fclose(f);
}
