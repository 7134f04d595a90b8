// A stand-in libcudart.so.12 over the stand-in driver (tests/cuda-sim/libcuda.c): the real
// runtime API names and signatures, exported with the `libcudart.so.12` symbol version
// (libcudart.map), and the driver taken from cuGetProcAddress_v2 after a dlopen, as the real
// runtime does. Every runtime call that has a driver counterpart in the sim makes it, so a
// runtime call's driver calls nest inside it: cudaMalloc → cuMemAlloc_v2, cudaLaunchKernel →
// cuLaunchKernel (and, at a kernel's first launch, cuModuleLoadData + cuModuleGetFunction).
//
// Kernels are registered as an nvcc-built program registers them: a constructor calls
// __cudaRegisterFatBinary with a fatbinary wrapper (here its data is the sim's PTX text) and
// __cudaRegisterFunction(handle, hostStub, deviceName, ...) per kernel; a launch names the
// kernel by its host stub's address. Modules load lazily, at the first launch, as CUDA 12's
// lazy loading does. Stream capture records the launches into a one-kernel graph.
// cudaMemcpy2D*, cudaMemset* and cudaMemcpy with cudaMemcpyHostToHost copy in the process:
// the sim driver has no such entries. Devices 0–3 exist; cudaSetDevice keeps the calling
// thread's device.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
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
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
       cudaErrorInvalidDevice = 101, cudaErrorInvalidDeviceFunction = 98,
       cudaErrorStreamCaptureUnsupported = 900 };
enum { H2H = 0, H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 };

#define DRV(ret, name, args) static ret (*name) args;
DRV(CUresult, cuInit, (unsigned))
DRV(CUresult, cuModuleLoadData, (H *, const void *))
DRV(CUresult, cuModuleGetFunction, (H *, H, const char *))
DRV(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))
DRV(CUresult, cuMemFree_v2, (CUdeviceptr))
DRV(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, H))
DRV(CUresult, cuMemFreeAsync, (CUdeviceptr, H))
DRV(CUresult, cuMemAllocHost_v2, (void **, size_t))
DRV(CUresult, cuMemFreeHost, (void *))
DRV(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))
DRV(CUresult, cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))
DRV(CUresult, cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))
DRV(CUresult, cuLaunchKernel, (H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **))
DRV(CUresult, cuGraphLaunch, (H, H))
DRV(CUresult, cuCtxSynchronize, (void))

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int driver_ok;
static void load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { fprintf(stderr, "libcudart sim: dlopen libcuda.so.1: %s\n", dlerror()); return; }
  CUresult (*gp)(const char *, void **, int, unsigned long long, int *) = dlsym(h, "cuGetProcAddress_v2");
  if (!gp) return;
  int bad = 0;
#define GET(var, name) bad |= gp(name, (void **)&var, 12000, 0, 0)
  GET(cuInit, "cuInit"); GET(cuModuleLoadData, "cuModuleLoadData");
  GET(cuModuleGetFunction, "cuModuleGetFunction"); GET(cuMemAlloc_v2, "cuMemAlloc");
  GET(cuMemFree_v2, "cuMemFree"); GET(cuMemAllocAsync, "cuMemAllocAsync"); GET(cuMemFreeAsync, "cuMemFreeAsync");
  GET(cuMemAllocHost_v2, "cuMemAllocHost"); GET(cuMemFreeHost, "cuMemFreeHost");
  GET(cuMemcpyHtoD_v2, "cuMemcpyHtoD"); GET(cuMemcpyDtoH_v2, "cuMemcpyDtoH"); GET(cuMemcpyDtoD_v2, "cuMemcpyDtoD");
  GET(cuLaunchKernel, "cuLaunchKernel"); GET(cuGraphLaunch, "cuGraphLaunch"); GET(cuCtxSynchronize, "cuCtxSynchronize");
  driver_ok = !bad && cuInit(0) == 0;
}
#define DRIVER() do { pthread_once(&once, load_driver); if (!driver_ok) return cudaErrorInvalidValue; } while (0)

// Registered fatbinaries and kernels.
typedef struct { int magic, version; const void *data; void *filename_or_fatbins; } FatbinWrapper;
typedef struct { const char *ptx; H module; } Fatbin;
typedef struct { const void *host; const char *device_name; Fatbin *fatbin; H func; } Kernel;
#define MAX_KERNELS 64
static Kernel kernels[MAX_KERNELS];
static int nkernels;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void **__cudaRegisterFatBinary(void *wrapper) {
  Fatbin *f = calloc(1, sizeof *f);
  if (f) f->ptx = ((FatbinWrapper *)wrapper)->data;
  return (void **)f;
}
void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }
void __cudaRegisterFunction(void **handle, const char *host, char *device_fun, const char *device_name,
                            int thread_limit, void *tid, void *bid, dim3 *bdim, dim3 *gdim, int *wsize) {
  (void)device_fun; (void)thread_limit; (void)tid; (void)bid; (void)bdim; (void)gdim; (void)wsize;
  pthread_mutex_lock(&lock);
  if (nkernels < MAX_KERNELS) kernels[nkernels++] = (Kernel){ host, device_name, (Fatbin *)handle, 0 };
  pthread_mutex_unlock(&lock);
}

// The driver function of host stub `host`, its module loaded at the first launch.
static cudaError_t function_of(const void *host, H *out) {
  DRIVER();
  cudaError_t err = cudaErrorInvalidDeviceFunction;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nkernels; i++) {
    Kernel *k = &kernels[i];
    if (k->host != host) continue;
    err = cudaSuccess;
    if (!k->fatbin->module && cuModuleLoadData(&k->fatbin->module, k->fatbin->ptx)) err = cudaErrorInvalidDeviceFunction;
    if (!err && !k->func && cuModuleGetFunction(&k->func, k->fatbin->module, k->device_name)) err = cudaErrorInvalidDeviceFunction;
    *out = k->func;
    break;
  }
  pthread_mutex_unlock(&lock);
  return err;
}

