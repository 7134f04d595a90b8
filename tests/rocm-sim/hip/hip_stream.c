/* hip_stream.c - streams (one HSA queue each), packet submission, in-flight tracking and
 * synchronization, and events. */
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

#define KRHIP_MAX_CACHED 1024

static hipError_t stream_create(int device, unsigned flags, bool is_null, hipStream_t* out) {
  hipStream_t s = calloc(1, sizeof(*s));
  if (!s) return hipErrorOutOfMemory;
  s->device = device;
  s->flags = flags;
  s->is_null = is_null;
  pthread_mutex_init(&s->mu, NULL);
  hsa_status_t st = hsa_queue_create(krhip_rt.devices[device].agent, KRHIP_QUEUE_SIZE,
                                     HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX,
                                     &s->queue);
  if (st != HSA_STATUS_SUCCESS) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return krhip_from_hsa(st);
  }
  pthread_mutex_lock(&krhip_rt.streams_mu);
  s->next = krhip_rt.streams;
  krhip_rt.streams = s;
  pthread_mutex_unlock(&krhip_rt.streams_mu);
  *out = s;
  return hipSuccess;
}

hipError_t krhip_stream_resolve(hipStream_t in, hipStream_t* out) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return e;
  if (in != NULL && in != hipStreamPerThread) {
    *out = in;
    return hipSuccess;
  }
  int dev = krhip_current_device();
  krhip_device* d = &krhip_rt.devices[dev];
  hipStream_t s = __atomic_load_n(&d->null_stream, __ATOMIC_ACQUIRE);
  if (s) {
    *out = s;
    return hipSuccess;
  }
  static pthread_mutex_t null_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&null_mu);
  e = hipSuccess;
  if (!d->null_stream) {
    e = stream_create(dev, 0, true, &s);
    if (e == hipSuccess) __atomic_store_n(&d->null_stream, s, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&null_mu);
  *out = d->null_stream;
  return e;
}

/* Recycles the resources of a finished op; s->mu held. */
static void recycle(hipStream_t s, krhip_inflight op) {
  if (op.kernarg) {
    if (s->free_kernargs_len < KRHIP_MAX_CACHED) {
      if (s->free_kernargs_len == s->free_kernargs_cap) {
        size_t cap = s->free_kernargs_cap ? s->free_kernargs_cap * 2 : 8;
        krhip_inflight* n = realloc(s->free_kernargs, cap * sizeof(*n));
        if (n) {
          s->free_kernargs = n;
          s->free_kernargs_cap = cap;
        }
      }
      if (s->free_kernargs_len < s->free_kernargs_cap)
        s->free_kernargs[s->free_kernargs_len++] = op;
      else
        hsa_amd_memory_pool_free(op.kernarg);
    } else {
      hsa_amd_memory_pool_free(op.kernarg);
    }
  }
  if (s->free_signals_len < KRHIP_MAX_CACHED) {
    if (s->free_signals_len == s->free_signals_cap) {
      size_t cap = s->free_signals_cap ? s->free_signals_cap * 2 : 8;
      hsa_signal_t* n = realloc(s->free_signals, cap * sizeof(*n));
      if (n) {
        s->free_signals = n;
        s->free_signals_cap = cap;
      }
    }
    if (s->free_signals_len < s->free_signals_cap) {
      s->free_signals[s->free_signals_len++] = op.signal;
      return;
    }
  }
  hsa_signal_destroy(op.signal);
}

/* Retires finished ops from the head of the ring (they finish in order). A finished op's
 * signal is recycled only once the op after it has finished too (or it is the last op): the
 * next op may be a barrier packet or a copy waiting on that signal, and must see it reach 0
 * before it is reset to 1 for reuse. s->mu held. */
static void reclaim(hipStream_t s) {
  while (s->ring_count > 0) {
    krhip_inflight* op = &s->ring[s->ring_head];
    if (!op->finished) {
      hsa_signal_value_t v = hsa_signal_load_scacquire(op->signal);
      if (v > 0) break;
      if (v < 0) s->failed = true; /* the runtime marks a failed op with a negative value */
      op->finished = true;
      s->ops_completed++;
    }
    if (s->ring_count > 1) {
      krhip_inflight* next = &s->ring[(s->ring_head + 1) % s->ring_cap];
      if (hsa_signal_load_scacquire(next->signal) > 0) break;
    }
    krhip_inflight done = *op;
    s->ring_head = (s->ring_head + 1) % s->ring_cap;
    s->ring_count--;
    recycle(s, done);
  }
}

hipError_t krhip_stream_signal(hipStream_t s, hsa_signal_t* out) {
  /* No reclaim here: a caller holding the last op's signal as a dependency must not see it
   * recycled (and reset to 1) before its own op is tracked. */
  if (s->free_signals_len > 0) {
    *out = s->free_signals[--s->free_signals_len];
    hsa_signal_store_screlease(*out, 1);
    return hipSuccess;
  }
  return krhip_from_hsa(hsa_signal_create(1, 0, NULL, out));
}

