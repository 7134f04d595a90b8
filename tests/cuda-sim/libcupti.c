// A stand-in libcupti.so for tests/cuda-sim's driver: the part of CUPTI's activity API
// kreplay-tool uses, with the real entry names and signatures (cupti_activity.h) and the
// leading fields of the real records in their real places (CUpti_ActivityAPI,
// CUpti_ActivityKernel9, CUpti_ActivityMemcpy5; packed, 8-byte aligned). The driver reports
// each launch and copy (fakecuda_observe); every one becomes a DRIVER API record (the call's
// start and end, process, system thread id, a fresh correlation id) and a CONCURRENT_KERNEL
// or MEMCPY record with that correlation id, appended to the current buffer from the
// registered request callback; a full buffer, and cuptiActivityFlushAll, hand it to the
// completion callback. Timestamps come from the callback registered with
// cuptiActivityRegisterTimestampCallback, else CLOCK_REALTIME (not the trace's clock).
// Knobs: FAKECUPTI_BUSY=1 (cuptiActivityEnable fails with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as with another subscriber),
// FAKECUPTI_NO_TIMESTAMP_CALLBACK=1 (its registration fails: the caller must map
// cuptiGetTimestamp's clock), FAKECUPTI_BUFFER_RECORDS=N (a buffer takes at most N records),
// FAKECUPTI_RUNTIME_SPAN_NS=N (each call is reported as a library's own copy of cudart
// reports it, as cuBLAS's is: a RUNTIME record holding the work's correlation id and spanning N
// ns more on each side than the driver call it made, and no DRIVER record for that call).
// Per-call filters (cuptiActivityEnableDriverApi, cuptiActivityEnableRuntimeApi): the driver's
// cuCtxGetCurrent (304), which launches nothing, makes a DRIVER record unless turned off;
// FAKECUPTI_REPORT=1 prints at exit how many such calls were made and recorded.
// FAKECUPTI_ORDER_FILE=path: the first cuptiActivityEnable writes there how many
// cuptiSubscribe calls came before it (the real CUPTI 13 crashed a process whose first
// subscriber came after its activity records had been on: docs/attach.md).
// The callback API's part kreplay uses (cupti_callbacks.h): one subscriber at a time
// (cuptiSubscribe, cuptiUnsubscribe), cuptiEnableCallback on the driver domain's cuLaunchKernel
// (307), the only call the driver reports (fakecuda_api_hook); the subscriber's function gets a
// CUpti_CallbackData at the call's entry and exit, on the calling thread, inside the call.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef uint32_t CUptiResult;
enum { SUCCESS = 0, ERROR_INVALID_PARAMETER = 1, ERROR_MAX_LIMIT_REACHED = 12, ERROR_MULTIPLE_SUBSCRIBERS = 39 };
enum { KIND_MEMCPY = 1, KIND_DRIVER = 4, KIND_RUNTIME = 5, KIND_CONCURRENT_KERNEL = 10 };

typedef struct __attribute__((packed, aligned(8))) {
  uint32_t kind, cbid;
  uint64_t start, end;
  uint32_t processId, threadId, correlationId, returnValue;
} Api;
typedef struct __attribute__((packed, aligned(8))) {
  uint32_t kind;
  uint8_t cacheConfig, sharedMemoryConfig;
  uint16_t registersPerThread;
  uint32_t partitionedGlobalCacheRequested, partitionedGlobalCacheExecuted;
  uint64_t start, end, completed;
  uint32_t deviceId, contextId, streamId;
  int32_t gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory;
  uint32_t localMemoryPerThread, localMemoryTotal, correlationId;
  int64_t gridId;
  const char *name;
  void *reserved0;
  uint64_t queued, submitted;
} Kernel;
typedef struct __attribute__((packed, aligned(8))) {
  uint32_t kind;
  uint8_t copyKind, srcKind, dstKind, flags;
  uint64_t bytes, start, end;
  uint32_t deviceId, contextId, streamId, correlationId, runtimeCorrelationId, pad;
  void *reserved0;
  uint64_t graphNodeId;
  uint32_t graphId, channelID, channelType, pad2;
} Memcpy;

