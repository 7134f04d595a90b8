/* hsa_queue: kernel dispatch (workgroups, kernargs), in-order execution with the barrier bit,
 * BARRIER_AND waiting on an external signal, INVALID headers after processing, read index,
 * profiling start/end per dispatch. */
#include <pthread.h>
#include <time.h>

#include "hsa_test_util.h"

typedef struct { int* log; int* pos; int id; uint32_t* hits; } args_t;

void __krsim_kernel_record(const krsim_dispatch* d, void* kernarg) {
  args_t* a = kernarg;
  if (d->group_id[0] == 0) a->log[__atomic_fetch_add(a->pos, 1, __ATOMIC_SEQ_CST)] = a->id;
  __atomic_fetch_add(&a->hits[d->group_id[0]], 1, __ATOMIC_SEQ_CST);
}

/* One 50 ms workgroup that records when it started and ended. */
typedef struct { uint64_t start, end; } span_t;
static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
void __krsim_kernel_slow(const krsim_dispatch* d, void* kernarg) {
  (void)d;
  span_t* s = kernarg;
  s->start = mono_ns();
  struct timespec ts = {0, 50 * 1000000};
  nanosleep(&ts, NULL);
  s->end = mono_ns();
}

static const krsim_code_object* make_co(size_t* size) {
  static struct { krsim_code_object h; krsim_co_entry e[2]; } co;
  memcpy(co.h.magic, KRSIM_CO_MAGIC, 8);
  co.h.version = 1;
  co.h.count = 2;
  co.e[0].kind = KRSIM_CO_KIND_KERNEL;
  co.e[0].size = sizeof(args_t);
  strcpy(co.e[0].name, "record");
  co.e[1].kind = KRSIM_CO_KIND_KERNEL;
  co.e[1].size = sizeof(span_t);
  strcpy(co.e[1].name, "slow");
  *size = sizeof co;
  return &co.h;
}

