/* hip_check.h - checks shared by the HIP C tests: each failed check prints where and exits 1;
 * passing sections print `ok <name>` so the Rust driver can assert which ran. */
#ifndef HIP_CHECK_H
#define HIP_CHECK_H

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "krsim_hip.h"

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

#define CHECK_EQ(a, b)                                                                      \
  do {                                                                                      \
    long long check_a = (long long)(a), check_b = (long long)(b);                           \
    if (check_a != check_b) {                                                               \
      fprintf(stderr, "FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b,  \
              check_a, check_b);                                                            \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

/* A HIP call that must return `want` (a hipError_t). */
#define CHECK_HIP_IS(call, want)                                                           \
  do {                                                                                     \
    hipError_t check_e = (call);                                                           \
    if (check_e != (want)) {                                                               \
      fprintf(stderr, "FAIL %s:%d: %s returned %s, want %s\n", __FILE__, __LINE__, #call,  \
              hipGetErrorName(check_e), hipGetErrorName(want));                            \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CHECK_HIP(call) CHECK_HIP_IS(call, hipSuccess)

static inline dim3 d3(uint32_t x, uint32_t y, uint32_t z) {
  dim3 d = {x, y, z};
  return d;
}

/* hsa_amd_pointer_info of p (size set, no accessible-agent list). */
static inline hsa_amd_pointer_info_t pointer_info(const void* p) {
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  CHECK_EQ(hsa_amd_pointer_info(p, &info, NULL, NULL, NULL), HSA_STATUS_SUCCESS);
  return info;
}

typedef struct test_agents {
  hsa_agent_t cpu;
  hsa_agent_t gpu[16];
  int ngpu;
} test_agents;

static hsa_status_t test_collect_agent(hsa_agent_t a, void* data) {
  test_agents* t = data;
  hsa_device_type_t type;
  CHECK_EQ(hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &type), HSA_STATUS_SUCCESS);
  if (type == HSA_DEVICE_TYPE_CPU && t->cpu.handle == 0) t->cpu = a;
  if (type == HSA_DEVICE_TYPE_GPU && t->ngpu < 16) t->gpu[t->ngpu++] = a;
  return HSA_STATUS_SUCCESS;
}

/* The agents in hsa_iterate_agents order (HIP device i is the i-th GPU agent). */
static inline test_agents agents(void) {
  test_agents t;
  memset(&t, 0, sizeof(t));
  CHECK_EQ(hsa_iterate_agents(test_collect_agent, &t), HSA_STATUS_SUCCESS);
  return t;
}

#endif /* HIP_CHECK_H */
