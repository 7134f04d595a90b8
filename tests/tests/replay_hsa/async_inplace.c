/* async_inplace.c - a kernel that updates stream-ordered (hipMallocAsync, vmem-mapped) memory
 * in place, so a replay that did not restore that memory between passes would show: each
 * iteration allocates y, uploads it, runs `triple` (y = 3y + 1) once, checks y against the
 * host, and frees y (the next allocation may reuse the address).
 * Usage: async_inplace [n=3000] [iterations=3]
 * Prints `iterations` and the checksum of the results. */
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(triple, uint32_t*, y, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] = args->y[i] * 3u + 1u;
  }
}

#define INPLACE_MODULE(K, V, C) K(triple)
KRSIM_MODULE(inplace_module, INPLACE_MODULE)

int main(int argc, char** argv) {
  uint32_t n = (uint32_t)wl_arg(argc, argv, 1, 3000);
  uint64_t iters = wl_arg(argc, argv, 2, 3);
  size_t bytes = (size_t)n * sizeof(uint32_t);
  uint32_t* h = malloc(bytes);
  uint32_t* out = malloc(bytes);
  if (!h || !out) return 2;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  uint64_t hash = WL_FNV_OFFSET;
  for (uint64_t it = 0; it < iters; it++) {
    for (uint32_t i = 0; i < n; i++) h[i] = i + (uint32_t)it * 7u;
    uint32_t* y;
    HIP_CHECK(hipMallocAsync((void**)&y, bytes, s));
    HIP_CHECK(hipMemcpyAsync(y, h, bytes, hipMemcpyHostToDevice, s));
    HIP_CHECK(triple(wl_dim((n + 255) / 256), wl_dim(256), 0, s, y, n));
    HIP_CHECK(hipMemcpyAsync(out, y, bytes, hipMemcpyDeviceToHost, s));
    HIP_CHECK(hipFreeAsync(y, s));
    HIP_CHECK(hipStreamSynchronize(s));
    for (uint32_t i = 0; i < n; i++)
      WL_EXPECT(out[i] == h[i] * 3u + 1u, "iteration %" PRIu64 " y[%u] = %u, one pass gives %u",
                it, i, out[i], h[i] * 3u + 1u);
    hash = wl_fnv(hash, out, bytes);
  }
  HIP_CHECK(hipStreamDestroy(s));
  printf("iterations: %" PRIu64 "\n", iters);
  printf("checksum: %016" PRIx64 "\n", hash);
  free(h);
  free(out);
  return 0;
}
