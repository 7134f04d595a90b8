/* nvtx_threads - NVTX v3 annotations, through the real NVTX headers, around simulated HIP calls
 * on two threads. NVTX needs no CUDA: its calls reach a tool only through the injection library
 * named by NVTX_INJECTION64_PATH.
 *
 * Main thread, twice: push "outer" { mark "tick"; push "inner" in domain "kreplay-test",
 * category 7 (named "io") { hipMalloc, hipFree } pop } pop. Then push L"wide"
 * { hipDeviceSynchronize } pop, and start range "load", which the worker ends. Worker: push
 * "worker" { hipMalloc, hipFree; mark "worker mark" } pop, then end "load". Prints
 * `levels: <the push levels and pop levels NVTX returned>`. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include "workload.h"

static nvtxRangeId_t load;

static void* worker(void* arg) {
  (void)arg;
  nvtxRangePushA("worker");
  void* p;
  HIP_CHECK(hipMalloc(&p, 64));
  HIP_CHECK(hipFree(p));
  nvtxMarkA("worker mark");
  nvtxRangePop();
  nvtxRangeEnd(load);
  return NULL;
}

int main(void) {
  nvtxDomainHandle_t dom = nvtxDomainCreateA("kreplay-test");
  nvtxDomainNameCategoryA(dom, 7, "io");
  int levels[8], n = 0;
  for (int i = 0; i < 2; i++) {
    levels[n++] = nvtxRangePushA("outer");
    nvtxMarkA("tick");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 7;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "inner";
    levels[n++] = nvtxDomainRangePushEx(dom, &a);
    void* p;
    HIP_CHECK(hipMalloc(&p, 256));
    HIP_CHECK(hipFree(p));
    nvtxDomainRangePop(dom);
    nvtxRangePop();
  }
  nvtxRangePushW(L"wide");
  HIP_CHECK(hipDeviceSynchronize());
  levels[n++] = nvtxRangePop();
  load = nvtxRangeStartA("load");
  pthread_t t;
  WL_EXPECT(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  printf("levels:");
  for (int i = 0; i < n; i++) printf(" %d", levels[i]);
  printf("\n");
  return 0;
}
