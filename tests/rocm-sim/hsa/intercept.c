/* intercept.c - hsa_amd_queue_intercept_create/_register: the application writes into an
 * intercept queue; each batch passes through the registered handlers (first registered
 * first), and what the last writer emits lands in a hidden hardware queue. */
#include "queue_impl.h"

typedef struct intercept_ctx {
  sim_queue* q;
  int level;
  uint64_t user_pkt_index;
} intercept_ctx;

static _Thread_local intercept_ctx* tl_ctx;

static void deliver_level(sim_queue* q, int level, const void* pkts, uint64_t count,
                          uint64_t user_idx);

/* The writer handed to a handler: forwards to the next handler or to the hardware queue. */
static void intercept_writer(const void* pkts, uint64_t count) {
  intercept_ctx* c = tl_ctx;
  if (!c) {
    fprintf(stderr, "krsim: intercept writer called outside a handler; packets dropped\n");
    return;
  }
  deliver_level(c->q, c->level + 1, pkts, count, c->user_pkt_index);
}

static void deliver_level(sim_queue* q, int level, const void* pkts, uint64_t count,
                          uint64_t user_idx) {
  pthread_mutex_lock(&q->hmu);
  int n = q->nhandlers;
  krsim_queue_intercept_handler h = level < n ? q->handlers[level] : NULL;
  void* data = level < n ? q->handler_data[level] : NULL;
  pthread_mutex_unlock(&q->hmu);
  if (!h) {
    if (count) sim_queue_write_packets(q->hw, pkts, count);
    return;
  }
  intercept_ctx ctx = {q, level, user_idx};
  intercept_ctx* saved = tl_ctx;
  tl_ctx = &ctx;
  h(pkts, count, user_idx, data, intercept_writer);
  tl_ctx = saved;
}

void sim_intercept_deliver(sim_queue* q, const hsa_aql_pkt* pkts, uint64_t count,
                           uint64_t user_pkt_index) {
  deliver_level(q, 0, pkts, count, user_pkt_index);
}

hsa_status_t sim_hsa_amd_queue_intercept_create(hsa_agent_t agent, uint32_t size,
                                                hsa_queue_type32_t type,
                                                void (*cb)(hsa_status_t, hsa_queue_t*, void*),
                                                void* data, uint32_t ps, uint32_t gs,
                                                hsa_queue_t** out) {
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_queue* hw = NULL;
  hsa_status_t st = sim_queue_create_common(agent, size, type, cb, data, ps, gs, false, &hw);
  if (st != HSA_STATUS_SUCCESS) return st;
  sim_queue* q = NULL;
  st = sim_queue_create_common(agent, size, type, cb, data, ps, gs, true, &q);
  if (st != HSA_STATUS_SUCCESS) {
    sim_hsa_queue_destroy(&hw->q);
    return st;
  }
  q->hw = hw;
  *out = &q->q;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_queue_intercept_register(hsa_queue_t* hq, krsim_queue_intercept_handler h,
                                                  void* data) {
  SIM_CHECK_INIT();
  sim_queue* q = sim_queue_from(hq);
  if (!q || !q->is_intercept) return HSA_STATUS_ERROR_INVALID_QUEUE;
  if (!h) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&q->hmu);
  hsa_status_t st = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (q->nhandlers < SIM_MAX_INTERCEPTORS) {
    q->handlers[q->nhandlers] = h;
    q->handler_data[q->nhandlers] = data;
    q->nhandlers++;
    st = HSA_STATUS_SUCCESS;
  }
  pthread_mutex_unlock(&q->hmu);
  return st;
}
