/* hsa_async_copy: copies run on the copy-engine thread, wait for dependency signals, and
 * decrement the completion signal; hsa_memory_copy; profiling of copies. */
#include <time.h>

#include "hsa_test_util.h"

int main(void) {
  setenv("KRSIM_COPY_LATENCY_US", "20000", 1); /* 20 ms per copy: asynchrony is observable */
  CHECK_OK(hsa_init());
  agents_t ag = get_agents();
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE), fine = find_pool(ag.cpu, FINE);
  enum { N = 1 << 20 };
  unsigned char *host = NULL, *back = NULL, *d = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(fine, N, 0, (void**)&host));
  CHECK_OK(hsa_amd_memory_pool_allocate(fine, N, 0, (void**)&back));
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, N, 0, (void**)&d));
  for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7);
  memset(back, 0, N);
  CHECK_OK(hsa_amd_profiling_async_copy_enable(true));

  hsa_signal_t gate, h2d, d2h;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &gate));
  CHECK_OK(hsa_signal_create(1, 0, NULL, &h2d));
  CHECK_OK(hsa_signal_create(1, 0, NULL, &d2h));
  /* d2h depends on h2d; h2d depends on the gate. Submit d2h FIRST: dependencies, not
   * submission order, decide. */
  CHECK_OK(hsa_amd_memory_async_copy(back, ag.cpu, d, ag.gpu[0], N, 1, &h2d, d2h));
  CHECK_OK(hsa_amd_memory_async_copy(d, ag.gpu[0], host, ag.cpu, N, 1, &gate, h2d));
  struct timespec ts = {0, 60 * 1000000};
  nanosleep(&ts, NULL);
  CHECK_EQ(hsa_signal_load_scacquire(h2d), 1);
  CHECK_EQ(hsa_signal_load_scacquire(d2h), 1);
  CHECK_EQ(back[12345], 0);
  hsa_signal_store_screlease(gate, 0);
  CHECK_EQ(hsa_signal_wait_scacquire(d2h, HSA_SIGNAL_CONDITION_EQ, 0, 5000000000ull, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(hsa_signal_load_scacquire(h2d), 0);
  CHECK(memcmp(back, host, N) == 0);
  hsa_amd_profiling_async_copy_time_t t1, t2;
  CHECK_OK(hsa_amd_profiling_get_async_copy_time(h2d, &t1));
  CHECK_OK(hsa_amd_profiling_get_async_copy_time(d2h, &t2));
  CHECK(t1.end - t1.start >= 20000000ull);
  CHECK(t2.start >= t1.end);

  /* Returns before the copy is done (latency 20 ms). */
  hsa_signal_t quick;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &quick));
  CHECK_OK(hsa_amd_memory_async_copy(d, ag.gpu[0], host, ag.cpu, 64, 0, NULL, quick));
  CHECK_EQ(hsa_signal_load_scacquire(quick), 1);
  CHECK_EQ(hsa_signal_wait_scacquire(quick, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);

  /* Synchronous copy, device to device within one agent. */
  CHECK_OK(hsa_memory_copy(d + 100, d, 100));
  CHECK(memcmp(d + 100, host, 100) == 0);
  CHECK_EQ(hsa_amd_memory_async_copy(back, ag.cpu, d, ag.gpu[0], N, 0, NULL, (hsa_signal_t){0}),
           HSA_STATUS_ERROR_INVALID_SIGNAL);
  /* memory_fill writes 32-bit words. */
  CHECK_OK(hsa_amd_memory_fill(d, 0xdeadbeef, 4));
  CHECK_EQ(((uint32_t*)d)[3], 0xdeadbeef);
  CHECK_OK(hsa_amd_memory_pool_free(host));
  CHECK_OK(hsa_amd_memory_pool_free(back));
  CHECK_OK(hsa_amd_memory_pool_free(d));
  CHECK_OK(hsa_shut_down());
  printf("hsa_async_copy: PASS\n");
  return 0;
}
