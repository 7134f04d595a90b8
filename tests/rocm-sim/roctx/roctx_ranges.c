/* roctx_ranges - roctx ranges and marks around HIP calls, on the main thread and a worker.
 * Usage: roctx_ranges [iterations=3]
 * Per iteration on the main thread: push "step" { mark "begin"; push "copy" { hipMemcpy }
 * pop; push "sync" { hipDeviceSynchronize } pop } pop. Then a start/end range "load" started
 * on the main thread and stopped by the worker, which also pushes "worker" { hipMalloc,
 * hipFree } once. Prints `ranges: <pushes>` and `marks: <marks>`. */
#include <pthread.h>
#include <stdint.h>

#include "../workloads/workload.h"

typedef uint64_t roctx_range_id_t;
void roctxMarkA(const char* message);
int roctxRangePushA(const char* message);
int roctxRangePop(void);
roctx_range_id_t roctxRangeStartA(const char* message);
void roctxRangeStop(roctx_range_id_t id);

static roctx_range_id_t load;

static void* worker(void* arg) {
  (void)arg;
  WL_EXPECT(roctxRangePushA("worker") == 0, "worker level");
  void* p;
  HIP_CHECK(hipMalloc(&p, 4096));
  HIP_CHECK(hipFree(p));
  WL_EXPECT(roctxRangePop() == 0, "worker pop");
  roctxRangeStop(load);
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t iters = wl_arg(argc, argv, 1, 3);
  void* dev;
  char host[256] = {0};
  HIP_CHECK(hipMalloc(&dev, sizeof host));
  for (uint64_t i = 0; i < iters; i++) {
    WL_EXPECT(roctxRangePushA("step") == 0, "step level");
    roctxMarkA("begin");
    WL_EXPECT(roctxRangePushA("copy") == 1, "copy level");
    HIP_CHECK(hipMemcpy(dev, host, sizeof host, hipMemcpyHostToDevice));
    roctxRangePop();
    roctxRangePushA("sync");
    HIP_CHECK(hipDeviceSynchronize());
    roctxRangePop();
    WL_EXPECT(roctxRangePop() == 0, "step pop");
  }
  load = roctxRangeStartA("load");
  pthread_t t;
  WL_EXPECT(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  HIP_CHECK(hipFree(dev));
  printf("ranges: %" PRIu64 "\n", iters * 3 + 1);
  printf("marks: %" PRIu64 "\n", iters);
  return 0;
}
