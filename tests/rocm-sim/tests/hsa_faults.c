/* hsa_faults: every environment knob of the sim, each in its own init/shut_down cycle
 * (knobs are read at the first hsa_init). */
#include <pthread.h>
#include <time.h>

#include "hsa_test_util.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void start(const char* name, const char* value) {
  if (name) setenv(name, value, 1);
  CHECK_OK(hsa_init());
}
static void stop(const char* name) {
  CHECK_OK(hsa_shut_down());
  if (name) unsetenv(name);
}

static hsa_status_t async_copy_wait(void* dst, hsa_agent_t da, const void* src, hsa_agent_t sa, size_t n) {
  hsa_signal_t s;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &s));
  hsa_status_t st = hsa_amd_memory_async_copy(dst, da, src, sa, n, 0, NULL, s);
  if (st == HSA_STATUS_SUCCESS)
    CHECK_EQ(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_OK(hsa_signal_destroy(s));
  return st;
}

static pthread_t g_threads[64];
static int g_nthreads;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
void __krsim_kernel_who(const krsim_dispatch* d, void* kernarg) {
  (void)d, (void)kernarg;
  struct timespec ts = {0, 2 * 1000000};
  nanosleep(&ts, NULL);
  pthread_mutex_lock(&g_mu);
  int known = 0;
  for (int i = 0; i < g_nthreads; i++) known |= pthread_equal(g_threads[i], pthread_self());
  if (!known && g_nthreads < 64) g_threads[g_nthreads++] = pthread_self();
  pthread_mutex_unlock(&g_mu);
}

static struct { krsim_code_object h; krsim_co_entry e[2]; } co = {
    .h = {.magic = KRSIM_CO_MAGIC, .version = 1, .count = 2},
    .e = {{.kind = 1, .size = 8, .name = "who"}, {.kind = 0, .size = 4, .name = "v"}}};

static hsa_status_t never(hsa_executable_t e, hsa_agent_t a, hsa_executable_symbol_t s, void* d) {
  (void)e, (void)a, (void)s, (void)d;
  CHECK(!"callback must not run");
  return HSA_STATUS_SUCCESS;
}

/* Runs `who` with `groups` workgroups; returns wall nanoseconds. */
static uint64_t run_who(agents_t ag, uint32_t groups) {
  hsa_executable_t e = load_co(&co.h, sizeof co, ag.gpu[0]);
  hsa_queue_t* q;
  CHECK_OK(hsa_queue_create(ag.gpu[0], 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  hsa_signal_t s;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &s));
  uint64_t t0 = now_ns();
  dispatch_kernel(q, kernel_object(e, "who", ag.gpu[0]), NULL, groups * 64, 64, 1, s);
  CHECK_EQ(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  uint64_t el = now_ns() - t0;
  CHECK_OK(hsa_signal_destroy(s));
  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_executable_destroy(e));
  return el;
}

