/* bytepatch - one buffer filled with a known pattern, then kernels that each store a single
 * byte: exactly one byte changes (or none, when the value is the one already there). For the
 * restore-only-what-changed tests of kreplay.
 * Usage: bytepatch [bytes=4MiB] [offset=196625] [value=0xff (256: the byte already there)]
 *                  [launches=1]
 * Prints `bytes`, `offset`, `old`, `new` and the checksum of the buffer (verified in full). */
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(patch, uint8_t*, buf, uint64_t, offset, uint8_t, value) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i == 0) args->buf[args->offset] = args->value;
  }
}

#define BYTEPATCH_MODULE(K, V, C) K(patch)
KRSIM_MODULE(bytepatch_module, BYTEPATCH_MODULE)

static uint8_t pattern(uint64_t i) { return (uint8_t)(i * 131 + (i >> 9)); }

int main(int argc, char** argv) {
  uint64_t size = wl_arg(argc, argv, 1, 4ull << 20), offset = wl_arg(argc, argv, 2, 196625);
  uint64_t value = wl_arg(argc, argv, 3, 0xff), launches = wl_arg(argc, argv, 4, 1);
  if (offset >= size || value > 256) return 2;
  uint8_t* host = malloc(size);
  if (!host) return 2;
  for (uint64_t i = 0; i < size; i++) host[i] = pattern(i);
  uint8_t* buf;
  HIP_CHECK(hipMalloc((void**)&buf, size));
  HIP_CHECK(hipMemcpy(buf, host, size, hipMemcpyHostToDevice));
  uint8_t v = value == 256 ? pattern(offset) : (uint8_t)value;
  for (uint64_t l = 0; l < launches; l++)
    HIP_CHECK(patch(wl_dim(1), wl_dim(64), 0, NULL, buf, offset, v));
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipMemcpy(host, buf, size, hipMemcpyDeviceToHost));
  for (uint64_t i = 0; i < size; i++) {
    uint8_t want = i == offset ? v : pattern(i);
    WL_EXPECT(host[i] == want, "byte %" PRIu64 ": %u != %u", i, host[i], want);
  }
  HIP_CHECK(hipFree(buf));
  printf("bytes: %" PRIu64 "\n", size);
  printf("offset: %" PRIu64 "\n", offset);
  printf("old: %u\n", pattern(offset));
  printf("new: %u\n", v);
  printf("checksum: %016" PRIx64 "\n", wl_fnv(WL_FNV_OFFSET, host, size));
  free(host);
  return 0;
}
