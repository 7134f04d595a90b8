/* hip_memory.c - allocation classes as HSA sees them (hsa_amd_pointer_info), frees, copies of
 * every hipMemcpyKind (pageable and pinned host memory, chunked staging), and memset. */
#include "hip_check.h"

#define FLAG_COARSE HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED
#define FLAG_FINE HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED

static void test_classes(test_agents ag) {
  void* d;
  CHECK_HIP(hipMalloc(&d, 10000));
  hsa_amd_pointer_info_t i = pointer_info((char*)d + 1234);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK(i.agentBaseAddress == d);
  CHECK_EQ(i.sizeInBytes, 10000);
  CHECK_EQ(i.agentOwner.handle, ag.gpu[0].handle);
  CHECK_EQ(i.global_flags & (FLAG_COARSE | FLAG_FINE), FLAG_COARSE);
  hipPointerAttribute_t attr;
  CHECK_HIP(hipPointerGetAttributes(&attr, d));
  CHECK_EQ(attr.memoryType, hipMemoryTypeDevice);
  CHECK_EQ(attr.device, 0);

  void* h;
  CHECK_HIP(hipHostMalloc(&h, 5000, 0));
  i = pointer_info(h);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(i.sizeInBytes, 5000);
  CHECK_EQ(i.agentOwner.handle, ag.cpu.handle);
  CHECK_EQ(i.global_flags & (FLAG_COARSE | FLAG_FINE), FLAG_FINE);

  void* m;
  CHECK_HIP(hipMallocManaged(&m, 3000, hipMemAttachGlobal));
  i = pointer_info(m);
  CHECK_EQ(i.agentOwner.handle, ag.cpu.handle);
  CHECK_EQ(i.global_flags & FLAG_FINE, FLAG_FINE);

  /* hipMallocAsync: vmem reserve + handle (device pool) + map, granule-rounded. */
  void* a;
  CHECK_HIP(hipMallocAsync(&a, 5000, NULL));
  i = pointer_info((char*)a + 4999);
  CHECK_EQ(i.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK(i.agentBaseAddress == a);
  CHECK_EQ(i.sizeInBytes, 8192);
  CHECK_EQ(i.agentOwner.handle, ag.gpu[0].handle);
  CHECK_EQ(i.global_flags & FLAG_COARSE, FLAG_COARSE);
  memset(&attr, 0, sizeof(attr));

  /* Frees return the memory to HSA: the addresses are no longer known. */
  CHECK_HIP(hipFree(d));
  CHECK_EQ(pointer_info(d).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_HIP(hipHostFree(h));
  CHECK_EQ(pointer_info(h).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_HIP(hipFree(m)); /* managed memory is freed with hipFree */
  CHECK_EQ(pointer_info(m).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_HIP(hipFreeAsync(a, NULL));
  CHECK_EQ(pointer_info(a).type, HSA_EXT_POINTER_TYPE_UNKNOWN);

  /* Wrong frees and empty allocations. */
  int on_stack;
  CHECK_HIP_IS(hipFree(&on_stack), hipErrorInvalidDevicePointer);
  CHECK_HIP_IS(hipFreeAsync(&on_stack, NULL), hipErrorInvalidValue);
  CHECK_HIP(hipMalloc(&d, 64));
  CHECK_HIP_IS(hipHostFree(d), hipErrorInvalidValue);
  CHECK_HIP(hipFree(d));
  CHECK_HIP(hipMalloc(&d, 0));
  CHECK(d == NULL);
  CHECK_HIP(hipFree(NULL));
  CHECK_HIP_IS(hipMalloc(NULL, 16), hipErrorInvalidValue);
  size_t free_b = 0, total_b = 0;
  CHECK_HIP(hipMemGetInfo(&free_b, &total_b));
  CHECK(total_b > 0);
  (void)hipGetLastError();
  puts("ok classes");
}

static void fill_pattern(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 13 + (i >> 11));
}

static void test_copies(void) {
  const size_t n = (9u << 20) + 123; /* over two staging chunks */
  uint8_t* src = malloc(n);
  uint8_t* dst = malloc(n);
  uint8_t *pin_a, *pin_b, *dev_a, *dev_b;
  CHECK(src && dst);
  CHECK_HIP(hipHostMalloc((void**)&pin_a, n, 0));
  CHECK_HIP(hipHostMalloc((void**)&pin_b, n, 0));
  CHECK_HIP(hipMalloc((void**)&dev_a, n));
  CHECK_HIP(hipMalloc((void**)&dev_b, n));
  fill_pattern(src, n, 7);

  /* pageable -> device -> device -> pageable */
  CHECK_HIP(hipMemcpy(dev_a, src, n, hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy(dev_b, dev_a, n, hipMemcpyDeviceToDevice));
  memset(dst, 0, n);
  CHECK_HIP(hipMemcpy(dst, dev_b, n, hipMemcpyDeviceToHost));
  CHECK(memcmp(src, dst, n) == 0);

  /* pinned host, async, one stream */
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  fill_pattern(pin_a, n, 99);
  CHECK_HIP(hipMemcpyAsync(dev_a, pin_a, n, hipMemcpyHostToDevice, s));
  CHECK_HIP(hipMemcpyAsync(dev_b, dev_a, n, hipMemcpyDeviceToDevice, s));
  CHECK_HIP(hipMemcpyAsync(pin_b, dev_b, n, hipMemcpyDeviceToHost, s));
  CHECK_HIP(hipStreamSynchronize(s));
  CHECK(memcmp(pin_a, pin_b, n) == 0);

  /* hipMemcpyDefault infers the direction from the pointers. */
  fill_pattern(src, n, 201);
  CHECK_HIP(hipMemcpy(dev_a, src, n, hipMemcpyDefault));
  CHECK_HIP(hipMemcpy(pin_b, dev_a, n, hipMemcpyDefault));
  CHECK(memcmp(src, pin_b, n) == 0);
  CHECK_HIP(hipMemcpy(dst, pin_b, 4096, hipMemcpyHostToHost));
  CHECK(memcmp(dst, src, 4096) == 0);
  /* Managed memory takes either direction, as device or host. */
  uint8_t* managed;
  CHECK_HIP(hipMallocManaged((void**)&managed, 4096, hipMemAttachGlobal));
  CHECK_HIP(hipMemcpy(managed, src, 4096, hipMemcpyHostToDevice));
  CHECK_HIP(hipMemcpy(dev_b, managed, 4096, hipMemcpyDeviceToDevice));
  memset(dst, 0, 4096);
  CHECK_HIP(hipMemcpy(dst, dev_b, 4096, hipMemcpyDeviceToHost));
  CHECK(memcmp(dst, src, 4096) == 0);
  CHECK(memcmp(managed, src, 4096) == 0);
  CHECK_HIP(hipFree(managed));
  void* pinned;
  CHECK_HIP(hipHostMalloc(&pinned, 64, 0));
  CHECK_HIP_IS(hipFree(pinned), hipErrorInvalidDevicePointer); /* pinned: hipHostFree only */
  CHECK_HIP(hipHostFree(pinned));
  (void)hipGetLastError();

  /* Directions that contradict the pointers, and unknown kinds, are refused. */
  CHECK_HIP_IS(hipMemcpy(dst, src, 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_HIP_IS(hipMemcpy(dst, src, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_HIP_IS(hipMemcpy(dev_a, src, 16, (hipMemcpyKind)7), hipErrorInvalidMemcpyDirection);
  CHECK_HIP(hipMemcpy(dev_a, src, 0, hipMemcpyHostToDevice));

  /* memset: a window of a buffer, async on a stream, and 32-bit fills. */
  CHECK_HIP(hipMemset(dev_a, 0x11, n));
  CHECK_HIP(hipMemset(dev_a + 100, 0xab, 50));
  CHECK_HIP(hipMemsetAsync(dev_a + 1000, 0x5c, 8, s));
  CHECK_HIP(hipStreamSynchronize(s));
  CHECK_HIP(hipMemcpy(dst, dev_a, 2000, hipMemcpyDeviceToHost));
  for (size_t i = 0; i < 2000; i++) {
    uint8_t want = (i >= 100 && i < 150) ? 0xab : (i >= 1000 && i < 1008) ? 0x5c : 0x11;
    CHECK_EQ(dst[i], want);
  }
  CHECK_HIP(hipMemsetD32(dev_a, 0x01020304, 3));
  uint32_t words[4];
  CHECK_HIP(hipMemcpy(words, dev_a, sizeof(words), hipMemcpyDeviceToHost));
  CHECK_EQ(words[0], 0x01020304);
  CHECK_EQ(words[2], 0x01020304);
  CHECK_EQ(words[3], 0x11111111);
  CHECK_HIP_IS(hipMemset(src, 0, 16), hipErrorInvalidValue);
  (void)hipGetLastError();

  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipFree(dev_a));
  CHECK_HIP(hipFree(dev_b));
  CHECK_HIP(hipHostFree(pin_a));
  CHECK_HIP(hipHostFree(pin_b));
  free(src);
  free(dst);
  puts("ok copies");
}

int main(void) {
  CHECK_HIP(hipInit(0));
  test_agents ag = agents();
  CHECK(ag.ngpu >= 1);
  test_classes(ag);
  test_copies();
  puts("PASS");
  return 0;
}
