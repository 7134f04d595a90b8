// A stand-in libcuda.so.1 for machines without an NVIDIA GPU: the real driver ABI (entry
// names, versioned symbols, cuGetProcAddress_v2), "device" memory in host RAM, and kernels run
// on the CPU. Modules are PTX text: `.entry NAME` lines name kernels (only the ones this file
// implements load; any other entry fails the load with CUDA_ERROR_NOT_FOUND, as an image for
// the wrong architecture would), `.global` lines name module variables (8-byte aligned storage
// of the declared size). Knobs: FAKECUDA_FREE_MIB (free device memory reported, default
// 65536), FAKECUDA_FAIL_DTOH_TO_PINNED=1 (device-to-host copies into cuMemAllocHost memory
// fail: the program's own copies, into ordinary memory, still work), FAKECUDA_FAIL_COPY_NTH=N
// (the Nth copy of any direction called from code outside the main program, such as a library
// layered on the driver, fails with 999 and copies nothing; the program's own copies neither
// count nor fail), FAKECUDA_FAIL_HOST_ALLOC_ABOVE=BYTES (cuMemAllocHost of more fails),
// FAKECUDA_DEVICE_NAME (what cuDeviceGetName says of the one device, ordinal 0; default
// "KRSim CUDA Device"), FAKECUDA_KERNEL_US=N (every kernel takes at least N µs),
// FAKECUDA_FAIL_EVENT_RECORD=1 (cuEventRecord fails).
// cuInit loads CUDA_INJECTION64_PATH's library once and calls its InitializeInjection, as the
// real driver does; a stand-in CUPTI (libcupti.c) sees each launch and copy through
// fakecuda_observe (and each cuCtxGetCurrent, a call that launches nothing), and each
// cuLaunchKernel call's entry and exit through fakecuda_api_hook
// (CUPTI's driver-API callbacks: the call's parameters as cuLaunchKernel_params lays them out).
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <link.h>
#include <stdatomic.h>
#include <dlfcn.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, E_INVALID_VALUE = 1, E_OOM = 2, E_NOT_FOUND = 500, E_INVALID_HANDLE = 400 };

static unsigned long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

#define MAX_ALLOCS 4096
static struct { CUdeviceptr p; size_t n; int live; } allocs[MAX_ALLOCS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// FAKECUDA_DEVICE_BYTES: the device's memory; an allocation that would take the live total
// past it fails with CUDA_ERROR_OUT_OF_MEMORY (unset: no limit).
static size_t live_bytes;
static CUdeviceptr dev_alloc(size_t n) {
  const char *cap = getenv("FAKECUDA_DEVICE_BYTES");
  pthread_mutex_lock(&lock);
  if (cap && live_bytes + n > strtoull(cap, 0, 10)) { pthread_mutex_unlock(&lock); return 0; }
  live_bytes += n;
  pthread_mutex_unlock(&lock);
  void *p = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!p) return 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_ALLOCS; i++) if (!allocs[i].live) { allocs[i].p = (CUdeviceptr)p; allocs[i].n = n; allocs[i].live = 1; break; }
  pthread_mutex_unlock(&lock);
  return (CUdeviceptr)p;
}
static int dev_free(CUdeviceptr p) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_ALLOCS; i++) if (allocs[i].live && allocs[i].p == p) { allocs[i].live = 0; live_bytes -= allocs[i].n; pthread_mutex_unlock(&lock); free((void *)p); return OK; }
  pthread_mutex_unlock(&lock);
  return E_INVALID_VALUE;
}

typedef struct { char name[64]; void *addr; size_t size; } Global;
typedef struct Module { Global g[16]; int ng; } Module;
typedef struct Func Func;
typedef void (*Impl)(Func *, void **);
// Laid out as the real driver's function objects are where a tracer can see it: the kernel's
// name pointer is the second word (tests/gpu/cufunc_layout.py).
struct Func { void *driver_private; const char *name; Impl run; Module *m; unsigned grid, block; };

