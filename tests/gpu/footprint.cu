// A CUDA program with a large device footprint of which each kernel touches a little, the
// shape of a training step's GEMM over a model's worth of memory: the replay cost target of a
// replayed dispatch is judged against it (tests/gpu/replay_footprint.sh).
//
//   footprint GIB DISPATCHES [TOUCH_MB]
//
// Allocates GIB GiB in 256 MiB buffers (cudaMalloc: tracked by kreplay), fills them, then
// launches `axpy` DISPATCHES times, each over TOUCH_MB MiB (default 16) of buffer 0 and 1:
// y = 3x + y in place, so a pass that ran on memory not put back would change the result.
// Prints a checksum of y and of one untouched buffer: a replay must print the same.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void fill(float *p, size_t n, float base) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = base + (float)(i % 1000) * 0.001f;
}

__global__ void axpy(const float *x, float *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = 3.0f * x[i] + y[i];
}

static double checksum(const float *d, size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  double s = 0;
  for (size_t i = 0; i < n; i++) s += h[i] * (double)((i % 7) + 1);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: footprint GIB DISPATCHES [TOUCH_MB]\n"); return 2; }
  const size_t gib = strtoull(argv[1], 0, 10), dispatches = strtoull(argv[2], 0, 10);
  const size_t touch = (argc > 3 ? strtoull(argv[3], 0, 10) : 16) << 20;
  const size_t buf = 256ull << 20, nbuf = gib * 4;
  if (nbuf < 2 || touch > buf) { fprintf(stderr, "need GIB >= 1 and TOUCH_MB <= 256\n"); return 2; }
  std::vector<float *> b(nbuf);
  for (size_t i = 0; i < nbuf; i++) {
    CK(cudaMalloc(&b[i], buf));
    fill<<<1024, 256>>>(b[i], buf / sizeof(float), (float)i);
  }
  CK(cudaDeviceSynchronize());
  const size_t n = touch / sizeof(float);
  for (size_t d = 0; d < dispatches; d++) axpy<<<1024, 256>>>(b[0], b[1], n);
  CK(cudaDeviceSynchronize());
  printf("footprint_gib %zu dispatches %zu touch_mb %zu\n", gib, dispatches, touch >> 20);
  printf("checksum_y %.6e\n", checksum(b[1], n));
  printf("checksum_untouched %.6e\n", checksum(b[nbuf - 1], 1 << 20));
  return 0;
}
