/* hip_launch.c - kernel launches: argument packing into EXECUTABLE kernarg memory, dispatch
 * packets (one per launch, barrier bit set for in-order streams) with completion signals,
 * and the launch entry points (hipLaunchKernel, hipModuleLaunchKernel, hipExtLaunchKernel,
 * the <<<>>> call-configuration stack). */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

hipError_t krhip_pack_args(hipFunction_t f, void** args, void** extra, void* buf) {
  const krsim_kernel_args* desc = f->desc;
  size_t cap = f->kernarg_size;
  memset(buf, 0, cap);
  size_t explicit_cap = desc && desc->hidden_offset != KRSIM_NO_HIDDEN ? desc->hidden_offset : cap;
  if (explicit_cap > cap) explicit_cap = cap;
  if (extra) {
    const void* ptr = NULL;
    size_t size = 0;
    for (size_t i = 0; extra[i] != HIP_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_POINTER) ptr = extra[i + 1];
      else if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_SIZE) size = *(const size_t*)extra[i + 1];
      else return hipErrorInvalidValue;
    }
    if (size > 0 && !ptr) return hipErrorInvalidValue;
    if (size > explicit_cap) return hipErrorInvalidValue;
    if (size) memcpy(buf, ptr, size);
  } else if (desc) {
    if (desc->count > 0 && !args) return hipErrorInvalidValue;
    for (uint32_t i = 0; i < desc->count; i++) {
      const krsim_arg* a = &desc->args[i];
      if ((size_t)a->offset + a->size > explicit_cap || !args[i]) return hipErrorInvalidValue;
      memcpy((char*)buf + a->offset, args[i], a->size);
    }
  } else {
    /* No layout in the code object: kernarg_size / 8 arguments of 8 bytes each. */
    size_t n = cap / 8;
    if (n > 0 && !args) return hipErrorInvalidValue;
    for (size_t i = 0; i < n; i++) memcpy((char*)buf + 8 * i, args[i], 8);
  }
  if (desc && desc->hidden_offset != KRSIM_NO_HIDDEN && (size_t)desc->hidden_offset + 8 <= cap) {
    const krsim_var_table* vt = f->module->var_table;
    memcpy((char*)buf + desc->hidden_offset, &vt, sizeof(vt));
  }
  return hipSuccess;
}

static uint16_t dims_of(dim3 grid, dim3 block) {
  if (grid.z > 1 || block.z > 1) return 3;
  if (grid.y > 1 || block.y > 1) return 2;
  return 1;
}

void krhip_fill_dispatch(void* slot, hipFunction_t f, dim3 grid, dim3 block, uint32_t shmem,
                         void* kernarg, hsa_signal_t completion) {
  hsa_kernel_dispatch_packet_t* p = slot;
  /* Everything but the first 32 bits (header + setup), which publishing writes last. */
  p->workgroup_size_x = (uint16_t)block.x;
  p->workgroup_size_y = (uint16_t)block.y;
  p->workgroup_size_z = (uint16_t)block.z;
  p->reserved0 = 0;
  p->grid_size_x = grid.x * block.x;
  p->grid_size_y = grid.y * block.y;
  p->grid_size_z = grid.z * block.z;
  p->private_segment_size = f->private_size;
  p->group_segment_size = f->group_size + shmem;
  p->kernel_object = f->kernel_object;
  p->kernarg_address = kernarg;
  p->reserved2 = 0;
  p->completion_signal = completion;
}

void krhip_fill_barrier(void* slot, hsa_signal_t dep) {
  hsa_barrier_and_packet_t* p = slot;
  p->reserved0 = 0;
  p->dep_signal[0] = dep;
  for (int i = 1; i < 5; i++) p->dep_signal[i].handle = 0;
  p->reserved2 = 0;
  p->completion_signal.handle = 0;
}