static void *global(Module *m, const char *n) { for (int i = 0; i < m->ng; i++) if (!strcmp(m->g[i].name, n)) return m->g[i].addr; return 0; }

// y[i] += a * x[i]
static void k_axpy(Func *f, void **a) {
  float *y = *(float **)a[0]; const float *x = *(float **)a[1]; float s = *(float *)a[2]; int n = *(int *)a[3];
  for (int i = 0; i < n; i++) y[i] += s * x[i];
}
// y[i] += 1, and the module variable `hits` counts the elements.
static void k_hits(Func *f, void **a) {
  float *y = *(float **)a[0]; int n = *(int *)a[1];
  unsigned *hits = global(f->m, "hits");
  for (int i = 0; i < n; i++) { y[i] += 1.0f; if (hits) (*hits)++; }
}
// Each kernel under its plain name (the driver-API programs' PTX) and its mangled one (the
// runtime program's, as nvcc names a C++ kernel's entry).
static const struct { const char *name; Impl run; } known[] = {
  { "axpy_inplace", k_axpy }, { "count_hits", k_hits },
  { "_Z12axpy_inplacePfPKffi", k_axpy }, { "_Z10count_hitsPfi", k_hits },
};

// What the stand-in CUPTI is told of each launch and copy: the call's start, the work's start
// and end, on the clock it gave.
typedef struct {
  int what; /* 0 kernel, 1 copy, 2 cuCtxGetCurrent (no GPU work) */
  const char *name;
  unsigned grid[3], block[3], shm;
  unsigned long long stream;
  int copy_kind; /* CUPTI's: 1 HtoD, 2 DtoH, 8 DtoD */
  unsigned long long bytes, api_start, start, end;
} FakeActivity;
static void (*observer)(const FakeActivity *);
static unsigned long long (*obs_clock)(void);
void fakecuda_observe(void (*obs)(const FakeActivity *), unsigned long long (*clock)(void)) {
  obs_clock = clock;
  observer = obs;
}
static void observe_copy(int kind, size_t n, unsigned long long api_start, unsigned long long start) {
  if (!observer) return;
  FakeActivity a = { .what = 1, .copy_kind = kind, .bytes = n, .api_start = api_start, .start = start };
  a.end = obs_clock();
  observer(&a);
}
#define OBS_NOW() (observer ? obs_clock() : 0)

// CUPTI's driver-API callback site: the stand-in CUPTI's dispatcher, told each launch's entry
// (site 0) and exit (site 1) with CUPTI's callback id and the call's parameters.
typedef struct {
  void *f;
  unsigned gx, gy, gz, bx, by, bz, shm;
  void *stream;
  void **params, **extra;
} LaunchKernelParams;
typedef void (*ApiHook)(int site, unsigned cbid, const char *name, const void *params, CUresult *ret);
static _Atomic(ApiHook) api_hook;
void fakecuda_api_hook(ApiHook hook) { atomic_store(&api_hook, hook); }