typedef struct {
  int what; const char *name; unsigned grid[3], block[3], shm; unsigned long long stream;
  int copy_kind; unsigned long long bytes, api_start, start, end;
} FakeActivity;

typedef void (*RequestFn)(uint8_t **, size_t *, size_t *);
typedef void (*CompleteFn)(void *, uint32_t, uint8_t *, size_t, size_t);
static RequestFn request;
static CompleteFn complete;
static uint64_t (*timestamp_cb)(void);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *buf;
static size_t cap, used, records;
static uint32_t next_corr = 1;
static int enabled[64];

static uint64_t now(void) {
  if (timestamp_cb) return timestamp_cb();
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static unsigned long long driver_clock(void) { return now(); }

static size_t record_size(uint32_t kind) {
  switch (kind) {
    case KIND_DRIVER:
    case KIND_RUNTIME: return sizeof(Api);
    case KIND_CONCURRENT_KERNEL: return sizeof(Kernel);
    case KIND_MEMCPY: return sizeof(Memcpy);
    default: return 0;
  }
}

// Hands the current buffer back (called with mu held).
static void hand_back(void) {
  if (!buf) return;
  uint8_t *b = buf;
  size_t c = cap, u = used;
  buf = 0, cap = used = records = 0;
  if (complete) complete(0, 0, b, c, u);
}

static void put(const void *rec, size_t n) {
  const char *lim = getenv("FAKECUPTI_BUFFER_RECORDS");
  if (buf && (used + n > cap || (lim && records >= strtoull(lim, 0, 10)))) hand_back();
  if (!buf) {
    size_t max = 0;
    if (!request) return;
    request(&buf, &cap, &max);
    used = records = 0;
    if (!buf) return;
  }
  memcpy(buf + used, rec, n);
  used += (n + 7) & ~(size_t)7;
  records++;
}

static uint8_t driver_off[1024];
static unsigned long quiet_calls, quiet_records;

static void observe(const FakeActivity *a) {
  pthread_mutex_lock(&mu);
  uint32_t corr = next_corr++;
  if (a->what == 2) {
    quiet_calls++;
    if (enabled[KIND_DRIVER] && !driver_off[304]) {
      Api r = { KIND_DRIVER, 304, a->api_start, a->end, (uint32_t)getpid(), (uint32_t)gettid(), corr, 0 };
      put(&r, sizeof r);
      quiet_records++;
    }
    pthread_mutex_unlock(&mu);
    return;
  }
  if (a->what == 0 && enabled[KIND_CONCURRENT_KERNEL]) {
    Kernel k;
    memset(&k, 0, sizeof k);
    k.kind = KIND_CONCURRENT_KERNEL;
    k.start = a->start, k.end = a->end, k.completed = a->end;
    k.contextId = 1;
    k.streamId = a->stream ? (uint32_t)(a->stream & 0xffff) : 7;
    k.gridX = (int32_t)a->grid[0], k.gridY = (int32_t)a->grid[1], k.gridZ = (int32_t)a->grid[2];
    k.blockX = (int32_t)a->block[0], k.blockY = (int32_t)a->block[1], k.blockZ = (int32_t)a->block[2];
    k.dynamicSharedMemory = (int32_t)a->shm;
    k.correlationId = corr;
    k.name = a->name;
    put(&k, sizeof k);
  }
  if (a->what == 1 && enabled[KIND_MEMCPY]) {
    Memcpy m;
    memset(&m, 0, sizeof m);
    m.kind = KIND_MEMCPY;
    m.copyKind = (uint8_t)a->copy_kind;
    m.bytes = a->bytes, m.start = a->start, m.end = a->end;
    m.contextId = 1, m.streamId = 7, m.correlationId = corr;
    put(&m, sizeof m);
  }
  const char *span = getenv("FAKECUPTI_RUNTIME_SPAN_NS");
  if (span && enabled[KIND_RUNTIME]) {
    uint64_t n = strtoull(span, 0, 10);
    // cudaLaunchKernel 211, cudaMemcpy 31 (cupti_runtime_cbid.h).
    Api r = { KIND_RUNTIME, a->what == 0 ? 211 : 31, a->api_start - n, now() + n,
              (uint32_t)getpid(), (uint32_t)gettid(), corr, 0 };
    put(&r, sizeof r);
  } else if (enabled[KIND_DRIVER]) {
    Api r = { KIND_DRIVER, a->what == 0 ? 307 : 279, a->api_start, now(), (uint32_t)getpid(),
              (uint32_t)gettid(), corr, 0 };
    put(&r, sizeof r);
  }
  pthread_mutex_unlock(&mu);
}

CUptiResult cuptiActivityRegisterCallbacks(RequestFn req, CompleteFn done) {
  if (!req || !done) return ERROR_INVALID_PARAMETER;
  request = req, complete = done;
  return SUCCESS;
}
CUptiResult cuptiActivityRegisterTimestampCallback(uint64_t (*f)(void)) {
  if (getenv("FAKECUPTI_NO_TIMESTAMP_CALLBACK")) return ERROR_INVALID_PARAMETER;
  timestamp_cb = f;
  return SUCCESS;
}
CUptiResult cuptiSetThreadIdType(uint32_t type) { return type <= 1 ? SUCCESS : ERROR_INVALID_PARAMETER; }
CUptiResult cuptiGetTimestamp(uint64_t *t) { *t = now(); return SUCCESS; }
static unsigned long subscribes;
CUptiResult cuptiActivityEnable(uint32_t kind) {
  if (getenv("FAKECUPTI_BUSY")) return ERROR_MULTIPLE_SUBSCRIBERS;
  if (kind >= 64) return ERROR_INVALID_PARAMETER;
  static int told;
  const char *order = getenv("FAKECUPTI_ORDER_FILE");
  if (order && !__atomic_exchange_n(&told, 1, __ATOMIC_SEQ_CST)) {
    FILE *f = fopen(order, "w");
    if (f) {
      fprintf(f, "first cuptiActivityEnable after %lu cuptiSubscribe\n",
              __atomic_load_n(&subscribes, __ATOMIC_SEQ_CST));
      fclose(f);
    }
  }
  enabled[kind] = 1;
  void (*obs)(void (*)(const FakeActivity *), unsigned long long (*)(void)) =
      (void (*)(void (*)(const FakeActivity *), unsigned long long (*)(void)))dlsym(RTLD_DEFAULT, "fakecuda_observe");
  if (obs) obs(observe, driver_clock);
  return SUCCESS;
}
CUptiResult cuptiActivityDisable(uint32_t kind) {
  if (kind >= 64) return ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&mu);
  enabled[kind] = 0;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUptiResult cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t enable) {
  if (cbid >= sizeof driver_off) return ERROR_INVALID_PARAMETER;
  driver_off[cbid] = !enable;
  return SUCCESS;
}
// No runtime call the sim reports launches nothing: a valid id is accepted and changes nothing.
// The callback names of the ids this CUPTI reports (cupti_driver_cbid.h, cupti_runtime_cbid.h,
// as the real cuptiGetCallbackName spells them: runtime names keep their version suffix).
CUptiResult cuptiGetCallbackName(uint32_t domain, uint32_t cbid, const char **name) {
  if (!name) return ERROR_INVALID_PARAMETER;
  const char *n = 0;
  if (domain == 1) n = cbid == 307 ? "cuLaunchKernel" : cbid == 279 ? "cuMemcpyHtoD_v2" : cbid == 304 ? "cuCtxGetCurrent" : 0;
  if (domain == 2) n = cbid == 211 ? "cudaLaunchKernel_v7000" : cbid == 31 ? "cudaMemcpy_v3020" : 0;
  if (!n) return ERROR_INVALID_PARAMETER;
  *name = n;
  return SUCCESS;
}
CUptiResult cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t enable) {
  (void)enable;
  return cbid < 1024 ? SUCCESS : ERROR_INVALID_PARAMETER;
}
__attribute__((destructor)) static void report(void) {
  if (getenv("FAKECUPTI_REPORT"))
    fprintf(stderr, "fakecupti: %lu of %lu cuCtxGetCurrent calls recorded\n", quiet_records, quiet_calls);
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record) {
  uint8_t *at;
  if (!*record) {
    at = buffer;
  } else {
    uint8_t *prev = *record;
    size_t n = record_size(*(uint32_t *)prev);
    at = prev + ((n + 7) & ~(size_t)7);
  }
  if (at >= buffer + valid || !record_size(*(uint32_t *)at)) return ERROR_MAX_LIMIT_REACHED;
  *record = at;
  return SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  pthread_mutex_lock(&mu);
  hand_back();
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped) {
  (void)ctx, (void)stream;
  *dropped = 0;
  return SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == ERROR_MULTIPLE_SUBSCRIBERS ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
       : r == ERROR_INVALID_PARAMETER  ? "CUPTI_ERROR_INVALID_PARAMETER"
                                        : "CUPTI_ERROR_UNKNOWN";
  return SUCCESS;
}

