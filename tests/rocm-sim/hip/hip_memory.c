/* hip_memory.c - allocation: device (coarse-grained pool), host (fine-grained pool), managed,
 * and stream-ordered allocation backed by the vmem API, as on real ROCm. */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

#define KRHIP_VMEM_GRANULE 4096u

/* A hipMallocAsync allocation: reserved range, physical handle, mapping. */
typedef struct vmem_alloc {
  void* va;
  size_t size; /* rounded to the granule */
  hsa_amd_vmem_alloc_handle_t handle;
  struct vmem_alloc* next;
} vmem_alloc;

static pthread_mutex_t vmem_mu = PTHREAD_MUTEX_INITIALIZER;
static vmem_alloc* vmem_list;

/* hipMallocManaged allocations (fine-grained host memory that hipFree accepts). */
typedef struct managed_alloc {
  void* ptr;
  struct managed_alloc* next;
} managed_alloc;

static managed_alloc* managed_list; /* guarded by vmem_mu */

/* Removes p from the managed list; true when it was a managed allocation. */
static bool managed_take(void* p) {
  pthread_mutex_lock(&vmem_mu);
  managed_alloc** link = &managed_list;
  while (*link && (*link)->ptr != p) link = &(*link)->next;
  managed_alloc* m = *link;
  if (m) *link = m->next;
  pthread_mutex_unlock(&vmem_mu);
  free(m);
  return m != NULL;
}

int krhip_pointer_kind(const void* p, hsa_agent_t* agent) {
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  if (hsa_amd_pointer_info(p, &info, NULL, NULL, NULL) != HSA_STATUS_SUCCESS ||
      info.type == HSA_EXT_POINTER_TYPE_UNKNOWN) {
    *agent = krhip_rt.cpu_agent;
    return 0;
  }
  for (int i = 0; i < krhip_rt.device_count; i++) {
    if (krhip_rt.devices[i].agent.handle == info.agentOwner.handle) {
      *agent = info.agentOwner;
      return 2;
    }
  }
  *agent = krhip_rt.cpu_agent;
  return 1;
}

HIP_EXPORT hipError_t hipMalloc(void** ptr, size_t size) {
  if (!ptr) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  krhip_device* dev = &krhip_rt.devices[krhip_current_device()];
  hsa_status_t st = hsa_amd_memory_pool_allocate(dev->coarse_pool, size, 0, ptr);
  if (st != HSA_STATUS_SUCCESS) {
    *ptr = NULL;
    return krhip_ret(hipErrorOutOfMemory);
  }
  return hipSuccess;
}

/* Removes and returns the vmem allocation starting at p, or NULL. */
static vmem_alloc* vmem_take(void* p) {
  pthread_mutex_lock(&vmem_mu);
  vmem_alloc** link = &vmem_list;
  while (*link && (*link)->va != p) link = &(*link)->next;
  vmem_alloc* a = *link;
  if (a) *link = a->next;
  pthread_mutex_unlock(&vmem_mu);
  return a;
}

static hipError_t vmem_release(vmem_alloc* a) {
  hsa_status_t st = hsa_amd_vmem_unmap(a->va, a->size);
  if (st == HSA_STATUS_SUCCESS) st = hsa_amd_vmem_handle_release(a->handle);
  if (st == HSA_STATUS_SUCCESS) st = hsa_amd_vmem_address_free(a->va, a->size);
  free(a);
  return st == HSA_STATUS_SUCCESS ? hipSuccess : hipErrorInvalidValue;
}

HIP_EXPORT hipError_t hipFree(void* ptr) {
  if (!ptr) return hipSuccess;
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  /* Like HIP, freeing waits for the device so no kernel still uses the memory. */
  krhip_device_sync(krhip_current_device());
  vmem_alloc* a = vmem_take(ptr);
  if (a) return krhip_ret(vmem_release(a));
  hsa_agent_t agent;
  if (krhip_pointer_kind(ptr, &agent) != 2 && !managed_take(ptr))
    return krhip_ret(hipErrorInvalidDevicePointer);
  if (hsa_amd_memory_pool_free(ptr) != HSA_STATUS_SUCCESS)
    return krhip_ret(hipErrorInvalidDevicePointer);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  (void)flags;
  if (!ptr) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  if (hsa_amd_memory_pool_allocate(krhip_rt.fine_pool, size, 0, ptr) != HSA_STATUS_SUCCESS) {
    *ptr = NULL;
    return krhip_ret(hipErrorOutOfMemory);
  }
  return hipSuccess;
}

