/* agents.c - agents (one CPU + KRSIM_GPUS GPUs), their memory pools and regions. */
#include "sim.h"

sim_state g_sim;

hsa_agent_t sim_agent_handle(const sim_agent* a) {
  hsa_agent_t h = {(uint64_t)(uintptr_t)a};
  return h;
}

sim_agent* sim_agent_from(hsa_agent_t a) {
  uintptr_t p = (uintptr_t)a.handle;
  uintptr_t lo = (uintptr_t)&g_sim.agents[0], hi = (uintptr_t)&g_sim.agents[g_sim.nagents];
  if (p < lo || p >= hi || (p - lo) % sizeof(sim_agent) != 0) return NULL;
  return (sim_agent*)p;
}

sim_pool* sim_pool_from(uint64_t handle) {
  uintptr_t p = (uintptr_t)handle;
  uintptr_t lo = (uintptr_t)&g_sim.pools[0], hi = (uintptr_t)&g_sim.pools[g_sim.npools];
  if (p < lo || p >= hi || (p - lo) % sizeof(sim_pool) != 0) return NULL;
  return (sim_pool*)p;
}

static sim_pool* add_pool(sim_agent* ag, sim_arena* ar, uint32_t flags, bool device, bool system) {
  sim_pool* p = &g_sim.pools[g_sim.npools++];
  p->agent = ag;
  p->arena = ar;
  p->global_flags = flags;
  p->is_device = device;
  p->is_system = system;
  ag->pools[ag->npools++] = p;
  return p;
}

void sim_agents_setup(void) {
  g_sim.ngpus = g_faults.gpus;
  g_sim.nagents = g_sim.ngpus + 1;
  g_sim.npools = 0;
  sim_agent* cpu = &g_sim.agents[0];
  cpu->index = 0;
  cpu->is_gpu = false;
  cpu->npools = 0;
  snprintf(cpu->name, sizeof cpu->name, "KRSim Host CPU");
  /* System pools: fine-grained, and the kernarg pool (KERNARG_INIT | FINE_GRAINED). */
  add_pool(cpu, &g_sim.system_arena, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, false, true);
  add_pool(cpu, &g_sim.system_arena,
           HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
               HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
           false, true);
  for (int i = 1; i <= g_sim.ngpus; i++) {
    sim_agent* g = &g_sim.agents[i];
    g->index = i;
    g->is_gpu = true;
    g->npools = 0;
    snprintf(g->name, sizeof g->name, "gfx90a");
    add_pool(g, &g->arena, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, true, false);
  }
}