static atomic_int injected, initialized;
CUresult cuInit(unsigned flags) {
  (void)flags;
  const char *inj = getenv("CUDA_INJECTION64_PATH");
  if (inj && *inj && !atomic_exchange(&injected, 1)) {
    void *h = dlopen(inj, RTLD_NOW);
    int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : 0;
    if (init) init();
  }
  atomic_store(&initialized, 1);
  return OK;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuCtxGetDevice(int *d) { *d = 0; return OK; }
// One device, ordinal 0, whose handle is its ordinal (as the real driver's are). Until cuInit
// has returned (its injection library set up) they fail with CUDA_ERROR_NOT_INITIALIZED, as
// the real driver's do before cuInit.
enum { E_NOT_INITIALIZED = 3, E_INVALID_DEVICE = 101 };
CUresult cuDeviceGetCount(int *n) { if (!atomic_load(&initialized)) return E_NOT_INITIALIZED; *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) {
  if (!atomic_load(&initialized)) return E_NOT_INITIALIZED;
  if (ordinal != 0) return E_INVALID_DEVICE;
  *d = ordinal;
  return OK;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
  if (!atomic_load(&initialized)) return E_NOT_INITIALIZED;
  if (!name || len <= 0) return E_INVALID_VALUE;
  if (dev != 0) return E_INVALID_DEVICE;
  const char *n = getenv("FAKECUDA_DEVICE_NAME");
  snprintf(name, (size_t)len, "%s", n ? n : "KRSim CUDA Device");
  return OK;
}
CUresult cuCtxGetCurrent(void **c) {
  unsigned long long api = OBS_NOW();
  *c = (void *)0x1;
  if (observer) {
    FakeActivity a = { .what = 2, .api_start = api };
    a.end = obs_clock();
    observer(&a);
  }
  return OK;
}
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuCtxSetCurrent(void *c) { return c == (void *)0x1 || !c ? OK : E_INVALID_VALUE; }
CUresult cuStreamIsCapturing(void *s, unsigned *st) { (void)s; *st = 0; return OK; }
CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
  const char *e = getenv("FAKECUDA_FREE_MIB");
  *free_ = (size_t)(e ? strtoull(e, 0, 10) : 65536) << 20;
  *total = (size_t)80 << 30;
  return OK;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = dev_alloc(n); return *p ? OK : E_OOM; }
CUresult cuMemFree_v2(CUdeviceptr p) { return dev_free(p); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) { (void)s; return cuMemAlloc_v2(p, n); }
CUresult cuMemFreeAsync(CUdeviceptr p, void *s) { (void)s; return dev_free(p); }
#define MAX_PINNED 256
static struct { char *p; size_t n; } pinned[MAX_PINNED];
// Virtual memory management: a reserved range is host memory at once; physical handles are
// tokens, mapping and access changes succeed.
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long f) {
  (void)align; (void)addr; (void)f; *p = dev_alloc(n); return *p ? OK : E_OOM;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t n) { (void)n; return dev_free(p); }
