/* hsa_pointer_info: classification of pool, interior, foreign, locked, loader and vmem memory;
 * the `size` protocol; userData; the EXECUTABLE allocate flag (pages become executable). */
#include "hsa_test_util.h"

/* Permissions of the /proc/self/maps line containing p, e.g. "rwxs". */
static void perms_of(const void* p, char out[5]) {
  FILE* f = fopen("/proc/self/maps", "r");
  CHECK(f);
  char line[512];
  out[0] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perm[5];
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
      memcpy(out, perm, 5);
      break;
    }
  }
  fclose(f);
}

static hsa_amd_pointer_info_t query(const void* p) {
  hsa_amd_pointer_info_t i;
  memset(&i, 0xee, sizeof i);
  i.size = sizeof i;
  CHECK_OK(hsa_amd_pointer_info(p, &i, NULL, NULL, NULL));
  return i;
}

int main(void) {
  CHECK_OK(hsa_init());
  agents_t ag = get_agents();
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE), fine = find_pool(ag.cpu, FINE);
  void *d = NULL, *h = NULL, *x = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, 3 * 4096 + 17, 0, &d));
  CHECK_OK(hsa_amd_memory_pool_allocate(fine, 100, 0, &h));
  CHECK_OK(hsa_amd_memory_pool_allocate(fine, 8192, HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG, &x));

  hsa_amd_pointer_info_t i = query((char*)d + 5000); /* interior pointer */
  CHECK_EQ(i.size, sizeof i);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK(i.agentBaseAddress == d && i.hostBaseAddress == d);
  CHECK_EQ(i.sizeInBytes, 3 * 4096 + 17);
  CHECK_EQ(i.agentOwner.handle, ag.gpu[0].handle);
  CHECK_EQ(i.global_flags, COARSE);
  CHECK(i.userData == NULL);
  i = query((char*)d + 3 * 4096 + 17); /* one past the end: not in the allocation */
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  i = query((char*)h + 99);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(i.agentOwner.handle, ag.cpu.handle);
  CHECK_EQ(i.global_flags, FINE);

  /* userData */
  CHECK_OK(hsa_amd_pointer_info_set_userdata(d, (void*)0x1234));
  CHECK(query((char*)d + 1).userData == (void*)0x1234);

  /* Foreign memory: heap and stack. */
  int local = 0;
  void* heap = malloc(64);
  CHECK_EQ(query(heap).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_EQ(query(&local).type, HSA_EXT_POINTER_TYPE_UNKNOWN);

  /* Size protocol: an old caller (without global_flags) gets exactly its size back and no
   * bytes past it are written. */
  struct {
    hsa_amd_pointer_info_t info;
    char guard[8];
  } small;
  memset(&small, 0x5a, sizeof small);
  uint32_t old_size = (uint32_t)offsetof(hsa_amd_pointer_info_t, global_flags);
  small.info.size = old_size;
  CHECK_OK(hsa_amd_pointer_info(d, &small.info, NULL, NULL, NULL));
  CHECK_EQ(small.info.size, old_size);
  CHECK_EQ(small.info.agentOwner.handle, ag.gpu[0].handle);
  CHECK_EQ((unsigned char)((char*)&small.info)[old_size], 0x5a);
  memset(&small, 0x5a, sizeof small);
  small.info.size = 8; /* size and type only */
  CHECK_OK(hsa_amd_pointer_info(d, &small.info, NULL, NULL, NULL));
  CHECK_EQ(small.info.size, 8);
  CHECK_EQ(small.info.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ((unsigned char)((char*)&small.info)[8], 0x5a);
  small.info.size = 0;
  CHECK_EQ(hsa_amd_pointer_info(d, &small.info, NULL, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Accessible agents through the caller's allocator. */
  uint32_t nacc = 0;
  hsa_agent_t* acc = NULL;
  hsa_amd_pointer_info_t full;
  full.size = sizeof full;
  CHECK_OK(hsa_amd_pointer_info(d, &full, malloc, &nacc, &acc));
  CHECK_EQ(nacc, 2);
  CHECK_EQ(acc[0].handle, ag.cpu.handle);
  CHECK_EQ(acc[1].handle, ag.gpu[0].handle);
  free(acc);

  /* EXECUTABLE flag: pages are executable while allocated, and not after free. */
  char perm[5];
  perms_of(x, perm);
  CHECK(strcmp(perm, "rwxs") == 0);
  perms_of(d, perm);
  CHECK(strcmp(perm, "rw-s") == 0);
  CHECK_OK(hsa_amd_memory_pool_free(x));
  perms_of(x, perm);
  CHECK(strcmp(perm, "rw-s") == 0);

  /* Locked host memory. */
  void* agent_ptr = NULL;
  CHECK_OK(hsa_amd_memory_lock(heap, 64, &ag.gpu[0], 1, &agent_ptr));
  i = query((char*)heap + 8);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_LOCKED);
  CHECK(i.hostBaseAddress == heap);
  CHECK_OK(hsa_amd_memory_unlock(heap));
  CHECK_EQ(query(heap).type, HSA_EXT_POINTER_TYPE_UNKNOWN);

  /* vmem: reserved range, then a mapping that aliases the handle's memory. */
  void* va = NULL;
  CHECK_OK(hsa_amd_vmem_address_reserve(&va, 1 << 20, 0, 0));
  i = query((char*)va + 4096);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_RESERVED_ADDR);
  CHECK(i.agentBaseAddress == va);
  CHECK_EQ(i.sizeInBytes, 1 << 20);
  hsa_amd_vmem_alloc_handle_t mh;
  CHECK_OK(hsa_amd_vmem_handle_create(dev, 2 * 65536, MEMORY_TYPE_NONE, 0, &mh));
  CHECK_OK(hsa_amd_vmem_map((char*)va + 65536, 65536, 65536, mh, 0));
  CHECK_OK(hsa_amd_vmem_map(va, 65536, 65536, mh, 0)); /* same physical pages twice */
  ((volatile int*)va)[3] = 77;
  CHECK_EQ(((volatile int*)((char*)va + 65536))[3], 77);
  i = query((char*)va + 65536 + 100);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK(i.agentBaseAddress == (char*)va + 65536);
  CHECK_EQ(i.sizeInBytes, 65536);
  CHECK_EQ(i.agentOwner.handle, ag.gpu[0].handle);
  CHECK_EQ(hsa_amd_vmem_handle_release(mh), HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_EQ(hsa_amd_vmem_address_free(va, 1 << 20), HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_OK(hsa_amd_vmem_unmap(va, 65536));
  CHECK_OK(hsa_amd_vmem_unmap((char*)va + 65536, 65536));
  CHECK_EQ(query((char*)va + 65536).type, HSA_EXT_POINTER_TYPE_RESERVED_ADDR);
  CHECK_OK(hsa_amd_vmem_handle_release(mh));
  CHECK_OK(hsa_amd_vmem_address_free(va, 1 << 20));
  CHECK_EQ(query(va).type, HSA_EXT_POINTER_TYPE_UNKNOWN);

  CHECK_OK(hsa_amd_memory_pool_free(d));
  CHECK_EQ(query(d).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_OK(hsa_amd_memory_pool_free(h));
  free(heap);
  CHECK_OK(hsa_shut_down());
  printf("hsa_pointer_info: PASS\n");
  return 0;
}
