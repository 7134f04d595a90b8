/* hip_launch.c - streams and launches: the dispatch a kernel sees, the kernarg memory class,
 * stream order (kernels after copies, dependent launches), several streams, device sync,
 * hipModuleLaunchKernel-free launch variants (hipLaunchKernel, the stub, hipExtLaunchKernel
 * with events, the <<<>>> configuration stack) and launch errors. */
#include <pthread.h>

#include "hip_check.h"

/* What one dispatch looked like from inside: written by workgroup (0,0,0). */
typedef struct seen {
  uint32_t grid[3], workgroup[3], dims;
  uint32_t groups; /* workgroups that ran */
  uint64_t kernarg_address;
  uint64_t arg_value;
} seen;

KRSIM_KERNEL(probe, seen*, out, uint64_t, value) {
  if (d->group_id[0] == 0 && d->group_id[1] == 0 && d->group_id[2] == 0) {
    for (int i = 0; i < 3; i++) {
      args->out->grid[i] = d->grid[i];
      args->out->workgroup[i] = d->workgroup[i];
    }
    args->out->dims = d->dims;
    args->out->kernarg_address = (uint64_t)(uintptr_t)args;
    args->out->arg_value = args->value;
  }
  __atomic_fetch_add(&args->out->groups, 1, __ATOMIC_RELAXED);
}

/* Non-atomic increment by one workgroup: correct only if launches run in stream order. */
KRSIM_KERNEL(bump, uint64_t*, counter, uint64_t, times) {
  for (uint64_t i = 0; i < args->times; i++) {
    uint64_t v = *(volatile uint64_t*)args->counter;
    *(volatile uint64_t*)args->counter = v + 1;
  }
}

KRSIM_KERNEL(scale_add, uint32_t*, data, uint32_t, n, uint32_t, mul, uint32_t, add) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->data[i] = args->data[i] * args->mul + args->add;
  }
}

KRSIM_KERNEL(snapshot, uint64_t*, out, const uint64_t*, counter) {
  if (d->group_id[0] == 0) *args->out = *(const volatile uint64_t*)args->counter;
}

#define LAUNCH_MODULE(K, V, C) K(probe) K(bump) K(scale_add) K(snapshot)
KRSIM_MODULE(launch_module, LAUNCH_MODULE)

static void test_dispatch_view(test_agents ag) {
  seen* s;
  CHECK_HIP(hipHostMalloc((void**)&s, sizeof(*s), 0));
  memset(s, 0, sizeof(*s));
  uint64_t value = 0x1122334455667788ull;
  void* args[] = {&s, &value};
  CHECK_HIP(hipLaunchKernel((const void*)probe, d3(3, 2, 1), d3(4, 5, 1), args, 0, NULL));
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_EQ(s->grid[0], 12);
  CHECK_EQ(s->grid[1], 10);
  CHECK_EQ(s->grid[2], 1);
  CHECK_EQ(s->workgroup[0], 4);
  CHECK_EQ(s->workgroup[1], 5);
  CHECK_EQ(s->dims, 2);
  CHECK_EQ(s->groups, 6);
  CHECK_EQ(s->arg_value, 0x1122334455667788ull);
  /* The kernarg segment is its own allocation in the CPU agent's kernarg pool. */
  hsa_amd_pointer_info_t ki = pointer_info((void*)(uintptr_t)s->kernarg_address);
  CHECK_EQ(ki.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(ki.agentOwner.handle, ag.cpu.handle);
  CHECK(ki.global_flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT);
  CHECK((uintptr_t)ki.agentBaseAddress == s->kernarg_address);
  CHECK(ki.sizeInBytes >= probe_kernarg_size);

  /* The generated stub launches through hipLaunchKernel too; 3-D grids report 3 dims. */
  memset(s, 0, sizeof(*s));
  CHECK_HIP(probe(d3(2, 2, 2), d3(1, 1, 3), 0, NULL, s, 42));
  CHECK_HIP(hipStreamSynchronize(NULL));
  CHECK_EQ(s->dims, 3);
  CHECK_EQ(s->groups, 8);
  CHECK_EQ(s->grid[2], 6);
  CHECK_EQ(s->arg_value, 42);
  CHECK_HIP(hipHostFree(s));
  puts("ok dispatch_view");
}

static void test_stream_order(void) {
  /* Many dependent single-workgroup launches on one stream: in order, none lost. */
  uint64_t* counter;
  CHECK_HIP(hipMalloc((void**)&counter, sizeof(uint64_t)));
  CHECK_HIP(hipMemset(counter, 0, sizeof(uint64_t)));
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  for (int i = 0; i < 300; i++) CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, s, counter, 3));
  CHECK_HIP(hipStreamSynchronize(s));
  CHECK_HIP(hipStreamQuery(s));
  uint64_t v = 0;
  CHECK_HIP(hipMemcpy(&v, counter, sizeof(v), hipMemcpyDeviceToHost));
  CHECK_EQ(v, 900);

  /* copy -> kernel -> kernel -> copy, all async: the kernels must see the copied data. */
  enum { N = 4096 };
  uint32_t *pin, *dev;
  CHECK_HIP(hipHostMalloc((void**)&pin, N * sizeof(uint32_t), 0));
  CHECK_HIP(hipMalloc((void**)&dev, N * sizeof(uint32_t)));
  for (uint32_t round = 0; round < 20; round++) {
    for (uint32_t i = 0; i < N; i++) pin[i] = i + round;
    CHECK_HIP(hipMemcpyAsync(dev, pin, N * sizeof(uint32_t), hipMemcpyHostToDevice, s));
    CHECK_HIP(scale_add(d3(N / 256, 1, 1), d3(256, 1, 1), 0, s, dev, N, 3, 1));
    CHECK_HIP(scale_add(d3(N / 256, 1, 1), d3(256, 1, 1), 0, s, dev, N, 2, 5));
    CHECK_HIP(hipMemcpyAsync(pin, dev, N * sizeof(uint32_t), hipMemcpyDeviceToHost, s));
    CHECK_HIP(hipStreamSynchronize(s));
    for (uint32_t i = 0; i < N; i++) CHECK_EQ(pin[i], ((i + round) * 3 + 1) * 2 + 5);
  }
  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipFree(dev));
  CHECK_HIP(hipHostFree(pin));
  CHECK_HIP(hipFree(counter));
  puts("ok stream_order");
}