CUresult cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long f) { (void)n; (void)prop; (void)f; *h = 1; return OK; }
CUresult cuMemRelease(unsigned long long h) { (void)h; return OK; }
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, unsigned long long h, unsigned long long f) { (void)p; (void)n; (void)off; (void)h; (void)f; return OK; }
CUresult cuMemUnmap(CUdeviceptr p, size_t n) { (void)p; (void)n; return OK; }
CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const void *d, size_t c) { (void)p; (void)n; (void)d; (void)c; return OK; }
CUresult cuMemAllocHost_v2(void **p, size_t n) {
  const char *cap = getenv("FAKECUDA_FAIL_HOST_ALLOC_ABOVE");
  if (cap && n > strtoull(cap, 0, 10)) { *p = 0; return E_OOM; }
  *p = malloc(n ? n : 1);
  if (!*p) return E_OOM;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_PINNED; i++) if (!pinned[i].p) { pinned[i].p = *p; pinned[i].n = n; break; }
  pthread_mutex_unlock(&lock);
  return OK;
}
CUresult cuMemFreeHost(void *p) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_PINNED; i++) if (pinned[i].p == p) pinned[i].p = 0;
  pthread_mutex_unlock(&lock);
  free(p);
  return OK;
}
static int is_pinned(const void *q) {
  int hit = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_PINNED; i++) if (pinned[i].p && (const char *)q >= pinned[i].p && (const char *)q < pinned[i].p + pinned[i].n) hit = 1;
  pthread_mutex_unlock(&lock);
  return hit;
}
// Whether code address `ra` lies in the main program (the first object dl_iterate_phdr lists).
static int main_program_has(struct dl_phdr_info *info, size_t size, void *ra) {
  (void)size;
  uintptr_t a = (uintptr_t)ra;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz) return 2;
  }
  return 1;
}
static atomic_ullong library_copies;
// FAKECUDA_FAIL_COPY_NTH: counts a copy called from `ra`; true when it must fail.
static int copy_fails(const void *ra) {
  const char *e = getenv("FAKECUDA_FAIL_COPY_NTH");
  if (!e) return 0;
  if (dl_iterate_phdr(main_program_has, (void *)ra) == 2) return 0;
  return atomic_fetch_add(&library_copies, 1) + 1 == strtoull(e, 0, 10);
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
  unsigned long long api = OBS_NOW();
  if (copy_fails(__builtin_return_address(0))) return 999;
  unsigned long long start = OBS_NOW();
  memcpy((void *)d, s, n);
  observe_copy(1, n, api, start);
  return OK;
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
  unsigned long long api = OBS_NOW();
  if (copy_fails(__builtin_return_address(0))) return 999;
  if (getenv("FAKECUDA_FAIL_DTOH_TO_PINNED") && is_pinned(d)) return 999;
  unsigned long long start = OBS_NOW();
  memcpy(d, (void *)s, n);
  observe_copy(2, n, api, start);
  return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  unsigned long long api = OBS_NOW();
  if (copy_fails(__builtin_return_address(0))) return 999;
  unsigned long long start = OBS_NOW();
  memcpy((void *)d, (void *)s, n);
  observe_copy(8, n, api, start);
  return OK;
}
CUresult cuPointerGetAttributes(unsigned n, unsigned *attrs, void **data, CUdeviceptr p) {
  pthread_mutex_lock(&lock);
  int found = -1;
  for (int i = 0; i < MAX_ALLOCS; i++) if (allocs[i].live && p >= allocs[i].p && p < allocs[i].p + allocs[i].n) { found = i; break; }
  for (unsigned k = 0; k < n; k++) switch (attrs[k]) {
    case 2: *(unsigned *)data[k] = found >= 0 ? 2 : 0; break;
    case 9: *(int *)data[k] = found >= 0 ? 0 : -1; break;
    case 11: *(CUdeviceptr *)data[k] = found >= 0 ? allocs[found].p : 0; break;
    case 12: *(size_t *)data[k] = found >= 0 ? allocs[found].n : 0; break;
    default: break;
  }
  pthread_mutex_unlock(&lock);
  return OK;
}

