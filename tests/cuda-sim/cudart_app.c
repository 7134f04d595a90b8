// A CUDA runtime program for the stand-in libcudart.so.12 (tests/cuda-sim/libcudart.c), laid
// out as nvcc lays one out: a constructor registers the module and one host stub per kernel,
// and each host stub, a function whose symbol is the kernel's mangled name, launches itself
// through cudaLaunchKernel. With -DSTATIC_CUDART it is linked with the runtime's archive.
//   cudart_app all        every probed runtime API (counts in tests/tests/trace_parts/cudart.rs)
//   cudart_app attach N   three launches, "ready", waits for a line on stdin, then N launches
//                         of each kernel, "done"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef void *H;
typedef struct { unsigned x, y, z; } dim3;
typedef struct {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  H stream;
  void *attrs;
  unsigned numAttrs;
} cudaLaunchConfig_t;
enum { H2H = 0, H2D = 1, D2H = 2, D2D = 3 };

cudaError_t cudaSetDevice(int);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMallocAsync(void **, size_t, H);
cudaError_t cudaFreeAsync(void *, H);
cudaError_t cudaMallocHost(void **, size_t);
cudaError_t cudaHostAlloc(void **, size_t, unsigned);
cudaError_t cudaFreeHost(void *);
cudaError_t cudaMallocManaged(void **, size_t, unsigned);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaMemcpyAsync(void *, const void *, size_t, int, H);
cudaError_t cudaMemcpy2D(void *, size_t, const void *, size_t, size_t, size_t, int);
cudaError_t cudaMemcpy2DAsync(void *, size_t, const void *, size_t, size_t, size_t, int, H);
cudaError_t cudaMemcpyPeer(void *, int, const void *, int, size_t);
cudaError_t cudaMemcpyPeerAsync(void *, int, const void *, int, size_t, H);
cudaError_t cudaMemset(void *, int, size_t);
cudaError_t cudaMemsetAsync(void *, int, size_t, H);
cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, H);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **);
cudaError_t cudaLaunchCooperativeKernel(const void *, dim3, dim3, void **, size_t, H);
cudaError_t cudaStreamBeginCapture(H, int);
cudaError_t cudaStreamEndCapture(H, H *);
cudaError_t cudaGraphInstantiate(H *, H, unsigned long long);
cudaError_t cudaGraphLaunch(H, H);
cudaError_t cudaStreamSynchronize(H);
cudaError_t cudaEventCreate(H *);
cudaError_t cudaEventRecord(H, H);
cudaError_t cudaEventSynchronize(H);
cudaError_t cudaEventDestroy(H);
cudaError_t cudaDeviceSynchronize(void);
void **__cudaRegisterFatBinary(void *);
void __cudaRegisterFatBinaryEnd(void **);
void __cudaRegisterFunction(void **, const char *, char *, const char *, int, void *, void *, dim3 *, dim3 *, int *);

#define CK(x) do { cudaError_t r_ = (x); if (r_) { fprintf(stderr, "%s failed: %d\n", #x, r_); exit(2); } } while (0)
#define N 1024

// The module: PTX text the sim driver reads, its entries named as nvcc names them, in the
// sections nvcc puts a module's fatbinary and its wrapper in.
__attribute__((section(".nv_fatbin"))) static const char PTX[] =
  ".version 8.0\n.target sm_90\n.address_size 64\n"
  ".visible .global .align 4 .u32 hits;\n"
  ".visible .entry _Z12axpy_inplacePfPKffi(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)\n{\n ret;\n}\n"
  ".visible .entry _Z10count_hitsPfi(.param .u64 y, .param .u32 n)\n{\n ret;\n}\n";
__attribute__((section(".nvFatBinSegment"))) static struct { int magic, version; const void *data; void *unused; } fatbin = { 0x466243b1, 1, PTX, 0 };

// Host stubs: `axpy_inplace(float*, float const*, float, int)` and `count_hits(float*, int)`,
// under their mangled names as nvcc emits them (noinline: each has its own address).
__attribute__((noinline)) void axpy_inplace(float *y, const float *x, float a, int n) __asm__("_Z12axpy_inplacePfPKffi");
__attribute__((noinline)) void count_hits(float *y, int n) __asm__("_Z10count_hitsPfi");
void axpy_inplace(float *y, const float *x, float a, int n) {
  void *args[] = { &y, &x, &a, &n };
  CK(cudaLaunchKernel((const void *)axpy_inplace, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, args, 0, 0));
}
void count_hits(float *y, int n) {
  void *args[] = { &y, &n };
  CK(cudaLaunchKernel((const void *)count_hits, (dim3){ 8, 1, 1 }, (dim3){ 128, 1, 1 }, args, 0, 0));
}

