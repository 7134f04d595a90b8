/* churn - allocation churn that leaks a known number of bytes: allocation i has
 * 1024 * (1 + i % 5) bytes and is freed unless i % leak_every == leak_every - 1.
 * Usage: churn [allocations=1000] [leak_every=10]
 * Prints `leaked: <bytes>` (the bytes never freed) and a checksum of the values read back. */
#include "workload.h"

KRSIM_KERNEL(tag, uint32_t*, out, uint32_t, n, uint32_t, value) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->out[i] = args->value + (uint32_t)i;
  }
}

#define CHURN_MODULE(K, V, C) K(tag)
KRSIM_MODULE(churn_module, CHURN_MODULE)

int main(int argc, char** argv) {
  uint64_t count = wl_arg(argc, argv, 1, 1000), every = wl_arg(argc, argv, 2, 10);
  if (every == 0) every = 1;
  uint64_t leaked = 0, h = WL_FNV_OFFSET;
  for (uint64_t i = 0; i < count; i++) {
    size_t bytes = 1024 * (1 + i % 5);
    uint32_t n = (uint32_t)(bytes / sizeof(uint32_t));
    uint32_t* dev;
    HIP_CHECK(hipMalloc((void**)&dev, bytes));
    HIP_CHECK(tag(wl_dim((n + 63) / 64), wl_dim(64), 0, NULL, dev, n, (uint32_t)i * 977u));
    uint32_t last;
    HIP_CHECK(hipMemcpy(&last, dev + n - 1, sizeof(last), hipMemcpyDeviceToHost));
    WL_EXPECT(last == (uint32_t)i * 977u + n - 1, "allocation %" PRIu64, i);
    h = wl_fnv(h, &last, sizeof(last));
    if (i % every == every - 1)
      leaked += bytes; /* never freed */
    else
      HIP_CHECK(hipFree(dev));
  }
  printf("allocations: %" PRIu64 "\n", count);
  printf("leaked: %" PRIu64 "\n", leaked);
  printf("checksum: %016" PRIx64 "\n", h);
  return 0;
}
