/* hsa_executables: code objects with mutable and constant variables and kernels; symbol
 * iteration and info; variables live in device memory (not via the pool allocate API);
 * a kernel updates a variable; the AMD loader extension enumerates executables. */
#include <hsa/hsa_ven_amd_loader.h>

#include "hsa_test_util.h"

/* Kernel: counter += 1 per workgroup, out[g] = table[g] * scale. */
typedef struct { int* counter; const int* table; int* out; int scale; } k_args;
void __krsim_kernel_scale(const krsim_dispatch* d, void* kernarg) {
  k_args* a = kernarg;
  uint32_t g = d->group_id[0];
  __atomic_fetch_add(a->counter, 1, __ATOMIC_SEQ_CST);
  a->out[g] = a->table[g] * a->scale;
}

static const int table_init[4] = {1, 2, 3, 4};
static struct { krsim_code_object h; krsim_co_entry e[3]; } co = {
    .h = {.magic = KRSIM_CO_MAGIC, .version = 1, .count = 3},
    .e = {{.kind = 0, .flags = 0, .size = 4, .name = "counter", .init = NULL},
          {.kind = 0, .flags = 1, .size = sizeof table_init, .name = "table", .init = table_init},
          {.kind = 1, .flags = 0, .size = sizeof(k_args), .name = "scale", .init = NULL}}};

typedef struct { int n, vars, kernels, consts; uint64_t counter_addr; hsa_agent_t agent; } seen_t;
static hsa_status_t on_symbol(hsa_executable_t e, hsa_agent_t a, hsa_executable_symbol_t s, void* d) {
  (void)e;
  seen_t* v = d;
  CHECK_EQ(a.handle, v->agent.handle);
  hsa_symbol_kind_t kind;
  uint32_t len = 0;
  char name[80] = {0};
  CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind));
  CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &len));
  CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_NAME, name));
  CHECK_EQ(strlen(name), len);
  v->n++;
  if (kind == HSA_SYMBOL_KIND_VARIABLE) {
    v->vars++;
    bool is_const = false;
    uint32_t size = 0;
    hsa_variable_segment_t seg;
    uint64_t addr = 0;
    CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST, &is_const));
    CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size));
    CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT, &seg));
    CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &addr));
    if (strcmp(name, "counter") == 0) {
      CHECK(!is_const);
      CHECK_EQ(size, 4);
      CHECK_EQ(seg, HSA_VARIABLE_SEGMENT_GLOBAL);
      CHECK_EQ(*(int*)addr, 0);
      v->counter_addr = addr;
    } else {
      CHECK(strcmp(name, "table") == 0);
      CHECK(is_const);
      v->consts++;
      CHECK_EQ(size, 16);
      CHECK_EQ(seg, HSA_VARIABLE_SEGMENT_READONLY);
      CHECK(memcmp((void*)addr, table_init, 16) == 0);
    }
    /* Device memory of this agent, classified as a runtime allocation. */
    hsa_amd_pointer_info_t pi;
    pi.size = sizeof pi;
    CHECK_OK(hsa_amd_pointer_info((void*)addr, &pi, NULL, NULL, NULL));
    CHECK_EQ(pi.type, HSA_EXT_POINTER_TYPE_HSA);
    CHECK_EQ(pi.agentOwner.handle, a.handle);
    CHECK_EQ(pi.global_flags, COARSE);
  } else {
    CHECK_EQ(kind, HSA_SYMBOL_KIND_KERNEL);
    CHECK(strcmp(name, "scale.kd") == 0);
    uint32_t ks = 0;
    CHECK_OK(hsa_executable_symbol_get_info(s, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &ks));
    CHECK_EQ(ks, sizeof(k_args));
    v->kernels++;
  }
  return HSA_STATUS_SUCCESS;
}

static int g_execs;
static hsa_status_t count_exec(hsa_executable_t e, void* d) {
  if (e.handle == ((hsa_executable_t*)d)->handle) g_execs++;
  return HSA_STATUS_SUCCESS;
}

