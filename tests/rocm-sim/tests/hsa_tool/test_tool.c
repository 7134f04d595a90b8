/* test_tool.c - a tiny HSA_TOOLS_LIB tool for hsa_tools: wraps hsa_amd_memory_pool_allocate
 * (counts calls), turns every hsa_queue_create into an intercept queue whose handler counts
 * packets and forwards them, and reports at OnUnload into $KRSIM_TEST_TOOL_OUT.
 * Built with -DREFUSE it is a tool whose OnLoad returns false. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_table.h"

#define EXPORT __attribute__((visibility("default")))

static krsim_hsa_api_table* g_table;
static __typeof__(hsa_amd_memory_pool_allocate)* next_allocate;
static int g_allocs, g_packets, g_versions_ok, g_index_gaps;
static uint64_t g_next_index, g_runtime_version;
static unsigned long long g_failed_count;
static char g_failed_name[256];

EXPORT int test_tool_allocs(void) { return __atomic_load_n(&g_allocs, __ATOMIC_SEQ_CST); }
EXPORT int test_tool_packets(void) { return __atomic_load_n(&g_packets, __ATOMIC_SEQ_CST); }

static hsa_status_t my_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags, void** ptr) {
  __atomic_fetch_add(&g_allocs, 1, __ATOMIC_SEQ_CST);
  return next_allocate(pool, size, flags, ptr);
}

static void count_and_forward(const void* pkts, uint64_t count, uint64_t user_index, void* data,
                              krsim_queue_intercept_writer writer) {
  (void)data;
  /* Batches arrive in order; user_pkt_index is the application ring index of pkts[0]. */
  if (user_index != g_next_index) g_index_gaps++;
  g_next_index = user_index + count;
  __atomic_fetch_add(&g_packets, (int)count, __ATOMIC_SEQ_CST);
  writer(pkts, count);
}

static hsa_status_t my_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                    void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                    uint32_t ps, uint32_t gs, hsa_queue_t** q) {
  hsa_status_t st = g_table->amd_ext_->hsa_amd_queue_intercept_create_fn(agent, size, type, cb,
                                                                         data, ps, gs, q);
  if (st != HSA_STATUS_SUCCESS) return st;
  return g_table->amd_ext_->hsa_amd_queue_intercept_register_fn(*q, count_and_forward, NULL);
}

EXPORT bool OnLoad(void* table, uint64_t runtime_version, uint64_t failed_tool_count,
                   const char* const* failed_tool_names) {
  g_runtime_version = runtime_version;
#ifdef REFUSE
  (void)table, (void)failed_tool_count, (void)failed_tool_names;
  return false;
#else
  g_table = table;
  g_failed_count = failed_tool_count;
  if (failed_tool_count) snprintf(g_failed_name, sizeof g_failed_name, "%s", failed_tool_names[0]);
  g_versions_ok = g_table->version.minor_id == sizeof(krsim_hsa_api_table) &&
                  g_table->core_->version.minor_id == sizeof(krsim_core_table) &&
                  g_table->amd_ext_->version.minor_id == sizeof(krsim_amd_ext_table) &&
                  g_table->amd_ext_->version.major_id == 2 &&
                  g_table->tools_->version.minor_id == sizeof(krsim_tools_table);
  next_allocate = g_table->amd_ext_->hsa_amd_memory_pool_allocate_fn;
  g_table->amd_ext_->hsa_amd_memory_pool_allocate_fn = my_allocate;
  g_table->core_->hsa_queue_create_fn = my_queue_create;
  return true;
#endif
}

EXPORT void OnUnload(void) {
  const char* path = getenv("KRSIM_TEST_TOOL_OUT");
  if (!path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  const char* slash = strrchr(g_failed_name, '/');
  fprintf(f, "rtv=%llu allocs=%d packets=%d next_index=%llu gaps=%d versions_ok=%d failed=%llu failed_name=%s\n",
          (unsigned long long)g_runtime_version, g_allocs, g_packets, (unsigned long long)g_next_index, g_index_gaps, g_versions_ok,
          g_failed_count, slash ? slash + 1 : g_failed_name);
  fclose(f);
}
