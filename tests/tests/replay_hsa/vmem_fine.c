/* vmem_fine.c - a vmem mapping kreplay cannot snapshot (fine-grained system memory, mapped
 * through the HSA vmem API as hipMemMap would) is live during the second of three launches
 * of `bump` on coarse-grained memory: bump(y) before the mapping, while it is mapped (the
 * kernel also writes the mapped word), after it is unmapped.
 * Usage: vmem_fine [n=2048]
 * Prints `mapped_word` and the checksum of y (checked against a host reference). */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(bump, uint32_t*, y, uint32_t, n, uint32_t*, extra) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] = args->y[i] * 3u + 1u;
  }
  if (args->extra && d->group_id[0] == 0) args->extra[0] += 1u;
}

#define FINE_MODULE(K, V, C) K(bump)
KRSIM_MODULE(fine_module, FINE_MODULE)

#define HSA_CHECK(call)                                                   \
  do {                                                                    \
    hsa_status_t hsa_check_s = (call);                                    \
    if (hsa_check_s != HSA_STATUS_SUCCESS) {                              \
      fprintf(stderr, "%s failed: %#x\n", #call, (unsigned)hsa_check_s); \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

static hsa_status_t find_cpu(hsa_agent_t a, void* out) {
  hsa_device_type_t t;
  HSA_CHECK(hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t));
  if (t == HSA_DEVICE_TYPE_CPU) {
    *(hsa_agent_t*)out = a;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_fine(hsa_amd_memory_pool_t p, void* out) {
  uint32_t flags = 0;
  HSA_CHECK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
  if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) &&
      !(flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)) {
    *(hsa_amd_memory_pool_t*)out = p;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

int main(int argc, char** argv) {
  uint32_t n = (uint32_t)wl_arg(argc, argv, 1, 2048);
  size_t bytes = (size_t)n * sizeof(uint32_t);
  uint32_t* h = malloc(bytes);
  if (!h) return 2;
  for (uint32_t i = 0; i < n; i++) h[i] = i ^ 0x5a5a5a5au;
  uint32_t* y;
  HIP_CHECK(hipMalloc((void**)&y, bytes));
  HIP_CHECK(hipMemcpy(y, h, bytes, hipMemcpyHostToDevice));
  dim3 grid = wl_dim((n + 255) / 256), block = wl_dim(256);

  HIP_CHECK(bump(grid, block, 0, NULL, y, n, NULL));
  HIP_CHECK(hipDeviceSynchronize());

  hsa_agent_t cpu = {0};
  hsa_iterate_agents(find_cpu, &cpu);
  hsa_amd_memory_pool_t fine = {0};
  hsa_amd_agent_iterate_memory_pools(cpu, find_fine, &fine);
  WL_EXPECT(cpu.handle && fine.handle, "no CPU agent or fine-grained pool");
  size_t page = 4096;
  void* va;
  hsa_amd_vmem_alloc_handle_t mem;
  HSA_CHECK(hsa_amd_vmem_address_reserve(&va, page, 0, 0));
  HSA_CHECK(hsa_amd_vmem_handle_create(fine, page, MEMORY_TYPE_NONE, 0, &mem));
  HSA_CHECK(hsa_amd_vmem_map(va, page, 0, mem, 0));
  uint32_t* word = va;
  word[0] = 0;
  HIP_CHECK(bump(grid, block, 0, NULL, y, n, word));
  HIP_CHECK(hipDeviceSynchronize());
  uint32_t mapped_word = word[0];
  HSA_CHECK(hsa_amd_vmem_unmap(va, page));
  HSA_CHECK(hsa_amd_vmem_handle_release(mem));
  HSA_CHECK(hsa_amd_vmem_address_free(va, page));

  HIP_CHECK(bump(grid, block, 0, NULL, y, n, NULL));
  HIP_CHECK(hipDeviceSynchronize());

  uint32_t* out = malloc(bytes);
  if (!out) return 2;
  HIP_CHECK(hipMemcpy(out, y, bytes, hipMemcpyDeviceToHost));
  for (int k = 0; k < 3; k++)
    for (uint32_t i = 0; i < n; i++) h[i] = h[i] * 3u + 1u;
  WL_EXPECT(memcmp(out, h, bytes) == 0, "y differs from three single launches");
  WL_EXPECT(mapped_word == 1, "the mapped word was bumped %u times", mapped_word);
  printf("mapped_word: %u\n", mapped_word);
  printf("checksum: %016" PRIx64 "\n", wl_fnv(WL_FNV_OFFSET, out, bytes));
  HIP_CHECK(hipFree(y));
  free(h);
  free(out);
  return 0;
}
