/* Direct AQL writes for the GPU timeline tests: packets the application writes itself, with no
 * launch call around them. Three dispatches of `tick` without a completion signal (barrier bit,
 * group segment 2048 bytes, private segment 64 bytes), then a BARRIER_AND packet whose
 * completion signal the program waits for; then two dispatches sharing one signal of initial
 * value 2. Each signal must end at exactly 0: completed once per packet, as without a tool.
 * Prints `dispatches: 5`. */
#include <time.h>

#include "hsa_test_util.h"

typedef struct { uint32_t* hits; } tick_args;

void __krsim_kernel_tick(const krsim_dispatch* d, void* kernarg) {
  (void)d;
  tick_args* a = kernarg;
  __atomic_fetch_add(a->hits, 1, __ATOMIC_SEQ_CST);
}

static const krsim_code_object* make_co(size_t* size) {
  static struct { krsim_code_object h; krsim_co_entry e[1]; } co;
  memcpy(co.h.magic, KRSIM_CO_MAGIC, 8);
  co.h.version = 1;
  co.h.count = 1;
  co.e[0].kind = KRSIM_CO_KIND_KERNEL;
  co.e[0].size = sizeof(tick_args);
  strcpy(co.e[0].name, "tick");
  *size = sizeof co;
  return &co.h;
}

static void tick(hsa_queue_t* q, uint64_t ko, tick_args* a, hsa_signal_t done) {
  hsa_kernel_dispatch_packet_t p;
  memset(&p, 0, sizeof p);
  p.header = pkt_header(HSA_PACKET_TYPE_KERNEL_DISPATCH, 1);
  p.setup = 1;
  p.workgroup_size_x = 64, p.workgroup_size_y = 1, p.workgroup_size_z = 1;
  p.grid_size_x = 256, p.grid_size_y = 1, p.grid_size_z = 1;
  p.group_segment_size = 2048;
  p.private_segment_size = 64;
  p.kernel_object = ko;
  p.kernarg_address = a;
  p.completion_signal = done;
  submit_packet(q, &p);
}

int main(void) {
  CHECK_OK(hsa_init());
  agents_t ag = get_agents();
  size_t cosz = 0;
  const krsim_code_object* co = make_co(&cosz);
  hsa_executable_t e = load_co(co, cosz, ag.gpu[0]);
  uint64_t ko = kernel_object(e, "tick.kd", ag.gpu[0]);
  hsa_queue_t* q = NULL;
  CHECK_OK(hsa_queue_create(ag.gpu[0], 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  uint32_t hits = 0;
  tick_args a = {&hits};
  hsa_signal_t none = {0}, done, pair;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &done));
  CHECK_OK(hsa_signal_create(2, 0, NULL, &pair));
  for (int k = 0; k < 3; k++) tick(q, ko, &a, none);
  hsa_barrier_and_packet_t b;
  memset(&b, 0, sizeof b);
  b.header = pkt_header(HSA_PACKET_TYPE_BARRIER_AND, 1);
  b.completion_signal = done;
  submit_packet(q, &b);
  CHECK_EQ(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(hits, 3 * 4);
  tick(q, ko, &a, pair);
  tick(q, ko, &a, pair);
  CHECK_EQ(hsa_signal_wait_scacquire(pair, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  struct timespec ts = {0, 20 * 1000000};
  nanosleep(&ts, NULL);
  /* Completed exactly once each: not below zero. */
  CHECK_EQ(hsa_signal_load_scacquire(done), 0);
  CHECK_EQ(hsa_signal_load_scacquire(pair), 0);
  CHECK_EQ(hits, 5 * 4);
  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_executable_destroy(e));
  CHECK_OK(hsa_signal_destroy(done));
  CHECK_OK(hsa_signal_destroy(pair));
  CHECK_OK(hsa_shut_down());
  printf("dispatches: 5\n");
  return 0;
}
