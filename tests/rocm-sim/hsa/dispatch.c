/* dispatch.c - the "compute units": KRSIM_WORKERS threads that run kernel workgroups.
 * Each dispatch becomes a job; workers claim workgroups from the oldest unfinished job, so
 * with more than one worker the workgroups of a kernel (and of unordered kernels) race.
 * KRSIM_INLINE_DISPATCH=1 instead runs each dispatch's workgroups, one after another, on the
 * thread of the queue that launched it: no hand-off per dispatch, so a launch loop measures
 * what sits around the runtime (a tool) rather than the simulator's own thread switches;
 * kernels of different queues then run at the same time. */
#include "sim.h"

typedef struct sim_job {
  krsim_kernel_fn fn;
  void* kernarg;
  uint32_t grid[3], wg[3], ngroups[3], dims;
  uint32_t group_size;
  uint64_t total;
  _Atomic uint64_t next, done;
  _Atomic uint64_t start_ns;
  void (*on_done)(void* ctx, uint64_t start_ns, uint64_t end_ns);
  void* ctx;
  struct sim_job* link;
} sim_job;

static pthread_mutex_t g_w_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_w_cv = PTHREAD_COND_INITIALIZER;
static sim_job *g_w_head, *g_w_tail;
static pthread_t g_w_threads[256];
static int g_w_count;
static bool g_w_stop;

static _Thread_local void* tl_group_mem;
static _Thread_local size_t tl_group_cap;

static void* group_segment(size_t n) {
  if (n == 0) return NULL;
  if (n > tl_group_cap) {
    free(tl_group_mem);
    tl_group_mem = malloc(n);
    tl_group_cap = tl_group_mem ? n : 0;
  }
  if (tl_group_mem) memset(tl_group_mem, 0, n);
  return tl_group_mem;
}

static void finish_job(sim_job* j) {
  sim_sleep_us(g_faults.kernel_latency_us);
  if (j->on_done) j->on_done(j->ctx, atomic_load(&j->start_ns), sim_now_ns());
  free(j);
}

/* Runs workgroup idx (in x-fastest order) of job j on this thread. */
static void run_group(sim_job* j, uint64_t idx) {
  krsim_dispatch d;
  memset(&d, 0, sizeof d);
  memcpy(d.grid, j->grid, sizeof d.grid);
  memcpy(d.workgroup, j->wg, sizeof d.workgroup);
  d.dims = j->dims;
  d.group_id[0] = (uint32_t)(idx % j->ngroups[0]);
  d.group_id[1] = (uint32_t)((idx / j->ngroups[0]) % j->ngroups[1]);
  d.group_id[2] = (uint32_t)(idx / ((uint64_t)j->ngroups[0] * j->ngroups[1]));
  d.group_segment = group_segment(j->group_size);
  j->fn(&d, j->kernarg);
}

static void* worker_main(void* unused) {
  (void)unused;
  sim_mark_runtime_thread();
  pthread_mutex_lock(&g_w_mu);
  for (;;) {
    while (!g_w_head && !g_w_stop) pthread_cond_wait(&g_w_cv, &g_w_mu);
    if (!g_w_head && g_w_stop) break;
    sim_job* j = g_w_head;
    uint64_t idx = atomic_fetch_add(&j->next, 1);
    if (idx + 1 >= j->total) {
      /* Last workgroup claimed: later workers move on to the next job. */
      g_w_head = j->link;
      if (!g_w_head) g_w_tail = NULL;
    }
    if (idx >= j->total) continue;
    pthread_mutex_unlock(&g_w_mu);
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&j->start_ns, &zero, sim_now_ns());
    run_group(j, idx);
    if (atomic_fetch_add(&j->done, 1) + 1 == j->total) finish_job(j);
    pthread_mutex_lock(&g_w_mu);
  }
  pthread_mutex_unlock(&g_w_mu);
  free(tl_group_mem);
  tl_group_mem = NULL;
  tl_group_cap = 0;
  return NULL;
}

void sim_workers_start(void) {
  pthread_mutex_lock(&g_w_mu);
  g_w_stop = false;
  pthread_mutex_unlock(&g_w_mu);
  g_w_count = 0;
  for (int i = 0; i < g_faults.workers; i++)
    if (pthread_create(&g_w_threads[g_w_count], NULL, worker_main, NULL) == 0) g_w_count++;
}

void sim_workers_stop(void) {
  pthread_mutex_lock(&g_w_mu);
  g_w_stop = true;
  pthread_cond_broadcast(&g_w_cv);
  pthread_mutex_unlock(&g_w_mu);
  for (int i = 0; i < g_w_count; i++) pthread_join(g_w_threads[i], NULL);
  g_w_count = 0;
}

/* Runs job j's workgroups on this thread, then finishes it. */
static void run_inline(sim_job* j) {
  atomic_store(&j->start_ns, sim_now_ns());
  for (uint64_t idx = 0; idx < j->total; idx++) run_group(j, idx);
  finish_job(j);
}

int sim_dispatch_launch(const hsa_kernel_dispatch_packet_t* pkt,
                        void (*done)(void* ctx, uint64_t start_ns, uint64_t end_ns), void* ctx) {
  const sim_kernel_desc* kd = (const sim_kernel_desc*)(uintptr_t)pkt->kernel_object;
  if (!kd || kd->magic != SIM_KERNEL_MAGIC || !kd->fn) return -1;
  sim_job* j = calloc(1, sizeof *j);
  if (!j) return -1;
  j->fn = kd->fn;
  j->kernarg = pkt->kernarg_address;
  j->dims = pkt->setup & 3u;
  if (j->dims == 0) j->dims = 1;
  j->grid[0] = pkt->grid_size_x, j->grid[1] = pkt->grid_size_y, j->grid[2] = pkt->grid_size_z;
  j->wg[0] = pkt->workgroup_size_x, j->wg[1] = pkt->workgroup_size_y, j->wg[2] = pkt->workgroup_size_z;
  uint64_t total = 1;
  for (int i = 0; i < 3; i++) {
    if (j->grid[i] == 0) j->grid[i] = 1;
    if (j->wg[i] == 0) j->wg[i] = 1;
    j->ngroups[i] = (j->grid[i] + j->wg[i] - 1) / j->wg[i];
    total *= j->ngroups[i];
  }
  j->total = total;
  j->group_size = pkt->group_segment_size;
  j->on_done = done;
  j->ctx = ctx;
  if (g_faults.inline_dispatch) {
    run_inline(j);
    return 0;
  }
  pthread_mutex_lock(&g_w_mu);
  if (g_w_tail) g_w_tail->link = j;
  else g_w_head = j;
  g_w_tail = j;
  pthread_cond_broadcast(&g_w_cv);
  pthread_mutex_unlock(&g_w_mu);
  return 0;
}
