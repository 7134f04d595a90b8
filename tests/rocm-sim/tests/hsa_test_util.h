/* hsa_test_util.h - helpers shared by the sim's C tests: checks, agent/pool lookup, dispatch. */
#ifndef HSA_TEST_UTIL_H
#define HSA_TEST_UTIL_H
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "krsim.h"

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
      exit(1);                                                               \
    }                                                                        \
  } while (0)
#define CHECK_EQ(a, b)                                                                     \
  do {                                                                                     \
    long long _a = (long long)(a), _b = (long long)(b);                                    \
    if (_a != _b) {                                                                        \
      fprintf(stderr, "FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, \
              _a, _b);                                                                     \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define CHECK_OK(expr) CHECK_EQ((expr), HSA_STATUS_SUCCESS)

typedef struct agents_t {
  hsa_agent_t cpu;
  hsa_agent_t gpu[16];
  int ngpu;
} agents_t;

static hsa_status_t collect_agent(hsa_agent_t a, void* d) {
  agents_t* s = d;
  hsa_device_type_t t;
  CHECK_OK(hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t));
  if (t == HSA_DEVICE_TYPE_CPU) s->cpu = a;
  else if (t == HSA_DEVICE_TYPE_GPU && s->ngpu < 16) s->gpu[s->ngpu++] = a;
  return HSA_STATUS_SUCCESS;
}

static inline agents_t get_agents(void) {
  agents_t s;
  memset(&s, 0, sizeof s);
  CHECK_OK(hsa_iterate_agents(collect_agent, &s));
  return s;
}

typedef struct pool_find_t {
  uint32_t want_flags;
  hsa_amd_memory_pool_t pool;
  int found;
} pool_find_t;

static hsa_status_t find_pool_cb(hsa_amd_memory_pool_t p, void* d) {
  pool_find_t* f = d;
  uint32_t flags = 0;
  CHECK_OK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
  if (flags == f->want_flags && !f->found) {
    f->pool = p;
    f->found = 1;
  }
  return HSA_STATUS_SUCCESS;
}

/* The pool of `agent` whose global flags equal `flags` exactly. */
static inline hsa_amd_memory_pool_t find_pool(hsa_agent_t agent, uint32_t flags) {
  pool_find_t f = {flags, {0}, 0};
  CHECK_OK(hsa_amd_agent_iterate_memory_pools(agent, find_pool_cb, &f));
  CHECK(f.found);
  return f.pool;
}

#define FINE HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED
#define COARSE HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED
#define KERNARG (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED)

/* Writes one packet: body first, header (with setup) last, then the doorbell. */
static inline uint64_t submit_packet(hsa_queue_t* q, const void* pkt) {
  uint64_t idx = hsa_queue_add_write_index_scacq_screl(q, 1);
  while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) {
  }
  char* slot = (char*)q->base_address + (idx % q->size) * 64;
  memcpy(slot + 4, (const char*)pkt + 4, 60);
  uint32_t first;
  memcpy(&first, pkt, 4);
  __atomic_store_n((uint32_t*)slot, first, __ATOMIC_RELEASE);
  hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)idx);
  return idx;
}

static inline uint16_t pkt_header(hsa_packet_type_t type, int barrier) {
  return (uint16_t)((type << HSA_PACKET_HEADER_TYPE) | ((barrier ? 1 : 0) << HSA_PACKET_HEADER_BARRIER) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE));
}

static inline void dispatch_kernel(hsa_queue_t* q, uint64_t kernel_object, void* kernarg,
                                   uint32_t grid, uint16_t wg, int barrier, hsa_signal_t done) {
  hsa_kernel_dispatch_packet_t p;
  memset(&p, 0, sizeof p);
  p.header = pkt_header(HSA_PACKET_TYPE_KERNEL_DISPATCH, barrier);
  p.setup = 1;
  p.workgroup_size_x = wg, p.workgroup_size_y = 1, p.workgroup_size_z = 1;
  p.grid_size_x = grid, p.grid_size_y = 1, p.grid_size_z = 1;
  p.kernel_object = kernel_object;
  p.kernarg_address = kernarg;
  p.completion_signal = done;
  submit_packet(q, &p);
}

/* Loads a code object onto `gpu` and returns the frozen executable. */
static inline hsa_executable_t load_co(const krsim_code_object* co, size_t size, hsa_agent_t gpu) {
  hsa_code_object_reader_t r;
  CHECK_OK(hsa_code_object_reader_create_from_memory(co, size, &r));
  hsa_executable_t e;
  CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &e));
  CHECK_OK(hsa_executable_load_agent_code_object(e, gpu, r, NULL, NULL));
  CHECK_OK(hsa_executable_freeze(e, NULL));
  CHECK_OK(hsa_code_object_reader_destroy(r));
  return e;
}

static inline uint64_t kernel_object(hsa_executable_t e, const char* name, hsa_agent_t gpu) {
  hsa_executable_symbol_t s;
  CHECK_OK(hsa_executable_get_symbol_by_name(e, name, &gpu, &s));
  uint64_t ko = 0;
  CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &ko));
  return ko;
}
#endif
