/* hip_graph.c - graphs: a diamond of four kernel nodes, instantiated once and launched many
 * times; each hipGraphLaunch must reach the queue as ONE batch (all packets, one doorbell).
 * The test observes that as a tool would: it interposes hsa_queue_create and
 * hsa_signal_store_screlease (exported by the executable, -rdynamic) to learn the stream's
 * queue and count doorbell rings and the write index at each ring. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "hip_check.h"

/* ---------------------------------------------------------------- the observer */

static hsa_queue_t* queues[64];
static int nqueues;
static uint64_t doorbells[64];   /* rings per queue */
static uint64_t last_ring[64];   /* value written at the last ring */

hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                              void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                              uint32_t private_segment_size, uint32_t group_segment_size,
                              hsa_queue_t** queue) {
  typedef hsa_status_t (*fn)(hsa_agent_t, uint32_t, hsa_queue_type32_t,
                             void (*)(hsa_status_t, hsa_queue_t*, void*), void*, uint32_t,
                             uint32_t, hsa_queue_t**);
  fn real = (fn)dlsym(RTLD_NEXT, "hsa_queue_create");
  hsa_status_t st = real(agent, size, type, callback, data, private_segment_size,
                         group_segment_size, queue);
  if (st == HSA_STATUS_SUCCESS && nqueues < 64) __atomic_store_n(&queues[nqueues++], *queue, __ATOMIC_RELEASE);
  return st;
}

void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  typedef void (*fn)(hsa_signal_t, hsa_signal_value_t);
  fn real = (fn)dlsym(RTLD_NEXT, "hsa_signal_store_screlease");
  for (int i = 0; i < nqueues; i++) {
    if (queues[i] && queues[i]->doorbell_signal.handle == signal.handle) {
      __atomic_fetch_add(&doorbells[i], 1, __ATOMIC_RELAXED);
      last_ring[i] = (uint64_t)value;
    }
  }
  real(signal, value);
}

/* ---------------------------------------------------------------- kernels */

KRSIM_KERNEL(inc, uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->x[i] += 1;
  }
}
KRSIM_KERNEL(twice, uint32_t*, y, const uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] = args->x[i] * 2;
  }
}
KRSIM_KERNEL(plus3, uint32_t*, z, const uint32_t*, x, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->z[i] = args->x[i] + 3;
  }
}
KRSIM_KERNEL(sum, uint32_t*, w, const uint32_t*, y, const uint32_t*, z, uint32_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->w[i] += args->y[i] + args->z[i];
  }
}

#define GRAPH_MODULE(K, V, C) K(inc) K(twice) K(plus3) K(sum)
KRSIM_MODULE(graph_module, GRAPH_MODULE)

enum { N = 1000 };

static hipGraphNode_t node(hipGraph_t g, const void* fn, void** params, hipGraphNode_t* deps,
                           size_t ndeps) {
  hipKernelNodeParams p;
  memset(&p, 0, sizeof(p));
  p.func = (void*)fn;
  p.gridDim = d3(4, 1, 1);
  p.blockDim = d3(256, 1, 1);
  p.kernelParams = params;
  hipGraphNode_t out;
  CHECK_HIP(hipGraphAddKernelNode(&out, g, deps, ndeps, &p));
  return out;
}