// Stream capture: the sim's graph is one kernel node (the driver sim's cuGraphLaunch layout).
typedef struct { H f; void *params[8]; } Graph;
static __thread H capturing;
static __thread Graph *captured;
static __thread int device;

static cudaError_t launch(const void *func, dim3 g, dim3 b, void **args, size_t shm, H stream) {
  H f;
  cudaError_t err = function_of(func, &f);
  if (err) return err;
  if (capturing && stream == capturing) {
    if (captured) return cudaErrorStreamCaptureUnsupported;
    captured = calloc(1, sizeof *captured);
    if (!captured) return cudaErrorMemoryAllocation;
    captured->f = f;
    // The sim's kernels take at most 4 arguments; each is copied into the node.
    for (int i = 0; i < 4; i++) {
      void *v = malloc(8);
      if (!v) return cudaErrorMemoryAllocation;
      memcpy(v, args[i], 8);
      captured->params[i] = v;
    }
    return cudaSuccess;
  }
  return cuLaunchKernel(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shm, stream, args, 0) ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm, H stream) {
  return launch(func, g, b, args, shm, stream);
}
cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm, H stream) {
  return launch(func, g, b, args, shm, stream);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *func, void **args) {
  if (!c) return cudaErrorInvalidValue;
  return launch(func, c->gridDim, c->blockDim, args, c->dynamicSmemBytes, c->stream);
}
cudaError_t cudaStreamBeginCapture(H stream, int mode) { (void)mode; capturing = stream; captured = 0; return cudaSuccess; }
cudaError_t cudaStreamEndCapture(H stream, H *graph) {
  if (stream != capturing || !captured) return cudaErrorInvalidValue;
  *graph = captured; capturing = 0; captured = 0;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(H *exec, H graph, unsigned long long flags) { (void)flags; *exec = graph; return cudaSuccess; }
cudaError_t cudaGraphLaunch(H exec, H stream) {
  DRIVER();
  return exec && !cuGraphLaunch(exec, stream) ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d > 3) return cudaErrorInvalidDevice;
  device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) { *d = device; return cudaSuccess; }
// Each API calls only internal helpers and the driver: a uprobe fires on any call of the
// function, a direct one from inside the library too, and the real runtime's entry points do
// not call one another.
static cudaError_t dev_alloc(void **p, size_t n) { DRIVER(); return cuMemAlloc_v2((CUdeviceptr *)p, n) ? cudaErrorMemoryAllocation : cudaSuccess; }
static cudaError_t host_alloc(void **p, size_t n) { DRIVER(); return cuMemAllocHost_v2(p, n) ? cudaErrorMemoryAllocation : cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) { return dev_alloc(p, n); }
cudaError_t cudaFree(void *p) { DRIVER(); return !p || !cuMemFree_v2((CUdeviceptr)p) ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaMallocAsync(void **p, size_t n, H s) { DRIVER(); return cuMemAllocAsync((CUdeviceptr *)p, n, s) ? cudaErrorMemoryAllocation : cudaSuccess; }
cudaError_t cudaFreeAsync(void *p, H s) { DRIVER(); return !cuMemFreeAsync((CUdeviceptr)p, s) ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaMallocHost(void **p, size_t n) { return host_alloc(p, n); }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; return host_alloc(p, n); }
cudaError_t cudaFreeHost(void *p) { DRIVER(); return cuMemFreeHost(p) ? cudaErrorInvalidValue : cudaSuccess; }
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags) { (void)flags; return dev_alloc(p, n); }

static cudaError_t copy(void *dst, const void *src, size_t n, int kind) {
  DRIVER();
  CUresult r;
  switch (kind) {
    case H2H: memcpy(dst, src, n); return cudaSuccess;
    case H2D: r = cuMemcpyHtoD_v2((CUdeviceptr)dst, src, n); break;
    case D2H: r = cuMemcpyDtoH_v2(dst, (CUdeviceptr)src, n); break;
    case D2D: case DEFAULT: r = cuMemcpyDtoD_v2((CUdeviceptr)dst, (CUdeviceptr)src, n); break;
    default: return cudaErrorInvalidValue;
  }
  return r ? cudaErrorInvalidValue : cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) { return copy(dst, src, n, kind); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, H s) { (void)s; return copy(dst, src, n, kind); }
static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h, int kind) {
  if (kind < H2H || kind > DEFAULT || w > dpitch || w > spitch) return cudaErrorInvalidValue;
  for (size_t r = 0; r < h; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, w);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h, int kind) {
  return copy_2d(dst, dpitch, src, spitch, w, h, kind);
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h, int kind, H s) {
  (void)s;
  return copy_2d(dst, dpitch, src, spitch, w, h, kind);
}
cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n) { (void)dd; (void)sd; return copy(dst, src, n, D2D); }
cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, H s) { (void)dd; (void)sd; (void)s; return copy(dst, src, n, D2D); }
cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, H s) { (void)s; memset(p, v, n); return cudaSuccess; }

typedef struct { int recorded; } Event;
cudaError_t cudaEventCreate(H *e) { *e = calloc(1, sizeof(Event)); return *e ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaEventRecord(H e, H s) { (void)s; ((Event *)e)->recorded = 1; return cudaSuccess; }
cudaError_t cudaEventSynchronize(H e) { return e ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaEventDestroy(H e) { free(e); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(H s) { (void)s; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { DRIVER(); return cuCtxSynchronize() ? cudaErrorInvalidValue : cudaSuccess; }
