/* hip_errors.c - error names and strings, the per-thread last error (set by failing calls,
 * kept by hipPeekAtLastError, cleared by hipGetLastError), and copy failures injected by the
 * HSA runtime's fault knobs reaching the application.
 * Usage: hip_errors            (error API)
 *        hip_errors fault-d2h  (run with KRSIM_FAIL_D2H_NTH=2: the 2nd D2H copy fails)
 *        hip_errors fault-host-alloc  (run with KRSIM_FAIL_HOST_ALLOC_ABOVE=65536) */
#include <pthread.h>

#include "hip_check.h"

static void test_strings(void) {
  CHECK(strcmp(hipGetErrorName(hipSuccess), "hipSuccess") == 0);
  CHECK(strcmp(hipGetErrorString(hipSuccess), "no error") == 0);
  CHECK(strcmp(hipGetErrorName(hipErrorInvalidValue), "hipErrorInvalidValue") == 0);
  CHECK(strcmp(hipGetErrorString(hipErrorInvalidValue), "invalid argument") == 0);
  CHECK(strcmp(hipGetErrorName(hipErrorOutOfMemory), "hipErrorOutOfMemory") == 0);
  CHECK(strcmp(hipGetErrorString(hipErrorOutOfMemory), "out of memory") == 0);
  CHECK(strcmp(hipGetErrorName(hipErrorInvalidDeviceFunction), "hipErrorInvalidDeviceFunction") == 0);
  CHECK(strcmp(hipGetErrorName(hipErrorNotReady), "hipErrorNotReady") == 0);
  CHECK(strcmp(hipGetErrorName(hipErrorInvalidHandle), "hipErrorInvalidHandle") == 0);
  CHECK(strcmp(hipGetErrorName((hipError_t)12345), "hipErrorUnknown") == 0);
  CHECK(strcmp(hipGetErrorString((hipError_t)12345), "unknown error") == 0);
  puts("ok strings");
}

static void* other_thread(void* arg) {
  (void)arg;
  CHECK_EQ(hipPeekAtLastError(), hipSuccess); /* last error is per thread */
  CHECK_HIP_IS(hipSetDevice(-1), hipErrorInvalidDevice);
  CHECK_EQ(hipGetLastError(), hipErrorInvalidDevice);
  return NULL;
}

static void test_last_error(void) {
  CHECK_EQ(hipGetLastError(), hipSuccess);
  CHECK_HIP_IS(hipMalloc(NULL, 16), hipErrorInvalidValue);
  CHECK_EQ(hipPeekAtLastError(), hipErrorInvalidValue);
  CHECK_EQ(hipPeekAtLastError(), hipErrorInvalidValue);
  void* p;
  CHECK_HIP(hipMalloc(&p, 16)); /* success does not clear it */
  CHECK_EQ(hipPeekAtLastError(), hipErrorInvalidValue);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, NULL);
  CHECK_EQ(hipGetLastError(), hipErrorInvalidValue);
  CHECK_EQ(hipGetLastError(), hipSuccess);
  CHECK_HIP_IS(hipSetDevice(99), hipErrorInvalidDevice);
  CHECK_HIP_IS(hipMemcpy(p, p, 16, (hipMemcpyKind)9), hipErrorInvalidMemcpyDirection);
  CHECK_EQ(hipGetLastError(), hipErrorInvalidMemcpyDirection); /* the latest one wins */
  CHECK_HIP(hipFree(p));
  int v = 0;
  CHECK_HIP(hipDriverGetVersion(&v));
  CHECK_EQ(v, 50221153);
  CHECK_HIP(hipRuntimeGetVersion(&v));
  CHECK_EQ(v, 50221153);
  char name[64];
  CHECK_HIP(hipDeviceGetName(name, sizeof(name), 0));
  CHECK(name[0] != 0);
  puts("ok last_error");
}

