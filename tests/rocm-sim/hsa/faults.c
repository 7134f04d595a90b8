/* faults.c - environment knobs: fault injection, latency and sizing (see README.md). */
#include <string.h>
#include <time.h>

#include "sim.h"

sim_faults g_faults;
static _Atomic uint64_t g_d2h_count, g_h2d_count;
static _Thread_local bool t_runtime_thread;

void sim_mark_runtime_thread(void) { t_runtime_thread = true; }

static uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  char* end = NULL;
  unsigned long long x = strtoull(v, &end, 0);
  if (end == v) return dflt;
  return (uint64_t)x;
}

void sim_faults_load(void) {
  g_faults.fail_d2h_nth = env_u64("KRSIM_FAIL_D2H_NTH", 0);
  g_faults.fail_h2d_nth = env_u64("KRSIM_FAIL_H2D_NTH", 0);
  g_faults.fail_symbol_iter = env_u64("KRSIM_FAIL_SYMBOL_ITER", 0) != 0;
  g_faults.fail_host_alloc_above = env_u64("KRSIM_FAIL_HOST_ALLOC_ABOVE", 0);
  const char* scope = getenv("KRSIM_FAULT_SCOPE");
  g_faults.fault_runtime_threads_only = scope && !strcmp(scope, "runtime");
  g_faults.kernel_latency_us = env_u64("KRSIM_KERNEL_LATENCY_US", 0);
  g_faults.copy_latency_us = env_u64("KRSIM_COPY_LATENCY_US", 0);
  uint64_t gpus = env_u64("KRSIM_GPUS", 1);
  if (gpus < 1) gpus = 1;
  if (gpus > SIM_MAX_GPUS) gpus = SIM_MAX_GPUS;
  g_faults.gpus = (int)gpus;
  uint64_t workers = env_u64("KRSIM_WORKERS", 1);
  if (workers < 1) workers = 1;
  if (workers > 256) workers = 256;
  g_faults.workers = (int)workers;
  g_faults.inline_dispatch = env_u64("KRSIM_INLINE_DISPATCH", 0) != 0;
  uint64_t mb = env_u64("KRSIM_DEVICE_MEM_MB", 4096);
  if (mb < 16) mb = 16;
  g_faults.device_mem_mb = mb;
  atomic_store(&g_d2h_count, 0);
  atomic_store(&g_h2d_count, 0);
}

bool sim_fault_copy_should_fail(const void* dst, const void* src) {
  /* Scoped to the runtime's threads, the application's own copies neither count nor fail. */
  if (g_faults.fault_runtime_threads_only && !t_runtime_thread) return false;
  bool dd = sim_is_device_ptr(dst), sd = sim_is_device_ptr(src);
  if (sd && !dd) {
    uint64_t n = atomic_fetch_add(&g_d2h_count, 1) + 1;
    return g_faults.fail_d2h_nth != 0 && n == g_faults.fail_d2h_nth;
  }
  if (dd && !sd) {
    uint64_t n = atomic_fetch_add(&g_h2d_count, 1) + 1;
    return g_faults.fail_h2d_nth != 0 && n == g_faults.fail_h2d_nth;
  }
  return false;
}

void sim_sleep_us(uint64_t us) {
  if (!us) return;
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