__attribute__((constructor)) static void register_kernels(void) {
  void **h = __cudaRegisterFatBinary(&fatbin);
  __cudaRegisterFunction(h, (const char *)axpy_inplace, "_Z12axpy_inplacePfPKffi", "_Z12axpy_inplacePfPKffi", -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(h, (const char *)count_hits, "_Z10count_hitsPfi", "_Z10count_hitsPfi", -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static float host[N], back[N];

static void check(const float *y, float want) {
  CK(cudaMemcpy(back, y, sizeof back, D2H));
  for (int i = 0; i < N; i++) if (back[i] != want) { fprintf(stderr, "y[%d] = %g, want %g\n", i, back[i], want); exit(3); }
  printf("cudart ok %g\n", want);
}

static int all(void) {
  float *y, *x;
  void *t, *h1, *h2, *m;
  for (int i = 0; i < N; i++) host[i] = 1.0f;
  // Device 1's buffers, freed later on device 0: their bytes count where they were made.
  CK(cudaSetDevice(1));
  CK(cudaMalloc((void **)&y, sizeof host));
  CK(cudaMalloc((void **)&x, sizeof host));
  CK(cudaSetDevice(0));
  CK(cudaMallocAsync(&t, 1024, 0));
  CK(cudaFreeAsync(t, 0));
  CK(cudaMallocHost(&h1, 512));
  CK(cudaHostAlloc(&h2, 256, 0));
  CK(cudaFreeHost(h1));
  CK(cudaFreeHost(h2));
  CK(cudaMallocManaged(&m, 128, 1));
  CK(cudaMemset(m, 0, 128));
  CK(cudaMemsetAsync(m, 0, 128, 0));
  CK(cudaFree(m));
  CK(cudaMemcpy(y, host, sizeof host, H2D));
  CK(cudaMemcpy(x, host, sizeof host, H2D));
  CK(cudaMemcpyAsync(x, y, sizeof host, D2D, 0));
  // 4 rows of 32 bytes, pitch 64: 128 bytes each.
  CK(cudaMemcpy2D(back, 64, host, 64, 32, 4, H2H));
  CK(cudaMemcpy2DAsync(back, 64, host, 64, 32, 4, H2H, 0));
  CK(cudaMemcpyPeer(x, 0, y, 1, sizeof host));
  CK(cudaMemcpyPeerAsync(x, 0, y, 1, sizeof host, 0));
  // y = 1 + 2 * 1 per axpy launch.
  for (int i = 0; i < 3; i++) axpy_inplace(y, x, 2.0f, N);
  void *cargs[] = { &y, &(int){ N } };
  cudaLaunchConfig_t cfg = { { 2, 1, 1 }, { 512, 1, 1 }, 0, 0, 0, 0 };
  CK(cudaLaunchKernelExC(&cfg, (const void *)count_hits, cargs));
  float a = 2.0f;
  int n = N;
  void *aargs[] = { &y, &x, &a, &n };
  CK(cudaLaunchCooperativeKernel((const void *)axpy_inplace, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, aargs, 0, 0));
  // A captured launch runs nothing until the graph is launched (twice).
  H stream = (H)0x5, graph, exec;
  CK(cudaStreamBeginCapture(stream, 0));
  CK(cudaLaunchKernel((const void *)axpy_inplace, (dim3){ 4, 1, 1 }, (dim3){ 256, 1, 1 }, aargs, 0, stream));
  CK(cudaStreamEndCapture(stream, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphLaunch(exec, stream));
  CK(cudaGraphLaunch(exec, stream));
  H ev;
  CK(cudaEventCreate(&ev));
  CK(cudaEventRecord(ev, 0));
  CK(cudaStreamSynchronize(0));
  CK(cudaEventSynchronize(ev));
  CK(cudaEventDestroy(ev));
  CK(cudaDeviceSynchronize());
  // 1 + 3×2 (axpy) + 1 (count_hits) + 2 (cooperative) + 2×2 (graph).
  check(y, 14.0f);
  CK(cudaFree(y));
  CK(cudaFree(x));
  return 0;
}

static int attach(int launches) {
  float *y, *x;
  for (int i = 0; i < N; i++) host[i] = 1.0f;
  CK(cudaMalloc((void **)&y, sizeof host));
  CK(cudaMalloc((void **)&x, sizeof host));
  CK(cudaMemcpy(y, host, sizeof host, H2D));
  CK(cudaMemcpy(x, host, sizeof host, H2D));
  // Both kernels' modules and functions are loaded before any attach.
  axpy_inplace(y, x, 1.0f, N);
  axpy_inplace(y, x, 1.0f, N);
  count_hits(y, N);
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 4;
  for (int i = 0; i < launches; i++) {
    axpy_inplace(y, x, 1.0f, N);
    count_hits(y, N);
  }
  check(y, 1.0f + 2 + 1 + 2.0f * launches);
  printf("done\n");
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "all")) return all();
  if (argc >= 3 && !strcmp(argv[1], "attach")) return attach(atoi(argv[2]));
  fprintf(stderr, "usage: cudart_app all | attach N\n");
  return 1;
}
