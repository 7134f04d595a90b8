/* copy.c - synchronous copies, hsa_amd_memory_fill and the asynchronous copy engine thread. */
#include "sim.h"

hsa_status_t sim_hsa_memory_copy(void* dst, const void* src, size_t n) {
  SIM_CHECK_INIT();
  if ((!dst || !src) && n) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (n == 0) return HSA_STATUS_SUCCESS;
  if (sim_fault_copy_should_fail(dst, src)) return HSA_STATUS_ERROR;
  sim_sleep_us(g_faults.copy_latency_us);
  memmove(dst, src, n);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_memory_fill(void* ptr, uint32_t value, size_t count) {
  SIM_CHECK_INIT();
  if (!ptr || ((uintptr_t)ptr & 3)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t* p = ptr;
  for (size_t i = 0; i < count; i++) p[i] = value;
  return HSA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ copy engine */

typedef struct copy_job {
  void* dst;
  const void* src;
  size_t n;
  uint32_t ndeps;
  hsa_signal_t* deps;
  hsa_signal_t completion;
  struct copy_job* next;
} copy_job;

static pthread_mutex_t g_c_mu = PTHREAD_MUTEX_INITIALIZER;
static copy_job *g_c_head, *g_c_tail;
static pthread_t g_c_thread;
static _Atomic bool g_c_running, g_c_stop, g_copy_profiling;

static bool deps_ready(const copy_job* j) {
  for (uint32_t i = 0; i < j->ndeps; i++) {
    sim_signal* s = sim_signal_from(j->deps[i]);
    if (s && atomic_load(&s->value) != 0) return false;
  }
  return true;
}

/* Takes the first job whose dependencies are satisfied (jobs without deps keep FIFO order). */
static copy_job* take_ready(void) {
  pthread_mutex_lock(&g_c_mu);
  copy_job *prev = NULL, *j = g_c_head;
  while (j && !deps_ready(j)) {
    prev = j;
    j = j->next;
  }
  if (j) {
    if (prev) prev->next = j->next;
    else g_c_head = j->next;
    if (g_c_tail == j) g_c_tail = prev;
  }
  pthread_mutex_unlock(&g_c_mu);
  return j;
}

static void* copy_main(void* unused) {
  (void)unused;
  sim_mark_runtime_thread();
  for (;;) {
    copy_job* j = take_ready();
    if (!j) {
      if (atomic_load(&g_c_stop)) {
        pthread_mutex_lock(&g_c_mu);
        bool empty = g_c_head == NULL;
        pthread_mutex_unlock(&g_c_mu);
        if (empty) break;
      }
      /* Nothing ready: with jobs queued, their dependencies are signals, so any change may
       * free one; with none, only a new job (a kick) can. */
      pthread_mutex_lock(&g_c_mu);
      bool queued = g_c_head != NULL;
      pthread_mutex_unlock(&g_c_mu);
      if (queued) sim_signal_wait_any_change(2000000ull);
      else sim_signal_wait_idle(2000000ull);
      continue;
    }
    uint64_t start = sim_now_ns();
    sim_sleep_us(g_faults.copy_latency_us);
    memmove(j->dst, j->src, j->n);
    sim_signal* c = sim_signal_from(j->completion);
    if (c) {
      if (atomic_load(&g_copy_profiling)) {
        atomic_store(&c->start_ns, start);
        atomic_store(&c->end_ns, sim_now_ns());
      }
      sim_signal_sub(c, 1);
    }
    free(j->deps);
    free(j);
  }
  return NULL;
}

void sim_copy_engine_start(void) {
  atomic_store(&g_c_stop, false);
  if (pthread_create(&g_c_thread, NULL, copy_main, NULL) == 0) atomic_store(&g_c_running, true);
}

void sim_copy_engine_stop(void) {
  if (!atomic_load(&g_c_running)) return;
  atomic_store(&g_c_stop, true);
  sim_signal_kick();
  pthread_join(g_c_thread, NULL);
  atomic_store(&g_c_running, false);
}

hsa_status_t sim_hsa_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                           hsa_agent_t src_agent, size_t n, uint32_t ndeps,
                                           const hsa_signal_t* deps, hsa_signal_t completion) {
  SIM_CHECK_INIT();
  if (!dst || !src) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sim_agent_from(dst_agent) || !sim_agent_from(src_agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (ndeps && !deps) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sim_signal_from(completion)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (sim_fault_copy_should_fail(dst, src)) return HSA_STATUS_ERROR;
  copy_job* j = calloc(1, sizeof *j);
  if (!j) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  j->dst = dst, j->src = src, j->n = n, j->completion = completion, j->ndeps = ndeps;
  if (ndeps) {
    j->deps = malloc(sizeof(hsa_signal_t) * ndeps);
    if (!j->deps) {
      free(j);
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    }
    memcpy(j->deps, deps, sizeof(hsa_signal_t) * ndeps);
  }
  pthread_mutex_lock(&g_c_mu);
  if (g_c_tail) g_c_tail->next = j;
  else g_c_head = j;
  g_c_tail = j;
  pthread_mutex_unlock(&g_c_mu);
  /* Wake the engine (it waits on the shared signal condvar). */
  sim_signal_kick();
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_profiling_async_copy_enable(bool enable) {
  SIM_CHECK_INIT();
  atomic_store(&g_copy_profiling, enable);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_profiling_get_async_copy_time(hsa_signal_t sig,
                                                       hsa_amd_profiling_async_copy_time_t* t) {
  SIM_CHECK_INIT();
  sim_signal* s = sim_signal_from(sig);
  if (!s) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (!t) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  t->start = atomic_load(&s->start_ns);
  t->end = atomic_load(&s->end_ns);
  return HSA_STATUS_SUCCESS;
}
