/* queues.c - AQL queues in memory, their index functions, and the packet processor thread
 * (one per queue) that executes KERNEL_DISPATCH and BARRIER_AND/OR packets in order. */
#include "queue_impl.h"

static _Atomic uint64_t g_queue_ids;

sim_queue* sim_queue_from(const hsa_queue_t* q) {
  sim_queue* s = (sim_queue*)q;
  if (!s || s->magic != SIM_QUEUE_MAGIC) return NULL;
  return s;
}

static hsa_aql_pkt* ring_slot(sim_queue* q, uint64_t idx) {
  return (hsa_aql_pkt*)q->q.base_address + (idx & (q->size - 1));
}

static void inflight_add(sim_queue* q, int d) {
  pthread_mutex_lock(&q->mu);
  q->inflight += d;
  if (q->inflight == 0) pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

static void drain(sim_queue* q) {
  pthread_mutex_lock(&q->mu);
  while (q->inflight > 0) pthread_cond_wait(&q->cv, &q->mu);
  pthread_mutex_unlock(&q->mu);
}

typedef struct done_ctx {
  sim_queue* q;
  hsa_signal_t completion;
} done_ctx;

static void dispatch_done(void* p, uint64_t start, uint64_t end) {
  done_ctx* c = p;
  sim_signal* s = sim_signal_from(c->completion);
  if (s) {
    if (atomic_load(&c->q->profiling)) {
      atomic_store(&s->start_ns, start);
      atomic_store(&s->end_ns, end);
    }
    sim_signal_sub(s, 1);
  }
  inflight_add(c->q, -1);
  free(c);
}

static void complete_signal(hsa_signal_t sig) {
  sim_signal* s = sim_signal_from(sig);
  if (s) {
    sim_signal_sub(s, 1);
  }
}

static void queue_error(sim_queue* q, hsa_status_t st) {
  if (q->cb) q->cb(st, &q->q, q->cb_data);
  else fprintf(stderr, "krsim: queue %llu: error 0x%x\n", (unsigned long long)q->q.id, st);
}

/* Waits for barrier dependencies; returns false when the queue is being stopped. */
static bool wait_barrier(sim_queue* q, const hsa_barrier_and_packet_t* b, bool any) {
  for (;;) {
    int nonnull = 0, satisfied = 0;
    for (int i = 0; i < 5; i++) {
      if (!b->dep_signal[i].handle) continue;
      nonnull++;
      sim_signal* s = sim_signal_from(b->dep_signal[i]);
      if (!s || atomic_load(&s->value) == 0) satisfied++;
    }
    if (any ? (nonnull == 0 || satisfied > 0) : satisfied == nonnull) return true;
    if (atomic_load(&q->stop)) return false;
    sim_signal_wait_any_change(5000000ull);
  }
}

static void retire_packets(sim_queue* q, uint64_t n);

/* Runs one packet. The slot is retired (INVALID, read index advanced) when the packet is
 * launched: after the barrier-bit drain for dispatches, once satisfied for barriers. */
static void execute(sim_queue* q, const hsa_aql_pkt* pkt) {
  uint16_t hdr = pkt->hdr.header;
  uint32_t type = (hdr >> HSA_PACKET_HEADER_TYPE) & 0xffu;
  bool barrier = (hdr >> HSA_PACKET_HEADER_BARRIER) & 1u;
  if (barrier) drain(q);
  switch (type) {
    case HSA_PACKET_TYPE_KERNEL_DISPATCH: {
      done_ctx* c = malloc(sizeof *c);
      if (!c) {
        retire_packets(q, 1);
        queue_error(q, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        return;
      }
      c->q = q;
      c->completion = pkt->dispatch.completion_signal;
      inflight_add(q, 1);
      retire_packets(q, 1);
      if (sim_dispatch_launch(&pkt->dispatch, dispatch_done, c) != 0) {
        free(c);
        inflight_add(q, -1);
        queue_error(q, HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
      }
      break;
    }
    case HSA_PACKET_TYPE_BARRIER_AND:
    case HSA_PACKET_TYPE_BARRIER_OR:
      if (!wait_barrier(q, &pkt->barrier, type == HSA_PACKET_TYPE_BARRIER_OR)) return;
      retire_packets(q, 1);
      complete_signal(pkt->barrier.completion_signal);
      break;
    default:
      retire_packets(q, 1);
      queue_error(q, HSA_STATUS_ERROR_INVALID_PACKET_FORMAT);
      break;
  }
}

/* Copies out the packet at read index + k if it is published. */
static bool peek_packet(sim_queue* q, uint64_t k, hsa_aql_pkt* out) {
  uint64_t rd = atomic_load(&q->read_index) + k;
  if (rd >= atomic_load(&q->write_index)) return false;
  hsa_aql_pkt* slot = ring_slot(q, rd);
  uint16_t hdr = atomic_load_explicit((_Atomic uint16_t*)&slot->hdr.header, memory_order_acquire);
  if (((hdr >> HSA_PACKET_HEADER_TYPE) & 0xffu) == HSA_PACKET_TYPE_INVALID) return false;
  memcpy(out, slot, sizeof *out);
  out->hdr.header = hdr;
  return true;
}

/* Retires n packets once launched (barriers: once satisfied): marks the slots INVALID and
 * advances the read index, which frees them for the producer. */
static void retire_packets(sim_queue* q, uint64_t n) {
  uint64_t rd = atomic_load(&q->read_index);
  for (uint64_t k = 0; k < n; k++)
    atomic_store_explicit((_Atomic uint16_t*)&ring_slot(q, rd + k)->hdr.header,
                          (uint16_t)(HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE),
                          memory_order_release);
  atomic_store(&q->read_index, rd + n);
}

static void* processor_main(void* arg) {
  sim_queue* q = arg;
  sim_mark_runtime_thread();
  sim_signal* doorbell = sim_signal_from(q->q.doorbell_signal);
  /* Intercept queues (like ROCR's, which processes one when its doorbell is written) hand over
   * only packets up to the highest packet id written to the doorbell so far. */
  uint32_t rung_seq = atomic_load(&doorbell->seq) - 1u; /* read the value on the first pass */
  uint64_t rung_end = 0; /* exclusive: packets [read index, rung_end) were rung */
  while (!atomic_load(&q->stop)) {
    uint32_t seq0 = atomic_load(&doorbell->seq);
    if (q->is_intercept && seq0 != rung_seq) {
      rung_seq = seq0;
      int64_t v = atomic_load(&doorbell->value);
      if (v >= 0 && (uint64_t)v + 1 > rung_end) rung_end = (uint64_t)v + 1;
    }
    hsa_aql_pkt pkts[64];
    uint64_t first = atomic_load(&q->read_index);
    uint64_t n = 0;
    /* Intercept queues hand whole batches to their handlers; others run one by one. */
    while (n < (q->is_intercept ? 64u : 1u) && (!q->is_intercept || first + n < rung_end) &&
           peek_packet(q, n, &pkts[n]))
      n++;
    if (n == 0) {
      /* Sleep until the doorbell rings (bounded: packets published without a doorbell). */
      sim_signal_wait_seq(doorbell, seq0, 2000000ull);
      continue;
    }
    if (q->is_intercept) {
      retire_packets(q, n);
      sim_intercept_deliver(q, pkts, n, first);
    } else {
      execute(q, &pkts[0]);
    }
    sim_signal_notify(); /* producers waiting for ring space */
  }
  return NULL;
}

hsa_status_t sim_queue_create_common(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                     void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                     uint32_t ps, uint32_t gs, bool intercept, sim_queue** out) {
  SIM_CHECK_INIT();
  sim_agent* a = sim_agent_from(agent);
  if (!a) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!out || size == 0 || (size & (size - 1)) || size > 131072 || !a->is_gpu ||
      type > HSA_QUEUE_TYPE_COOPERATIVE)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (size < 64) size = 64;
  sim_queue* q = calloc(1, sizeof *q);
  if (!q) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  void* ring = aligned_alloc(4096, (size_t)size * 64);
  if (!ring) {
    free(q);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  hsa_aql_pkt* pk = ring;
  for (uint32_t i = 0; i < size; i++) {
    memset(&pk[i], 0, sizeof pk[i]);
    pk[i].hdr.header = HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE;
  }
  hsa_signal_t db;
  /* An intercept queue's doorbell starts below every packet id: nothing is rung yet. */
  if (sim_hsa_signal_create(intercept ? -1 : 0, 0, NULL, &db) != HSA_STATUS_SUCCESS) {
    free(ring);
    free(q);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  q->q.type = type;
  q->q.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  q->q.base_address = ring;
  q->q.doorbell_signal = db;
  q->q.size = size;
  q->q.id = atomic_fetch_add(&g_queue_ids, 1);
  q->magic = SIM_QUEUE_MAGIC;
  q->size = size;
  q->agent = a;
  q->cb = cb;
  q->cb_data = data;
  q->private_size = ps;
  q->group_size = gs;
  q->is_intercept = intercept;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  pthread_mutex_init(&q->hmu, NULL);
  if (pthread_create(&q->thread, NULL, processor_main, q) != 0) {
    sim_hsa_signal_destroy(db);
    free(ring);
    free(q);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  q->has_thread = true;
  *out = q;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                  void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                  uint32_t ps, uint32_t gs, hsa_queue_t** out) {
  sim_queue* q = NULL;
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_status_t st = sim_queue_create_common(agent, size, type, cb, data, ps, gs, false, &q);
  if (st == HSA_STATUS_SUCCESS) *out = &q->q;
  return st;
}

static void stop_thread(sim_queue* q) {
  if (!q->has_thread) return;
  atomic_store(&q->stop, true);
  sim_signal_changed(sim_signal_from(q->q.doorbell_signal));
  pthread_join(q->thread, NULL);
  q->has_thread = false;
}

hsa_status_t sim_hsa_queue_destroy(hsa_queue_t* hq) {
  SIM_CHECK_INIT();
  sim_queue* q = sim_queue_from(hq);
  if (!q) return HSA_STATUS_ERROR_INVALID_QUEUE;
  stop_thread(q);
  drain(q);
  if (q->hw) sim_hsa_queue_destroy(&q->hw->q);
  q->magic = 0;
  sim_hsa_signal_destroy(q->q.doorbell_signal);
  free(q->q.base_address);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->hmu);
  free(q);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_queue_inactivate(hsa_queue_t* hq) {
  SIM_CHECK_INIT();
  sim_queue* q = sim_queue_from(hq);
  if (!q) return HSA_STATUS_ERROR_INVALID_QUEUE;
  stop_thread(q);
  return HSA_STATUS_SUCCESS;
}

/* Writes packets into a queue as a producer would: reserve, wait for space, copy the body,
 * publish the header last, ring the doorbell. */
void sim_queue_write_packets(sim_queue* q, const void* pkts, uint64_t count) {
  const hsa_aql_pkt* src = pkts;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t idx = atomic_fetch_add(&q->write_index, 1);
    while (idx - atomic_load(&q->read_index) >= q->size) sim_signal_wait_any_change(1000000ull);
    hsa_aql_pkt* slot = ring_slot(q, idx);
    memcpy((char*)slot + 4, (const char*)&src[i] + 4, sizeof *slot - 4);
    uint32_t first;
    memcpy(&first, &src[i], 4);
    atomic_store_explicit((_Atomic uint32_t*)slot, first, memory_order_release);
    sim_hsa_signal_store_screlease(q->q.doorbell_signal, (hsa_signal_value_t)idx);
  }
}

/* ---------------------------------------------------------------- index functions */

#define QOR(hq, ret) \
  sim_queue* q = sim_queue_from(hq); \
  if (!q) return ret
static uint64_t ld_rd(const hsa_queue_t* hq) { QOR(hq, 0); return atomic_load(&q->read_index); }
static uint64_t ld_wr(const hsa_queue_t* hq) { QOR(hq, 0); return atomic_load(&q->write_index); }
static void st_wr(const hsa_queue_t* hq, uint64_t v) { QOR(hq, ); atomic_store(&q->write_index, v); }
static void st_rd(const hsa_queue_t* hq, uint64_t v) { QOR(hq, ); atomic_store(&q->read_index, v); }
static uint64_t cas_wr(const hsa_queue_t* hq, uint64_t e, uint64_t v) {
  QOR(hq, 0);
  uint64_t exp = e;
  atomic_compare_exchange_strong(&q->write_index, &exp, v);
  return exp;
}
static uint64_t add_wr(const hsa_queue_t* hq, uint64_t v) {
  QOR(hq, 0);
  return atomic_fetch_add(&q->write_index, v);
}

uint64_t sim_hsa_queue_load_read_index_scacquire(const hsa_queue_t* q) { return ld_rd(q); }
uint64_t sim_hsa_queue_load_read_index_relaxed(const hsa_queue_t* q) { return ld_rd(q); }
uint64_t sim_hsa_queue_load_write_index_scacquire(const hsa_queue_t* q) { return ld_wr(q); }
uint64_t sim_hsa_queue_load_write_index_relaxed(const hsa_queue_t* q) { return ld_wr(q); }
void sim_hsa_queue_store_write_index_relaxed(const hsa_queue_t* q, uint64_t v) { st_wr(q, v); }
void sim_hsa_queue_store_write_index_screlease(const hsa_queue_t* q, uint64_t v) { st_wr(q, v); }
void sim_hsa_queue_store_read_index_relaxed(const hsa_queue_t* q, uint64_t v) { st_rd(q, v); }
void sim_hsa_queue_store_read_index_screlease(const hsa_queue_t* q, uint64_t v) { st_rd(q, v); }
uint64_t sim_hsa_queue_cas_write_index_scacq_screl(const hsa_queue_t* q, uint64_t e, uint64_t v) { return cas_wr(q, e, v); }
uint64_t sim_hsa_queue_cas_write_index_scacquire(const hsa_queue_t* q, uint64_t e, uint64_t v) { return cas_wr(q, e, v); }
uint64_t sim_hsa_queue_cas_write_index_relaxed(const hsa_queue_t* q, uint64_t e, uint64_t v) { return cas_wr(q, e, v); }
uint64_t sim_hsa_queue_cas_write_index_screlease(const hsa_queue_t* q, uint64_t e, uint64_t v) { return cas_wr(q, e, v); }
uint64_t sim_hsa_queue_add_write_index_scacq_screl(const hsa_queue_t* q, uint64_t v) { return add_wr(q, v); }
uint64_t sim_hsa_queue_add_write_index_scacquire(const hsa_queue_t* q, uint64_t v) { return add_wr(q, v); }
uint64_t sim_hsa_queue_add_write_index_relaxed(const hsa_queue_t* q, uint64_t v) { return add_wr(q, v); }
uint64_t sim_hsa_queue_add_write_index_screlease(const hsa_queue_t* q, uint64_t v) { return add_wr(q, v); }

/* ------------------------------------------------------------------- profiling etc. */

hsa_status_t sim_hsa_amd_profiling_set_profiler_enabled(hsa_queue_t* hq, int enable) {
  SIM_CHECK_INIT();
  sim_queue* q = sim_queue_from(hq);
  if (!q) return HSA_STATUS_ERROR_INVALID_QUEUE;
  atomic_store(&q->profiling, enable != 0);
  if (q->hw) atomic_store(&q->hw->profiling, enable != 0);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_profiling_get_dispatch_time(hsa_agent_t agent, hsa_signal_t sig,
                                                     hsa_amd_profiling_dispatch_time_t* t) {
  SIM_CHECK_INIT();
  if (!sim_agent_from(agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  sim_signal* s = sim_signal_from(sig);
  if (!s) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (!t) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  t->start = atomic_load(&s->start_ns);
  t->end = atomic_load(&s->end_ns);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_profiling_convert_tick_to_system_domain(hsa_agent_t agent, uint64_t tick,
                                                                 uint64_t* out) {
  SIM_CHECK_INIT();
  if (!sim_agent_from(agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *out = tick; /* agent ticks are CLOCK_MONOTONIC nanoseconds already */
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_queue_cu_set_mask(const hsa_queue_t* hq, uint32_t n, const uint32_t* m) {
  SIM_CHECK_INIT();
  if (!sim_queue_from(hq)) return HSA_STATUS_ERROR_INVALID_QUEUE;
  if (n && !m) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_queue_set_priority(hsa_queue_t* hq, hsa_amd_queue_priority_t p) {
  SIM_CHECK_INIT();
  (void)p;
  return sim_queue_from(hq) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_QUEUE;
}
