/* pairloop - the paired probe-overhead benchmark: two probes timed side by side in one process.
 * Usage: pairloop TWIN PAIRS CHUNK [GATE]
 * TWIN is a byte-for-byte copy of the simulated libamdhip64 under a name no GPU tracer knows, so
 * its hipStreamSynchronize (B) is the same machine code as the runtime's own (A) at another
 * address. The loop alternates CHUNK idle calls of A with CHUNK calls of B, PAIRS times (every
 * other pair B first), and prints one line per pair: `pair A_NS B_NS`, each arm's ns per call.
 * Whatever slows the machine for a while (another tenant, a frequency change) slows both arms of
 * a pair alike, so the per-pair ratio of two probes' costs holds still where whole runs vary
 * by half. With GATE, it writes its pid to GATE.pid and waits for GATE to exist before timing:
 * the probes under test are attached in between. KREPLAY_BENCH_CPU pins it (pin.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pin.h"
#include "workload.h"

typedef hipError_t (*sync_fn)(hipStream_t);

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns per call of CHUNK calls of f. */
static double timed_chunk(sync_fn f, uint64_t chunk) {
  uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < chunk; i++) HIP_CHECK(f(NULL));
  return (double)(now_ns() - t0) / (double)chunk;
}

/* Writes GATE.pid, then waits (up to a minute) for GATE to exist. */
static void wait_at_gate(const char* gate) {
  char pidfile[4096];
  snprintf(pidfile, sizeof pidfile, "%s.pid", gate);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
  FILE* f = fopen(tmp, "w");
  WL_EXPECT(f != NULL, "cannot write %s", tmp);
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  /* Renamed into place, so a reader never sees a half-written pid. */
  WL_EXPECT(rename(tmp, pidfile) == 0, "cannot rename %s", tmp);
  struct stat st;
  for (int i = 0; stat(gate, &st) != 0; i++) {
    WL_EXPECT(i < 6000, "gate %s never opened", gate);
    usleep(10000);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: pairloop TWIN PAIRS CHUNK [GATE]\n");
    return 2;
  }
  bench_pin();
  uint64_t pairs = wl_arg(argc, argv, 2, 100);
  uint64_t chunk = wl_arg(argc, argv, 3, 1000);
  void* twin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  WL_EXPECT(twin != NULL, "dlopen %s: %s", argv[1], dlerror());
  sync_fn a = hipStreamSynchronize;
  sync_fn b = (sync_fn)dlsym(twin, "hipStreamSynchronize");
  WL_EXPECT(b != NULL && b != a, "the twin library has no hipStreamSynchronize of its own");
  void* warm;
  HIP_CHECK(hipMalloc(&warm, 64));
  HIP_CHECK(hipFree(warm));
  HIP_CHECK(a(NULL));
  HIP_CHECK(b(NULL));
  if (argc > 4) wait_at_gate(argv[4]);
  for (uint64_t p = 0; p < pairs; p++) {
    double ta, tb;
    if (p & 1) {
      tb = timed_chunk(b, chunk);
      ta = timed_chunk(a, chunk);
    } else {
      ta = timed_chunk(a, chunk);
      tb = timed_chunk(b, chunk);
    }
    printf("pair %.1f %.1f\n", ta, tb);
  }
  return 0;
}
