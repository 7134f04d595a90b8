/* hip_internal.h - shared state of the simulated libamdhip64 (tests/rocm-sim/hip).
 *
 * The HIP layer is written over the public HSA API only (hsa.h, hsa_ext_amd.h and the vmem
 * declarations in krsim.h), the way real HIP sits on ROCR: every HSA call goes through the
 * exported hsa_* functions, so an HSA tools library wrapping the API table sees them. */
#ifndef KRSIM_HIP_INTERNAL_H
#define KRSIM_HIP_INTERNAL_H

#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "krsim.h"
#include "krsim_hip.h"

#define HIP_EXPORT __attribute__((visibility("default")))
#define KRHIP_MAX_DEVICES 16
#define KRHIP_QUEUE_SIZE 1024u
/* Header bits for every packet HIP writes: barrier (in-order stream), system-scope fences. */
#define KRHIP_FENCES ((HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE) | \
                      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE) | \
                      (1u << HSA_PACKET_HEADER_BARRIER))

/* hipExtLaunchKernel is declared only in C++ (hip_ext.h); this is its C signature. */
hipError_t hipExtLaunchKernel(const void* function_address, dim3 numBlocks, dim3 dimBlocks,
                              void** args, size_t sharedMemBytes, hipStream_t stream,
                              hipEvent_t startEvent, hipEvent_t stopEvent, int flags);

/* ---------------------------------------------------------------- devices */

typedef struct krhip_device {
  hsa_agent_t agent;
  hsa_amd_memory_pool_t coarse_pool; /* device memory: hipMalloc, hipMallocAsync */
  char name[64];
  hipStream_t null_stream; /* created on first use */
} krhip_device;

typedef struct krhip_runtime {
  hipError_t init_status;
  int device_count;
  krhip_device devices[KRHIP_MAX_DEVICES];
  hsa_agent_t cpu_agent;
  hsa_amd_memory_pool_t fine_pool;   /* system fine-grained: hipHostMalloc */
  hsa_amd_memory_pool_t kernarg_pool; /* system kernarg pool: kernel arguments */
  pthread_mutex_t streams_mu;        /* guards the stream list */
  hipStream_t streams;               /* every live stream, null streams included */
} krhip_runtime;

extern krhip_runtime krhip_rt;

/* Initializes HSA and discovers devices once; returns the saved status. */
hipError_t krhip_init(void);
/* The calling thread's current device (hipSetDevice). */
int krhip_current_device(void);
/* Records err as the thread's last error (when not hipSuccess) and returns it. */
hipError_t krhip_ret(hipError_t err);
/* Maps an HSA status to the closest hipError_t. */
hipError_t krhip_from_hsa(hsa_status_t st);

/* ---------------------------------------------------------------- streams */

typedef struct krhip_inflight {
  hsa_signal_t signal; /* completion signal of the packet or copy */
  void* kernarg;       /* kernarg allocation to recycle, or NULL */
  size_t kernarg_cap;
  bool is_copy;        /* completed by the copy engine, not by the queue */
  bool finished;       /* seen complete (counted in ops_completed) */
} krhip_inflight;

struct ihipStream_t {
  int device;
  unsigned flags;
  bool is_null;
  hsa_queue_t* queue;
  pthread_mutex_t mu; /* serializes submission, reclamation and waiting */
  krhip_inflight* ring;
  size_t ring_cap, ring_head, ring_count;
  hsa_signal_t* free_signals;
  size_t free_signals_len, free_signals_cap;
  krhip_inflight* free_kernargs; /* recycled kernarg blocks (signal unused) */
  size_t free_kernargs_len, free_kernargs_cap;
  uint64_t ops_submitted; /* total ops, for events */
  uint64_t ops_completed;
  bool failed; /* an op completed with a negative signal value since the last sync */
  struct ihipStream_t* next;
};

/* Resolves NULL / hipStreamPerThread to the device's null stream. */
hipError_t krhip_stream_resolve(hipStream_t in, hipStream_t* out);
/* Waits for every op submitted to s; s->mu must be held. Ops signal completion by reaching
 * 0; a negative value marks a failed op (reported once, by the next synchronization). */
hipError_t krhip_stream_sync_locked(hipStream_t s);
hipError_t krhip_stream_sync(hipStream_t s);
/* Legacy null-stream semantics, before submitting to s (no stream lock held): work for a
 * blocking stream waits for the device's null stream, work for the null stream waits for the
 * device's blocking streams. Done by waiting from the host: stricter than HIP, same order. */
hipError_t krhip_stream_order(hipStream_t s);
/* Waits for every stream of a device. */
hipError_t krhip_device_sync(int device);
/* Takes a completion signal (value 1) from the stream's cache or HSA; s->mu held. Never
 * retires ops, so a dependency from krhip_stream_last stays valid until the op is tracked. */
