/* hip_check.h - checks shared by the HIP C tests (the HSA tests' hsa_test_util.h plus HIP's):
 * each failed check prints where and exits 1; passing sections print `ok <name>` so the Rust
 * driver can assert which ran. */
#ifndef HIP_CHECK_H
#define HIP_CHECK_H

#include <inttypes.h>

#include "hsa_test_util.h" /* CHECK, CHECK_EQ, CHECK_OK and the agent list */
#include "krsim_hip.h"

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

/* The agents in hsa_iterate_agents order (HIP device i is the i-th GPU agent). */
typedef agents_t test_agents;

static inline test_agents agents(void) { return get_agents(); }

#endif /* HIP_CHECK_H */
