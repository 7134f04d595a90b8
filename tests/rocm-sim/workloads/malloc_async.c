/* malloc_async - stream-ordered allocation traffic: hipMallocAsync, a kernel writing the
 * block, a copy back, hipFreeAsync, on two streams in turn.
 * Usage: malloc_async [iterations=200]
 * Prints `async_allocs: <iterations>`, `async_bytes: <total bytes allocated>` and a checksum. */
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(stamp, uint64_t*, out, uint64_t, n, uint64_t, seed) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->out[i] = args->seed ^ (i * 0x9e3779b97f4a7c15ull);
  }
}

#define ASYNC_MODULE(K, V, C) K(stamp)
KRSIM_MODULE(async_module, ASYNC_MODULE)

int main(int argc, char** argv) {
  uint64_t iters = wl_arg(argc, argv, 1, 200);
  hipStream_t s[2];
  HIP_CHECK(hipStreamCreate(&s[0]));
  HIP_CHECK(hipStreamCreate(&s[1]));
  uint64_t* host;
  HIP_CHECK(hipHostMalloc((void**)&host, 8 * 4096 * sizeof(uint64_t), 0));
  uint64_t h = WL_FNV_OFFSET, total = 0;
  for (uint64_t it = 0; it < iters; it++) {
    hipStream_t st = s[it % 2];
    uint64_t n = 512 * (1 + it % 7) + it % 5;
    uint64_t* dev;
    HIP_CHECK(hipMallocAsync((void**)&dev, n * sizeof(uint64_t), st));
    HIP_CHECK(stamp(wl_dim((uint32_t)((n + 255) / 256)), wl_dim(256), 0, st, dev, n, it));
    HIP_CHECK(hipMemcpyAsync(host, dev, n * sizeof(uint64_t), hipMemcpyDeviceToHost, st));
    HIP_CHECK(hipFreeAsync(dev, st));
    HIP_CHECK(hipStreamSynchronize(st));
    for (uint64_t i = 0; i < n; i++)
      WL_EXPECT(host[i] == (it ^ (i * 0x9e3779b97f4a7c15ull)), "iteration %" PRIu64 " word %" PRIu64,
                it, i);
    h = wl_fnv(h, host, n * sizeof(uint64_t));
    total += n * sizeof(uint64_t);
  }
  HIP_CHECK(hipHostFree(host));
  HIP_CHECK(hipStreamDestroy(s[0]));
  HIP_CHECK(hipStreamDestroy(s[1]));
  printf("async_allocs: %" PRIu64 "\n", iters);
  printf("async_bytes: %" PRIu64 "\n", total);
  printf("checksum: %016" PRIx64 "\n", h);
  return 0;
}
