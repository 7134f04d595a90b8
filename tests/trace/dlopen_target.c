/* dlopen_target.c - maps only the HSA runtime at start; once released, dlopens the HIP runtime
 * by name (found through LD_LIBRARY_PATH) and at once makes n hipMalloc/hipFree pairs through
 * it, then exits. For the test that `kreplay trace -p` sees a runtime dlopen'ed after the
 * attach from its first call. Usage: dlopen_target [n=10]. Prints `ready` after hsa_init,
 * waits for a line on stdin, prints `done`. */
#include <dlfcn.h>
#include <hsa/hsa.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*hip_malloc_fn)(void**, size_t);
typedef int (*hip_free_fn)(void*);

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  if (hsa_init() != HSA_STATUS_SUCCESS) return 2;
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof(line), stdin)) return 2;
  void* hip = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_GLOBAL);
  if (!hip) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  hip_malloc_fn hip_malloc = (hip_malloc_fn)dlsym(hip, "hipMalloc");
  hip_free_fn hip_free = (hip_free_fn)dlsym(hip, "hipFree");
  if (!hip_malloc || !hip_free) return 2;
  for (int i = 0; i < n; i++) {
    void* p;
    if (hip_malloc(&p, 4096) != 0 || hip_free(p) != 0) return 3;
  }
  printf("done\n");
  fflush(stdout);
  hsa_shut_down();
  return 0;
}
