/* racy - a deliberately racy kernel: every work-item does a non-atomic read-modify-write of
 * one shared device counter, with a pause in between. With KRSIM_WORKERS=1 workgroups run
 * one after another and the count is exact; with more workers updates get lost, so the
 * output is nondeterministic (for determinism tests). It never fails on a lost update.
 * Usage: racy [workgroups=64] [items_per_group=64]
 * Prints `expected`, `counter` and the checksum of the counter; the counter's device address
 * goes to stderr (`counter_address: 0x...`), for tests that locate it in a report. */
#include "workload.h"

KRSIM_KERNEL(race, volatile uint64_t*, counter) {
  KRSIM_FOR_EACH_X(d, i) {
    (void)i;
    uint64_t v = *args->counter;
    for (volatile int spin = 0; spin < 200; spin++) {
    }
    *args->counter = v + 1;
  }
}

#define RACY_MODULE(K, V, C) K(race)
KRSIM_MODULE(racy_module, RACY_MODULE)

int main(int argc, char** argv) {
  uint64_t groups = wl_arg(argc, argv, 1, 64), items = wl_arg(argc, argv, 2, 64);
  uint64_t* counter;
  HIP_CHECK(hipMalloc((void**)&counter, sizeof(uint64_t)));
  HIP_CHECK(hipMemset(counter, 0, sizeof(uint64_t)));
  fprintf(stderr, "counter_address: %p\n", (void*)counter);
  HIP_CHECK(race(wl_dim((uint32_t)groups), wl_dim((uint32_t)items), 0, NULL, counter));
  uint64_t value = 0;
  HIP_CHECK(hipMemcpy(&value, counter, sizeof(value), hipMemcpyDeviceToHost));
  HIP_CHECK(hipFree(counter));
  WL_EXPECT(value >= 1 && value <= groups * items, "counter %" PRIu64 " out of range", value);
  printf("expected: %" PRIu64 "\n", groups * items);
  printf("counter: %" PRIu64 "\n", value);
  printf("checksum: %016" PRIx64 "\n", wl_fnv(WL_FNV_OFFSET, &value, sizeof(value)));
  return 0;
}
