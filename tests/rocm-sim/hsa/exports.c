/* exports.c - the HSA API table and the exported entry points that dispatch through it.
 *
 * As in the real runtime, every exported hsa_* / hsa_amd_* function calls the current
 * table entry, so a tool (HSA_TOOLS_LIB) that replaces an entry sees every caller.
 */
#include "sim.h"

#define EXPORT __attribute__((visibility("default")))

krsim_core_table g_core;
krsim_amd_ext_table g_amd;
static krsim_finalizer_ext_table g_fin;
static krsim_image_ext_table g_img;
static krsim_tools_table g_tools;
static krsim_pc_sampling_table g_pcs;
krsim_hsa_api_table g_api;

/* Entries the sim does not implement: a tool may wrap them, callers get an error. Also the
 * target of exports without a table slot (fwd.S). */
hsa_status_t sim_unsupported_entry(void) { return HSA_STATUS_ERROR; }
#define sim_unsupported sim_unsupported_entry

/* The real runtime exports its loader's debugger rendezvous (struct r_debug, 40 bytes). */
EXPORT struct {
  int version;
  void* map;
  uintptr_t brk;
  int state;
  uintptr_t ldbase;
} _amdgpu_r_debug;

static void fill_unsupported(void* table, size_t size) {
  void** slots = (void**)((char*)table + sizeof(krsim_api_table_version));
  size_t n = (size - sizeof(krsim_api_table_version)) / sizeof(void*);
  for (size_t i = 0; i < n; i++)
    if (!slots[i]) slots[i] = (void*)sim_unsupported;
}

static void set_version(krsim_api_table_version* v, uint32_t major, uint32_t size, uint32_t step) {
  v->major_id = major;
  v->minor_id = size;
  v->step_id = step;
  v->reserved = 0;
}

void sim_tables_reset(void) {
  memset(&g_core, 0, sizeof g_core);
  memset(&g_amd, 0, sizeof g_amd);
  memset(&g_fin, 0, sizeof g_fin);
  memset(&g_img, 0, sizeof g_img);
  memset(&g_tools, 0, sizeof g_tools);
  memset(&g_pcs, 0, sizeof g_pcs);
  set_version(&g_core.version, KRSIM_CORE_TABLE_MAJOR, sizeof g_core, 0);
  set_version(&g_amd.version, KRSIM_AMD_EXT_TABLE_MAJOR, sizeof g_amd, KRSIM_AMD_EXT_TABLE_STEP);
  set_version(&g_fin.version, KRSIM_FINALIZER_TABLE_MAJOR, sizeof g_fin, 0);
  set_version(&g_img.version, KRSIM_IMAGE_TABLE_MAJOR, sizeof g_img, 0);
  set_version(&g_tools.version, KRSIM_TOOLS_TABLE_MAJOR, sizeof g_tools, 0);
  set_version(&g_pcs.version, KRSIM_PC_SAMPLING_TABLE_MAJOR, sizeof g_pcs, 0);
#define CF(r, n, p, a) g_core.n##_fn = sim_##n;
#define CV(n, p, a) g_core.n##_fn = sim_##n;
#define AF(r, n, p, a) g_amd.n##_fn = sim_##n;
#define AX(r, n, p, a) g_amd.n##_fn = sim_##n;
  KRSIM_API_LIST
#undef CF
#undef CV
#undef AF
#undef AX
  fill_unsupported(&g_core, sizeof g_core);
  fill_unsupported(&g_amd, sizeof g_amd);
  set_version(&g_api.version, KRSIM_API_TABLE_MAJOR, sizeof g_api, KRSIM_API_TABLE_STEP);
  g_api.core_ = &g_core;
  g_api.amd_ext_ = &g_amd;
  g_api.finalizer_ext_ = &g_fin;
  g_api.image_ext_ = &g_img;
  g_api.tools_ = &g_tools;
  g_api.pc_sampling_ext_ = &g_pcs;
}

__attribute__((constructor)) static void sim_tables_ctor(void) { sim_tables_reset(); }

/* Exported trampolines. */
#define CF(r, n, p, a) \
  EXPORT r n p { return g_core.n##_fn a; }
#define CV(n, p, a) \
  EXPORT void n p { g_core.n##_fn a; }
#define AF(r, n, p, a) \
  EXPORT r n p { return g_amd.n##_fn a; }
#define AX(r, n, p, a)
KRSIM_API_LIST
#undef CF
#undef CV
#undef AF
#undef AX

#define ALIAS_F(r, n, target, p, a) \
  EXPORT r n p { return g_core.target##_fn a; }
#define ALIAS_V(n, target, p, a) \
  EXPORT void n p { g_core.target##_fn a; }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
KRSIM_ALIAS_LIST(ALIAS_F, ALIAS_V)
#pragma GCC diagnostic pop
