/* hip_device.c - runtime start-up (HSA init, agents, pools), devices and versions. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hip_internal.h"

krhip_runtime krhip_rt = {.streams_mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread int current_device;

uint64_t krhip_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct pool_search {
  hsa_amd_memory_pool_t found;
  uint32_t want_flags; /* global flag that must be set */
  bool found_any;
} pool_search;

static hsa_status_t find_pool(hsa_amd_memory_pool_t pool, void* data) {
  pool_search* ps = data;
  hsa_amd_segment_t seg;
  uint32_t flags = 0;
  bool alloc_ok = false;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg) != HSA_STATUS_SUCCESS ||
      seg != HSA_AMD_SEGMENT_GLOBAL)
    return HSA_STATUS_SUCCESS;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc_ok) !=
          HSA_STATUS_SUCCESS ||
      !alloc_ok)
    return HSA_STATUS_SUCCESS;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) !=
      HSA_STATUS_SUCCESS)
    return HSA_STATUS_SUCCESS;
  if ((flags & ps->want_flags) != ps->want_flags) return HSA_STATUS_SUCCESS;
  /* The fine-grained host pool is the one without the kernarg flag. */
  if (ps->want_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED &&
      (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT))
    return HSA_STATUS_SUCCESS;
  ps->found = pool;
  ps->found_any = true;
  return HSA_STATUS_INFO_BREAK;
}

static hsa_status_t visit_agent(hsa_agent_t agent, void* data) {
  (void)data;
  hsa_device_type_t type;
  if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS)
    return HSA_STATUS_SUCCESS;
  if (type == HSA_DEVICE_TYPE_CPU) {
    if (krhip_rt.cpu_agent.handle == 0) krhip_rt.cpu_agent = agent;
    return HSA_STATUS_SUCCESS;
  }
  if (type != HSA_DEVICE_TYPE_GPU || krhip_rt.device_count >= KRHIP_MAX_DEVICES)
    return HSA_STATUS_SUCCESS;
  pool_search ps = {.want_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED};
  hsa_amd_agent_iterate_memory_pools(agent, find_pool, &ps);
  if (!ps.found_any) return HSA_STATUS_SUCCESS;
  krhip_device* dev = &krhip_rt.devices[krhip_rt.device_count++];
  dev->agent = agent;
  dev->coarse_pool = ps.found;
  hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, dev->name);
  return HSA_STATUS_SUCCESS;
}

static void init_runtime(void) {
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    krhip_rt.init_status = hipErrorNotInitialized;
    return;
  }
  hsa_iterate_agents(visit_agent, NULL);
  if (krhip_rt.device_count == 0 || krhip_rt.cpu_agent.handle == 0) {
    krhip_rt.init_status = hipErrorNoDevice;
    return;
  }
  pool_search fine = {.want_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED};
  hsa_amd_agent_iterate_memory_pools(krhip_rt.cpu_agent, find_pool, &fine);
  pool_search karg = {.want_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT};
  hsa_amd_agent_iterate_memory_pools(krhip_rt.cpu_agent, find_pool, &karg);
  if (!fine.found_any || !karg.found_any) {
    krhip_rt.init_status = hipErrorInitializationError;
    return;
  }
  krhip_rt.fine_pool = fine.found;
  krhip_rt.kernarg_pool = karg.found;
  krhip_rt.init_status = hipSuccess;
}

hipError_t krhip_init(void) {
  pthread_once(&init_once, init_runtime);
  return krhip_rt.init_status;
}

int krhip_current_device(void) { return current_device; }

hipError_t krhip_from_hsa(hsa_status_t st) {
  switch (st) {
    case HSA_STATUS_SUCCESS:
      return hipSuccess;
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
      return hipErrorOutOfMemory;
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
      return hipErrorInvalidValue;
    case HSA_STATUS_ERROR_NOT_INITIALIZED:
      return hipErrorNotInitialized;
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT:
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE:
      return hipErrorInvalidImage;
    case HSA_STATUS_ERROR_INVALID_SYMBOL_NAME:
      return hipErrorNotFound;
    default:
      return hipErrorUnknown;
  }
}

HIP_EXPORT hipError_t hipInit(unsigned int flags) {
  if (flags != 0) return krhip_ret(hipErrorInvalidValue);
  return krhip_ret(krhip_init());
}

HIP_EXPORT hipError_t hipGetDeviceCount(int* count) {
  if (!count) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  *count = e == hipSuccess ? krhip_rt.device_count : 0;
  return krhip_ret(e);
}

HIP_EXPORT hipError_t hipSetDevice(int device) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  if (device < 0 || device >= krhip_rt.device_count) return krhip_ret(hipErrorInvalidDevice);
  current_device = device;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGetDevice(int* device) {
  if (!device) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  *device = current_device;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipDeviceSynchronize(void) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_device_sync(current_device));
}

HIP_EXPORT hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  if (!name || len <= 0) return krhip_ret(hipErrorInvalidValue);
  if (device < 0 || device >= krhip_rt.device_count) return krhip_ret(hipErrorInvalidDevice);
  strncpy(name, krhip_rt.devices[device].name, (size_t)len - 1);
  name[len - 1] = 0;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipDriverGetVersion(int* version) {
  if (!version) return krhip_ret(hipErrorInvalidValue);
  *version = 50221153; /* HIP_VERSION of the 5.2 headers this library implements */
  return hipSuccess;
}

HIP_EXPORT hipError_t hipRuntimeGetVersion(int* version) { return hipDriverGetVersion(version); }

/* At unload, like HIP's runtime tear-down: let in-flight work finish, then shut HSA down
 * (which runs HSA tools' OnUnload). */
__attribute__((destructor)) static void shutdown_runtime(void) {
  if (krhip_rt.init_status != hipSuccess || krhip_rt.device_count == 0) return;
  for (int d = 0; d < krhip_rt.device_count; d++) krhip_device_sync(d);
  hsa_shut_down();
}