int main(void) {
  setenv("KRSIM_WORKERS", "3", 1);
  CHECK_OK(hsa_init());
  agents_t ag = get_agents();
  hsa_executable_t e = load_co(&co.h, sizeof co, ag.gpu[0]);
  seen_t seen = {0};
  seen.agent = ag.gpu[0];
  CHECK_OK(hsa_executable_iterate_agent_symbols(e, ag.gpu[0], on_symbol, &seen));
  CHECK_EQ(seen.n, 3);
  CHECK_EQ(seen.vars, 2);
  CHECK_EQ(seen.consts, 1);
  CHECK_EQ(seen.kernels, 1);
  hsa_executable_symbol_t sym;
  CHECK_EQ(hsa_executable_get_symbol_by_name(e, "nope", &ag.gpu[0], &sym), HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
  CHECK_OK(hsa_executable_get_symbol_by_name(e, "counter", &ag.gpu[0], &sym));
  uint64_t addr = 0, taddr = 0;
  CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &addr));
  CHECK_EQ(addr, seen.counter_addr);
  CHECK_OK(hsa_executable_get_symbol_by_name(e, "table", &ag.gpu[0], &sym));
  CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &taddr));
  CHECK_EQ(kernel_object(e, "scale.kd", ag.gpu[0]), kernel_object(e, "scale", ag.gpu[0]));

  /* Run the kernel: 4 workgroups, counter bumped 4 times per launch, twice. */
  hsa_queue_t* q;
  CHECK_OK(hsa_queue_create(ag.gpu[0], 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q));
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE);
  int* out = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, 16, 0, (void**)&out));
  k_args args = {(int*)addr, (const int*)taddr, out, 10};
  hsa_signal_t done;
  CHECK_OK(hsa_signal_create(2, 0, NULL, &done));
  uint64_t ko = kernel_object(e, "scale", ag.gpu[0]);
  dispatch_kernel(q, ko, &args, 256, 64, 1, done);
  dispatch_kernel(q, ko, &args, 256, 64, 1, done);
  CHECK_EQ(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(*(int*)addr, 8);
  for (int i = 0; i < 4; i++) CHECK_EQ(out[i], (i + 1) * 10);

  /* Loader extension: the executable is enumerable; loader memory maps to itself. */
  hsa_ven_amd_loader_1_03_pfn_t lt;
  memset(&lt, 0, sizeof lt);
  CHECK_OK(hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, sizeof lt, &lt));
  CHECK(lt.hsa_ven_amd_loader_iterate_executables && lt.hsa_ven_amd_loader_query_host_address);
  CHECK_OK(lt.hsa_ven_amd_loader_iterate_executables(count_exec, &e));
  CHECK_EQ(g_execs, 1);
  const void* host = NULL;
  CHECK_OK(lt.hsa_ven_amd_loader_query_host_address((void*)addr, &host));
  CHECK(host == (void*)addr);
  hsa_executable_t owner;
  CHECK_OK(lt.hsa_ven_amd_loader_query_executable((void*)taddr, &owner));
  CHECK_EQ(owner.handle, e.handle);
  /* Kernel descriptors live in the agent's device memory (the code segment). */
  CHECK_EQ(ko, kernel_object(e, "scale", ag.gpu[0]));
  CHECK_OK(lt.hsa_ven_amd_loader_query_host_address((void*)ko, &host));
  CHECK(host == (void*)ko);
  CHECK_OK(lt.hsa_ven_amd_loader_query_executable((void*)ko, &owner));
  CHECK_EQ(owner.handle, e.handle);
  hsa_amd_pointer_info_t kpi;
  kpi.size = sizeof kpi;
  CHECK_OK(hsa_amd_pointer_info((void*)ko, &kpi, NULL, NULL, NULL));
  CHECK_EQ(kpi.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(kpi.agentOwner.handle, ag.gpu[0].handle);
  CHECK(kpi.agentBaseAddress == (void*)ko); /* one kernel: it starts the segment */
  size_t nseg = 0;
  CHECK_OK(lt.hsa_ven_amd_loader_query_segment_descriptors(NULL, &nseg));
  CHECK_EQ(nseg, 1);
  hsa_ven_amd_loader_segment_descriptor_t seg;
  CHECK_OK(lt.hsa_ven_amd_loader_query_segment_descriptors(&seg, &nseg));
  CHECK(seg.segment_base == (void*)ko);
  CHECK_EQ(seg.segment_size, 128);
  CHECK_EQ(seg.executable.handle, e.handle);
  CHECK_EQ(seg.agent.handle, ag.gpu[0].handle);
  CHECK(seg.code_object_storage_base == &co);
  bool supported = false;
  CHECK_OK(hsa_system_extension_supported(HSA_EXTENSION_AMD_LOADER, 1, 1, &supported));
  CHECK(supported);

  /* Frozen executables refuse new code objects; bad magic is rejected. */
  hsa_code_object_reader_t r;
  char bad[64] = "NOTACO";
  CHECK_EQ(hsa_code_object_reader_create_from_memory(bad, sizeof bad, &r), HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  CHECK_OK(hsa_code_object_reader_create_from_memory(&co, sizeof co, &r));
  CHECK_EQ(hsa_executable_load_agent_code_object(e, ag.gpu[0], r, NULL, NULL), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_OK(hsa_code_object_reader_destroy(r));
  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_amd_memory_pool_free(out));
  CHECK_OK(hsa_executable_destroy(e));
  hsa_amd_pointer_info_t pi;
  pi.size = sizeof pi;
  CHECK_OK(hsa_amd_pointer_info((void*)addr, &pi, NULL, NULL, NULL));
  CHECK_EQ(pi.type, HSA_EXT_POINTER_TYPE_UNKNOWN); /* loader memory released */
  CHECK_OK(hsa_signal_destroy(done));
  CHECK_OK(hsa_shut_down());
  printf("hsa_executables: PASS\n");
  return 0;
}
