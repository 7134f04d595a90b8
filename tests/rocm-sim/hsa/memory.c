/* memory.c - the sim's memory: one memfd-backed region (a sub-range per GPU agent plus a system
 * range), a first-fit allocator per range, and the allocation registry behind pointer info. */
#include <sys/mman.h>
#include <unistd.h>

#include "sim.h"

/* --------------------------------------------------------------------- arenas */

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static void arena_init(sim_arena* ar, uintptr_t base, size_t size) {
  ar->base = base;
  ar->size = size;
  pthread_mutex_init(&ar->mu, NULL);
  ar->blocks = NULL;
  ar->nblocks = ar->cap = 0;
  ar->hole_hint = 0;
}

static void arena_destroy(sim_arena* ar) {
  free(ar->blocks);
  ar->blocks = NULL;
  ar->nblocks = ar->cap = 0;
  pthread_mutex_destroy(&ar->mu);
}

static size_t block_lower_bound(const sim_arena* ar, size_t off) {
  size_t lo = 0, hi = ar->nblocks;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ar->blocks[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* First fit. `hole_hint` is an offset below which there is no hole, so a long run of
 * allocations without frees stays O(log n). */
void* sim_arena_alloc(sim_arena* ar, size_t size) {
  if (size == 0) return NULL;
  size_t len = round_up(size, SIM_PAGE);
  pthread_mutex_lock(&ar->mu);
  size_t off = 0, pos = 0;
  bool found = false;
  size_t i = ar->hole_hint ? block_lower_bound(ar, ar->hole_hint) : 0;
  if (i > 0) i--;
  size_t prev_end = i > 0 ? ar->blocks[i - 1].off + ar->blocks[i - 1].len : 0;
  if (i == 0) prev_end = 0;
  for (; i <= ar->nblocks; i++) {
    size_t next = i < ar->nblocks ? ar->blocks[i].off : ar->size;
    if (next >= prev_end && next - prev_end >= len) {
      off = prev_end;
      pos = i;
      found = true;
      break;
    }
    if (i < ar->nblocks) prev_end = ar->blocks[i].off + ar->blocks[i].len;
  }
  if (found && pos == ar->nblocks) ar->hole_hint = off + len;
  if (found && ar->nblocks == ar->cap) {
    size_t cap = ar->cap ? ar->cap * 2 : 256;
    sim_block* nb = realloc(ar->blocks, cap * sizeof *nb);
    if (!nb) found = false;
    else {
      ar->blocks = nb;
      ar->cap = cap;
    }
  }
  if (!found) {
    pthread_mutex_unlock(&ar->mu);
    return NULL;
  }
  memmove(&ar->blocks[pos + 1], &ar->blocks[pos], (ar->nblocks - pos) * sizeof(sim_block));
  ar->blocks[pos].off = off;
  ar->blocks[pos].len = len;
  ar->nblocks++;
  pthread_mutex_unlock(&ar->mu);
  return (void*)(ar->base + off);
}

bool sim_arena_free(sim_arena* ar, void* p) {
  uintptr_t a = (uintptr_t)p;
  if (a < ar->base || a >= ar->base + ar->size) return false;
  size_t off = a - ar->base;
  pthread_mutex_lock(&ar->mu);
  size_t lo = 0, hi = ar->nblocks;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ar->blocks[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  bool ok = lo < ar->nblocks && ar->blocks[lo].off == off;
  if (ok && off < ar->hole_hint) ar->hole_hint = off;
  if (ok) {
    memmove(&ar->blocks[lo], &ar->blocks[lo + 1], (ar->nblocks - lo - 1) * sizeof(sim_block));
    ar->nblocks--;
  }
  pthread_mutex_unlock(&ar->mu);
  return ok;
}

/* ------------------------------------------------------------------- registry */

static pthread_rwlock_t g_reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static sim_alloc* g_reg;
static size_t g_nreg, g_capreg;
static uint64_t g_made; /* allocations ever registered */

static size_t reg_lower_bound(uintptr_t base) {
  size_t lo = 0, hi = g_nreg;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_reg[mid].base < base) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int sim_registry_add(const sim_alloc* a) {
  pthread_rwlock_wrlock(&g_reg_lock);
  if (g_nreg == g_capreg) {
    size_t cap = g_capreg ? g_capreg * 2 : 1024;
    sim_alloc* n = realloc(g_reg, cap * sizeof *n);
    if (!n) {
      pthread_rwlock_unlock(&g_reg_lock);
      return -1;
    }
    g_reg = n;
    g_capreg = cap;
  }
  size_t pos = reg_lower_bound(a->base);
  memmove(&g_reg[pos + 1], &g_reg[pos], (g_nreg - pos) * sizeof *g_reg);
  g_reg[pos] = *a;
  g_nreg++;
  g_made++;
  pthread_rwlock_unlock(&g_reg_lock);
  return 0;
}

bool sim_registry_remove(uintptr_t base, sim_alloc* out) {
  pthread_rwlock_wrlock(&g_reg_lock);
  size_t pos = reg_lower_bound(base);
  bool ok = pos < g_nreg && g_reg[pos].base == base;
  if (ok) {
    if (out) *out = g_reg[pos];
    memmove(&g_reg[pos], &g_reg[pos + 1], (g_nreg - pos - 1) * sizeof *g_reg);
    g_nreg--;
  }
  pthread_rwlock_unlock(&g_reg_lock);
  return ok;
}

/* Finds the allocation containing p (interior pointers included). */
bool sim_registry_find(uintptr_t p, sim_alloc* out) {
  pthread_rwlock_rdlock(&g_reg_lock);
  size_t pos = reg_lower_bound(p + 1); /* first with base > p */
  bool ok = false;
  if (pos > 0) {
    sim_alloc* a = &g_reg[pos - 1];
    if (p >= a->base && p < a->base + (a->size ? a->size : 1)) {
      ok = true;
      if (out) *out = *a;
    }
  }
  pthread_rwlock_unlock(&g_reg_lock);
  return ok;
}

static bool registry_set_userdata(uintptr_t p, void* ud) {
  pthread_rwlock_wrlock(&g_reg_lock);
  size_t pos = reg_lower_bound(p + 1);
  bool ok = false;
  if (pos > 0) {
    sim_alloc* a = &g_reg[pos - 1];
    if (p >= a->base && p < a->base + a->size) {
      a->user_data = ud;
      ok = true;
    }
  }
  pthread_rwlock_unlock(&g_reg_lock);
  return ok;
}

bool sim_is_device_ptr(const void* p) {
  sim_alloc a;
  if (sim_registry_find((uintptr_t)p, &a)) return a.is_device;
  return false;
}

/* ---------------------------------------------------------------- setup/teardown */

void sim_memory_setup(void) {
  size_t dev = (size_t)g_faults.device_mem_mb << 20;
  size_t sys = dev < (4ull << 30) ? (4ull << 30) : dev;
  size_t total = dev * (size_t)g_faults.gpus + sys;
  g_sim.memfd = memfd_create("krsim-memory", MFD_CLOEXEC);
  if (g_sim.memfd < 0 || ftruncate(g_sim.memfd, (off_t)total) != 0) {
    perror("krsim: memfd");
    abort();
  }
  void* base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, g_sim.memfd, 0);
  if (base == MAP_FAILED) {
    perror("krsim: mmap device memory");
    abort();
  }
  g_sim.region_base = (uintptr_t)base;
  g_sim.region_size = total;
  for (int i = 0; i < g_faults.gpus; i++)
    arena_init(&g_sim.agents[i + 1].arena, g_sim.region_base + dev * (size_t)i, dev);
  arena_init(&g_sim.system_arena, g_sim.region_base + dev * (size_t)g_faults.gpus, sys);
}

/* KRSIM_REPORT_LIVE set: one stderr line with what is still allocated when HSA shuts down
 * (after tools unloaded and executables were destroyed), for leak checks (`cargo xtask soak`):
 * `krsim: live allocations at shutdown: N (B bytes) of M made`. Caller holds g_reg_lock. */
static void report_live(void) {
  if (!getenv("KRSIM_REPORT_LIVE")) return;
  uint64_t bytes = 0;
  for (size_t i = 0; i < g_nreg; i++) bytes += g_reg[i].size;
  fprintf(stderr, "krsim: live allocations at shutdown: %zu (%llu bytes) of %llu made\n", g_nreg,
          (unsigned long long)bytes, (unsigned long long)g_made);
}

void sim_memory_teardown(void) {
  pthread_rwlock_wrlock(&g_reg_lock);
  report_live();
  free(g_reg);
  g_reg = NULL;
  g_nreg = g_capreg = 0;
  pthread_rwlock_unlock(&g_reg_lock);
  for (int i = 1; i < g_sim.nagents; i++) arena_destroy(&g_sim.agents[i].arena);
  arena_destroy(&g_sim.system_arena);
  munmap((void*)g_sim.region_base, g_sim.region_size);
  close(g_sim.memfd);
  g_sim.memfd = -1;
}

/* ------------------------------------------------------------------ allocation */

static hsa_status_t pool_allocate(sim_pool* pool, size_t size, uint32_t flags, int kind,
                                  void** ptr) {
  if (!ptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (pool->is_system && g_faults.fail_host_alloc_above && size > g_faults.fail_host_alloc_above)
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  void* p = sim_arena_alloc(pool->arena, size);
  if (!p) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_alloc a = {.base = (uintptr_t)p,
                 .size = size,
                 .kind = kind,
                 .owner = pool->agent,
                 .pool = pool,
                 .alloc_flags = flags,
                 .global_flags = pool->global_flags,
                 .is_device = pool->is_device};
  if (sim_registry_add(&a) != 0) {
    sim_arena_free(pool->arena, p);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  /* EXECUTABLE: the allocation's own pages (allocations are page-granular) become executable. */
  if (flags & HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG)
    mprotect(p, (size + SIM_PAGE - 1) / SIM_PAGE * SIM_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC);
  *ptr = p;
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t pool_free(void* p, int kind) {
  if (!p) return HSA_STATUS_SUCCESS;
  sim_alloc a;
  if (!sim_registry_find((uintptr_t)p, &a) || a.base != (uintptr_t)p || a.kind != kind)
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  sim_registry_remove(a.base, NULL);
  if (a.alloc_flags & HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG)
    mprotect(p, (a.size + SIM_PAGE - 1) / SIM_PAGE * SIM_PAGE, PROT_READ | PROT_WRITE);
  sim_arena_free(a.pool->arena, p);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, size_t size,
                                              uint32_t flags, void** ptr) {
  SIM_CHECK_INIT();
  sim_pool* p = sim_pool_from(pool.handle);
  if (!p) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  return pool_allocate(p, size, flags, SIM_ALLOC_POOL, ptr);
}

hsa_status_t sim_hsa_amd_memory_pool_free(void* ptr) {
  SIM_CHECK_INIT();
  return pool_free(ptr, SIM_ALLOC_POOL);
}

hsa_status_t sim_hsa_memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  SIM_CHECK_INIT();
  sim_pool* p = sim_pool_from(region.handle);
  if (!p) return HSA_STATUS_ERROR_INVALID_REGION;
  return pool_allocate(p, size, 0, SIM_ALLOC_POOL, ptr);
}

hsa_status_t sim_hsa_memory_free(void* ptr) {
  SIM_CHECK_INIT();
  return pool_free(ptr, SIM_ALLOC_POOL);
}

/* The code-object loader's own device memory: not through the pool allocator API. */
void* sim_loader_alloc(sim_agent* agent, size_t size) {
  sim_pool* pool = agent->pools[0];
  void* p = NULL;
  if (pool_allocate(pool, size ? size : 1, 0, SIM_ALLOC_LOADER, &p) != HSA_STATUS_SUCCESS)
    return NULL;
  return p;
}

void sim_loader_free(void* p) { pool_free(p, SIM_ALLOC_LOADER); }

/* ------------------------------------------------------------------ pointer info */

hsa_status_t sim_hsa_amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                                      void* (*alloc)(size_t), uint32_t* num_accessible,
                                      hsa_agent_t** accessible) {
  SIM_CHECK_INIT();
  /* As ROCR: only an unset size is rejected; min(size, sizeof) bytes are written. */
  if (!info || info->size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t caller_size = info->size;
  hsa_amd_pointer_info_t out;
  memset(&out, 0, sizeof out);
  out.size = caller_size < sizeof out ? caller_size : (uint32_t)sizeof out;
  sim_alloc a;
  uintptr_t rbase;
  size_t rsize;
  bool found = sim_registry_find((uintptr_t)ptr, &a);
  if (found) {
    out.type = a.kind == SIM_ALLOC_LOCKED ? HSA_EXT_POINTER_TYPE_LOCKED : HSA_EXT_POINTER_TYPE_HSA;
    out.agentBaseAddress = (void*)a.base;
    out.hostBaseAddress = a.kind == SIM_ALLOC_LOCKED ? (void*)a.host_base : (void*)a.base;
    out.sizeInBytes = a.size;
    out.userData = a.user_data;
    out.agentOwner = sim_agent_handle(a.owner);
    out.global_flags = a.global_flags;
  } else if (sim_vmem_find_reservation((uintptr_t)ptr, &rbase, &rsize)) {
    out.type = (hsa_amd_pointer_type_t)HSA_EXT_POINTER_TYPE_RESERVED_ADDR;
    out.agentBaseAddress = (void*)rbase;
    out.hostBaseAddress = (void*)rbase;
    out.sizeInBytes = rsize;
  } else {
    out.type = HSA_EXT_POINTER_TYPE_UNKNOWN;
  }
  memcpy(info, &out, out.size);
  if (num_accessible || accessible) {
    if (!num_accessible || !accessible || !alloc) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    uint32_t n = found ? (uint32_t)g_sim.nagents : 0;
    *num_accessible = n;
    *accessible = NULL;
    if (n) {
      hsa_agent_t* list = alloc(sizeof(hsa_agent_t) * n);
      if (!list) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
      for (uint32_t i = 0; i < n; i++) list[i] = sim_agent_handle(&g_sim.agents[i]);
      *accessible = list;
    }
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_pointer_info_set_userdata(const void* ptr, void* ud) {
  SIM_CHECK_INIT();
  return registry_set_userdata((uintptr_t)ptr, ud) ? HSA_STATUS_SUCCESS
                                                   : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

/* ------------------------------------------------------ locking, access, misc */

hsa_status_t sim_hsa_amd_memory_lock(void* host, size_t size, hsa_agent_t* agents, int n,
                                     void** agent_ptr) {
  SIM_CHECK_INIT();
  (void)agents, (void)n;
  if (!host || !size || !agent_ptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (sim_registry_find((uintptr_t)host, NULL)) {
    *agent_ptr = host; /* already runtime memory */
    return HSA_STATUS_SUCCESS;
  }
  sim_alloc a = {.base = (uintptr_t)host,
                 .size = size,
                 .kind = SIM_ALLOC_LOCKED,
                 .owner = &g_sim.agents[0],
                 .pool = g_sim.agents[0].pools[0],
                 .global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
                 .host_base = (uintptr_t)host};
  if (sim_registry_add(&a) != 0) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *agent_ptr = host;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_memory_unlock(void* host) {
  SIM_CHECK_INIT();
  sim_alloc a;
  if (!sim_registry_find((uintptr_t)host, &a) || a.kind != SIM_ALLOC_LOCKED || a.base != (uintptr_t)host)
    return HSA_STATUS_SUCCESS; /* unlocking unlocked memory is not an error in ROCR */
  sim_registry_remove(a.base, NULL);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_agents_allow_access(uint32_t n, const hsa_agent_t* agents,
                                             const uint32_t* flags, const void* ptr) {
  SIM_CHECK_INIT();
  (void)flags;
  if (!n || !agents || !ptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < n; i++)
    if (!sim_agent_from(agents[i])) return HSA_STATUS_ERROR_INVALID_AGENT;
  return sim_registry_find((uintptr_t)ptr, NULL) ? HSA_STATUS_SUCCESS
                                                 : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t sim_hsa_memory_register(void* p, size_t n) {
  SIM_CHECK_INIT();
  return (p == NULL && n != 0) ? HSA_STATUS_ERROR_INVALID_ARGUMENT : HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_memory_deregister(void* p, size_t n) {
  SIM_CHECK_INIT();
  (void)p, (void)n;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_memory_assign_agent(void* p, hsa_agent_t agent, hsa_access_permission_t ac) {
  SIM_CHECK_INIT();
  (void)ac;
  if (!p) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return sim_agent_from(agent) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_AGENT;
}

