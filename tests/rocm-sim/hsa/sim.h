/* sim.h - internal declarations shared by the simulated HSA runtime's source files. */
#ifndef KRSIM_SIM_H
#define KRSIM_SIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_list.h"
#include "api_table.h"

/* Implementations: sim_<name> for every entry of api_list.h. */
#define CF(r, n, p, a) r sim_##n p;
#define CV(n, p, a) void sim_##n p;
#define AF(r, n, p, a) r sim_##n p;
#define AX(r, n, p, a) r sim_##n p;
KRSIM_API_LIST
#undef CF
#undef CV
#undef AF
#undef AX

#define SIM_MAX_GPUS 16
#define SIM_MAX_POOLS 4
#define SIM_PAGE 4096ull

/* ------------------------------------------------------------------ agents & pools */
typedef struct sim_arena {
  uintptr_t base;
  size_t size;
  pthread_mutex_t mu;
  struct sim_block* blocks; /* used blocks, sorted by offset */
  size_t nblocks, cap;
  size_t hole_hint; /* no hole below this offset */
} sim_arena;

typedef struct sim_block {
  size_t off, len;
} sim_block;

typedef struct sim_pool {
  struct sim_agent* agent;
  sim_arena* arena;
  uint32_t global_flags; /* HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_* */
  bool is_device;        /* GPU-local memory */
  bool is_system;        /* counted by KRSIM_FAIL_HOST_ALLOC_ABOVE */
} sim_pool;

typedef struct sim_agent {
  int index; /* 0 = CPU, 1.. = GPUs */
  bool is_gpu;
  char name[64];
  sim_pool* pools[SIM_MAX_POOLS];
  int npools;
  sim_arena arena; /* GPU: device memory */
} sim_agent;

typedef struct sim_state {
  int ngpus;
  int nagents;
  sim_agent agents[SIM_MAX_GPUS + 1];
  sim_pool pools[SIM_MAX_GPUS + 2];
  int npools;
  sim_arena system_arena;
  int memfd;
  uintptr_t region_base;
  size_t region_size;
} sim_state;

extern sim_state g_sim;

sim_agent* sim_agent_from(hsa_agent_t a);
sim_pool* sim_pool_from(uint64_t handle);
hsa_agent_t sim_agent_handle(const sim_agent* a);
bool sim_is_initialized(void);
void sim_agents_setup(void);
void sim_memory_setup(void);
void sim_memory_teardown(void);

/* ---------------------------------------------------------------------- memory */
enum sim_alloc_kind { SIM_ALLOC_POOL = 1, SIM_ALLOC_LOADER, SIM_ALLOC_VMEM_MAP, SIM_ALLOC_LOCKED };

typedef struct sim_alloc {
  uintptr_t base;
  size_t size;
  int kind;
  sim_agent* owner;
  sim_pool* pool;
  uint32_t alloc_flags;
  uint32_t global_flags;
  bool is_device;
  void* user_data;
  uint64_t host_base; /* SIM_ALLOC_LOCKED: the user's pointer */
} sim_alloc;

void* sim_arena_alloc(sim_arena* ar, size_t size);
bool sim_arena_free(sim_arena* ar, void* p);
int sim_registry_add(const sim_alloc* a);
bool sim_registry_remove(uintptr_t base, sim_alloc* out);
bool sim_registry_find(uintptr_t p, sim_alloc* out);
bool sim_is_device_ptr(const void* p);
void* sim_loader_alloc(sim_agent* agent, size_t size);
void sim_loader_free(void* p);
int sim_vmem_find_reservation(uintptr_t p, uintptr_t* base, size_t* size);

/* ---------------------------------------------------------------------- signals */
#define SIM_SIGNAL_MAGIC 0x4b52534947ull /* "KRSIG" */
typedef struct sim_signal {
  int64_t kind; /* mirrors amd_signal_t: value lives at offset 8 */
  _Atomic int64_t value;
  uint64_t magic;
  _Atomic uint64_t start_ns, end_ns; /* profiling: last dispatch or copy */
  _Atomic uint32_t seq;     /* bumped on every change; futex word for waiters */
  _Atomic uint32_t waiters; /* threads blocked on seq */
  _Atomic uint32_t watched; /* async handlers registered on it */
} sim_signal;

sim_signal* sim_signal_from(hsa_signal_t s);
bool sim_signal_satisfied(int64_t v, hsa_signal_condition_t c, int64_t cmp);
/* Waits until the condition holds or timeout_ns passes; returns the last value seen. */
int64_t sim_signal_wait(sim_signal* s, hsa_signal_condition_t c, int64_t cmp, uint64_t timeout_ns,
                        bool* satisfied);