int main(void) {
  setenv("KRSIM_WORKERS", "4", 1);
  CHECK_OK(hsa_init());
  agents_t ag = get_agents();
  size_t cosz = 0;
  const krsim_code_object* co = make_co(&cosz);
  hsa_executable_t e = load_co(co, cosz, ag.gpu[0]);
  uint64_t ko = kernel_object(e, "record.kd", ag.gpu[0]);
  hsa_queue_t* q = NULL;
  CHECK_EQ(hsa_queue_create(ag.gpu[0], 100, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q),
           HSA_STATUS_ERROR_INVALID_ARGUMENT); /* not a power of two */
  CHECK_OK(hsa_queue_create(ag.gpu[0], 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  CHECK_EQ(q->size, 64);
  CHECK(q->base_address != NULL);
  CHECK_OK(hsa_amd_profiling_set_profiler_enabled(q, 1));

  /* Gate: a BARRIER_AND on an external signal holds everything behind it. */
  hsa_signal_t gate, done;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &gate));
  CHECK_OK(hsa_signal_create(6, 0, NULL, &done));
  hsa_barrier_and_packet_t b;
  memset(&b, 0, sizeof b);
  b.header = pkt_header(HSA_PACKET_TYPE_BARRIER_AND, 1);
  b.dep_signal[2] = gate;
  b.completion_signal = done;
  uint64_t first = submit_packet(q, &b);
  CHECK_EQ(first, 0);
  int log[8] = {0}, pos = 0;
  uint32_t hits[5][16];
  memset(hits, 0, sizeof hits);
  args_t args[5];
  for (int k = 0; k < 5; k++) {
    args[k] = (args_t){log, &pos, k + 1, hits[k]};
    /* 16 workgroups of 64; every dispatch carries the barrier bit: strict order. */
    dispatch_kernel(q, ko, &args[k], 1024, 64, 1, done);
  }
  struct timespec ts = {0, 50 * 1000000};
  nanosleep(&ts, NULL);
  CHECK_EQ(pos, 0); /* still gated */
  CHECK_EQ(hsa_signal_load_scacquire(done), 6);
  CHECK_EQ(hsa_queue_load_read_index_scacquire(q), 0);
  hsa_signal_store_screlease(gate, 0);
  CHECK_EQ(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, 5000000000ull, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(pos, 5);
  for (int k = 0; k < 5; k++) CHECK_EQ(log[k], k + 1);
  for (int k = 0; k < 5; k++)
    for (int g = 0; g < 16; g++) CHECK_EQ(hits[k][g], 1);
  CHECK_EQ(hsa_queue_load_read_index_scacquire(q), 6);
  CHECK_EQ(hsa_queue_load_write_index_scacquire(q), 6);
  for (int k = 0; k < 6; k++)
    CHECK_EQ(((hsa_kernel_dispatch_packet_t*)q->base_address)[k].header & 0xff, HSA_PACKET_TYPE_INVALID);

  /* Profiling: per completion signal, start <= end, in CLOCK_MONOTONIC nanoseconds. */
  hsa_signal_t one;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &one));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t before = (uint64_t)t0.tv_sec * 1000000000ull + (uint64_t)t0.tv_nsec;
  dispatch_kernel(q, ko, &args[0], 64, 64, 1, one);
  CHECK_EQ(hsa_signal_wait_scacquire(one, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  hsa_amd_profiling_dispatch_time_t t;
  CHECK_OK(hsa_amd_profiling_get_dispatch_time(ag.gpu[0], one, &t));
  CHECK(t.start >= before);
  CHECK(t.end >= t.start);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(t.end <= (uint64_t)t0.tv_sec * 1000000000ull + (uint64_t)t0.tv_nsec);

  /* Wrap around the ring: 200 dispatches through a 64-slot queue. */
  hsa_signal_t many;
  CHECK_OK(hsa_signal_create(200, 0, NULL, &many));
  pos = 0;
  int biglog[8];
  uint32_t bighits[16];
  args_t wrap = {biglog, &pos, 9, bighits};
  for (int k = 0; k < 200; k++) {
    pos = 0;
    dispatch_kernel(q, ko, &wrap, 64, 64, 1, many);
    CHECK_EQ(hsa_signal_wait_scacquire(many, HSA_SIGNAL_CONDITION_EQ, 199 - k, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 199 - k);
  }
  CHECK_EQ(hsa_queue_load_read_index_scacquire(q), 207);

  /* The barrier bit matters: with 4 workers, a dispatch without it starts while the previous
   * one still runs; with it, only after the previous one ended. */
  uint64_t slow = kernel_object(e, "slow", ag.gpu[0]);
  span_t sp[4];
  memset(sp, 0, sizeof sp);
  hsa_signal_t two;
  CHECK_OK(hsa_signal_create(4, 0, NULL, &two));
  dispatch_kernel(q, slow, &sp[0], 1, 1, 0, two);
  dispatch_kernel(q, slow, &sp[1], 1, 1, 0, two); /* no barrier bit: overlaps sp[0] */
  dispatch_kernel(q, slow, &sp[2], 1, 1, 1, two); /* barrier bit: after sp[0] and sp[1] */
  dispatch_kernel(q, slow, &sp[3], 1, 1, 1, two);
  CHECK_EQ(hsa_signal_wait_scacquire(two, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK(sp[1].start < sp[0].end);
  CHECK(sp[2].start >= sp[0].end && sp[2].start >= sp[1].end);
  CHECK(sp[3].start >= sp[2].end);
  CHECK_OK(hsa_signal_destroy(two));
  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_executable_destroy(e));
  CHECK_OK(hsa_signal_destroy(gate));
  CHECK_OK(hsa_signal_destroy(done));
  CHECK_OK(hsa_signal_destroy(one));
  CHECK_OK(hsa_signal_destroy(many));
  CHECK_OK(hsa_shut_down());
  printf("hsa_queue: PASS\n");
  return 0;
}
