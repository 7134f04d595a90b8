/* workload.h - what every sample workload shares: HIP error checks, argument parsing and the
 * FNV-1a checksum each prints as its last line (`checksum: <16 hex digits>`). */
#ifndef KRSIM_WORKLOAD_H
#define KRSIM_WORKLOAD_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "krsim_hip.h"

/* Exits with status 2 when a HIP call fails, naming the call. */
#define HIP_CHECK(call)                                                                  \
  do {                                                                                   \
    hipError_t hip_check_e = (call);                                                     \
    if (hip_check_e != hipSuccess) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,          \
              hipGetErrorName(hip_check_e), hipGetErrorString(hip_check_e));             \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

/* Exits with status 1 (a wrong result) when cond is false. */
#define WL_EXPECT(cond, ...)                                                             \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "wrong result: " __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                                             \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define WL_FNV_OFFSET 0xcbf29ce484222325ull

/* Folds n bytes into an FNV-1a 64 hash. */
static inline uint64_t wl_fnv(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* The idx-th command-line argument as an unsigned number, or def when absent. */
static inline uint64_t wl_arg(int argc, char** argv, int idx, uint64_t def) {
  if (idx >= argc) return def;
  char* end;
  unsigned long long v = strtoull(argv[idx], &end, 0);
  if (*end != 0) {
    fprintf(stderr, "bad argument %d: %s\n", idx, argv[idx]);
    exit(2);
  }
  return v;
}

static inline dim3 wl_dim(uint32_t x) {
  dim3 d = {x, 1, 1};
  return d;
}

#endif /* KRSIM_WORKLOAD_H */