/* Wakes global waiters (sim_signal_wait_any_change). */
void sim_signal_notify(void);
/* Wakes every global waiter, idle ones too (new work, stopping). */
void sim_signal_kick(void);
/* Waits for new work: a kick, or a change of a signal an async handler watches; at most
 * timeout_ns. A thread with nothing to do waits here, not for every signal change. */
void sim_signal_wait_idle(uint64_t timeout_ns);
/* After changing s->value: wakes s's waiters and the global waiters. */
void sim_signal_changed(sim_signal* s);
/* Subtracts v (release) and wakes waiters. */
void sim_signal_sub(sim_signal* s, int64_t v);
/* Waits until s->seq differs from seq0, at most timeout_ns. */
void sim_signal_wait_seq(sim_signal* s, uint32_t seq0, uint64_t timeout_ns);
void sim_signal_wait_any_change(uint64_t timeout_ns);
void sim_handlers_start(void);
void sim_handlers_stop(void);

/* ---------------------------------------------------------------------- queues */
typedef struct sim_queue sim_queue;
void sim_queue_write_packets(sim_queue* q, const void* pkts, uint64_t count);
sim_queue* sim_queue_from(const hsa_queue_t* q);

/* dispatch engine (dispatch.c) */
typedef struct sim_kernel_desc {
  uint64_t magic;
  krsim_kernel_fn fn;
  uint64_t kernarg_size;
  char name[72];
} sim_kernel_desc;
#define SIM_KERNEL_MAGIC 0x4b524b45524e454cull /* "KRKERNEL" */

/* Launches a kernel dispatch packet on the worker pool; `done` runs after the last workgroup
 * with the times the first workgroup started and the dispatch ended. Returns -1 for a bad
 * kernel object. */
int sim_dispatch_launch(const hsa_kernel_dispatch_packet_t* pkt,
                        void (*done)(void* ctx, uint64_t start_ns, uint64_t end_ns), void* ctx);
void sim_workers_start(void);
void sim_workers_stop(void);

/* copy engine (copy.c) */
void sim_copy_engine_start(void);
void sim_copy_engine_stop(void);

/* ---------------------------------------------------------------------- faults */
typedef struct sim_faults {
  uint64_t fail_d2h_nth, fail_h2d_nth;
  bool fail_symbol_iter;
  uint64_t fail_host_alloc_above; /* 0 = off */
  uint64_t kernel_latency_us, copy_latency_us;
  int gpus, workers;
  bool inline_dispatch; /* KRSIM_INLINE_DISPATCH=1 */
  uint64_t device_mem_mb;
  bool fault_runtime_threads_only; /* KRSIM_FAULT_SCOPE=runtime */
} sim_faults;
extern sim_faults g_faults;
void sim_faults_load(void);
/* Marks the calling thread as one of the runtime's own (queue processors, which run
 * intercept handlers; signal handlers; the copy engine). */
void sim_mark_runtime_thread(void);
/* Counts one copy from src to dst; returns true if it must fail. */
bool sim_fault_copy_should_fail(const void* dst, const void* src);
void sim_sleep_us(uint64_t us);
uint64_t sim_now_ns(void);

/* ---------------------------------------------------------------------- tables */
extern krsim_hsa_api_table g_api;
extern krsim_core_table g_core;
extern krsim_amd_ext_table g_amd;
void sim_tables_reset(void);
void sim_tools_load(void);
void sim_tools_unload(void);

/* executables (executables.c) used by the loader extension (system.c) */
hsa_status_t sim_loader_query_host_address(const void* dev, const void** host);
hsa_status_t sim_loader_iterate_executables(hsa_status_t (*cb)(hsa_executable_t, void*),
                                            void* data);
hsa_status_t sim_loader_query_executable(const void* dev, hsa_executable_t* e);
hsa_status_t sim_loader_iterate_loaded_code_objects(
    hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_loaded_code_object_t, void*),
    void* data);
hsa_status_t sim_loader_loaded_code_object_get_info(hsa_loaded_code_object_t lco, int attr,
                                                    void* value);
void sim_executables_teardown(void);
struct hsa_ven_amd_loader_segment_descriptor_s;
hsa_status_t sim_loader_segment_descriptors(struct hsa_ven_amd_loader_segment_descriptor_s* d,
                                            size_t* n);

#define SIM_CHECK_INIT()                                            \
  do {                                                              \
    if (!sim_is_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED; \
  } while (0)

#endif /* KRSIM_SIM_H */