CUresult cuModuleLoadData(Module **out, const void *image) {
  const char *t = image;
  Module *m = calloc(1, sizeof *m);
  for (const char *l = t; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : 0) {
    char line[256]; size_t k = strcspn(l, "\n"); if (k >= sizeof line) k = sizeof line - 1;
    memcpy(line, l, k); line[k] = 0;
    char *e = strstr(line, ".entry ");
    if (e) {
      char name[64]; sscanf(e + 7, "%63[A-Za-z0-9_]", name);
      int ok = 0; for (size_t i = 0; i < sizeof known / sizeof *known; i++) ok |= !strcmp(known[i].name, name);
      if (!ok) { free(m); return E_NOT_FOUND; }
    } else if (strstr(line, ".global ") && m->ng < 16) {
      char *semi = strchr(line, ';'); if (!semi) continue; *semi = 0;
      char *name = strrchr(line, ' ') + 1; size_t size = 4; char *br = strchr(name, '[');
      if (br) { size = strtoul(br + 1, 0, 10); *br = 0; }
      snprintf(m->g[m->ng].name, 64, "%s", name);
      m->g[m->ng].size = size;
      m->g[m->ng].addr = (void *)dev_alloc(size);
      memset(m->g[m->ng].addr, 0, size);
      m->ng++;
    }
  }
  *out = m;
  return OK;
}
CUresult cuModuleLoadDataEx(Module **out, const void *image, unsigned n, int *o, void **v) { (void)n; (void)o; (void)v; return cuModuleLoadData(out, image); }
CUresult cuModuleUnload(Module *m) { free(m); return OK; }
CUresult cuModuleGetFunction(Func **out, Module *m, const char *name) {
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) if (!strcmp(known[i].name, name)) {
    Func *f = calloc(1, sizeof *f); f->name = known[i].name; f->run = known[i].run; f->m = m; *out = f; return OK;
  }
  return E_NOT_FOUND;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *n, Module *m, const char *name) {
  for (int i = 0; i < m->ng; i++) if (!strcmp(m->g[i].name, name)) { if (p) *p = (CUdeviceptr)m->g[i].addr; if (n) *n = m->g[i].size; return OK; }
  return E_NOT_FOUND;
}
CUresult cuFuncGetName(const char **name, Func *f) { if (!f) return E_INVALID_HANDLE; *name = f->name; return OK; }
// Each kernel's parameters (offset, size), as the PTX declares them.
CUresult cuFuncGetParamInfo(Func *f, size_t index, size_t *offset, size_t *size) {
  static const size_t axpy[][2] = { { 0, 8 }, { 8, 8 }, { 16, 4 }, { 20, 4 } }, hits[][2] = { { 0, 8 }, { 8, 4 } };
  if (!f) return E_INVALID_HANDLE;
  int is_axpy = f->run == k_axpy;
  size_t n = is_axpy ? 4 : 2;
  if (index >= n) return E_INVALID_VALUE;
  if (offset) *offset = is_axpy ? axpy[index][0] : hits[index][0];
  if (size) *size = is_axpy ? axpy[index][1] : hits[index][1];
  return OK;
}
static CUresult launch(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shm, void *stream, void **params, void **extra);
CUresult cuLaunchKernel(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shm, void *stream, void **params, void **extra) {
  ApiHook hook = atomic_load(&api_hook);
  if (!hook) return launch(f, gx, gy, gz, bx, by, bz, shm, stream, params, extra);
  LaunchKernelParams p = { f, gx, gy, gz, bx, by, bz, shm, stream, params, extra };
  CUresult r = OK;
  hook(0, 307, "cuLaunchKernel", &p, &r);
  r = launch(f, gx, gy, gz, bx, by, bz, shm, stream, params, extra);
  hook(1, 307, "cuLaunchKernel", &p, &r);
  return r;
}
static CUresult launch(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shm, void *stream, void **params, void **extra) {
  (void)extra;
  unsigned long long api = OBS_NOW();
  if (!f || !params) return E_INVALID_VALUE;
  f->grid = gx; f->block = bx;
  unsigned long long start = OBS_NOW();
  f->run(f, params);
  const char *lat = getenv("FAKECUDA_KERNEL_US");
  if (lat) {
    // The kernel's duration on the "GPU": it runs inside the launch call.
    unsigned long long until = mono_ns() + strtoull(lat, 0, 10) * 1000ull;
    while (mono_ns() < until) {}
  }
  if (observer) {
    FakeActivity a = { .what = 0, .name = f->name, .grid = { gx, gy, gz }, .block = { bx, by, bz },
                       .shm = shm, .stream = (unsigned long long)stream, .api_start = api, .start = start };
    a.end = obs_clock();
    observer(&a);
  }
  return OK;
}
// Events: a timestamp taken when recorded (the kernels before it on the stream have run:
// they run inside their launch call). FAKECUDA_FAIL_EVENT_RECORD=1 makes cuEventRecord fail
// with CUDA_ERROR_INVALID_HANDLE.
typedef struct { unsigned long long ns; int recorded; } Event;
CUresult cuEventCreate(Event **e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e ? OK : E_OOM;
}
CUresult cuEventRecord(Event *e, void *stream) {
  (void)stream;
  if (!e || getenv("FAKECUDA_FAIL_EVENT_RECORD")) return E_INVALID_HANDLE;
  e->ns = mono_ns(), e->recorded = 1;
  return OK;
}
CUresult cuEventElapsedTime(float *ms, Event *a, Event *b) {
  if (!a || !b || !a->recorded || !b->recorded) return E_INVALID_HANDLE;
  *ms = (float)((double)(b->ns - a->ns) / 1e6);
  return OK;
}
CUresult cuEventDestroy_v2(Event *e) { free(e); return OK; }
// A "graph" of one kernel node: what the test program captures.
typedef struct { Func *f; void *params[8]; } Graph;
// Through cuLaunchKernel's symbol, so a tracer sees the graph launch's kernel as a nested launch.
CUresult cuGraphLaunch(Graph *g, void *stream) { return cuLaunchKernel(g->f, 1, 1, 1, 1, 1, 1, 0, stream, g->params, 0); }