static hipError_t check_config(dim3 grid, dim3 block) {
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
    return hipErrorInvalidConfiguration;
  if ((uint64_t)block.x * block.y * block.z > 1024) return hipErrorInvalidConfiguration;
  if ((uint64_t)grid.x * block.x > UINT32_MAX || (uint64_t)grid.y * block.y > UINT32_MAX ||
      (uint64_t)grid.z * block.z > UINT32_MAX)
    return hipErrorInvalidConfiguration;
  return hipSuccess;
}

hipError_t krhip_submit_batch(hipStream_t s, const krhip_launch* launches, size_t n) {
  if (n == 0) return hipSuccess;
  if (n + 1 > s->queue->size) return hipErrorInvalidValue;
  hipError_t oe = krhip_stream_order(s);
  if (oe != hipSuccess) return oe;
  pthread_mutex_lock(&s->mu);
  hsa_signal_t dep;
  bool dep_is_copy = false;
  bool need_barrier = krhip_stream_last(s, &dep, &dep_is_copy) && dep_is_copy;
  krhip_inflight* ops = calloc(n, sizeof(*ops));
  hipError_t e = ops ? hipSuccess : hipErrorOutOfMemory;
  size_t prepared = 0;
  for (; e == hipSuccess && prepared < n; prepared++) {
    const krhip_launch* l = &launches[prepared];
    krhip_inflight* op = &ops[prepared];
    e = krhip_stream_kernarg(s, l->fn->kernarg_size ? l->fn->kernarg_size : 8, &op->kernarg,
                             &op->kernarg_cap);
    if (e != hipSuccess) break;
    memcpy(op->kernarg, l->kernarg, l->fn->kernarg_size);
    e = krhip_stream_signal(s, &op->signal);
    if (e != hipSuccess) {
      hsa_amd_memory_pool_free(op->kernarg);
      break;
    }
  }
  if (e != hipSuccess) {
    for (size_t i = 0; i < prepared; i++) {
      hsa_amd_memory_pool_free(ops[i].kernarg);
      hsa_signal_destroy(ops[i].signal);
    }
    free(ops);
    pthread_mutex_unlock(&s->mu);
    return e;
  }
  uint32_t total = (uint32_t)n + (need_barrier ? 1u : 0u);
  uint64_t idx = krhip_queue_reserve(s, total);
  uint64_t at = idx;
  void* barrier_slot = NULL;
  if (need_barrier) {
    barrier_slot = krhip_queue_slot(s, at++);
    krhip_fill_barrier(barrier_slot, dep);
  }
  for (size_t i = 0; i < n; i++) {
    const krhip_launch* l = &launches[i];
    krhip_fill_dispatch(krhip_queue_slot(s, at + i), l->fn, l->grid, l->block, l->shmem,
                        ops[i].kernarg, ops[i].signal);
  }
  if (barrier_slot)
    krhip_packet_publish(barrier_slot, (uint16_t)(HSA_PACKET_TYPE_BARRIER_AND | KRHIP_FENCES), 0);
  for (size_t i = 0; i < n; i++) {
    uint16_t dims = dims_of(launches[i].grid, launches[i].block);
    krhip_packet_publish(krhip_queue_slot(s, at + i),
                         (uint16_t)(HSA_PACKET_TYPE_KERNEL_DISPATCH | KRHIP_FENCES),
                         (uint16_t)(dims << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS));
  }
  krhip_queue_ring(s, idx + total - 1);
  for (size_t i = 0; i < n && e == hipSuccess; i++) e = krhip_stream_track(s, ops[i]);
  pthread_mutex_unlock(&s->mu);
  free(ops);
  return e;
}

/* Packs and submits one launch of f. */
static hipError_t launch(hipFunction_t f, dim3 grid, dim3 block, void** args, void** extra,
                         size_t shmem, hipStream_t stream) {
  hipError_t e = check_config(grid, block);
  if (e != hipSuccess) return e;
  hipStream_t s;
  e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return e;
  unsigned char local[1024];
  void* buf = f->kernarg_size <= sizeof(local) ? local : malloc(f->kernarg_size);
  if (!buf) return hipErrorOutOfMemory;
  e = krhip_pack_args(f, args, extra, buf);
  if (e == hipSuccess) {
    krhip_launch l = {.fn = f, .grid = grid, .block = block, .shmem = (uint32_t)shmem,
                      .kernarg = buf};
    e = krhip_submit_batch(s, &l, 1);
  }
  if (buf != local) free(buf);
  return e;
}