// The callback API.
typedef struct {
  uint32_t callbackSite;
  const char *functionName;
  const void *functionParams;
  void *functionReturnValue;
  const char *symbolName;
  void *context;
  uint32_t contextUid;
  uint64_t *correlationData;
  uint32_t correlationId;
} CallbackData;
typedef void (*CallbackFunc)(void *userdata, uint32_t domain, uint32_t cbid, const void *data);
enum { DOMAIN_DRIVER_API = 1, CBID_LAUNCH_KERNEL = 307 };
static struct { CallbackFunc fn; void *userdata; int launch_on; } sub;
static int subscribed;
static _Atomic uint32_t next_callback_corr = 1;
static void api_hook(int site, unsigned cbid, const char *name, const void *params, int *ret) {
  pthread_mutex_lock(&mu);
  CallbackFunc fn = subscribed && sub.launch_on && cbid == CBID_LAUNCH_KERNEL ? sub.fn : 0;
  void *ud = sub.userdata;
  pthread_mutex_unlock(&mu);
  if (!fn) return;
  static __thread uint64_t corr_data;
  static __thread uint32_t corr;
  if (site == 0) corr = next_callback_corr++;
  CallbackData d = { (uint32_t)site, name, params, ret, 0, (void *)0x1, 1, &corr_data, corr };
  fn(ud, DOMAIN_DRIVER_API, cbid, &d);
}
CUptiResult cuptiSubscribe(void **subscriber, CallbackFunc fn, void *userdata) {
  if (!subscriber || !fn) return ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&mu);
  if (subscribed || getenv("FAKECUPTI_BUSY")) { pthread_mutex_unlock(&mu); return ERROR_MULTIPLE_SUBSCRIBERS; }
  subscribed = 1;
  __atomic_add_fetch(&subscribes, 1, __ATOMIC_SEQ_CST);
  sub.fn = fn, sub.userdata = userdata, sub.launch_on = 0;
  *subscriber = &sub;
  pthread_mutex_unlock(&mu);
  void (*hook)(void (*)(int, unsigned, const char *, const void *, int *)) =
      (void (*)(void (*)(int, unsigned, const char *, const void *, int *)))dlsym(RTLD_DEFAULT, "fakecuda_api_hook");
  if (hook) hook(api_hook);
  return SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t enable, void *subscriber, uint32_t domain, uint32_t cbid) {
  pthread_mutex_lock(&mu);
  CUptiResult r = SUCCESS;
  if (!subscribed || subscriber != &sub) r = ERROR_INVALID_PARAMETER;
  else if (domain == DOMAIN_DRIVER_API && cbid == CBID_LAUNCH_KERNEL) sub.launch_on = enable != 0;
  pthread_mutex_unlock(&mu);
  return r;
}
CUptiResult cuptiUnsubscribe(void *subscriber) {
  pthread_mutex_lock(&mu);
  CUptiResult r = SUCCESS;
  if (!subscribed || subscriber != &sub) r = ERROR_INVALID_PARAMETER;
  else subscribed = 0, sub.fn = 0, sub.launch_on = 0;
  pthread_mutex_unlock(&mu);
  return r;
}
