/* hip_copy.c - hipMemcpy* (async copies on the copy engine, ordered with the stream's queue,
 * staged through pinned buffers for pageable host memory), hipMemset*, and symbol copies. */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

#define KRHIP_STAGING_BYTES (4u << 20)

static pthread_mutex_t staging_mu = PTHREAD_MUTEX_INITIALIZER;
static void* staging_cache[8];
static int staging_cached;

static void* staging_get(void) {
  void* p = NULL;
  pthread_mutex_lock(&staging_mu);
  if (staging_cached > 0) p = staging_cache[--staging_cached];
  pthread_mutex_unlock(&staging_mu);
  if (!p && hsa_amd_memory_pool_allocate(krhip_rt.fine_pool, KRHIP_STAGING_BYTES, 0, &p) !=
                HSA_STATUS_SUCCESS)
    return NULL;
  return p;
}

static void staging_put(void* p) {
  pthread_mutex_lock(&staging_mu);
  if (staging_cached < 8) {
    staging_cache[staging_cached++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&staging_mu);
  if (p) hsa_amd_memory_pool_free(p);
}

/* Submits one async copy after the stream's last op; waits for it when blocking.
 * s->mu held. */
static hipError_t submit_copy(hipStream_t s, void* dst, hsa_agent_t dst_agent, const void* src,
                              hsa_agent_t src_agent, size_t size, bool blocking) {
  hsa_signal_t dep, done;
  bool dep_is_copy;
  bool has_dep = krhip_stream_last(s, &dep, &dep_is_copy);
  hipError_t e = krhip_stream_signal(s, &done);
  if (e != hipSuccess) return e;
  hsa_status_t st = hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, size,
                                              has_dep ? 1 : 0, has_dep ? &dep : NULL, done);
  if (st != HSA_STATUS_SUCCESS) {
    hsa_signal_destroy(done);
    return krhip_from_hsa(st);
  }
  e = krhip_stream_track(s, (krhip_inflight){.signal = done, .is_copy = true});
  if (e != hipSuccess) return e;
  return blocking ? krhip_wait_signal(done) : hipSuccess;
}

/* Copies between pageable host memory (host_side) and HSA memory (other) through pinned
 * staging buffers, in stream order; always completes before returning, as HIP does. */
static hipError_t staged_copy(hipStream_t s, void* dst, hsa_agent_t dst_agent, const void* src,
                              hsa_agent_t src_agent, size_t size, bool to_device) {
  void* stage = staging_get();
  if (!stage) {
    /* No pinned staging memory (e.g. host allocations refused): lock the user's pages for
     * the copy instead, as HIP's pinned-copy path does. */
    void* host = to_device ? (void*)src : dst;
    hsa_agent_t dev = to_device ? dst_agent : src_agent;
    void* agent_ptr;
    if (hsa_amd_memory_lock(host, size, &dev, 1, &agent_ptr) != HSA_STATUS_SUCCESS)
      return hipErrorOutOfMemory;
    hipError_t e = to_device
                       ? submit_copy(s, dst, dst_agent, agent_ptr, krhip_rt.cpu_agent, size, true)
                       : submit_copy(s, agent_ptr, krhip_rt.cpu_agent, src, src_agent, size, true);
    hsa_amd_memory_unlock(host);
    return e;
  }
  hipError_t e = hipSuccess;
  for (size_t off = 0; off < size && e == hipSuccess; off += KRHIP_STAGING_BYTES) {
    size_t n = size - off < KRHIP_STAGING_BYTES ? size - off : KRHIP_STAGING_BYTES;
    if (to_device) {
      memcpy(stage, (const char*)src + off, n);
      e = submit_copy(s, (char*)dst + off, dst_agent, stage, krhip_rt.cpu_agent, n, true);
    } else {
      e = submit_copy(s, stage, krhip_rt.cpu_agent, (const char*)src + off, src_agent, n, true);
      if (e == hipSuccess) memcpy((char*)dst + off, stage, n);
    }
  }
  staging_put(stage);
  return e;
}

hipError_t krhip_copy(void* dst, const void* src, size_t size, hipMemcpyKind kind,
                      hipStream_t stream, bool blocking) {
  if ((unsigned)kind > hipMemcpyDefault) return hipErrorInvalidMemcpyDirection;
  if (size == 0) return hipSuccess;
  if (!dst || !src) return hipErrorInvalidValue;
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return e;
  hsa_agent_t dst_agent, src_agent;
  int dst_kind = krhip_pointer_kind(dst, &dst_agent);
  int src_kind = krhip_pointer_kind(src, &src_agent);
  /* The "device" side of a direction must be memory the runtime knows (device, pinned or
   * managed); plain pageable memory there is refused. */
  if ((kind == hipMemcpyHostToDevice && dst_kind == 0) ||
      (kind == hipMemcpyDeviceToHost && src_kind == 0) ||
      (kind == hipMemcpyDeviceToDevice && (dst_kind == 0 || src_kind == 0)))
    return hipErrorInvalidValue;
  e = krhip_stream_order(s);
  if (e != hipSuccess) return e;
  pthread_mutex_lock(&s->mu);
  if (dst_kind == 0 && src_kind == 0) {
    e = krhip_stream_sync_locked(s);
    if (e == hipSuccess) memmove(dst, src, size);
  } else if (src_kind == 0) {
    e = staged_copy(s, dst, dst_agent, src, src_agent, size, true);
  } else if (dst_kind == 0) {
    e = staged_copy(s, dst, dst_agent, src, src_agent, size, false);
  } else {
    e = submit_copy(s, dst, dst_agent, src, src_agent, size, blocking);
  }
  pthread_mutex_unlock(&s->mu);
  return e;
}