HIP_EXPORT hipError_t hipMallocHost(void** ptr, size_t size) { return hipHostMalloc(ptr, size, 0); }

HIP_EXPORT hipError_t hipHostFree(void* ptr) {
  if (!ptr) return hipSuccess;
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  krhip_device_sync(krhip_current_device());
  hsa_agent_t agent;
  if (krhip_pointer_kind(ptr, &agent) != 1) return krhip_ret(hipErrorInvalidValue);
  managed_take(ptr);
  if (hsa_amd_memory_pool_free(ptr) != HSA_STATUS_SUCCESS) return krhip_ret(hipErrorInvalidValue);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipFreeHost(void* ptr) { return hipHostFree(ptr); }

/* Managed memory is fine-grained system memory: host and every device see it coherently. */
HIP_EXPORT hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags) {
  if (flags != 0 && flags != hipMemAttachGlobal && flags != hipMemAttachHost)
    return krhip_ret(hipErrorInvalidValue);
  managed_alloc* m = calloc(1, sizeof(*m));
  if (!m) return krhip_ret(hipErrorOutOfMemory);
  hipError_t e = hipHostMalloc(ptr, size, 0);
  if (e != hipSuccess || !*ptr) {
    free(m);
    return e;
  }
  m->ptr = *ptr;
  pthread_mutex_lock(&vmem_mu);
  m->next = managed_list;
  managed_list = m;
  pthread_mutex_unlock(&vmem_mu);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t stream) {
  if (!ptr) return krhip_ret(hipErrorInvalidValue);
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  vmem_alloc* a = calloc(1, sizeof(*a));
  if (!a) return krhip_ret(hipErrorOutOfMemory);
  a->size = (size + KRHIP_VMEM_GRANULE - 1) & ~(size_t)(KRHIP_VMEM_GRANULE - 1);
  krhip_device* dev = &krhip_rt.devices[s->device];
  hsa_status_t st = hsa_amd_vmem_address_reserve(&a->va, a->size, 0, 0);
  if (st != HSA_STATUS_SUCCESS) goto fail_reserve;
  st = hsa_amd_vmem_handle_create(dev->coarse_pool, a->size, MEMORY_TYPE_NONE, 0, &a->handle);
  if (st != HSA_STATUS_SUCCESS) goto fail_handle;
  st = hsa_amd_vmem_map(a->va, a->size, 0, a->handle, 0);
  if (st != HSA_STATUS_SUCCESS) goto fail_map;
  pthread_mutex_lock(&vmem_mu);
  a->next = vmem_list;
  vmem_list = a;
  pthread_mutex_unlock(&vmem_mu);
  *ptr = a->va;
  return hipSuccess;
fail_map:
  hsa_amd_vmem_handle_release(a->handle);
fail_handle:
  hsa_amd_vmem_address_free(a->va, a->size);
fail_reserve:
  free(a);
  *ptr = NULL;
  return krhip_ret(hipErrorOutOfMemory);
}

/* Stream-ordered free: the memory is released once the stream's earlier work is done. */
HIP_EXPORT hipError_t hipFreeAsync(void* ptr, hipStream_t stream) {
  if (!ptr) return hipSuccess;
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  vmem_alloc* a = vmem_take(ptr);
  if (!a) return krhip_ret(hipErrorInvalidValue);
  krhip_stream_sync(s);
  return krhip_ret(vmem_release(a));
}

HIP_EXPORT hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  size_t size = 0;
  krhip_device* dev = &krhip_rt.devices[krhip_current_device()];
  hsa_amd_memory_pool_get_info(dev->coarse_pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size);
  if (free_bytes) *free_bytes = size;
  if (total) *total = size;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attr, const void* ptr) {
  if (!attr || !ptr) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  if (hsa_amd_pointer_info(ptr, &info, NULL, NULL, NULL) != HSA_STATUS_SUCCESS ||
      info.type == HSA_EXT_POINTER_TYPE_UNKNOWN)
    return krhip_ret(hipErrorInvalidValue);
  memset(attr, 0, sizeof(*attr));
  hsa_agent_t agent;
  int kind = krhip_pointer_kind(ptr, &agent);
  attr->memoryType = kind == 2 ? hipMemoryTypeDevice : hipMemoryTypeHost;
  attr->device = 0;
  for (int i = 0; i < krhip_rt.device_count; i++)
    if (krhip_rt.devices[i].agent.handle == agent.handle) attr->device = i;
  attr->devicePointer = (void*)ptr;
  attr->hostPointer = kind == 2 ? NULL : (void*)ptr;
  return hipSuccess;
}
