/* hsa_signals: values, arithmetic, waits with conditions and timeout, async handlers, wait_any. */
#include <pthread.h>
#include <time.h>

#include "hsa_test_util.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int g_calls;
static hsa_signal_value_t g_seen;
static bool handler(hsa_signal_value_t v, void* arg) {
  g_seen = v;
  __atomic_fetch_add(&g_calls, 1, __ATOMIC_SEQ_CST);
  return arg != NULL; /* non-NULL arg: stay armed */
}

static void* setter(void* p) {
  struct timespec ts = {0, 30 * 1000000};
  nanosleep(&ts, NULL);
  hsa_signal_subtract_screlease(*(hsa_signal_t*)p, 3);
  return NULL;
}

int main(void) {
  CHECK_OK(hsa_init());
  hsa_signal_t s;
  CHECK_OK(hsa_signal_create(10, 0, NULL, &s));
  CHECK_EQ(hsa_signal_load_relaxed(s), 10);
  hsa_signal_add_relaxed(s, 5);
  hsa_signal_subtract_scacq_screl(s, 2);
  CHECK_EQ(hsa_signal_load_scacquire(s), 13);
  hsa_signal_and_relaxed(s, 0xc);
  CHECK_EQ(hsa_signal_load_scacquire(s), 12);
  hsa_signal_or_relaxed(s, 1);
  hsa_signal_xor_relaxed(s, 4);
  CHECK_EQ(hsa_signal_load_scacquire(s), 9);
  CHECK_EQ(hsa_signal_exchange_relaxed(s, 7), 9);
  CHECK_EQ(hsa_signal_cas_relaxed(s, 1, 100), 7); /* fails, returns current */
  CHECK_EQ(hsa_signal_cas_relaxed(s, 7, 3), 7);
  CHECK_EQ(hsa_signal_load_relaxed(s), 3);
  hsa_signal_store_relaxed(s, 3);

  /* Timeout: the wait returns the unsatisfying value after about the hint (ns). */
  uint64_t t0 = now_ns();
  CHECK_EQ(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 20000000ull, HSA_WAIT_STATE_BLOCKED), 3);
  uint64_t el = now_ns() - t0;
  /* The upper bound only catches a wait that ignores its timeout; a loaded host can delay
     the wake-up by far more than the hint, so it is generous. */
  CHECK(el >= 20000000ull && el < 10000000000ull);
  /* Satisfied immediately for each condition. */
  CHECK_EQ(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_NE, 0, 0, HSA_WAIT_STATE_ACTIVE), 3);
  CHECK_EQ(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_LT, 4, 0, HSA_WAIT_STATE_ACTIVE), 3);
  CHECK_EQ(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_GTE, 3, 0, HSA_WAIT_STATE_ACTIVE), 3);
  /* Woken by another thread. */
  pthread_t th;
  pthread_create(&th, NULL, setter, &s);
  t0 = now_ns();
  CHECK_EQ(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK(now_ns() - t0 >= 25000000ull);
  pthread_join(th, NULL);

  /* Async handler: fires once the condition holds, on the handler thread. */
  hsa_signal_t h;
  CHECK_OK(hsa_amd_signal_create(1, 0, NULL, 0, &h));
  CHECK_OK(hsa_amd_signal_async_handler(h, HSA_SIGNAL_CONDITION_LT, 1, handler, NULL));
  struct timespec ts = {0, 20 * 1000000};
  nanosleep(&ts, NULL);
  CHECK_EQ(__atomic_load_n(&g_calls, __ATOMIC_SEQ_CST), 0);
  hsa_signal_store_screlease(h, -5);
  for (int i = 0; i < 200 && __atomic_load_n(&g_calls, __ATOMIC_SEQ_CST) == 0; i++) nanosleep(&ts, NULL);
  CHECK_EQ(g_calls, 1);
  CHECK_EQ(g_seen, -5);
  nanosleep(&ts, NULL);
  CHECK_EQ(g_calls, 1); /* returned false: disarmed */

  /* wait_any returns the index of the satisfied signal. */
  hsa_signal_t two[2] = {s, h};
  hsa_signal_condition_t conds[2] = {HSA_SIGNAL_CONDITION_NE, HSA_SIGNAL_CONDITION_EQ};
  hsa_signal_value_t vals[2] = {0, -5};
  hsa_signal_value_t got = 0;
  CHECK_EQ(hsa_amd_signal_wait_any(2, two, conds, vals, UINT64_MAX, HSA_WAIT_STATE_BLOCKED, &got), 1);
  CHECK_EQ(got, -5);
  CHECK_OK(hsa_signal_destroy(s));
  CHECK_OK(hsa_signal_destroy(h));
  CHECK_EQ(hsa_signal_destroy(h), HSA_STATUS_ERROR_INVALID_SIGNAL); /* stale handle */
  hsa_signal_subtract_screlease(h, 1); /* a late completion into a dead signal is harmless */
  CHECK_EQ(hsa_signal_wait_scacquire(h, HSA_SIGNAL_CONDITION_EQ, 12345, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_OK(hsa_shut_down());
  printf("hsa_signals: PASS\n");
  return 0;
}
