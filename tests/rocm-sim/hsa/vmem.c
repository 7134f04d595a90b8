/* vmem.c - virtual memory API: address reservations, physical handles carved from a pool's
 * arena, and mappings that alias the handle's pages (mmap of the memfd at the handle offset). */
#include <sys/mman.h>

#include "sim.h"

typedef struct sim_reservation {
  uintptr_t base;
  size_t size;
  struct sim_reservation* next;
} sim_reservation;

typedef struct sim_vmem_handle {
  uint64_t magic;
  sim_pool* pool;
  void* backing; /* in the pool's arena */
  size_t size;
  _Atomic int maps;
} sim_vmem_handle;
#define VMEM_HANDLE_MAGIC 0x4b52564d48ull

static pthread_mutex_t g_v_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_reservation* g_res;

int sim_vmem_find_reservation(uintptr_t p, uintptr_t* base, size_t* size) {
  int found = 0;
  pthread_mutex_lock(&g_v_mu);
  for (sim_reservation* r = g_res; r; r = r->next)
    if (p >= r->base && p < r->base + r->size) {
      *base = r->base;
      *size = r->size;
      found = 1;
      break;
    }
  pthread_mutex_unlock(&g_v_mu);
  return found;
}

static bool page_aligned(uint64_t x) { return (x & (SIM_PAGE - 1)) == 0; }

hsa_status_t sim_hsa_amd_vmem_address_reserve(void** va, size_t size, uint64_t address,
                                              uint64_t flags) {
  SIM_CHECK_INIT();
  (void)flags;
  if (!va || !size || !page_aligned(size)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  void* p = mmap((void*)(uintptr_t)address, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_reservation* r = calloc(1, sizeof *r);
  if (!r) {
    munmap(p, size);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  r->base = (uintptr_t)p;
  r->size = size;
  pthread_mutex_lock(&g_v_mu);
  r->next = g_res;
  g_res = r;
  pthread_mutex_unlock(&g_v_mu);
  *va = p;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_vmem_address_free(void* va, size_t size) {
  SIM_CHECK_INIT();
  pthread_mutex_lock(&g_v_mu);
  sim_reservation** pp = &g_res;
  while (*pp && (*pp)->base != (uintptr_t)va) pp = &(*pp)->next;
  sim_reservation* r = *pp;
  if (!r) {
    pthread_mutex_unlock(&g_v_mu);
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (r->size != size) {
    pthread_mutex_unlock(&g_v_mu);
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  /* Still mapped somewhere inside? */
  sim_alloc a;
  for (uintptr_t p = r->base; p < r->base + r->size; p += SIM_PAGE) {
    if (sim_registry_find(p, &a) && a.kind == SIM_ALLOC_VMEM_MAP) {
      pthread_mutex_unlock(&g_v_mu);
      return HSA_STATUS_ERROR_RESOURCE_FREE;
    }
    if (r->size > (64ull << 20)) break; /* checking every page of huge ranges is too slow */
  }
  *pp = r->next;
  pthread_mutex_unlock(&g_v_mu);
  munmap(va, size);
  free(r);
  return HSA_STATUS_SUCCESS;
}

static sim_vmem_handle* handle_from(hsa_amd_vmem_alloc_handle_t h) {
  sim_vmem_handle* p = (sim_vmem_handle*)(uintptr_t)h.handle;
  if (!p || p->magic != VMEM_HANDLE_MAGIC) return NULL;
  return p;
}

hsa_status_t sim_hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                            hsa_amd_memory_type_t type, uint64_t flags,
                                            hsa_amd_vmem_alloc_handle_t* out) {
  SIM_CHECK_INIT();
  (void)type, (void)flags;
  sim_pool* p = sim_pool_from(pool.handle);
  if (!p) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (!out || !size || !page_aligned(size)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (p->is_system && g_faults.fail_host_alloc_above && size > g_faults.fail_host_alloc_above)
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_vmem_handle* h = calloc(1, sizeof *h);
  if (!h) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  h->backing = sim_arena_alloc(p->arena, size);
  if (!h->backing) {
    free(h);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  h->magic = VMEM_HANDLE_MAGIC;
  h->pool = p;
  h->size = size;
  out->handle = (uint64_t)(uintptr_t)h;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t hh) {
  SIM_CHECK_INIT();
  sim_vmem_handle* h = handle_from(hh);
  if (!h) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (atomic_load(&h->maps) > 0) return HSA_STATUS_ERROR_RESOURCE_FREE;
  sim_arena_free(h->pool->arena, h->backing);
  h->magic = 0;
  free(h);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_vmem_map(void* va, size_t size, size_t offset,
                                  hsa_amd_vmem_alloc_handle_t hh, uint64_t flags) {
  SIM_CHECK_INIT();
  (void)flags;
  sim_vmem_handle* h = handle_from(hh);
  if (!h) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (!va || !size || !page_aligned((uintptr_t)va) || !page_aligned(size) || !page_aligned(offset) ||
      offset + size > h->size)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uintptr_t rb;
  size_t rs;
  if (!sim_vmem_find_reservation((uintptr_t)va, &rb, &rs) || (uintptr_t)va + size > rb + rs)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (sim_registry_find((uintptr_t)va, NULL)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  off_t file_off = (off_t)((uintptr_t)h->backing - g_sim.region_base + offset);
  void* p = mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, g_sim.memfd, file_off);
  if (p == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_alloc a = {.base = (uintptr_t)va,
                 .size = size,
                 .kind = SIM_ALLOC_VMEM_MAP,
                 .owner = h->pool->agent,
                 .pool = h->pool,
                 .global_flags = h->pool->global_flags,
                 .is_device = h->pool->is_device,
                 .host_base = (uintptr_t)h};
  if (sim_registry_add(&a) != 0) {
    mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  atomic_fetch_add(&h->maps, 1);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_vmem_unmap(void* va, size_t size) {
  SIM_CHECK_INIT();
  sim_alloc a;
  if (!sim_registry_find((uintptr_t)va, &a) || a.kind != SIM_ALLOC_VMEM_MAP || a.base != (uintptr_t)va)
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (a.size != size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_registry_remove(a.base, NULL);
  mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  sim_vmem_handle* h = (sim_vmem_handle*)(uintptr_t)a.host_base;
  atomic_fetch_sub(&h->maps, 1);
  return HSA_STATUS_SUCCESS;
}
