/* hsa_pools: agents, pools (flags, sizes, granule), regions, hsa_memory_allocate, refcounted init. */
#include "hsa_test_util.h"

static hsa_status_t count_pool(hsa_amd_memory_pool_t p, void* d) {
  (void)p;
  ++*(int*)d;
  return HSA_STATUS_SUCCESS;
}

typedef struct { hsa_region_t r[4]; uint32_t flags[4]; int n; } regions_t;
static hsa_status_t collect_region(hsa_region_t r, void* d) {
  regions_t* s = d;
  CHECK_OK(hsa_region_get_info(r, HSA_REGION_INFO_GLOBAL_FLAGS, &s->flags[s->n]));
  s->r[s->n++] = r;
  return HSA_STATUS_SUCCESS;
}

int main(void) {
  setenv("KRSIM_GPUS", "2", 1);
  setenv("KRSIM_DEVICE_MEM_MB", "256", 1);
  CHECK_EQ(hsa_iterate_agents(collect_agent, NULL), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_OK(hsa_init());
  CHECK_OK(hsa_init()); /* refcounted */
  agents_t ag = get_agents();
  CHECK_EQ(ag.ngpu, 2);
  uint32_t node = 99;
  CHECK_OK(hsa_agent_get_info(ag.cpu, HSA_AGENT_INFO_NODE, &node));
  CHECK_EQ(node, 0);
  CHECK_OK(hsa_agent_get_info(ag.gpu[1], HSA_AGENT_INFO_NODE, &node));
  CHECK_EQ(node, 2);
  char name[64];
  CHECK_OK(hsa_agent_get_info(ag.gpu[0], HSA_AGENT_INFO_NAME, name));
  CHECK(strcmp(name, "gfx90a") == 0);
  uint32_t wave = 0;
  CHECK_OK(hsa_agent_get_info(ag.gpu[0], HSA_AGENT_INFO_WAVEFRONT_SIZE, &wave));
  CHECK_EQ(wave, 64);

  int n = 0;
  CHECK_OK(hsa_amd_agent_iterate_memory_pools(ag.cpu, count_pool, &n));
  CHECK_EQ(n, 2);
  n = 0;
  CHECK_OK(hsa_amd_agent_iterate_memory_pools(ag.gpu[0], count_pool, &n));
  CHECK_EQ(n, 1);
  hsa_amd_memory_pool_t fine = find_pool(ag.cpu, FINE), karg = find_pool(ag.cpu, KERNARG);
  hsa_amd_memory_pool_t dev0 = find_pool(ag.gpu[0], COARSE), dev1 = find_pool(ag.gpu[1], COARSE);
  size_t size = 0, granule = 0, align = 0;
  bool allowed = false;
  uint32_t seg = 99;
  CHECK_OK(hsa_amd_memory_pool_get_info(dev0, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
  CHECK_EQ(size, 256ull << 20);
  CHECK_OK(hsa_amd_memory_pool_get_info(dev0, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed));
  CHECK(allowed);
  CHECK_OK(hsa_amd_memory_pool_get_info(karg, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &granule));
  CHECK_EQ(granule, 4096);
  CHECK_OK(hsa_amd_memory_pool_get_info(fine, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT, &align));
  CHECK_EQ(align, 4096);
  CHECK_OK(hsa_amd_memory_pool_get_info(fine, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
  CHECK_EQ(seg, HSA_AMD_SEGMENT_GLOBAL);
  hsa_amd_memory_pool_access_t acc;
  CHECK_OK(hsa_amd_agent_memory_pool_get_info(ag.gpu[0], fine, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &acc));
  CHECK_EQ(acc, HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
  CHECK_OK(hsa_amd_agent_memory_pool_get_info(ag.gpu[0], dev1, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &acc));
  CHECK_EQ(acc, HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);

  /* Allocations land in distinct, page-aligned, non-overlapping ranges per GPU. */
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev0, 100, 0, &a));
  CHECK_OK(hsa_amd_memory_pool_allocate(dev0, 5000, 0, &b));
  CHECK_OK(hsa_amd_memory_pool_allocate(dev1, 64, 0, &c));
  CHECK_EQ((uintptr_t)a % 4096, 0);
  CHECK_EQ((uintptr_t)b - (uintptr_t)a, 4096);
  CHECK((uintptr_t)c >= (uintptr_t)a + (256ull << 20));
  memset(b, 0xab, 5000); /* device memory is host-addressable in the sim */
  CHECK_EQ(hsa_amd_memory_pool_allocate(dev0, (256ull << 20) + 1, 0, &c), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_OK(hsa_amd_memory_pool_free(a));
  CHECK_EQ(hsa_amd_memory_pool_free(a), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  void* a2 = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev0, 10, 0, &a2));
  CHECK(a2 == a); /* first fit reuses the hole */
  CHECK_OK(hsa_amd_memory_pool_free(a2));
  CHECK_OK(hsa_amd_memory_pool_free(b));

  /* Allocator stress: random sizes, interleaved frees; every live block keeps its own
   * pattern (no overlap) and pointer info reports exactly its base and size. */
  {
    enum { LIVE = 200, OPS = 4000 };
    unsigned char* blk[LIVE] = {0};
    size_t sz[LIVE] = {0};
    unsigned seed = 12345;
    for (int op = 0; op < OPS; op++) {
      seed = seed * 1103515245u + 12345u;
      int i = (int)((seed >> 8) % LIVE);
      if (blk[i]) {
        for (size_t k = 0; k < sz[i]; k += 997) CHECK_EQ(blk[i][k], (unsigned char)i);
        CHECK_EQ(blk[i][sz[i] - 1], (unsigned char)i);
        CHECK_OK(hsa_amd_memory_pool_free(blk[i]));
        blk[i] = NULL;
      } else {
        sz[i] = 1 + (seed >> 4) % 65536;
        CHECK_OK(hsa_amd_memory_pool_allocate(dev0, sz[i], 0, (void**)&blk[i]));
        memset(blk[i], i, sz[i]);
        hsa_amd_pointer_info_t pi;
        pi.size = sizeof pi;
        CHECK_OK(hsa_amd_pointer_info(blk[i] + sz[i] / 2, &pi, NULL, NULL, NULL));
        CHECK(pi.agentBaseAddress == blk[i]);
        CHECK_EQ(pi.sizeInBytes, sz[i]);
      }
    }
    for (int i = 0; i < LIVE; i++)
      if (blk[i]) {
        for (size_t k = 0; k < sz[i]; k += 997) CHECK_EQ(blk[i][k], (unsigned char)i);
        CHECK_OK(hsa_amd_memory_pool_free(blk[i]));
      }
  }

  /* Regions mirror pools: hsa_memory_allocate through the kernarg region. */
  regions_t rs;
  memset(&rs, 0, sizeof rs);
  CHECK_OK(hsa_agent_iterate_regions(ag.cpu, collect_region, &rs));
  CHECK_EQ(rs.n, 2);
  CHECK_EQ(rs.flags[0], HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
  CHECK_EQ(rs.flags[1], HSA_REGION_GLOBAL_FLAG_KERNARG | HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
  void* k = NULL;
  CHECK_OK(hsa_memory_allocate(rs.r[1], 256, &k));
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK_OK(hsa_amd_pointer_info(k, &info, NULL, NULL, NULL));
  CHECK_EQ(info.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(info.global_flags, KERNARG);
  CHECK_EQ(info.agentOwner.handle, ag.cpu.handle);
  CHECK_OK(hsa_memory_free(k));

  uint64_t freq = 0;
  CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq));
  CHECK_EQ(freq, 1000000000ull);
  const char* s = NULL;
  CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_AGENT, &s));
  CHECK(strncmp(s, "HSA_STATUS_ERROR_INVALID_AGENT", 30) == 0);
  CHECK_OK(hsa_shut_down());
  CHECK_OK(hsa_shut_down());
  CHECK_EQ(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  printf("hsa_pools: PASS\n");
  return 0;
}
