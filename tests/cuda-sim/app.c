// A CUDA driver-API program for the stand-in libcuda (tests/cuda-sim/libcuda.c). Built twice:
// linked against libcuda (calls go through its symbols), and with -DRUNTIME_STYLE, where it
// dlopens libcuda.so.1 and takes every entry from cuGetProcAddress_v2, as the CUDA runtime does.
//   app inplace | twice | devicevar | graph | async | vmm | realloc | teardown | attach
// twice: inplace with the kernel launched two times (y gets a*x added twice).
// attach: gets its function handle, prints "ready", waits for a line on stdin (a tracer
// attaches meanwhile), then launches it 5 times, prints "attach done" and waits for another
// line before going on (a long-running process, whose memory the tracer can still read).
// realloc: inplace, then frees x and allocates 40 KiB (room the device must have).
// teardown: inplace, then frees both buffers and unloads the module.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *H;
#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s failed: %d\n", #x, r_); exit(2); } } while (0)

static const char *MODULE =
  ".version 8.0\n.target sm_90\n.address_size 64\n"
  ".visible .global .align 4 .u32 hits;\n"
  ".visible .entry axpy_inplace(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)\n{\n ret;\n}\n"
  ".visible .entry count_hits(.param .u64 y, .param .u32 n)\n{\n ret;\n}\n";

#ifdef RUNTIME_STYLE
#define API(ret, name, args) static ret (*p_##name) args;
#else
#define API(ret, name, args) ret name args;
#endif
API(CUresult, cuInit, (unsigned))
API(CUresult, cuModuleLoadData, (H *, const void *))
API(CUresult, cuModuleGetFunction, (H *, H, const char *))
API(CUresult, cuModuleGetGlobal_v2, (CUdeviceptr *, size_t *, H, const char *))
API(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))
API(CUresult, cuMemFree_v2, (CUdeviceptr))
API(CUresult, cuModuleUnload, (H))
API(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, H))
API(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))
API(CUresult, cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))
API(CUresult, cuLaunchKernel, (H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **))
API(CUresult, cuGraphLaunch, (H, H))
API(CUresult, cuCtxSynchronize, (void))
API(CUresult, cuMemAddressReserve, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))
API(CUresult, cuMemCreate, (unsigned long long *, size_t, const void *, unsigned long long))
API(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long))
API(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const void *, size_t))

#ifdef RUNTIME_STYLE
typedef CUresult (*GetProc)(const char *, void **, int, unsigned long long, int *);
static void load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(2); }
  GetProc gp = (GetProc)dlsym(h, "cuGetProcAddress_v2");
  if (!gp) { fprintf(stderr, "no cuGetProcAddress_v2\n"); exit(2); }
#define GET(name, base) CK(gp(base, (void **)&p_##name, 12000, 0, 0))
  GET(cuInit, "cuInit"); GET(cuModuleLoadData, "cuModuleLoadData"); GET(cuModuleGetFunction, "cuModuleGetFunction");
  GET(cuModuleGetGlobal_v2, "cuModuleGetGlobal"); GET(cuMemAlloc_v2, "cuMemAlloc"); GET(cuMemFree_v2, "cuMemFree");
  GET(cuMemAllocAsync, "cuMemAllocAsync"); GET(cuMemcpyHtoD_v2, "cuMemcpyHtoD"); GET(cuMemcpyDtoH_v2, "cuMemcpyDtoH");
  GET(cuLaunchKernel, "cuLaunchKernel"); GET(cuGraphLaunch, "cuGraphLaunch"); GET(cuCtxSynchronize, "cuCtxSynchronize");
  GET(cuMemAddressReserve, "cuMemAddressReserve"); GET(cuMemCreate, "cuMemCreate"); GET(cuMemMap, "cuMemMap");
  GET(cuMemSetAccess, "cuMemSetAccess"); GET(cuModuleUnload, "cuModuleUnload");
}
#define C(name) p_##name
#else
static void load(void) {}
#define C(name) name
#endif

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "inplace";
  load();
  CK(C(cuInit)(0));
  H mod, fn;
  CK(C(cuModuleLoadData)(&mod, MODULE));
  enum { N = 4096 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) { x[i] = 0.5f + i % 7; y[i] = 1.0f + i % 5; }
  CUdeviceptr dx, dy;
  CK(C(cuMemAlloc_v2)(&dx, sizeof x));
  if (!strcmp(c, "async")) {
    CK(C(cuMemAllocAsync)(&dy, sizeof y, 0));
  } else if (!strcmp(c, "vmm")) {
    // Reserve, create, map, allow access: how PyTorch's expandable segments get memory.
    unsigned long long h; char prop[64] = {0}, desc[16] = {0};
    CK(C(cuMemAddressReserve)(&dy, sizeof y, 0, 0, 0));
    CK(C(cuMemCreate)(&h, sizeof y, prop, 0));
    CK(C(cuMemMap)(dy, sizeof y, 0, h, 0));
    CK(C(cuMemSetAccess)(dy, sizeof y, desc, 1));
  } else {
    CK(C(cuMemAlloc_v2)(&dy, sizeof y));
  }
  CK(C(cuMemcpyHtoD_v2)(dx, x, sizeof x));
  CK(C(cuMemcpyHtoD_v2)(dy, y, sizeof y));
  int n = N;
  float a = 2.0f;
  if (!strcmp(c, "devicevar")) {
    CK(C(cuModuleGetFunction)(&fn, mod, "count_hits"));
    void *args[] = { &dy, &n };
    CK(C(cuLaunchKernel)(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    CUdeviceptr hp; size_t hs; unsigned hits = 0;
    CK(C(cuModuleGetGlobal_v2)(&hp, &hs, mod, "hits"));
    CK(C(cuMemcpyDtoH_v2)(&hits, hp, sizeof hits));
    printf("hits %u\n", hits);
  } else {
    CK(C(cuModuleGetFunction)(&fn, mod, "axpy_inplace"));
    void *args[] = { &dy, &dx, &a, &n };
    if (!strcmp(c, "attach")) {
      printf("ready\n");
      fflush(stdout);
      char line[16];
      if (!fgets(line, sizeof line, stdin)) return 3;
      for (int i = 0; i < 5; i++) CK(C(cuLaunchKernel)(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
      printf("attach done\n");
      fflush(stdout);
      if (!fgets(line, sizeof line, stdin)) return 3;
    } else if (!strcmp(c, "graph")) {
      struct { H f; void *params[8]; } g = { fn, { &dy, &dx, &a, &n } };
      CK(C(cuGraphLaunch)(&g, 0));
    } else {
      CK(C(cuLaunchKernel)(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
      if (!strcmp(c, "twice")) CK(C(cuLaunchKernel)(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    }
  }
  CK(C(cuCtxSynchronize)());
  CK(C(cuMemcpyDtoH_v2)(y, dy, sizeof y));
  double s = 0;
  for (int i = 0; i < N; i++) s += y[i];
  printf("y_sum %.1f\n", s);
  if (!strcmp(c, "realloc")) {
    CUdeviceptr big;
    CK(C(cuMemFree_v2)(dx));
    CK(C(cuMemAlloc_v2)(&big, 40960));
    printf("realloc ok\n");
  }
  if (!strcmp(c, "teardown")) {
    // What a program does before it exits: its buffers freed, its module unloaded.
    CK(C(cuMemFree_v2)(dx));
    CK(C(cuMemFree_v2)(dy));
    CK(C(cuModuleUnload)(mod));
  }
  return 0;
}