typedef struct stream_job {
  uint64_t* counter;
  int launches;
} stream_job;

static void* stream_thread(void* arg) {
  stream_job* j = arg;
  hipStream_t s;
  CHECK_HIP(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  unsigned flags = 0;
  CHECK_HIP(hipStreamGetFlags(s, &flags));
  CHECK_EQ(flags, hipStreamNonBlocking);
  for (int i = 0; i < j->launches; i++) CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, s, j->counter, 1));
  CHECK_HIP(hipStreamSynchronize(s));
  CHECK_HIP(hipStreamDestroy(s));
  return NULL;
}

static void test_streams(void) {
  /* Eight threads, a stream each, a counter each; then device-wide sync on two streams. */
  enum { T = 8 };
  uint64_t* counters;
  CHECK_HIP(hipMalloc((void**)&counters, T * sizeof(uint64_t)));
  CHECK_HIP(hipMemset(counters, 0, T * sizeof(uint64_t)));
  pthread_t th[T];
  stream_job jobs[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (stream_job){counters + t, 50 + t};
    CHECK_EQ(pthread_create(&th[t], NULL, stream_thread, &jobs[t]), 0);
  }
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  uint64_t got[T];
  CHECK_HIP(hipMemcpy(got, counters, sizeof(got), hipMemcpyDeviceToHost));
  for (int t = 0; t < T; t++) CHECK_EQ(got[t], 50 + t);

  hipStream_t a, b;
  CHECK_HIP(hipStreamCreate(&a));
  CHECK_HIP(hipStreamCreate(&b));
  CHECK_HIP(hipMemset(counters, 0, T * sizeof(uint64_t)));
  for (int i = 0; i < 40; i++) {
    CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, a, counters, 1));
    CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, b, counters + 1, 2));
  }
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_HIP(hipStreamQuery(a));
  CHECK_HIP(hipStreamQuery(b));
  CHECK_HIP(hipMemcpy(got, counters, 2 * sizeof(uint64_t), hipMemcpyDeviceToHost));
  CHECK_EQ(got[0], 40);
  CHECK_EQ(got[1], 80);
  CHECK_HIP(hipStreamDestroy(a));
  CHECK_HIP(hipStreamDestroy(b));
  CHECK_HIP_IS(hipStreamDestroy(NULL), hipErrorInvalidHandle);
  (void)hipGetLastError();
  CHECK_HIP(hipFree(counters));
  puts("ok streams");
}

/* The null stream is a legacy blocking stream: work on a blocking stream waits for it, and
 * it waits for blocking streams. A long kernel on one side, a reader on the other. */