int main(void) {
  /* Copies take 20 ms, so a graph launched right after one must wait behind a barrier. */
  setenv("KRSIM_COPY_LATENCY_US", "20000", 1);
  CHECK_HIP(hipInit(0));
  uint32_t *x, *y, *z, *w, *host;
  CHECK_HIP(hipMalloc((void**)&x, N * 4));
  CHECK_HIP(hipMalloc((void**)&y, N * 4));
  CHECK_HIP(hipMalloc((void**)&z, N * 4));
  CHECK_HIP(hipMalloc((void**)&w, N * 4));
  CHECK_HIP(hipHostMalloc((void**)&host, N * 4, 0));
  CHECK_HIP(hipMemset(x, 0, N * 4));
  CHECK_HIP(hipMemset(w, 0, N * 4));

  hipGraph_t g;
  CHECK_HIP(hipGraphCreate(&g, 0));
  uint32_t n = N;
  void* p_inc[] = {&x, &n};
  void* p_twice[] = {&y, &x, &n};
  void* p_plus3[] = {&z, &x, &n};
  void* p_sum[] = {&w, &y, &z, &n};
  hipGraphNode_t a = node(g, (const void*)inc, p_inc, NULL, 0);
  hipGraphNode_t b = node(g, (const void*)twice, p_twice, &a, 1);
  hipGraphNode_t c = node(g, (const void*)plus3, p_plus3, &a, 1);
  hipGraphNode_t bc[] = {b, c};
  hipGraphNode_t dn = node(g, (const void*)sum, p_sum, bc, 2);
  size_t count = 0;
  CHECK_HIP(hipGraphGetNodes(g, NULL, &count));
  CHECK_EQ(count, 4);
  hipGraphExec_t exec;
  CHECK_HIP(hipGraphInstantiate(&exec, g, NULL, NULL, 0));

  int before = nqueues;
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  CHECK_EQ(nqueues, before + 1); /* one HSA queue per stream */
  int qi = nqueues - 1;
  hsa_queue_t* q = queues[qi];

  uint64_t w0 = hsa_queue_load_write_index_relaxed(q), r0 = doorbells[qi];
  CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_EQ(doorbells[qi] - r0, 1);
  CHECK_EQ(hsa_queue_load_write_index_relaxed(q) - w0, 4);
  CHECK_EQ(last_ring[qi], w0 + 3);
  for (int i = 0; i < 9; i++) CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_EQ(doorbells[qi] - r0, 10);
  CHECK_EQ(hsa_queue_load_write_index_relaxed(q) - w0, 40);
  CHECK_HIP(hipStreamSynchronize(s));
  puts("ok one_batch");

  /* Behind an unfinished copy: barrier + 4 dispatches, still one ring. */
  for (uint32_t i = 0; i < N; i++) host[i] = i;
  CHECK_HIP(hipMemcpyAsync(x, host, N * 4, hipMemcpyHostToDevice, s));
  uint64_t w1 = hsa_queue_load_write_index_relaxed(q), r1 = doorbells[qi];
  CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_EQ(doorbells[qi] - r1, 1);
  CHECK_EQ(hsa_queue_load_write_index_relaxed(q) - w1, 5);
  CHECK_HIP(hipStreamSynchronize(s));
  /* A plain launch is one packet, one ring. */
  CHECK_HIP(inc(d3(4, 1, 1), d3(256, 1, 1), 0, s, x, n));
  CHECK_EQ(doorbells[qi] - r1, 2);
  CHECK_EQ(hsa_queue_load_write_index_relaxed(q) - w1, 6);
  CHECK_HIP(hipStreamSynchronize(s));
  puts("ok after_copy");

  /* Results: 10 launches from x = 0, then x = i, one launch, one inc. */
  uint32_t want_w[N];
  for (uint32_t i = 0; i < N; i++) {
    uint32_t xv = 0, wv = 0;
    for (int l = 0; l < 10; l++) {
      xv += 1;
      wv += xv * 2 + xv + 3;
    }
    xv = i + 1;
    wv += xv * 2 + xv + 3;
    want_w[i] = wv;
  }
  CHECK_HIP(hipMemcpy(host, w, N * 4, hipMemcpyDeviceToHost));
  for (uint32_t i = 0; i < N; i++) CHECK_EQ(host[i], want_w[i]);
  CHECK_HIP(hipMemcpy(host, x, N * 4, hipMemcpyDeviceToHost));
  for (uint32_t i = 0; i < N; i++) CHECK_EQ(host[i], i + 2);
  puts("ok results");

  /* A cycle cannot be instantiated. */
  CHECK_HIP(hipGraphAddDependencies(g, &dn, &a, 1));
  hipGraphExec_t bad;
  CHECK_HIP_IS(hipGraphInstantiate(&bad, g, NULL, NULL, 0), hipErrorInvalidValue);
  (void)hipGetLastError();
  CHECK_HIP(hipGraphExecDestroy(exec));
  CHECK_HIP(hipGraphDestroy(g));
  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipFree(x));
  CHECK_HIP(hipFree(y));
  CHECK_HIP(hipFree(z));
  CHECK_HIP(hipFree(w));
  CHECK_HIP(hipHostFree(host));
  puts("PASS");
  return 0;
}