HIP_EXPORT hipError_t hipMemcpy(void* dst, const void* src, size_t size, hipMemcpyKind kind) {
  return krhip_ret(krhip_copy(dst, src, size, kind, NULL, true));
}

HIP_EXPORT hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, hipMemcpyKind kind,
                                     hipStream_t stream) {
  return krhip_ret(krhip_copy(dst, src, size, kind, stream, false));
}

HIP_EXPORT hipError_t hipMemcpyWithStream(void* dst, const void* src, size_t size,
                                          hipMemcpyKind kind, hipStream_t stream) {
  return krhip_ret(krhip_copy(dst, src, size, kind, stream, true));
}

HIP_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t size) {
  return krhip_ret(krhip_copy(dst, src, size, hipMemcpyHostToDevice, NULL, true));
}

HIP_EXPORT hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t size) {
  return krhip_ret(krhip_copy(dst, src, size, hipMemcpyDeviceToHost, NULL, true));
}

HIP_EXPORT hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t size) {
  return krhip_ret(krhip_copy(dst, src, size, hipMemcpyDeviceToDevice, NULL, true));
}

/* Fills after the stream's earlier work; the sim's device memory is host-addressable, so the
 * fill is a plain store once the stream is idle (real HIP runs a fill kernel). */
static hipError_t fill(void* dst, int value, size_t size, hipStream_t stream) {
  if (size == 0) return hipSuccess;
  if (!dst) return hipErrorInvalidValue;
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return e;
  hsa_agent_t agent;
  if (krhip_pointer_kind(dst, &agent) == 0) return hipErrorInvalidValue;
  e = krhip_stream_order(s);
  if (e != hipSuccess) return e;
  pthread_mutex_lock(&s->mu);
  e = krhip_stream_sync_locked(s);
  if (e == hipSuccess) memset(dst, value, size);
  pthread_mutex_unlock(&s->mu);
  return e;
}

HIP_EXPORT hipError_t hipMemset(void* dst, int value, size_t size) {
  return krhip_ret(fill(dst, value, size, NULL));
}

HIP_EXPORT hipError_t hipMemsetAsync(void* dst, int value, size_t size, hipStream_t stream) {
  return krhip_ret(fill(dst, value, size, stream));
}

HIP_EXPORT hipError_t hipMemsetD8(hipDeviceptr_t dst, unsigned char value, size_t count) {
  return krhip_ret(fill(dst, value, count, NULL));
}

HIP_EXPORT hipError_t hipMemsetD32(hipDeviceptr_t dst, int value, size_t count) {
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(NULL, &s);
  if (e != hipSuccess) return krhip_ret(e);
  hsa_agent_t agent;
  if (!dst || krhip_pointer_kind(dst, &agent) == 0) return krhip_ret(hipErrorInvalidValue);
  e = krhip_stream_order(s);
  if (e != hipSuccess) return krhip_ret(e);
  pthread_mutex_lock(&s->mu);
  e = krhip_stream_sync_locked(s);
  for (size_t i = 0; e == hipSuccess && i < count; i++) ((int32_t*)dst)[i] = value;
  pthread_mutex_unlock(&s->mu);
  return krhip_ret(e);
}

/* ---------------------------------------------------------------- symbols */

static hipError_t symbol_range(const void* symbol, size_t count, size_t offset, char** addr) {
  void* base;
  size_t size;
  hipError_t e = krhip_registered_var(symbol, &base, &size);
  if (e != hipSuccess) return e;
  if (offset > size || count > size - offset) return hipErrorInvalidValue;
  *addr = (char*)base + offset;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipMemcpyToSymbol(const void* symbol, const void* src, size_t count,
                                        size_t offset, hipMemcpyKind kind) {
  char* addr;
  hipError_t e = symbol_range(symbol, count, offset, &addr);
  if (e != hipSuccess) return krhip_ret(e);
  if (kind == hipMemcpyDeviceToHost || kind == hipMemcpyHostToHost)
    return krhip_ret(hipErrorInvalidMemcpyDirection);
  return krhip_ret(krhip_copy(addr, src, count, kind, NULL, true));
}

HIP_EXPORT hipError_t hipMemcpyFromSymbol(void* dst, const void* symbol, size_t count,
                                          size_t offset, hipMemcpyKind kind) {
  char* addr;
  hipError_t e = symbol_range(symbol, count, offset, &addr);
  if (e != hipSuccess) return krhip_ret(e);
  if (kind == hipMemcpyHostToDevice || kind == hipMemcpyHostToHost)
    return krhip_ret(hipErrorInvalidMemcpyDirection);
  return krhip_ret(krhip_copy(dst, addr, count, kind, NULL, true));
}

HIP_EXPORT hipError_t hipMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                             size_t offset, hipMemcpyKind kind,
                                             hipStream_t stream) {
  char* addr;
  hipError_t e = symbol_range(symbol, count, offset, &addr);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_copy(addr, src, count, kind, stream, false));
}

HIP_EXPORT hipError_t hipMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count,
                                               size_t offset, hipMemcpyKind kind,
                                               hipStream_t stream) {
  char* addr;
  hipError_t e = symbol_range(symbol, count, offset, &addr);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_copy(dst, addr, count, kind, stream, false));
}

HIP_EXPORT hipError_t hipGetSymbolAddress(void** devPtr, const void* symbol) {
  if (!devPtr) return krhip_ret(hipErrorInvalidValue);
  size_t size;
  return krhip_ret(krhip_registered_var(symbol, devPtr, &size));
}

HIP_EXPORT hipError_t hipGetSymbolSize(size_t* size, const void* symbol) {
  if (!size) return krhip_ret(hipErrorInvalidValue);
  void* addr;
  return krhip_ret(krhip_registered_var(symbol, &addr, size));
}
