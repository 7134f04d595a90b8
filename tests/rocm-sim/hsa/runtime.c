/* runtime.c - hsa_init/hsa_shut_down (refcounted) and HSA_TOOLS_LIB loading. */
#include <dlfcn.h>

#include "sim.h"

static pthread_mutex_t g_init_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static _Atomic int g_refcount;

typedef bool (*tool_onload_fn)(void* table, uint64_t runtime_version, uint64_t failed_tool_count,
                               const char* const* failed_tool_names);
typedef void (*tool_onunload_fn)(void);

#define MAX_TOOLS 16
static void* g_tool_handles[MAX_TOOLS];
static int g_ntools;

bool sim_is_initialized(void) { return atomic_load(&g_refcount) > 0; }

void sim_tools_load(void) {
  const char* libs = getenv("HSA_TOOLS_LIB");
  if (!libs || !*libs) return;
  char* copy = strdup(libs);
  if (!copy) return;
  const char* failed[MAX_TOOLS];
  uint64_t nfailed = 0;
  char* save = NULL;
  for (char* name = strtok_r(copy, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
    if (g_ntools >= MAX_TOOLS) break;
    void* h = dlopen(name, RTLD_NOW);
    if (!h) {
      fprintf(stderr, "krsim: HSA_TOOLS_LIB: cannot load %s: %s\n", name, dlerror());
      if (nfailed < MAX_TOOLS) failed[nfailed++] = strdup(name);
      continue;
    }
    tool_onload_fn onload = (tool_onload_fn)dlsym(h, "OnLoad");
    /* As ROCR: no OnLoad, or OnLoad returning false, counts as failed and unloads. The
     * runtime_version argument is the root table's major version. */
    if (!onload || !onload(&g_api, g_api.version.major_id, nfailed, failed)) {
      if (nfailed < MAX_TOOLS) failed[nfailed++] = strdup(name);
      dlclose(h);
      continue;
    }
    g_tool_handles[g_ntools++] = h;
  }
  for (uint64_t i = 0; i < nfailed; i++) free((void*)failed[i]);
  free(copy);
}

void sim_tools_unload(void) {
  for (int i = g_ntools - 1; i >= 0; i--) {
    tool_onunload_fn onunload = (tool_onunload_fn)dlsym(g_tool_handles[i], "OnUnload");
    if (onunload) onunload();
  }
  for (int i = g_ntools - 1; i >= 0; i--) dlclose(g_tool_handles[i]);
  g_ntools = 0;
  sim_tables_reset();
}

hsa_status_t sim_hsa_init(void) {
  pthread_mutex_lock(&g_init_mu);
  if (atomic_fetch_add(&g_refcount, 1) == 0) {
    sim_faults_load();
    sim_memory_setup();
    sim_agents_setup();
    sim_handlers_start();
    sim_workers_start();
    sim_copy_engine_start();
    sim_tools_load();
  }
  pthread_mutex_unlock(&g_init_mu);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_shut_down(void) {
  pthread_mutex_lock(&g_init_mu);
  int rc = atomic_load(&g_refcount);
  if (rc == 0) {
    pthread_mutex_unlock(&g_init_mu);
    return HSA_STATUS_ERROR_NOT_INITIALIZED;
  }
  if (rc == 1) {
    sim_tools_unload();
    sim_copy_engine_stop();
    sim_workers_stop();
    sim_handlers_stop();
    sim_executables_teardown();
    sim_memory_teardown();
  }
  atomic_fetch_sub(&g_refcount, 1);
  pthread_mutex_unlock(&g_init_mu);
  return HSA_STATUS_SUCCESS;
}
