/* queue_impl.h - the sim queue object, shared by queues.c and intercept.c. */
#ifndef KRSIM_QUEUE_IMPL_H
#define KRSIM_QUEUE_IMPL_H

#include "sim.h"

#define SIM_QUEUE_MAGIC 0x4b52515545554551ull
#define SIM_MAX_INTERCEPTORS 8

typedef union hsa_aql_pkt {
  struct {
    uint16_t header;
    uint16_t setup;
  } hdr;
  hsa_kernel_dispatch_packet_t dispatch;
  hsa_barrier_and_packet_t barrier;
  uint8_t bytes[64];
} hsa_aql_pkt;

struct sim_queue {
  hsa_queue_t q; /* first: hsa_queue_t* and sim_queue* are the same address */
  uint64_t magic;
  _Atomic uint64_t read_index, write_index;
  uint32_t size;
  sim_agent* agent;
  void (*cb)(hsa_status_t, hsa_queue_t*, void*);
  void* cb_data;
  uint32_t private_size, group_size;
  _Atomic bool profiling;
  pthread_t thread;
  bool has_thread;
  _Atomic bool stop;
  pthread_mutex_t mu; /* inflight dispatches, for the barrier bit */
  pthread_cond_t cv;
  uint64_t inflight;
  /* interception (hsa_amd_queue_intercept_create) */
  bool is_intercept;
  struct sim_queue* hw;
  pthread_mutex_t hmu;
  int nhandlers;
  krsim_queue_intercept_handler handlers[SIM_MAX_INTERCEPTORS];
  void* handler_data[SIM_MAX_INTERCEPTORS];
};

hsa_status_t sim_queue_create_common(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                     void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                     uint32_t ps, uint32_t gs, bool intercept, sim_queue** out);
/* Passes packets taken from an intercept queue through its handler chain. */
void sim_intercept_deliver(sim_queue* q, const hsa_aql_pkt* pkts, uint64_t count,
                           uint64_t user_pkt_index);

#endif