hipError_t krhip_stream_signal(hipStream_t s, hsa_signal_t* out);
/* Takes a kernarg block of at least size bytes (EXECUTABLE kernarg pool); s->mu held. */
hipError_t krhip_stream_kernarg(hipStream_t s, size_t size, void** out, size_t* cap);
/* Records an op as in flight; s->mu held. */
hipError_t krhip_stream_track(hipStream_t s, krhip_inflight op);
/* Retires finished ops, then gives the last op's signal (for ordering) if any; s->mu held. */
bool krhip_stream_last(hipStream_t s, hsa_signal_t* sig, bool* is_copy);
/* Reserves n packet slots (n <= queue size) and returns the first index; s->mu held. */
uint64_t krhip_queue_reserve(hipStream_t s, uint32_t n);
/* Slot of packet index idx in the stream's queue. */
void* krhip_queue_slot(hipStream_t s, uint64_t idx);
/* Publishes a packet's header (makes it valid) with release ordering. */
void krhip_packet_publish(void* slot, uint16_t header, uint16_t setup);
/* Rings the doorbell for packets up to and including idx. */
void krhip_queue_ring(hipStream_t s, uint64_t idx);

/* ---------------------------------------------------------------- modules */

/* A kernel resolved in one device's executable (hipFunction_t). */
struct ihipModuleSymbol_t {
  struct ihipModule_t* module;
  char name[64];
  uint64_t kernel_object;
  uint32_t kernarg_size;
  uint32_t group_size;
  uint32_t private_size;
  const krsim_kernel_args* desc; /* argument layout from the code object, or NULL */
  struct ihipModuleSymbol_t* next;
};

/* One code object loaded into one device's HSA executable (hipModule_t). */
struct ihipModule_t {
  const krsim_code_object* co;
  int device;
  hsa_code_object_reader_t reader;
  hsa_executable_t exec;
  krsim_var_table* var_table; /* device memory: the module's variable addresses */
  pthread_mutex_t mu;
  struct ihipModuleSymbol_t* functions; /* resolved so far */
};

/* Loads co into device's executable. */
hipError_t krhip_module_load(const krsim_code_object* co, int device, hipModule_t* out);
void krhip_module_unload(hipModule_t m);
/* Resolves a kernel of a module by device name. */
hipError_t krhip_module_function(hipModule_t m, const char* name, hipFunction_t* out);
/* Resolves a variable of a module by device name. */
hipError_t krhip_module_global(hipModule_t m, const char* name, void** addr, size_t* size);
/* Resolves a registered host function pointer on a device (-1: the current one). */
hipError_t krhip_registered_function(const void* host_fn, int device, hipFunction_t* out);
/* Resolves a registered host shadow variable on the current device. */
hipError_t krhip_registered_var(const void* shadow, void** addr, size_t* size);

/* ---------------------------------------------------------------- launch */

/* Builds the kernarg bytes (explicit args packed per the kernel's layout, then the hidden
 * variable-table pointer) into buf of f->kernarg_size bytes. */
hipError_t krhip_pack_args(hipFunction_t f, void** args, void** extra, void* buf);
/* Fills a dispatch packet (all but the header) at slot. */
void krhip_fill_dispatch(void* slot, hipFunction_t f, dim3 grid_blocks, dim3 block,
                         uint32_t shmem, void* kernarg, hsa_signal_t completion);
/* Writes a BARRIER_AND packet waiting for dep (no completion signal) at slot. */
void krhip_fill_barrier(void* slot, hsa_signal_t dep);
/* One prepared launch: a resolved kernel, its configuration and its kernarg bytes. */
typedef struct krhip_launch {
  hipFunction_t fn;
  dim3 grid; /* in blocks */
  dim3 block;
  uint32_t shmem;
  const void* kernarg; /* fn->kernarg_size bytes */
} krhip_launch;

/* Submits n launches to s as ONE batch: kernarg copies, n dispatch packets (after a
 * BARRIER_AND when the stream's last op is an unfinished copy), one doorbell. */
hipError_t krhip_submit_batch(hipStream_t s, const krhip_launch* launches, size_t n);

/* ---------------------------------------------------------------- memory */

/* Owner agent and kind of a pointer: 0 unknown (pageable host), 1 host HSA memory, 2 device. */
int krhip_pointer_kind(const void* p, hsa_agent_t* agent);
/* Copies size bytes in stream order; blocking waits for completion. */
hipError_t krhip_copy(void* dst, const void* src, size_t size, hipMemcpyKind kind,
                      hipStream_t stream, bool blocking);

/* Waits for one op's signal while s->mu is held (so nobody recycles it meanwhile). */
hipError_t krhip_wait_signal(hsa_signal_t sig);

/* ---------------------------------------------------------------- events */

struct ihipEvent_t {
  hipStream_t stream; /* stream of the last record, NULL before */
  uint64_t op_target; /* ops_submitted at record */
  uint64_t done_ns;   /* host time at which completion was first observed */
};

uint64_t krhip_now_ns(void);

#endif /* KRSIM_HIP_INTERNAL_H */
