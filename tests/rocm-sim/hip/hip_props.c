/* hip_props.c - device properties and attributes (from HSA agent info), device flags and
 * reset, and small cross-stream/cross-device helpers (hipStreamWaitEvent, hipMemcpyPeer). */
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"

static __thread unsigned device_flags;

static uint32_t agent_u32(hsa_agent_t agent, hsa_agent_info_t attr, uint32_t fallback) {
  uint32_t v = 0;
  return hsa_agent_get_info(agent, attr, &v) == HSA_STATUS_SUCCESS && v ? v : fallback;
}

static hipError_t check_device(int device) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return e;
  return device >= 0 && device < krhip_rt.device_count ? hipSuccess : hipErrorInvalidDevice;
}

HIP_EXPORT hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  if (!prop) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = check_device(device);
  if (e != hipSuccess) return krhip_ret(e);
  krhip_device* dev = &krhip_rt.devices[device];
  memset(prop, 0, sizeof(*prop));
  snprintf(prop->name, sizeof(prop->name), "krsim %s", dev->name);
  snprintf(prop->gcnArchName, sizeof(prop->gcnArchName), "%s", dev->name);
  size_t mem = 0;
  hsa_amd_memory_pool_get_info(dev->coarse_pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &mem);
  prop->totalGlobalMem = mem;
  prop->sharedMemPerBlock = 64 * 1024;
  prop->maxSharedMemoryPerMultiProcessor = 64 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = (int)agent_u32(dev->agent, HSA_AGENT_INFO_WAVEFRONT_SIZE, 64);
  prop->maxThreadsPerBlock = (int)agent_u32(dev->agent, HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, 1024);
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = prop->maxThreadsDim[2] = 1024;
  prop->maxGridSize[0] = prop->maxGridSize[1] = prop->maxGridSize[2] = 0x7fffffff;
  prop->clockRate = (int)agent_u32(dev->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY,
                                   1700) * 1000;
  prop->multiProcessorCount =
      (int)agent_u32(dev->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, 1);
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->major = 9;
  prop->minor = 0;
  prop->gcnArch = 910;
  prop->totalConstMem = mem;
  prop->concurrentKernels = 1;
  prop->pciBusID = device + 1;
  prop->canMapHostMemory = 1;
  prop->managedMemory = 1;
  prop->directManagedMemAccessFromHost = 1;
  prop->concurrentManagedAccess = 1;
  prop->isLargeBar = 1;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  if (!value) return krhip_ret(hipErrorInvalidValue);
  hipDeviceProp_t p;
  hipError_t e = hipGetDeviceProperties(&p, device);
  if (e != hipSuccess) return e;
  switch (attr) {
    case hipDeviceAttributeMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case hipDeviceAttributeMaxBlockDimX:
    case hipDeviceAttributeMaxBlockDimY:
    case hipDeviceAttributeMaxBlockDimZ: *value = p.maxThreadsDim[0]; break;
    case hipDeviceAttributeMaxGridDimX:
    case hipDeviceAttributeMaxGridDimY:
    case hipDeviceAttributeMaxGridDimZ: *value = p.maxGridSize[0]; break;
    case hipDeviceAttributeWarpSize: *value = p.warpSize; break;
    case hipDeviceAttributeMultiprocessorCount: *value = p.multiProcessorCount; break;
    case hipDeviceAttributeComputeCapabilityMajor: *value = p.major; break;
    case hipDeviceAttributeComputeCapabilityMinor: *value = p.minor; break;
    case hipDeviceAttributeClockRate: *value = p.clockRate; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case hipDeviceAttributeConcurrentKernels: *value = p.concurrentKernels; break;
    case hipDeviceAttributeManagedMemory: *value = p.managedMemory; break;
    case hipDeviceAttributePciBusId: *value = p.pciBusID; break;
    default: return krhip_ret(hipErrorInvalidValue);
  }
  return hipSuccess;
}

HIP_EXPORT hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  if (!device) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = check_device(ordinal);
  if (e != hipSuccess) return krhip_ret(e);
  *device = ordinal;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipSetDeviceFlags(unsigned flags) {
  device_flags = flags;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGetDeviceFlags(unsigned int* flags) {
  if (!flags) return krhip_ret(hipErrorInvalidValue);
  *flags = device_flags;
  return hipSuccess;
}

/* Waits for the device's work; allocations stay (the sim keeps no per-device context). */
HIP_EXPORT hipError_t hipDeviceReset(void) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_device_sync(krhip_current_device()));
}

/* The stream's later work waits for the event: done from the host, which is stricter. */
HIP_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  (void)stream;
  if (flags != 0) return krhip_ret(hipErrorInvalidValue);
  if (!event) return krhip_ret(hipErrorInvalidHandle);
  return hipEventSynchronize(event);
}

HIP_EXPORT hipError_t hipMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice,
                                    size_t sizeBytes) {
  hipError_t e = check_device(dstDevice);
  if (e == hipSuccess) e = check_device(srcDevice);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_copy(dst, src, sizeBytes, hipMemcpyDeviceToDevice, NULL, true));
}