hipError_t krhip_stream_kernarg(hipStream_t s, size_t size, void** out, size_t* cap) {
  for (size_t i = s->free_kernargs_len; i-- > 0;) {
    if (s->free_kernargs[i].kernarg_cap >= size) {
      *out = s->free_kernargs[i].kernarg;
      *cap = s->free_kernargs[i].kernarg_cap;
      s->free_kernargs[i] = s->free_kernargs[--s->free_kernargs_len];
      return hipSuccess;
    }
  }
  size_t want = size < 256 ? 256 : (size + 255) & ~(size_t)255;
  hsa_status_t st = hsa_amd_memory_pool_allocate(krhip_rt.kernarg_pool, want,
                                                  HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG, out);
  if (st != HSA_STATUS_SUCCESS) return krhip_from_hsa(st);
  *cap = want;
  return hipSuccess;
}

hipError_t krhip_stream_track(hipStream_t s, krhip_inflight op) {
  if (s->ring_count == s->ring_cap) {
    size_t cap = s->ring_cap ? s->ring_cap * 2 : 64;
    krhip_inflight* n = malloc(cap * sizeof(*n));
    if (!n) return hipErrorOutOfMemory;
    for (size_t i = 0; i < s->ring_count; i++) n[i] = s->ring[(s->ring_head + i) % s->ring_cap];
    free(s->ring);
    s->ring = n;
    s->ring_cap = cap;
    s->ring_head = 0;
  }
  s->ring[(s->ring_head + s->ring_count) % s->ring_cap] = op;
  s->ring_count++;
  s->ops_submitted++;
  return hipSuccess;
}

bool krhip_stream_last(hipStream_t s, hsa_signal_t* sig, bool* is_copy) {
  reclaim(s);
  if (s->ring_count == 0) return false;
  krhip_inflight* op = &s->ring[(s->ring_head + s->ring_count - 1) % s->ring_cap];
  *sig = op->signal;
  *is_copy = op->is_copy;
  return true;
}

uint64_t krhip_queue_reserve(hipStream_t s, uint32_t n) {
  hsa_queue_t* q = s->queue;
  uint64_t idx = hsa_queue_add_write_index_scacq_screl(q, n);
  /* Full queue: wait for the packet processor, yielding first, then sleeping (the processor
   * and the kernel workers need the CPU more than this loop does). */
  for (unsigned spins = 0; idx + n - hsa_queue_load_read_index_scacquire(q) > q->size; spins++) {
    if (spins < 16) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  return idx;
}

void* krhip_queue_slot(hipStream_t s, uint64_t idx) {
  hsa_queue_t* q = s->queue;
  return (char*)q->base_address + (idx % q->size) * 64;
}

void krhip_packet_publish(void* slot, uint16_t header, uint16_t setup) {
  uint32_t word = (uint32_t)header | ((uint32_t)setup << 16);
  __atomic_store_n((uint32_t*)slot, word, __ATOMIC_RELEASE);
}

void krhip_queue_ring(hipStream_t s, uint64_t idx) {
  hsa_signal_store_screlease(s->queue->doorbell_signal, (hsa_signal_value_t)idx);
}

hipError_t krhip_stream_sync_locked(hipStream_t s) {
  reclaim(s);
  if (s->ring_count > 0) {
    krhip_inflight* last = &s->ring[(s->ring_head + s->ring_count - 1) % s->ring_cap];
    while (hsa_signal_wait_scacquire(last->signal, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX,
                                     HSA_WAIT_STATE_BLOCKED) > 0) {
    }
    reclaim(s);
  }
  if (s->failed) {
    s->failed = false;
    return hipErrorLaunchFailure;
  }
  return s->ring_count == 0 ? hipSuccess : hipErrorUnknown;
}

hipError_t krhip_stream_sync(hipStream_t s) {
  pthread_mutex_lock(&s->mu);
  hipError_t e = krhip_stream_sync_locked(s);
  pthread_mutex_unlock(&s->mu);
  return e;
}

hipError_t krhip_stream_order(hipStream_t s) {
  if (!s->is_null) {
    if (s->flags & hipStreamNonBlocking) return hipSuccess;
    hipStream_t null_stream = __atomic_load_n(&krhip_rt.devices[s->device].null_stream,
                                              __ATOMIC_ACQUIRE);
    return null_stream ? krhip_stream_sync(null_stream) : hipSuccess;
  }
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&krhip_rt.streams_mu);
  for (hipStream_t t = krhip_rt.streams; t; t = t->next) {
    if (t->device != s->device || t->is_null || (t->flags & hipStreamNonBlocking)) continue;
    hipError_t te = krhip_stream_sync(t);
    if (te != hipSuccess) e = te;
  }
  pthread_mutex_unlock(&krhip_rt.streams_mu);
  return e;
}

hipError_t krhip_device_sync(int device) {
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&krhip_rt.streams_mu);
  for (hipStream_t s = krhip_rt.streams; s; s = s->next) {
    if (s->device != device) continue;
    hipError_t se = krhip_stream_sync(s);
    if (se != hipSuccess) e = se;
  }
  pthread_mutex_unlock(&krhip_rt.streams_mu);
  return e;
}

