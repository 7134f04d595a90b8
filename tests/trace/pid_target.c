/* A HIP program for attach-by-pid tests: it initializes the runtime (so the libraries are
 * mapped), prints "ready", waits for a line on stdin, then makes exactly N hipMalloc/hipFree
 * pairs of 4096 bytes and prints "done". With `linger` it then waits for another line before
 * exiting (tests that stop the tracer while its target lives). Usage: pid_target N [linger] */
#include "workload.h"

int main(int argc, char** argv) {
  uint64_t n = wl_arg(argc, argv, 1, 10);
  void* warm;
  HIP_CHECK(hipMalloc(&warm, 64));
  HIP_CHECK(hipFree(warm));
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 3;
  for (uint64_t i = 0; i < n; i++) {
    void* p;
    HIP_CHECK(hipMalloc(&p, 4096));
    HIP_CHECK(hipFree(p));
  }
  printf("done\n");
  fflush(stdout);
  if (argc > 2 && !fgets(line, sizeof line, stdin)) return 3;
  return 0;
}
