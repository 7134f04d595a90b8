/* callloop - the tight loop of the probe-overhead benchmarks.
 * Usage: callloop THREADS CALLS [RATE]
 * Each thread calls hipStreamSynchronize(NULL) (idle stream: the runtime call itself is cheap)
 * CALLS times; with RATE > 0 each thread paces itself to at most RATE calls per second (it
 * sleeps after every 1000 calls that run ahead of that schedule; `cargo xtask soak`). Prints `ns_per_call: X` (mean per-thread loop time / CALLS),
 * `cpu_ns_per_call: Z` (mean per-thread CPU time / CALLS: the loop's own cost, without the time
 * it waited for a CPU) and `calls_per_sec: Y` (all calls / wall time of the parallel section).
 * KREPLAY_BENCH_CPU pins every loop thread to one CPU (pin.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "pin.h"
#include "workload.h"

static uint64_t calls;
static uint64_t rate; /* calls per second per thread, 0: unpaced */
static pthread_barrier_t start;

static uint64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* out[0]: the loop's wall time, out[1]: its thread's CPU time. */
static void* worker(void* out) {
  bench_pin();
  pthread_barrier_wait(&start);
  uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < calls; i++) {
    HIP_CHECK(hipStreamSynchronize(NULL));
    if (rate && (i + 1) % 1000 == 0) {
      uint64_t due = t0 + (i + 1) * 1000000000ull / rate;
      uint64_t now = now_ns();
      if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000000ull), (long)((due - now) % 1000000000ull)};
        nanosleep(&ts, NULL);
      }
    }
  }
  ((uint64_t*)out)[0] = now_ns() - t0;
  ((uint64_t*)out)[1] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t threads = wl_arg(argc, argv, 1, 1);
  calls = wl_arg(argc, argv, 2, 100000);
  rate = wl_arg(argc, argv, 3, 0);
  void* warm;
  HIP_CHECK(hipMalloc(&warm, 64));
  HIP_CHECK(hipFree(warm));
  pthread_t* t = calloc(threads, sizeof(pthread_t));
  uint64_t* ns = calloc(threads * 2, sizeof(uint64_t));
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (uint64_t i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, &ns[2 * i]);
  uint64_t t0 = now_ns();
  pthread_barrier_wait(&start);
  for (uint64_t i = 0; i < threads; i++) pthread_join(t[i], NULL);
  uint64_t wall = now_ns() - t0;
  double mean = 0, cpu = 0;
  for (uint64_t i = 0; i < threads; i++) {
    mean += (double)ns[2 * i] / (double)calls;
    cpu += (double)ns[2 * i + 1] / (double)calls;
  }
  mean /= (double)threads;
  cpu /= (double)threads;
  printf("ns_per_call: %.1f\n", mean);
  printf("cpu_ns_per_call: %.1f\n", cpu);
  printf("calls_per_sec: %.0f\n", (double)(threads * calls) / ((double)wall / 1e9));
  printf("calls: %llu\n", (unsigned long long)(threads * calls));
  return 0;
}
