/* graph - a graph of four kernels (a diamond: scale -> {accumulate, mix} -> combine) built
 * once and launched repeatedly; every launch is one multi-packet submission.
 * Usage: graph [n=65536] [launches=50]
 * Prints `graph_launches`, `kernels_per_graph` and the checksum of the final w. */
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(scale, uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->x[i] = args->x[i] * 3u + 1u;
  }
}
KRSIM_KERNEL(accumulate, uint32_t*, y, const uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] += args->x[i];
  }
}
KRSIM_KERNEL(mix, uint32_t*, z, const uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->z[i] ^= args->x[i] >> 3;
  }
}
KRSIM_KERNEL(combine, uint32_t*, w, const uint32_t*, y, const uint32_t*, z, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->w[i] = args->w[i] * 5u + (args->y[i] ^ args->z[i]);
  }
}

#define GRAPH_MODULE(K, V, C) K(scale) K(accumulate) K(mix) K(combine)
KRSIM_MODULE(graph_module, GRAPH_MODULE)

static hipGraphNode_t add(hipGraph_t g, const void* fn, uint32_t n, void** params,
                          hipGraphNode_t* deps, size_t ndeps) {
  hipKernelNodeParams p;
  memset(&p, 0, sizeof(p));
  p.func = (void*)fn;
  p.gridDim = wl_dim((n + 127) / 128);
  p.blockDim = wl_dim(128);
  p.kernelParams = params;
  hipGraphNode_t node;
  HIP_CHECK(hipGraphAddKernelNode(&node, g, deps, ndeps, &p));
  return node;
}

int main(int argc, char** argv) {
  uint32_t n = (uint32_t)wl_arg(argc, argv, 1, 65536);
  uint64_t launches = wl_arg(argc, argv, 2, 50);
  uint32_t *x, *y, *z, *w;
  size_t bytes = (size_t)n * sizeof(uint32_t);
  uint32_t* h[4];
  for (int i = 0; i < 4; i++) {
    h[i] = malloc(bytes);
    if (!h[i]) return 2;
  }
  for (uint32_t i = 0; i < n; i++) {
    h[0][i] = i;
    h[1][i] = i * 7u;
    h[2][i] = ~i;
    h[3][i] = 1;
  }
  HIP_CHECK(hipMalloc((void**)&x, bytes));
  HIP_CHECK(hipMalloc((void**)&y, bytes));
  HIP_CHECK(hipMalloc((void**)&z, bytes));
  HIP_CHECK(hipMalloc((void**)&w, bytes));
  HIP_CHECK(hipMemcpy(x, h[0], bytes, hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(y, h[1], bytes, hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(z, h[2], bytes, hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(w, h[3], bytes, hipMemcpyHostToDevice));

  hipGraph_t g;
  HIP_CHECK(hipGraphCreate(&g, 0));
  void* p_scale[] = {&x, &n};
  void* p_acc[] = {&y, &x, &n};
  void* p_mix[] = {&z, &x, &n};
  void* p_comb[] = {&w, &y, &z, &n};
  hipGraphNode_t n_scale = add(g, (const void*)scale, n, p_scale, NULL, 0);
  hipGraphNode_t n_acc = add(g, (const void*)accumulate, n, p_acc, &n_scale, 1);
  hipGraphNode_t n_mix = add(g, (const void*)mix, n, p_mix, &n_scale, 1);
  hipGraphNode_t both[] = {n_acc, n_mix};
  add(g, (const void*)combine, n, p_comb, both, 2);
  hipGraphExec_t exec;
  HIP_CHECK(hipGraphInstantiate(&exec, g, NULL, NULL, 0));
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  for (uint64_t l = 0; l < launches; l++) HIP_CHECK(hipGraphLaunch(exec, s));
  HIP_CHECK(hipStreamSynchronize(s));

  uint32_t* out = malloc(bytes);
  if (!out) return 2;
  HIP_CHECK(hipMemcpy(out, w, bytes, hipMemcpyDeviceToHost));
  for (uint64_t l = 0; l < launches; l++)
    for (uint32_t i = 0; i < n; i++) {
      h[0][i] = h[0][i] * 3u + 1u;
      h[1][i] += h[0][i];
      h[2][i] ^= h[0][i] >> 3;
      h[3][i] = h[3][i] * 5u + (h[1][i] ^ h[2][i]);
    }
  WL_EXPECT(memcmp(out, h[3], bytes) == 0, "w differs from the host reference");
  uint64_t hash = wl_fnv(WL_FNV_OFFSET, out, bytes);
  HIP_CHECK(hipGraphExecDestroy(exec));
  HIP_CHECK(hipGraphDestroy(g));
  HIP_CHECK(hipStreamDestroy(s));
  HIP_CHECK(hipFree(x));
  HIP_CHECK(hipFree(y));
  HIP_CHECK(hipFree(z));
  HIP_CHECK(hipFree(w));
  printf("graph_launches: %" PRIu64 "\n", launches);
  printf("kernels_per_graph: 4\n");
  printf("checksum: %016" PRIx64 "\n", hash);
  return 0;
}
