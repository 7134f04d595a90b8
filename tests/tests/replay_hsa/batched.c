/* batched.c - several submissions reach the queue interceptor in ONE batch, deterministically:
 * `hold` (one workgroup) reports that it runs and then waits for the host; while it runs the
 * host makes `before` bump launches (one doorbell each), one launch of a two-node graph of
 * `mix` (two packets, one doorbell) and `after` more bump launches, then releases `hold`.
 * Under kreplay the interceptor is busy replaying `hold` meanwhile, so everything after it
 * arrives as one batch. Without kreplay the queue simply waits behind `hold` (barrier bits).
 * Usage: batched [n=4096] [before=2] [after=2]
 * Prints `bumps`, `graph_nodes` and the checksum of y (checked against a host reference). */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "workload.h"

KRSIM_KERNEL(hold, volatile uint32_t*, flags) {
  if (d->group_id[0] == 0) {
    __atomic_store_n(&args->flags[0], 1u, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&args->flags[1], __ATOMIC_ACQUIRE)) sched_yield();
  }
}
KRSIM_KERNEL(bump, uint32_t*, y, uint32_t, n, uint32_t, v) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] = args->y[i] * 3u + args->v;
  }
}
KRSIM_KERNEL(mix, uint32_t*, y, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] ^= args->y[i] >> 3;
  }
}

#define BATCHED_MODULE(K, V, C) K(hold) K(bump) K(mix)
KRSIM_MODULE(batched_module, BATCHED_MODULE)

static void host_bump(uint32_t* h, uint32_t n, uint32_t v) {
  for (uint32_t i = 0; i < n; i++) h[i] = h[i] * 3u + v;
}
static void host_mix(uint32_t* h, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) h[i] ^= h[i] >> 3;
}

int main(int argc, char** argv) {
  uint32_t n = (uint32_t)wl_arg(argc, argv, 1, 4096);
  uint32_t before = (uint32_t)wl_arg(argc, argv, 2, 2), after = (uint32_t)wl_arg(argc, argv, 3, 2);
  size_t bytes = (size_t)n * sizeof(uint32_t);
  uint32_t* h = malloc(bytes);
  if (!h) return 2;
  for (uint32_t i = 0; i < n; i++) h[i] = i * 2654435761u;
  uint32_t* y;
  HIP_CHECK(hipMalloc((void**)&y, bytes));
  HIP_CHECK(hipMemcpy(y, h, bytes, hipMemcpyHostToDevice));
  volatile uint32_t* flags;
  HIP_CHECK(hipHostMalloc((void**)&flags, 2 * sizeof(uint32_t), 0));
  flags[0] = flags[1] = 0;

  hipGraph_t g;
  HIP_CHECK(hipGraphCreate(&g, 0));
  hipKernelNodeParams p;
  memset(&p, 0, sizeof(p));
  p.func = (void*)mix;
  p.gridDim = wl_dim((n + 127) / 128);
  p.blockDim = wl_dim(128);
  void* params[] = {&y, &n};
  p.kernelParams = params;
  hipGraphNode_t first, second;
  HIP_CHECK(hipGraphAddKernelNode(&first, g, NULL, 0, &p));
  HIP_CHECK(hipGraphAddKernelNode(&second, g, &first, 1, &p));
  hipGraphExec_t exec;
  HIP_CHECK(hipGraphInstantiate(&exec, g, NULL, NULL, 0));

  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hold(wl_dim(1), wl_dim(1), 0, s, (volatile uint32_t*)flags));
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE)) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    WL_EXPECT(t.tv_sec - t0.tv_sec < 60, "hold never started");
    sched_yield();
  }
  uint32_t v = 1;
  for (uint32_t k = 0; k < before; k++, v++) {
    HIP_CHECK(bump(wl_dim((n + 127) / 128), wl_dim(128), 0, s, y, n, v));
    host_bump(h, n, v);
  }
  HIP_CHECK(hipGraphLaunch(exec, s));
  host_mix(h, n);
  host_mix(h, n);
  for (uint32_t k = 0; k < after; k++, v++) {
    HIP_CHECK(bump(wl_dim((n + 127) / 128), wl_dim(128), 0, s, y, n, v));
    host_bump(h, n, v);
  }
  __atomic_store_n(&flags[1], 1u, __ATOMIC_RELEASE);
  HIP_CHECK(hipStreamSynchronize(s));

  uint32_t* out = malloc(bytes);
  if (!out) return 2;
  HIP_CHECK(hipMemcpy(out, y, bytes, hipMemcpyDeviceToHost));
  WL_EXPECT(memcmp(out, h, bytes) == 0, "y differs from the host reference");
  printf("bumps: %u\n", before + after);
  printf("graph_nodes: 2\n");
  printf("checksum: %016" PRIx64 "\n", wl_fnv(WL_FNV_OFFSET, out, bytes));
  HIP_CHECK(hipGraphExecDestroy(exec));
  HIP_CHECK(hipGraphDestroy(g));
  HIP_CHECK(hipStreamDestroy(s));
  HIP_CHECK(hipHostFree((void*)flags));
  HIP_CHECK(hipFree(y));
  free(h);
  free(out);
  return 0;
}
