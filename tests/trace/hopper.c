/* A HIP program whose one thread moves between CPUs 0 and 1 while it calls: N idle
 * hipStreamSynchronize calls, pinned to CPU 0 and CPU 1 in turns of TURN calls, so its records
 * land in both of kreplay's per-CPU rings. Usage: hopper N TURN */
#define _GNU_SOURCE
#include <sched.h>

#include "workload.h"

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  WL_EXPECT(sched_setaffinity(0, sizeof set, &set) == 0, "cannot pin to CPU %d", cpu);
}

int main(int argc, char** argv) {
  uint64_t n = wl_arg(argc, argv, 1, 4000);
  uint64_t turn = wl_arg(argc, argv, 2, 50);
  for (uint64_t i = 0; i < n; i++) {
    if (i % turn == 0) pin((int)((i / turn) & 1));
    HIP_CHECK(hipStreamSynchronize(NULL));
  }
  printf("done\n");
  return 0;
}
