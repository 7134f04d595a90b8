/* high_qps - many host threads (default 32), each on its own stream, launching small kernels
 * and allocating/freeing device memory in a loop.
 * Usage: high_qps [threads=32] [iterations=200]
 * Each iteration: hipMalloc, a fill kernel, a copy back, a check, hipFree. Prints
 * `launches: <threads*iterations>` and a checksum of every value read back. */
#include <pthread.h>
#include <string.h>

#include "workload.h"

KRSIM_KERNEL(fill, uint32_t*, out, uint32_t, n, uint32_t, seed) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->out[i] = args->seed * 2654435761u + (uint32_t)i;
  }
}

#define QPS_MODULE(K, V, C) K(fill)
KRSIM_MODULE(qps_module, QPS_MODULE)

typedef struct worker {
  uint32_t id;
  uint64_t iterations;
  uint64_t hash; /* this thread's values, in order */
  int failed;
} worker;

static void* run(void* arg) {
  worker* w = arg;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  uint32_t host[512];
  w->hash = WL_FNV_OFFSET;
  for (uint64_t it = 0; it < w->iterations; it++) {
    uint32_t n = 64 + (uint32_t)((it * 31 + w->id) % 448);
    uint32_t seed = w->id * 1000003u + (uint32_t)it;
    uint32_t* dev;
    HIP_CHECK(hipMalloc((void**)&dev, n * sizeof(uint32_t)));
    HIP_CHECK(fill(wl_dim((n + 63) / 64), wl_dim(64), 0, s, dev, n, seed));
    HIP_CHECK(hipMemcpyAsync(host, dev, n * sizeof(uint32_t), hipMemcpyDeviceToHost, s));
    HIP_CHECK(hipStreamSynchronize(s));
    for (uint32_t i = 0; i < n; i++)
      if (host[i] != seed * 2654435761u + i) w->failed = 1;
    w->hash = wl_fnv(w->hash, host, n * sizeof(uint32_t));
    HIP_CHECK(hipFree(dev));
  }
  HIP_CHECK(hipStreamDestroy(s));
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t threads = wl_arg(argc, argv, 1, 32), iters = wl_arg(argc, argv, 2, 200);
  worker* ws = calloc(threads, sizeof(worker));
  pthread_t* ts = calloc(threads, sizeof(pthread_t));
  if (!ws || !ts) return 2;
  for (uint64_t t = 0; t < threads; t++) {
    ws[t] = (worker){.id = (uint32_t)t, .iterations = iters};
    if (pthread_create(&ts[t], NULL, run, &ws[t]) != 0) return 2;
  }
  uint64_t h = WL_FNV_OFFSET;
  for (uint64_t t = 0; t < threads; t++) {
    pthread_join(ts[t], NULL);
    WL_EXPECT(!ws[t].failed, "thread %" PRIu64 " read back a wrong value", t);
    h = wl_fnv(h, &ws[t].hash, sizeof(ws[t].hash));
  }
  printf("launches: %" PRIu64 "\n", threads * iters);
  printf("checksum: %016" PRIx64 "\n", h);
  return 0;
}
