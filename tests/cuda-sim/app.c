// A CUDA driver-API program for the stand-in libcuda (tests/cuda-sim/libcuda.c). Built twice:
// linked against libcuda (calls go through its symbols), and with -DRUNTIME_STYLE, where it
// dlopens libcuda.so.1 and takes every entry from cuGetProcAddress_v2, as the CUDA runtime does.
//   app inplace | twice | devicevar | graph | async | vmm | realloc | teardown | attach | loop
// twice: inplace with the kernel launched two times (y gets a*x added twice).
// attach: gets its function handle, prints "ready", waits for a line on stdin (a tracer
// attaches meanwhile), then launches it 5 times, prints "attach done" and waits for another
// line before going on (a long-running process, whose memory the tracer can still read).
// loop: a long-running multi-threaded workload: three worker threads, each with its own
// buffers and function handle, wait on a condition variable; the main thread prints "ready",
// then for each line on stdin runs one round (every worker copies x in, launches axpy_inplace
// three times on its y, copies y out) and prints "round N" with each worker's sum, in worker
// order; at EOF it prints "loop done" and exits. A tracer attaches between rounds.
// realloc: inplace, then frees x and allocates 40 KiB (room the device must have).
// teardown: inplace, then frees both buffers and unloads the module.
#include <dlfcn.h>
#include <pthread.h>
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
API(CUresult, cuCtxGetCurrent, (H *))
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
  GET(cuCtxGetCurrent, "cuCtxGetCurrent");
  GET(cuMemAddressReserve, "cuMemAddressReserve"); GET(cuMemCreate, "cuMemCreate"); GET(cuMemMap, "cuMemMap");
  GET(cuMemSetAccess, "cuMemSetAccess"); GET(cuModuleUnload, "cuModuleUnload");
}
#define C(name) p_##name
#else
static void load(void) {}
#define C(name) name
#endif

enum { LOOP_WORKERS = 3, LOOP_N = 2048 };
static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int round, finished, quit;
} loop_sync = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
typedef struct { H mod; int id; double sum; } Worker;

static void *loop_worker(void *arg) {
  Worker *w = arg;
  H fn;
  CK(C(cuModuleGetFunction)(&fn, w->mod, "axpy_inplace"));
  static __thread float x[LOOP_N], y[LOOP_N];
  CUdeviceptr dx, dy;
  CK(C(cuMemAlloc_v2)(&dx, sizeof x));
  CK(C(cuMemAlloc_v2)(&dy, sizeof y));
  for (int i = 0; i < LOOP_N; i++) { x[i] = 0.25f * (float)(w->id + 1) + i % 3; y[i] = (float)(i % 11); }
  CK(C(cuMemcpyHtoD_v2)(dy, y, sizeof y));
  int n = LOOP_N, seen = 0;
  float a = 1.5f;
  for (;;) {
    pthread_mutex_lock(&loop_sync.mu);
    while (loop_sync.round == seen && !loop_sync.quit) pthread_cond_wait(&loop_sync.go, &loop_sync.mu);
    int quit = loop_sync.quit;
    seen = loop_sync.round;
    pthread_mutex_unlock(&loop_sync.mu);
    if (quit) return 0;
    CK(C(cuMemcpyHtoD_v2)(dx, x, sizeof x));
    void *args[] = { &dy, &dx, &a, &n };
    for (int k = 0; k < 3; k++) CK(C(cuLaunchKernel)(fn, LOOP_N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    CK(C(cuMemcpyDtoH_v2)(y, dy, sizeof y));
    double s = 0;
    for (int i = 0; i < LOOP_N; i++) s += y[i];
    pthread_mutex_lock(&loop_sync.mu);
    w->sum = s;
    loop_sync.finished++;
    pthread_cond_broadcast(&loop_sync.done);
    pthread_mutex_unlock(&loop_sync.mu);
  }
}

static int run_loop(H mod) {
  Worker w[LOOP_WORKERS];
  pthread_t t[LOOP_WORKERS];
  for (int i = 0; i < LOOP_WORKERS; i++) {
    w[i] = (Worker){ mod, i, 0 };
    pthread_create(&t[i], 0, loop_worker, &w[i]);
  }
  printf("ready\n");
  fflush(stdout);
  char line[64];
  for (int r = 1; fgets(line, sizeof line, stdin); r++) {
    pthread_mutex_lock(&loop_sync.mu);
    loop_sync.finished = 0;
    loop_sync.round = r;
    pthread_cond_broadcast(&loop_sync.go);
    while (loop_sync.finished < LOOP_WORKERS) pthread_cond_wait(&loop_sync.done, &loop_sync.mu);
    pthread_mutex_unlock(&loop_sync.mu);
    printf("round %d", r);
    for (int i = 0; i < LOOP_WORKERS; i++) printf(" %.1f", w[i].sum);
    printf("\n");
    fflush(stdout);
  }
  pthread_mutex_lock(&loop_sync.mu);
  loop_sync.quit = 1;
  pthread_cond_broadcast(&loop_sync.go);
  pthread_mutex_unlock(&loop_sync.mu);
  for (int i = 0; i < LOOP_WORKERS; i++) pthread_join(t[i], 0);
  printf("loop done\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "inplace";
  load();
  CK(C(cuInit)(0));
  H mod, fn;
  CK(C(cuModuleLoadData)(&mod, MODULE));
  if (!strcmp(c, "loop")) return run_loop(mod);
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
      // Asks for the current context first, as cudart does before each launch.
      H ctx;
      CK(C(cuCtxGetCurrent)(&ctx));
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