/* The registered kernel for a launch on `stream`: resolved on the stream's device. */
static hipError_t stream_function(const void* host_fn, hipStream_t stream, hipFunction_t* f) {
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return e;
  return krhip_registered_function(host_fn, s->device, f);
}

HIP_EXPORT hipError_t hipLaunchKernel(const void* function_address, dim3 numBlocks,
                                      dim3 dimBlocks, void** args, size_t sharedMemBytes,
                                      hipStream_t stream) {
  hipFunction_t f;
  hipError_t e = stream_function(function_address, stream, &f);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(launch(f, numBlocks, dimBlocks, args, NULL, sharedMemBytes, stream));
}

/* Cooperative launches need every workgroup resident at once; the sim's workers interleave
 * workgroups freely, so grid-wide barriers are not available: launched like any kernel. */
HIP_EXPORT hipError_t hipLaunchCooperativeKernel(const void* f, dim3 gridDim, dim3 blockDimX,
                                                 void** kernelParams, unsigned int sharedMemBytes,
                                                 hipStream_t stream) {
  return hipLaunchKernel(f, gridDim, blockDimX, kernelParams, sharedMemBytes, stream);
}

HIP_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX,
                                            unsigned int gridDimY, unsigned int gridDimZ,
                                            unsigned int blockDimX, unsigned int blockDimY,
                                            unsigned int blockDimZ, unsigned int sharedMemBytes,
                                            hipStream_t stream, void** kernelParams,
                                            void** extra) {
  if (!f) return krhip_ret(hipErrorInvalidResourceHandle);
  if (kernelParams && extra) return krhip_ret(hipErrorInvalidValue);
  dim3 grid = {gridDimX, gridDimY, gridDimZ};
  dim3 block = {blockDimX, blockDimY, blockDimZ};
  return krhip_ret(launch(f, grid, block, kernelParams, extra, sharedMemBytes, stream));
}

HIP_EXPORT hipError_t hipExtLaunchKernel(const void* function_address, dim3 numBlocks,
                                         dim3 dimBlocks, void** args, size_t sharedMemBytes,
                                         hipStream_t stream, hipEvent_t startEvent,
                                         hipEvent_t stopEvent, int flags) {
  (void)flags;
  hipFunction_t f;
  hipError_t e = stream_function(function_address, stream, &f);
  if (e != hipSuccess) return krhip_ret(e);
  if (startEvent && (e = hipEventRecord(startEvent, stream)) != hipSuccess) return krhip_ret(e);
  e = launch(f, numBlocks, dimBlocks, args, NULL, sharedMemBytes, stream);
  if (e != hipSuccess) return krhip_ret(e);
  if (stopEvent && (e = hipEventRecord(stopEvent, stream)) != hipSuccess) return krhip_ret(e);
  return hipSuccess;
}

/* ------------------------------------------------- <<<>>> call configuration (per thread) */

typedef struct call_config {
  dim3 grid, block;
  size_t shmem;
  hipStream_t stream;
} call_config;

static __thread call_config config_stack[8];
static __thread int config_depth;

HIP_EXPORT hipError_t __hipPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                 hipStream_t stream) {
  if (config_depth >= 8) return krhip_ret(hipErrorInvalidConfiguration);
  config_stack[config_depth++] = (call_config){gridDim, blockDim, sharedMem, stream};
  return hipSuccess;
}

HIP_EXPORT hipError_t __hipPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                hipStream_t* stream) {
  if (config_depth <= 0) return krhip_ret(hipErrorMissingConfiguration);
  call_config c = config_stack[--config_depth];
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shmem;
  *stream = c.stream;
  return hipSuccess;
}
