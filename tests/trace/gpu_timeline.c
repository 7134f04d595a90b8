/* Kernels, copies and a barrier-guarded graph, for the GPU timeline tests.
 * Usage: gpu_timeline MODE [N]
 *   streams N  two streams, each: one H2D copy, N launches of `fill`, hipStreamSynchronize, one
 *              D2H copy (checked). With KRSIM_GPUS=2 and MODE two_gpus, the second stream is on
 *              device 1. Prints `launches: 2N`.
 *   barrier N  one stream: hipMemcpyAsync H2D, then N launches of a graph of `fill` -> `twice`
 *              (the first launch behind a BARRIER_AND packet while the copy is unfinished, with
 *              KRSIM_COPY_LATENCY_US), hipStreamSynchronize, one D2H copy (checked).
 *   nosync N   N launches of `fill` on the null stream, then return without synchronizing.
 *   rounds N   a long-running program to attach to: one stream and buffer made (and one round
 *              run), `ready` printed, then per line on stdin one round (H2D copy, N fills,
 *              synchronize, D2H copy, checked) and `round R` printed; `rounds done` at EOF. */
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(fill, uint32_t*, x, uint32_t, n, uint32_t, v) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->x[i] = args->v;
  }
}
KRSIM_KERNEL(twice, uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->x[i] *= 2u;
  }
}

#define TL_MODULE(K, V, C) K(fill) K(twice)
KRSIM_MODULE(tl_module, TL_MODULE)

enum { LEN = 1024 };

/* One stream's work: copy in, `launches` fills, synchronize, copy out and check. */
static void stream_work(int device, uint64_t launches) {
  HIP_CHECK(hipSetDevice(device));
  uint32_t host[LEN], *x;
  for (int i = 0; i < LEN; i++) host[i] = (uint32_t)i;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hipMalloc((void**)&x, sizeof host));
  HIP_CHECK(hipMemcpy(x, host, sizeof host, hipMemcpyHostToDevice));
  for (uint64_t l = 0; l < launches; l++)
    HIP_CHECK(fill(wl_dim(LEN / 256), wl_dim(256), 0, s, x, LEN, (uint32_t)l + 7u));
  HIP_CHECK(hipStreamSynchronize(s));
  HIP_CHECK(hipMemcpy(host, x, sizeof host, hipMemcpyDeviceToHost));
  WL_EXPECT(host[LEN - 1] == (uint32_t)launches + 6u, "fill wrote %u", host[LEN - 1]);
  HIP_CHECK(hipFree(x));
  HIP_CHECK(hipStreamDestroy(s));
}

static void barrier(uint64_t launches) {
  uint32_t host[LEN], *x;
  for (int i = 0; i < LEN; i++) host[i] = 5u;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hipMalloc((void**)&x, sizeof host));
  uint32_t n = LEN, v = 3;
  hipGraph_t g;
  HIP_CHECK(hipGraphCreate(&g, 0));
  void* p_fill[] = {&x, &n, &v};
  void* p_twice[] = {&x, &n};
  hipKernelNodeParams p;
  memset(&p, 0, sizeof p);
  p.gridDim = wl_dim(LEN / 256);
  p.blockDim = wl_dim(256);
  p.func = (void*)fill;
  p.kernelParams = p_fill;
  hipGraphNode_t n_fill, n_twice;
  HIP_CHECK(hipGraphAddKernelNode(&n_fill, g, NULL, 0, &p));
  p.func = (void*)twice;
  p.kernelParams = p_twice;
  HIP_CHECK(hipGraphAddKernelNode(&n_twice, g, &n_fill, 1, &p));
  hipGraphExec_t exec;
  HIP_CHECK(hipGraphInstantiate(&exec, g, NULL, NULL, 0));
  HIP_CHECK(hipMemcpyAsync(x, host, sizeof host, hipMemcpyHostToDevice, s));
  for (uint64_t l = 0; l < launches; l++) HIP_CHECK(hipGraphLaunch(exec, s));
  HIP_CHECK(hipStreamSynchronize(s));
  HIP_CHECK(hipMemcpy(host, x, sizeof host, hipMemcpyDeviceToHost));
  WL_EXPECT(host[0] == 6u, "graph wrote %u", host[0]);
  HIP_CHECK(hipGraphExecDestroy(exec));
  HIP_CHECK(hipGraphDestroy(g));
  HIP_CHECK(hipFree(x));
  HIP_CHECK(hipStreamDestroy(s));
}

/* One round on a stream and buffer that live across rounds. */
static void round_on(hipStream_t s, uint32_t* x, uint64_t launches, uint64_t r) {
  uint32_t host[LEN];
  for (int i = 0; i < LEN; i++) host[i] = (uint32_t)i;
  HIP_CHECK(hipMemcpy(x, host, sizeof host, hipMemcpyHostToDevice));
  for (uint64_t l = 0; l < launches; l++)
    HIP_CHECK(fill(wl_dim(LEN / 256), wl_dim(256), 0, s, x, LEN, (uint32_t)(r * 100 + l)));
  HIP_CHECK(hipStreamSynchronize(s));
  HIP_CHECK(hipMemcpy(host, x, sizeof host, hipMemcpyDeviceToHost));
  WL_EXPECT(host[7] == (uint32_t)(r * 100 + launches - 1), "fill wrote %u", host[7]);
}

static void rounds(uint64_t launches) {
  hipStream_t s;
  uint32_t* x;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hipMalloc((void**)&x, LEN * sizeof *x));
  round_on(s, x, launches, 0);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  for (uint64_t r = 1; fgets(line, sizeof line, stdin); r++) {
    round_on(s, x, launches, r);
    printf("round %" PRIu64 "\n", r);
    fflush(stdout);
  }
  HIP_CHECK(hipFree(x));
  HIP_CHECK(hipStreamDestroy(s));
  printf("rounds done\n");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "streams";
  uint64_t n = wl_arg(argc, argv, 2, 4);
  if (strcmp(mode, "streams") == 0 || strcmp(mode, "two_gpus") == 0) {
    stream_work(0, n);
    stream_work(strcmp(mode, "two_gpus") == 0 ? 1 : 0, n);
    printf("launches: %" PRIu64 "\n", 2 * n);
  } else if (strcmp(mode, "barrier") == 0) {
    barrier(n);
    printf("graph_launches: %" PRIu64 "\n", n);
  } else if (strcmp(mode, "rounds") == 0) {
    rounds(n);
  } else if (strcmp(mode, "nosync") == 0) {
    uint32_t* x;
    HIP_CHECK(hipMalloc((void**)&x, LEN * sizeof *x));
    for (uint64_t l = 0; l < n; l++)
      HIP_CHECK(fill(wl_dim(LEN / 256), wl_dim(256), 0, NULL, x, LEN, 1));
    printf("launched: %" PRIu64 "\n", n);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
