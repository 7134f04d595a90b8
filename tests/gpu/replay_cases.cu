// Replay scenarios on a real NVIDIA GPU (CUDA runtime API). Each case prints `key value`
// lines; the output of a case must be identical with and without `kreplay replay`, because
// kreplay restores memory between passes and the last pass leaves the one-pass result.
//   replay_cases inplace | buffers | devicevar | graph | async | footprint MIB DIRTY_PERMILLE | tables
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(2); } } while (0)

__device__ unsigned long long hits;

extern "C" __global__ void axpy_inplace(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

extern "C" __global__ void three_buffers(float *a, float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { a[i] += 1.0f; b[i] *= 2.0f; c[i] = a[i] + b[i] + c[i]; }
}

extern "C" __global__ void count_hits(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] += 1.0f; atomicAdd(&hits, 1ull); }
}

// Adds 1 to one word in every `stride` words: a known dirty fraction of a large footprint.
extern "C" __global__ void touch_strided(unsigned *p, size_t words, size_t stride) {
  size_t i = (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * stride;
  if (i < words) p[i] += 1;
}

// Sums the footprint on the device (a host copy of gigabytes would dominate the run).
extern "C" __global__ void sum_words(const unsigned *p, size_t words, unsigned long long *out) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) s += p[i];
  atomicAdd(out, s);
}

static double sum(const std::vector<float> &v) { double s = 0; for (float f : v) s += f; return s; }

static void fill(std::vector<float> &v, float base) { for (size_t i = 0; i < v.size(); i++) v[i] = base + (float)(i % 97); }

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "inplace";
  const int n = 1 << 20, T = 256, B = (n + T - 1) / T;
  const size_t bytes = n * sizeof(float);
  if (!strcmp(c, "inplace") || !strcmp(c, "graph") || !strcmp(c, "async")) {
    std::vector<float> x(n), y(n);
    fill(x, 0.5f); fill(y, 1.0f);
    float *dx, *dy;
    CK(cudaMalloc(&dx, bytes));
    if (!strcmp(c, "async")) CK(cudaMallocAsync((void **)&dy, bytes, 0)); else CK(cudaMalloc(&dy, bytes));
    CK(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice));
    if (!strcmp(c, "graph")) {
      cudaStream_t s; cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamCreate(&s));
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      axpy_inplace<<<B, T, 0, s>>>(dy, dx, 2.0f, n);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaStreamSynchronize(s));
    } else {
      axpy_inplace<<<B, T>>>(dy, dx, 2.0f, n);
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost));
    // One pass: y[i] = 1 + i%97 + 2 * (0.5 + i%97).
    int wrong = 0;
    for (int i = 0; i < n; i++) if (y[i] != 1.0f + (i % 97) + 2.0f * (0.5f + (i % 97))) wrong++;
    printf("y_sum %.1f\nwrong %d\n", sum(y), wrong);
  } else if (!strcmp(c, "buffers")) {
    std::vector<float> a(n), b(n), cc(n);
    fill(a, 1.0f); fill(b, 2.0f); fill(cc, 3.0f);
    float *da, *db, *dc;
    CK(cudaMalloc(&da, bytes)); CK(cudaMalloc(&db, bytes)); CK(cudaMalloc(&dc, bytes));
    CK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, cc.data(), bytes, cudaMemcpyHostToDevice));
    three_buffers<<<B, T>>>(da, db, dc, n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(a.data(), da, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), db, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(cc.data(), dc, bytes, cudaMemcpyDeviceToHost));
    printf("a_sum %.1f\nb_sum %.1f\nc_sum %.1f\n", sum(a), sum(b), sum(cc));
  } else if (!strcmp(c, "devicevar")) {
    std::vector<float> y(n);
    fill(y, 0.0f);
    float *dy;
    CK(cudaMalloc(&dy, bytes));
    CK(cudaMemcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice));
    unsigned long long zero = 0, h = 0;
    CK(cudaMemcpyToSymbol(hits, &zero, sizeof zero));
    count_hits<<<B, T>>>(dy, n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpyFromSymbol(&h, hits, sizeof h));
    CK(cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost));
    printf("hits %llu\ny_sum %.1f\n", h, sum(y));
  } else if (!strcmp(c, "footprint")) {
    size_t mib = argc > 2 ? strtoull(argv[2], 0, 10) : 1024;
    size_t permille = argc > 3 ? strtoull(argv[3], 0, 10) : 10;
    // PERMILLE 0: the kernel runs and writes nothing.
    size_t words = mib << 18, stride = permille ? (1000 / permille) * 1024 : words;
    unsigned *p;
    unsigned long long *total;
    CK(cudaMalloc(&p, words * 4));
    CK(cudaMalloc(&total, 8));
    CK(cudaMemset(p, 0, words * 4));
    CK(cudaMemset(total, 0, 8));
    size_t touched = permille ? (words + stride - 1) / stride : 0;
    touch_strided<<<(unsigned)((touched + 255) / 256) + !touched, 256>>>(p, permille ? words : 0, stride);
    CK(cudaDeviceSynchronize());
    sum_words<<<1024, 256>>>(p, words, total);
    unsigned long long s = 0;
    CK(cudaMemcpy(&s, total, 8, cudaMemcpyDeviceToHost));
    printf("touched %zu\nsum %llu\n", touched, s);
  } else if (!strcmp(c, "tables")) {
    // Snapshots of different sets of buffers in one process: a kernel writes `a` while three
    // buffers are live, then two, then one, so kreplay's device-side restore gets a new job
    // table (with fewer regions each time) twice. Prints how many words each launch touched
    // and the sum of `a` (three launches' worth).
    size_t words = 16 << 18, stride = 100 * 1024, touched = (words + stride - 1) / stride;
    unsigned *a, *b, *d;
    unsigned long long *total;
    CK(cudaMalloc(&a, words * 4));
    CK(cudaMalloc(&b, words * 4));
    CK(cudaMalloc(&d, words * 4));
    CK(cudaMalloc(&total, 8));
    for (unsigned *q : {a, b, d}) CK(cudaMemset(q, 0, words * 4));
    CK(cudaMemset(total, 0, 8));
    unsigned blocks = (unsigned)((touched + 255) / 256);
    for (unsigned *gone : {d, b, (unsigned *)0}) {
      touch_strided<<<blocks, 256>>>(a, words, stride);
      CK(cudaDeviceSynchronize());
      if (gone) CK(cudaFree(gone));
    }
    sum_words<<<1024, 256>>>(a, words, total);
    unsigned long long s = 0;
    CK(cudaMemcpy(&s, total, 8, cudaMemcpyDeviceToHost));
    printf("touched %zu\nsum %llu\n", touched, s);
  } else {
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
  }
  return 0;
}