int main(void) {
  static unsigned char host[8192], back[8192];
  for (int i = 0; i < 8192; i++) host[i] = (unsigned char)i;

  /* KRSIM_FAIL_D2H_NTH=2: the 2nd device-to-host copy (sync or async) fails. */
  start("KRSIM_FAIL_D2H_NTH", "2");
  agents_t ag = get_agents();
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE);
  unsigned char* d;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, 16384, 0, (void**)&d));
  CHECK_OK(hsa_memory_copy(d, host, 8192));                                  /* H2D: not counted */
  CHECK_OK(hsa_memory_copy(d + 8192, d, 8192));                              /* D2D: not counted */
  CHECK_OK(hsa_memory_copy(back, d, 16));                                    /* D2H #1 */
  memset(back, 0, sizeof back);
  CHECK_EQ(async_copy_wait(back, ag.cpu, d, ag.gpu[0], 8192), HSA_STATUS_ERROR); /* D2H #2 */
  CHECK_EQ(back[5], 0);                                                      /* nothing copied */
  CHECK_OK(async_copy_wait(back, ag.cpu, d, ag.gpu[0], 8192));               /* D2H #3 */
  CHECK(memcmp(back, host, 8192) == 0);
  CHECK_OK(hsa_amd_memory_pool_free(d));
  stop("KRSIM_FAIL_D2H_NTH");

  /* KRSIM_FAIL_H2D_NTH=1: the first host-to-device copy fails, later ones work. */
  start("KRSIM_FAIL_H2D_NTH", "1");
  ag = get_agents();
  dev = find_pool(ag.gpu[0], COARSE);
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, 8192, 0, (void**)&d));
  memset(d, 0, 8192);
  CHECK_EQ(hsa_memory_copy(d, host, 8192), HSA_STATUS_ERROR);
  CHECK_EQ(d[7], 0);
  CHECK_OK(async_copy_wait(d, ag.gpu[0], host, ag.cpu, 8192));
  CHECK_EQ(d[7], 7);
  CHECK_OK(hsa_memory_copy(back, d, 8192)); /* D2H unaffected */
  CHECK_OK(hsa_amd_memory_pool_free(d));
  stop("KRSIM_FAIL_H2D_NTH");

  /* KRSIM_FAIL_SYMBOL_ITER=1: iteration fails without calling back; lookups still work. */
  start("KRSIM_FAIL_SYMBOL_ITER", "1");
  ag = get_agents();
  hsa_executable_t e = load_co(&co.h, sizeof co, ag.gpu[0]);
  CHECK_EQ(hsa_executable_iterate_agent_symbols(e, ag.gpu[0], never, NULL), HSA_STATUS_ERROR);
  hsa_executable_symbol_t sym;
  CHECK_OK(hsa_executable_get_symbol_by_name(e, "v", &ag.gpu[0], &sym));
  CHECK_OK(hsa_executable_destroy(e));
  stop("KRSIM_FAIL_SYMBOL_ITER");

  /* KRSIM_FAIL_HOST_ALLOC_ABOVE=65536: system pools refuse larger allocations; device pools don't. */
  start("KRSIM_FAIL_HOST_ALLOC_ABOVE", "65536");
  ag = get_agents();
  void* p;
  CHECK_OK(hsa_amd_memory_pool_allocate(find_pool(ag.cpu, FINE), 65536, 0, &p));
  CHECK_OK(hsa_amd_memory_pool_free(p));
  CHECK_EQ(hsa_amd_memory_pool_allocate(find_pool(ag.cpu, FINE), 65537, 0, &p), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_EQ(hsa_amd_memory_pool_allocate(find_pool(ag.cpu, KERNARG), 1 << 20, 0, &p), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_OK(hsa_amd_memory_pool_allocate(find_pool(ag.gpu[0], COARSE), 1 << 20, 0, &p));
  CHECK_OK(hsa_amd_memory_pool_free(p));
  stop("KRSIM_FAIL_HOST_ALLOC_ABOVE");

  /* KRSIM_KERNEL_LATENCY_US: each dispatch takes at least the latency. */
  start("KRSIM_KERNEL_LATENCY_US", "40000");
  ag = get_agents();
  CHECK(run_who(ag, 1) >= 40000000ull);
  stop("KRSIM_KERNEL_LATENCY_US");
  start(NULL, NULL);
  CHECK(run_who(get_agents(), 1) < 40000000ull);
  stop(NULL);

  /* KRSIM_COPY_LATENCY_US: each copy takes at least the latency. */
  start("KRSIM_COPY_LATENCY_US", "40000");
  ag = get_agents();
  uint64_t t0 = now_ns();
  CHECK_OK(hsa_memory_copy(back, host, 64));
  CHECK(now_ns() - t0 >= 40000000ull);
  stop("KRSIM_COPY_LATENCY_US");

  /* KRSIM_GPUS and KRSIM_WORKERS: agents, and workgroups spread over 4 threads. */
  setenv("KRSIM_GPUS", "3", 1);
  start("KRSIM_WORKERS", "4");
  ag = get_agents();
  CHECK_EQ(ag.ngpu, 3);
  uint32_t cus = 0;
  CHECK_OK(hsa_agent_get_info(ag.gpu[2], HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &cus));
  CHECK_EQ(cus, 4);
  g_nthreads = 0;
  run_who(ag, 64);
  CHECK_EQ(g_nthreads, 4);
  stop("KRSIM_WORKERS");
  unsetenv("KRSIM_GPUS");
  start(NULL, NULL);
  CHECK_EQ(get_agents().ngpu, 1);
  g_nthreads = 0;
  run_who(get_agents(), 16);
  CHECK_EQ(g_nthreads, 1);
  stop(NULL);

  /* KRSIM_DEVICE_MEM_MB: pool size; the default (4096) holds a 1 GiB footprint. */
  start("KRSIM_DEVICE_MEM_MB", "64");
  size_t size = 0;
  CHECK_OK(hsa_amd_memory_pool_get_info(find_pool(get_agents().gpu[0], COARSE), HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
  CHECK_EQ(size, 64ull << 20);
  CHECK_EQ(hsa_amd_memory_pool_allocate(find_pool(get_agents().gpu[0], COARSE), 65ull << 20, 0, &p), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  stop("KRSIM_DEVICE_MEM_MB");
  start(NULL, NULL);
  CHECK_OK(hsa_amd_memory_pool_get_info(find_pool(get_agents().gpu[0], COARSE), HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
  CHECK_EQ(size, 4096ull << 20);
  void* big[16];
  for (int i = 0; i < 16; i++) {
    CHECK_OK(hsa_amd_memory_pool_allocate(find_pool(get_agents().gpu[0], COARSE), 64ull << 20, 0, &big[i]));
    ((char*)big[i])[0] = 1;
    ((char*)big[i])[(64 << 20) - 1] = 2;
  }
  for (int i = 0; i < 16; i++) CHECK_OK(hsa_amd_memory_pool_free(big[i]));
  stop(NULL);
  printf("hsa_faults: PASS\n");
  return 0;
}