hsa_status_t sim_hsa_iterate_agents(hsa_status_t (*cb)(hsa_agent_t, void*), void* data) {
  SIM_CHECK_INIT();
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < g_sim.nagents; i++) {
    hsa_status_t st = cb(sim_agent_handle(&g_sim.agents[i]), data);
    if (st != HSA_STATUS_SUCCESS) return st;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attr, void* v) {
  SIM_CHECK_INIT();
  sim_agent* a = sim_agent_from(agent);
  if (!a) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  bool gpu = a->is_gpu;
  switch ((int)attr) {
    case HSA_AGENT_INFO_NAME: memset(v, 0, 64); memcpy(v, a->name, strlen(a->name)); break;
    case HSA_AGENT_INFO_VENDOR_NAME: memset(v, 0, 64); memcpy(v, gpu ? "AMD" : "CPU", gpu ? 3 : 3); break;
    case HSA_AGENT_INFO_FEATURE:
      *(hsa_agent_feature_t*)v = gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : HSA_AGENT_FEATURE_AGENT_DISPATCH;
      break;
    case HSA_AGENT_INFO_MACHINE_MODEL: *(hsa_machine_model_t*)v = HSA_MACHINE_MODEL_LARGE; break;
    case HSA_AGENT_INFO_PROFILE: *(hsa_profile_t*)v = HSA_PROFILE_BASE; break;
    case HSA_AGENT_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
      *(hsa_default_float_rounding_mode_t*)v = HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR;
      break;
    case HSA_AGENT_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES:
      *(hsa_default_float_rounding_mode_t*)v = HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR;
      break;
    case HSA_AGENT_INFO_FAST_F16_OPERATION: *(bool*)v = gpu; break;
    case HSA_AGENT_INFO_WAVEFRONT_SIZE: *(uint32_t*)v = gpu ? 64 : 0; break;
    case HSA_AGENT_INFO_WORKGROUP_MAX_DIM: {
      uint16_t* d = v;
      d[0] = d[1] = d[2] = gpu ? 1024 : 0;
      break;
    }
    case HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: *(uint32_t*)v = gpu ? 1024 : 0; break;
    case HSA_AGENT_INFO_GRID_MAX_DIM: {
      hsa_dim3_t* d = v;
      d->x = d->y = d->z = gpu ? UINT32_MAX : 0;
      break;
    }
    case HSA_AGENT_INFO_GRID_MAX_SIZE: *(uint32_t*)v = gpu ? UINT32_MAX : 0; break;
    case HSA_AGENT_INFO_FBARRIER_MAX_SIZE: *(uint32_t*)v = gpu ? 32 : 0; break;
    case HSA_AGENT_INFO_QUEUES_MAX: *(uint32_t*)v = gpu ? 128 : 0; break;
    case HSA_AGENT_INFO_QUEUE_MIN_SIZE: *(uint32_t*)v = gpu ? 64 : 0; break;
    case HSA_AGENT_INFO_QUEUE_MAX_SIZE: *(uint32_t*)v = gpu ? 131072 : 0; break;
    case HSA_AGENT_INFO_QUEUE_TYPE: *(hsa_queue_type32_t*)v = HSA_QUEUE_TYPE_MULTI; break;
    case HSA_AGENT_INFO_NODE: *(uint32_t*)v = (uint32_t)a->index; break;
    case HSA_AGENT_INFO_DEVICE: *(hsa_device_type_t*)v = gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU; break;
    case HSA_AGENT_INFO_CACHE_SIZE: {
      uint32_t* c = v;
      c[0] = 16 << 10, c[1] = 8 << 20, c[2] = 0, c[3] = 0;
      break;
    }
    case HSA_AGENT_INFO_ISA: ((hsa_isa_t*)v)->handle = 0; break;
    case HSA_AGENT_INFO_EXTENSIONS: memset(v, 0, 128); break;
    case HSA_AGENT_INFO_VERSION_MAJOR: *(uint16_t*)v = 1; break;
    case HSA_AGENT_INFO_VERSION_MINOR: *(uint16_t*)v = 1; break;
    case HSA_AMD_AGENT_INFO_CHIP_ID: *(uint32_t*)v = gpu ? 0x740f : 0; break;
    case HSA_AMD_AGENT_INFO_CACHELINE_SIZE: *(uint32_t*)v = 64; break;
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: *(uint32_t*)v = gpu ? (uint32_t)g_faults.workers : 2; break;
    case HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY: *(uint32_t*)v = 1700; break;
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: *(uint32_t*)v = (uint32_t)a->index; break;
    case HSA_AMD_AGENT_INFO_MAX_ADDRESS_WATCH_POINTS: *(uint32_t*)v = 4; break;
    case HSA_AMD_AGENT_INFO_BDFID: *(uint32_t*)v = gpu ? (uint32_t)(a->index << 8) : 0; break;
    case HSA_AMD_AGENT_INFO_MEMORY_WIDTH: *(uint32_t*)v = 4096; break;
    case HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY: *(uint32_t*)v = 1600; break;
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
      memset(v, 0, 64);
      snprintf(v, 64, gpu ? "KRSim Simulated GPU" : "KRSim Host CPU");
      break;
    case HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU: *(uint32_t*)v = gpu ? 32 : 0; break;
    case HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU: *(uint32_t*)v = gpu ? 4 : 0; break;
    case HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES: *(uint32_t*)v = gpu ? 1 : 0; break;
    case HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE: *(uint32_t*)v = gpu ? 1 : 0; break;
    case HSA_AMD_AGENT_INFO_DOMAIN: *(uint32_t*)v = 0; break;
    case HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES: *(bool*)v = false; break;
    case HSA_AMD_AGENT_INFO_UUID:
      memset(v, 0, 21);
      if (gpu) snprintf(v, 21, "GPU-krsim%011d", a->index);
      else snprintf(v, 21, "CPU-XX");
      break;
    case HSA_AMD_AGENT_INFO_ASIC_REVISION: *(uint32_t*)v = 1; break;
    case HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS: *(bool*)v = false; break;
    case HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT:
      *(uint32_t*)v = gpu ? (uint32_t)g_faults.workers : 0;
      break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

/* ----------------------------------------------------------------- pools/regions */

hsa_status_t sim_hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                                    hsa_status_t (*cb)(hsa_amd_memory_pool_t, void*),
                                                    void* data) {
  SIM_CHECK_INIT();
  sim_agent* a = sim_agent_from(agent);
  if (!a) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < a->npools; i++) {
    hsa_amd_memory_pool_t p = {(uint64_t)(uintptr_t)a->pools[i]};
    hsa_status_t st = cb(p, data);
    if (st != HSA_STATUS_SUCCESS) return st;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t pool_info(sim_pool* p, int attr, void* v, bool region) {
  switch (attr) {
    case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: /* same value for HSA_REGION_INFO_SEGMENT */
      *(uint32_t*)v = region ? (uint32_t)HSA_REGION_SEGMENT_GLOBAL : (uint32_t)HSA_AMD_SEGMENT_GLOBAL;
      break;
    case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: *(uint32_t*)v = p->global_flags; break;
    case HSA_AMD_MEMORY_POOL_INFO_SIZE: *(size_t*)v = p->arena->size; break;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: *(bool*)v = true; break;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: *(size_t*)v = SIM_PAGE; break;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: *(size_t*)v = SIM_PAGE; break;
    case HSA_REGION_INFO_ALLOC_MAX_SIZE: /* 4 */
      if (!region) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      *(size_t*)v = p->arena->size;
      break;
    case HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE: /* 8 */
      if (!region) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      *(uint32_t*)v = 0;
      break;
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: /* 15 */
      if (region) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      *(bool*)v = !p->is_device;
      break;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: /* 16 */
      if (region) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      *(size_t*)v = p->arena->size;
      break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool,
                                              hsa_amd_memory_pool_info_t attr, void* v) {
  SIM_CHECK_INIT();
  sim_pool* p = sim_pool_from(pool.handle);
  if (!p) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return pool_info(p, (int)attr, v, false);
}

hsa_status_t sim_hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t pool,
                                                    hsa_amd_agent_memory_pool_info_t attr, void* v) {
  SIM_CHECK_INIT();
  sim_agent* a = sim_agent_from(agent);
  sim_pool* p = sim_pool_from(pool.handle);
  if (!a) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!p) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch ((int)attr) {
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS:
      /* Own pools and system pools: allowed by default; another GPU's memory: disallowed
       * by default (needs hsa_amd_agents_allow_access), as on real systems. */
      *(hsa_amd_memory_pool_access_t*)v =
          (!p->is_device || p->agent == a) ? HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT
          : a->is_gpu                      ? HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
                                           : HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
      break;
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS: *(uint32_t*)v = p->agent == a ? 0 : 1; break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_memory_pool_can_migrate(hsa_amd_memory_pool_t s, hsa_amd_memory_pool_t d,
                                                 bool* r) {
  SIM_CHECK_INIT();
  if (!sim_pool_from(s.handle) || !sim_pool_from(d.handle)) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (!r) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *r = false;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_agent_iterate_regions(hsa_agent_t agent, hsa_status_t (*cb)(hsa_region_t, void*),
                                           void* data) {
  SIM_CHECK_INIT();
  sim_agent* a = sim_agent_from(agent);
  if (!a) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < a->npools; i++) {
    hsa_region_t r = {(uint64_t)(uintptr_t)a->pools[i]};
    hsa_status_t st = cb(r, data);
    if (st != HSA_STATUS_SUCCESS) return st;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_region_get_info(hsa_region_t region, hsa_region_info_t attr, void* v) {
  SIM_CHECK_INIT();
  sim_pool* p = sim_pool_from(region.handle);
  if (!p) return HSA_STATUS_ERROR_INVALID_REGION;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if ((int)attr == HSA_REGION_INFO_GLOBAL_FLAGS) {
    /* Region flags use the same bit values: KERNARG 1, FINE_GRAINED 2, COARSE_GRAINED 4. */
    *(uint32_t*)v = p->global_flags;
    return HSA_STATUS_SUCCESS;
  }
  return pool_info(p, (int)attr, v, true);
}
