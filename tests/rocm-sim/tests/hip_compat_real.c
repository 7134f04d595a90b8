/* hip_compat_real.c - binary compatibility: this program is compiled and linked against
 * Debian's REAL ROCm 5.2 libamdhip64.so.5 (-l:libamdhip64.so.5, so it records the real
 * per-function version nodes: hip_4.2, hip_4.3, hip_5.1) and is run unchanged against the
 * sim with LD_LIBRARY_PATH=tests/rocm-sim/build. It uses only HIP calls, no HSA. */
#include "hip_check.h"

KRSIM_DEVICE_VAR(uint64_t, calls) = 0;

KRSIM_KERNEL(axpb, int32_t*, v, int32_t, a, int32_t, b, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->v[i] = args->v[i] * args->a + args->b;
  }
  if (d->group_id[0] == 0) __atomic_fetch_add(KRSIM_VAR(calls), 1, __ATOMIC_RELAXED);
}

#define COMPAT_MODULE(K, V, C) K(axpb) V(calls)
KRSIM_MODULE(compat_module, COMPAT_MODULE)

int main(void) {
  enum { N = 512 };
  int count = 0;
  CHECK_HIP(hipGetDeviceCount(&count)); /* hip_4.2 */
  CHECK(count >= 1);
  int32_t host[N];
  for (int i = 0; i < N; i++) host[i] = i;
  int32_t* dev;
  CHECK_HIP(hipMalloc((void**)&dev, sizeof(host)));
  CHECK_HIP(hipMemcpy(dev, host, sizeof(host), hipMemcpyHostToDevice));
  CHECK_HIP(axpb(d3(N / 128, 1, 1), d3(128, 1, 1), 0, NULL, dev, 3, 1, N)); /* hipLaunchKernel */

  /* hip_4.3: graphs */
  hipGraph_t g;
  CHECK_HIP(hipGraphCreate(&g, 0));
  int32_t a = 2, b = -1;
  uint32_t n = N;
  void* params[] = {&dev, &a, &b, &n};
  hipKernelNodeParams p;
  memset(&p, 0, sizeof(p));
  p.func = (void*)axpb;
  p.gridDim = d3(N / 128, 1, 1);
  p.blockDim = d3(128, 1, 1);
  p.kernelParams = params;
  hipGraphNode_t node;
  CHECK_HIP(hipGraphAddKernelNode(&node, g, NULL, 0, &p));
  hipGraphExec_t exec;
  CHECK_HIP(hipGraphInstantiate(&exec, g, NULL, NULL, 0));
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_HIP(hipStreamSynchronize(s));

  /* hip_5.1: stream-ordered allocation */
  void* tmp;
  CHECK_HIP(hipMallocAsync(&tmp, 4096, s));
  CHECK_HIP(hipMemcpyAsync(tmp, dev, sizeof(host), hipMemcpyDeviceToDevice, s));
  CHECK_HIP(hipMemcpyAsync(host, tmp, sizeof(host), hipMemcpyDeviceToHost, s));
  CHECK_HIP(hipFreeAsync(tmp, s));
  CHECK_HIP(hipStreamSynchronize(s));
  for (int i = 0; i < N; i++) CHECK_EQ(host[i], (i * 3 + 1) * 2 - 1);
  uint64_t c = 0;
  CHECK_HIP(hipMemcpyFromSymbol(&c, &calls, sizeof(c), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(c, 2);
  CHECK(strcmp(hipGetErrorName(hipErrorInvalidValue), "hipErrorInvalidValue") == 0);

  CHECK_HIP(hipGraphExecDestroy(exec));
  CHECK_HIP(hipGraphDestroy(g));
  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipFree(dev));
  printf("kernel calls: %" PRIu64 "\n", c);
  puts("PASS");
  return 0;
}
