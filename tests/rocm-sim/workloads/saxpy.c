/* saxpy - y = a*x + y in place over several buffers (one stream each), plus a __device__
 * counter every launch bumps atomically.  Usage: saxpy [buffers=4] [n=100000] [iterations=8]
 * Prints `launches: <counter>` (must equal buffers*iterations) and the checksum of all y. */
#include <string.h>

#include "workload.h"

KRSIM_DEVICE_VAR(uint64_t, launch_counter) = 0;

KRSIM_KERNEL(saxpy, float, a, const float*, x, float*, y, uint64_t, n) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->y[i] = args->a * args->x[i] + args->y[i];
  }
  if (d->group_id[0] == 0 && d->group_id[1] == 0 && d->group_id[2] == 0)
    __atomic_fetch_add(KRSIM_VAR(launch_counter), 1, __ATOMIC_RELAXED);
}

#define SAXPY_MODULE(K, V, C) K(saxpy) V(launch_counter)
KRSIM_MODULE(saxpy_module, SAXPY_MODULE)

int main(int argc, char** argv) {
  uint64_t nbuf = wl_arg(argc, argv, 1, 4), n = wl_arg(argc, argv, 2, 100000),
           iters = wl_arg(argc, argv, 3, 8);
  const float a = 0.5f;
  float** x = calloc(nbuf, sizeof(float*));
  float** y = calloc(nbuf, sizeof(float*));
  hipStream_t* streams = calloc(nbuf, sizeof(hipStream_t));
  float* hx = malloc(n * sizeof(float));
  float* hy = malloc(n * sizeof(float));
  float* ref = malloc(n * sizeof(float));
  if (!x || !y || !streams || !hx || !hy || !ref) return 2;
  for (uint64_t b = 0; b < nbuf; b++) {
    HIP_CHECK(hipStreamCreate(&streams[b]));
    HIP_CHECK(hipMalloc((void**)&x[b], n * sizeof(float)));
    HIP_CHECK(hipMalloc((void**)&y[b], n * sizeof(float)));
    for (uint64_t i = 0; i < n; i++) {
      hx[i] = (float)((i * 7 + b) % 101) * 0.25f;
      hy[i] = (float)((i + 3 * b) % 17);
    }
    HIP_CHECK(hipMemcpy(x[b], hx, n * sizeof(float), hipMemcpyHostToDevice));
    HIP_CHECK(hipMemcpy(y[b], hy, n * sizeof(float), hipMemcpyHostToDevice));
  }
  uint32_t block = 256;
  uint32_t grid = (uint32_t)((n + block - 1) / block);
  for (uint64_t it = 0; it < iters; it++)
    for (uint64_t b = 0; b < nbuf; b++)
      HIP_CHECK(saxpy(wl_dim(grid), wl_dim(block), 0, streams[b], a, x[b], y[b], n));
  HIP_CHECK(hipDeviceSynchronize());

  uint64_t h = WL_FNV_OFFSET;
  for (uint64_t b = 0; b < nbuf; b++) {
    HIP_CHECK(hipMemcpy(hy, y[b], n * sizeof(float), hipMemcpyDeviceToHost));
    for (uint64_t i = 0; i < n; i++) {
      float xv = (float)((i * 7 + b) % 101) * 0.25f;
      float yv = (float)((i + 3 * b) % 17);
      for (uint64_t it = 0; it < iters; it++) yv = a * xv + yv;
      ref[i] = yv;
    }
    WL_EXPECT(memcmp(ref, hy, n * sizeof(float)) == 0, "buffer %" PRIu64 " differs", b);
    h = wl_fnv(h, hy, n * sizeof(float));
  }
  uint64_t launches = 0;
  HIP_CHECK(hipMemcpyFromSymbol(&launches, &launch_counter, sizeof(launches), 0,
                                hipMemcpyDeviceToHost));
  WL_EXPECT(launches == nbuf * iters, "counter %" PRIu64 " != %" PRIu64, launches, nbuf * iters);
  h = wl_fnv(h, &launches, sizeof(launches));
  for (uint64_t b = 0; b < nbuf; b++) {
    HIP_CHECK(hipFree(x[b]));
    HIP_CHECK(hipFree(y[b]));
    HIP_CHECK(hipStreamDestroy(streams[b]));
  }
  printf("launches: %" PRIu64 "\n", launches);
  printf("checksum: %016" PRIx64 "\n", h);
  return 0;
}
