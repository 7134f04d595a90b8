/* pin.h - the benchmark loops' optional CPU pinning: with KREPLAY_BENCH_CPU=N in the
 * environment, bench_pin() binds the calling thread to CPU N. On a large idle host this takes
 * the scheduler's choice of core (and of that core's busy or idle sibling) out of the
 * run-to-run variation; on a 2-core VM it only ties the loop to whatever else runs there. */
#ifndef KREPLAY_BENCH_PIN_H
#define KREPLAY_BENCH_PIN_H

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* Pins the calling thread as KREPLAY_BENCH_CPU asks; exits with status 2 when it cannot. */
static inline void bench_pin(void) {
  const char* v = getenv("KREPLAY_BENCH_CPU");
  if (v == NULL || *v == 0) return;
  char* end;
  long cpu = strtol(v, &end, 10);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (*end != 0 || cpu < 0 || cpu >= CPU_SETSIZE) {
    fprintf(stderr, "KREPLAY_BENCH_CPU=%s: not a CPU number\n", v);
    exit(2);
  }
  CPU_SET((int)cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity (KREPLAY_BENCH_CPU)");
    exit(2);
  }
}

#endif