typedef struct { const char *name; void *fn; } Entry;
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);
static const Entry table[] = {
  { "cuInit", cuInit }, { "cuDriverGetVersion", cuDriverGetVersion }, { "cuCtxGetDevice", cuCtxGetDevice },
  { "cuDeviceGetCount", cuDeviceGetCount }, { "cuDeviceGet", cuDeviceGet }, { "cuDeviceGetName", cuDeviceGetName },
  { "cuCtxGetCurrent", cuCtxGetCurrent }, { "cuCtxSynchronize", cuCtxSynchronize }, { "cuCtxSetCurrent", cuCtxSetCurrent },
  { "cuStreamIsCapturing", cuStreamIsCapturing }, { "cuMemGetInfo", cuMemGetInfo_v2 },
  { "cuMemAlloc", cuMemAlloc_v2 }, { "cuMemFree", cuMemFree_v2 }, { "cuMemAllocAsync", cuMemAllocAsync },
  { "cuMemFreeAsync", cuMemFreeAsync }, { "cuMemAllocHost", cuMemAllocHost_v2 }, { "cuMemFreeHost", cuMemFreeHost },
  { "cuMemcpyHtoD", cuMemcpyHtoD_v2 }, { "cuMemcpyDtoH", cuMemcpyDtoH_v2 }, { "cuMemcpyDtoD", cuMemcpyDtoD_v2 },
  { "cuPointerGetAttributes", cuPointerGetAttributes }, { "cuModuleLoadData", cuModuleLoadData },
  { "cuModuleLoadDataEx", cuModuleLoadDataEx }, { "cuModuleUnload", cuModuleUnload },
  { "cuModuleGetFunction", cuModuleGetFunction }, { "cuModuleGetGlobal", cuModuleGetGlobal_v2 },
  { "cuFuncGetName", cuFuncGetName }, { "cuFuncGetParamInfo", cuFuncGetParamInfo }, { "cuLaunchKernel", cuLaunchKernel }, { "cuGraphLaunch", cuGraphLaunch },
  { "cuGetProcAddress", cuGetProcAddress_v2 }, { "cuMemAddressReserve", cuMemAddressReserve },
  { "cuMemAddressFree", cuMemAddressFree }, { "cuMemCreate", cuMemCreate }, { "cuMemRelease", cuMemRelease },
  { "cuMemMap", cuMemMap }, { "cuMemUnmap", cuMemUnmap }, { "cuMemSetAccess", cuMemSetAccess },
  { "cuEventCreate", cuEventCreate }, { "cuEventRecord", cuEventRecord },
  { "cuEventElapsedTime", cuEventElapsedTime }, { "cuEventDestroy", cuEventDestroy_v2 },
};
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  (void)ver; (void)flags;
  for (size_t i = 0; i < sizeof table / sizeof *table; i++) if (!strcmp(table[i].name, sym)) {
    *pfn = table[i].fn; if (status) *status = 0; return OK;
  }
  *pfn = 0; if (status) *status = 1;
  return E_NOT_FOUND;
}