static void test_fault_d2h(void) {
  uint32_t *dev, host[4] = {1, 2, 3, 4}, back[4] = {0};
  CHECK_HIP(hipMalloc((void**)&dev, sizeof(host)));
  CHECK_HIP(hipMemcpy(dev, host, sizeof(host), hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy(back, dev, sizeof(back), hipMemcpyDeviceToHost)); /* D2H #1 */
  CHECK_EQ(back[3], 4);
  hipError_t e = hipMemcpy(back, dev, sizeof(back), hipMemcpyDeviceToHost); /* D2H #2 fails */
  CHECK(e != hipSuccess);
  CHECK_EQ(hipGetLastError(), e);
  CHECK_HIP(hipMemcpy(back, dev, sizeof(back), hipMemcpyDeviceToHost)); /* D2H #3 */
  CHECK_EQ(back[0], 1);
  printf("fault error: %s\n", hipGetErrorName(e));
  CHECK_HIP(hipFree(dev));
  puts("ok fault_d2h");
}

/* With KRSIM_FAIL_HOST_ALLOC_ABOVE=65536: big pinned allocations fail, pageable copies still
 * work (HIP locks the user's pages when it cannot get pinned staging memory). */
static void test_fault_host_alloc(void) {
  void* big;
  CHECK_HIP_IS(hipHostMalloc(&big, 1 << 20, 0), hipErrorOutOfMemory);
  CHECK_EQ(hipGetLastError(), hipErrorOutOfMemory);
  void* small;
  CHECK_HIP(hipHostMalloc(&small, 4096, 0));
  CHECK_HIP(hipHostFree(small));
  enum { N = 300000 };
  uint32_t* src = malloc(N * 4);
  uint32_t* back = malloc(N * 4);
  CHECK(src && back);
  for (uint32_t i = 0; i < N; i++) src[i] = i * 7;
  void* dev;
  CHECK_HIP(hipMalloc(&dev, N * 4));
  CHECK_HIP(hipMemcpy(dev, src, N * 4, hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy(back, dev, N * 4, hipMemcpyDeviceToHost));
  CHECK(memcmp(src, back, N * 4) == 0);
  CHECK_EQ(pointer_info(src).type, HSA_EXT_POINTER_TYPE_UNKNOWN); /* unlocked again */
  CHECK_HIP(hipFree(dev));
  free(src);
  free(back);
  puts("ok fault_host_alloc");
}

static void test_device_api(void) {
  hipDeviceProp_t p;
  CHECK_HIP(hipGetDeviceProperties(&p, 0));
  CHECK(strncmp(p.gcnArchName, "gfx", 3) == 0);
  CHECK_EQ(p.warpSize, 64);
  CHECK_EQ(p.maxThreadsPerBlock, 1024);
  size_t total = 0;
  CHECK_HIP(hipMemGetInfo(NULL, &total));
  CHECK_EQ(p.totalGlobalMem, total);
  int v = 0;
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, 0));
  CHECK_EQ(v, 64);
  CHECK_HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, 0));
  CHECK_EQ(v, p.multiProcessorCount);
  CHECK_HIP_IS(hipGetDeviceProperties(&p, 7), hipErrorInvalidDevice);
  hipDevice_t d = -1;
  CHECK_HIP(hipDeviceGet(&d, 0));
  CHECK_EQ(d, 0);
  CHECK_HIP(hipSetDeviceFlags(hipDeviceScheduleYield));
  unsigned flags = 0;
  CHECK_HIP(hipGetDeviceFlags(&flags));
  CHECK_EQ(flags, hipDeviceScheduleYield);
  CHECK_HIP(hipDeviceReset());
  (void)hipGetLastError();
  puts("ok device_api");
}

int main(int argc, char** argv) {
  CHECK_HIP(hipInit(0));
  if (argc > 1 && strcmp(argv[1], "fault-d2h") == 0) {
    test_fault_d2h();
  } else if (argc > 1 && strcmp(argv[1], "fault-host-alloc") == 0) {
    test_fault_host_alloc();
  } else {
    test_strings();
    test_last_error();
    test_device_api();
  }
  puts("PASS");
  return 0;
}