HIP_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  if (!stream) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(stream_create(krhip_current_device(), flags, false, stream));
}

HIP_EXPORT hipError_t hipStreamCreate(hipStream_t* stream) {
  return hipStreamCreateWithFlags(stream, hipStreamDefault);
}

HIP_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags,
                                                  int priority) {
  (void)priority;
  return hipStreamCreateWithFlags(stream, flags);
}

HIP_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  if (!stream || stream == hipStreamPerThread || stream->is_null)
    return krhip_ret(hipErrorInvalidHandle);
  pthread_mutex_lock(&krhip_rt.streams_mu);
  hipStream_t* link = &krhip_rt.streams;
  while (*link && *link != stream) link = &(*link)->next;
  if (!*link) {
    pthread_mutex_unlock(&krhip_rt.streams_mu);
    return krhip_ret(hipErrorInvalidHandle);
  }
  *link = stream->next;
  pthread_mutex_unlock(&krhip_rt.streams_mu);
  krhip_stream_sync(stream);
  hsa_queue_destroy(stream->queue);
  for (size_t i = 0; i < stream->free_signals_len; i++) hsa_signal_destroy(stream->free_signals[i]);
  for (size_t i = 0; i < stream->free_kernargs_len; i++)
    hsa_amd_memory_pool_free(stream->free_kernargs[i].kernarg);
  free(stream->free_signals);
  free(stream->free_kernargs);
  free(stream->ring);
  pthread_mutex_destroy(&stream->mu);
  free(stream);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_stream_sync(s));
}

HIP_EXPORT hipError_t hipStreamQuery(hipStream_t stream) {
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  pthread_mutex_lock(&s->mu);
  reclaim(s);
  bool idle = s->ops_completed == s->ops_submitted;
  pthread_mutex_unlock(&s->mu);
  return idle ? hipSuccess : hipErrorNotReady;
}

HIP_EXPORT hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags) {
  hipStream_t s;
  if (!flags) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  *flags = s->flags;
  return hipSuccess;
}

/* ---------------------------------------------------------------- events */

HIP_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  (void)flags;
  if (!event) return krhip_ret(hipErrorInvalidValue);
  *event = calloc(1, sizeof(**event));
  return *event ? hipSuccess : krhip_ret(hipErrorOutOfMemory);
}

HIP_EXPORT hipError_t hipEventCreate(hipEvent_t* event) { return hipEventCreateWithFlags(event, 0); }

HIP_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  if (!event) return krhip_ret(hipErrorInvalidHandle);
  free(event);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  if (!event) return krhip_ret(hipErrorInvalidHandle);
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  pthread_mutex_lock(&s->mu);
  reclaim(s);
  event->stream = s;
  event->op_target = s->ops_submitted;
  event->done_ns = s->ops_completed >= event->op_target ? krhip_now_ns() : 0;
  pthread_mutex_unlock(&s->mu);
  return hipSuccess;
}

/* Whether the event's ops are done, observing completion time; s->mu held. */
static bool event_done_locked(hipEvent_t ev) {
  reclaim(ev->stream);
  if (ev->stream->ops_completed < ev->op_target) return false;
  if (!ev->done_ns) ev->done_ns = krhip_now_ns();
  return true;
}

HIP_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  if (!event) return krhip_ret(hipErrorInvalidHandle);
  hipStream_t s = event->stream;
  if (!s) return hipSuccess;
  pthread_mutex_lock(&s->mu);
  while (!event_done_locked(event)) {
    /* The first unfinished op: the head may be finished but kept for its successor. */
    krhip_inflight* op = &s->ring[s->ring_head];
    if (op->finished) op = &s->ring[(s->ring_head + 1) % s->ring_cap];
    hsa_signal_wait_scacquire(op->signal, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX,
                              HSA_WAIT_STATE_BLOCKED);
  }
  pthread_mutex_unlock(&s->mu);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipEventQuery(hipEvent_t event) {
  if (!event) return krhip_ret(hipErrorInvalidHandle);
  hipStream_t s = event->stream;
  if (!s) return hipSuccess;
  pthread_mutex_lock(&s->mu);
  bool done = event_done_locked(event);
  pthread_mutex_unlock(&s->mu);
  return done ? hipSuccess : hipErrorNotReady;
}

HIP_EXPORT hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  if (!ms || !start || !stop) return krhip_ret(hipErrorInvalidHandle);
  if (hipEventQuery(start) != hipSuccess || hipEventQuery(stop) != hipSuccess)
    return krhip_ret(hipErrorNotReady);
  *ms = (float)((double)((int64_t)stop->done_ns - (int64_t)start->done_ns) / 1e6);
  return hipSuccess;
}

hipError_t krhip_wait_signal(hsa_signal_t sig) {
  hsa_signal_value_t v;
  while ((v = hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX,
                                        HSA_WAIT_STATE_BLOCKED)) > 0) {
  }
  return v == 0 ? hipSuccess : hipErrorLaunchFailure;
}