static void test_null_stream_order(void) {
  uint64_t* buf;
  CHECK_HIP(hipMalloc((void**)&buf, 2 * sizeof(uint64_t)));
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  for (int round = 0; round < 3; round++) {
    CHECK_HIP(hipMemset(buf, 0, 2 * sizeof(uint64_t)));
    CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, NULL, buf, 3000000));
    CHECK_HIP(snapshot(d3(1, 1, 1), d3(1, 1, 1), 0, s, buf + 1, buf));
    CHECK_HIP(hipStreamSynchronize(s));
    uint64_t got[2];
    CHECK_HIP(hipMemcpy(got, buf, sizeof(got), hipMemcpyDeviceToHost));
    CHECK_EQ(got[1], 3000000);
    CHECK_HIP(bump(d3(1, 1, 1), d3(1, 1, 1), 0, s, buf, 1000000));
    CHECK_HIP(snapshot(d3(1, 1, 1), d3(1, 1, 1), 0, NULL, buf + 1, buf));
    CHECK_HIP(hipMemcpy(got, buf, sizeof(got), hipMemcpyDeviceToHost));
    CHECK_EQ(got[1], 4000000);
  }
  CHECK_HIP(hipStreamDestroy(s));
  CHECK_HIP(hipFree(buf));
  puts("ok null_stream_order");
}

static void test_launch_variants(void) {
  uint64_t* counter;
  CHECK_HIP(hipMalloc((void**)&counter, sizeof(uint64_t)));
  CHECK_HIP(hipMemset(counter, 0, sizeof(uint64_t)));
  hipEvent_t start, stop;
  CHECK_HIP(hipEventCreate(&start));
  CHECK_HIP(hipEventCreate(&stop));
  uint64_t times = 7;
  void* args[] = {&counter, &times};
  CHECK_HIP(hipExtLaunchKernel((const void*)bump, d3(1, 1, 1), d3(1, 1, 1), args, 0, NULL, start,
                               stop, 0));
  CHECK_HIP(hipEventSynchronize(stop));
  CHECK_HIP(hipEventQuery(start));
  float ms = -1;
  CHECK_HIP(hipEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0);

  /* What hip-clang emits for kernel<<<grid, block, shmem, stream>>>(args). */
  CHECK_HIP(__hipPushCallConfiguration(d3(1, 1, 1), d3(1, 1, 1), 0, NULL));
  dim3 g, b;
  size_t shmem;
  hipStream_t st;
  CHECK_HIP(__hipPopCallConfiguration(&g, &b, &shmem, &st));
  CHECK_EQ(g.x, 1);
  CHECK(st == NULL);
  CHECK_HIP(hipLaunchKernel((const void*)bump, g, b, args, shmem, st));
  CHECK_HIP_IS(__hipPopCallConfiguration(&g, &b, &shmem, &st), hipErrorMissingConfiguration);
  CHECK_HIP(hipLaunchCooperativeKernel((const void*)bump, g, b, args, 0, NULL));
  uint64_t v = 0;
  CHECK_HIP(hipMemcpy(&v, counter, sizeof(v), hipMemcpyDeviceToHost));
  CHECK_EQ(v, 21);

  /* Errors: bad configurations, unregistered host functions, missing arguments. */
  CHECK_HIP_IS(hipLaunchKernel((const void*)bump, d3(1, 1, 1), d3(2048, 1, 1), args, 0, NULL),
               hipErrorInvalidConfiguration);
  CHECK_EQ(hipGetLastError(), hipErrorInvalidConfiguration);
  CHECK_HIP_IS(hipLaunchKernel((const void*)bump, d3(0, 1, 1), d3(1, 1, 1), args, 0, NULL),
               hipErrorInvalidConfiguration);
  CHECK_HIP_IS(hipLaunchKernel((const void*)test_launch_variants, d3(1, 1, 1), d3(1, 1, 1), args,
                               0, NULL),
               hipErrorInvalidDeviceFunction);
  CHECK_HIP_IS(hipLaunchKernel((const void*)bump, d3(1, 1, 1), d3(1, 1, 1), NULL, 0, NULL),
               hipErrorInvalidValue);
  (void)hipGetLastError();
  CHECK_HIP(hipEventDestroy(start));
  CHECK_HIP(hipEventDestroy(stop));
  CHECK_HIP(hipFree(counter));
  puts("ok launch_variants");
}

int main(void) {
  CHECK_HIP(hipInit(0));
  test_agents ag = agents();
  test_dispatch_view(ag);
  test_stream_order();
  test_streams();
  test_null_stream_order();
  test_launch_variants();
  puts("PASS");
  return 0;
}
