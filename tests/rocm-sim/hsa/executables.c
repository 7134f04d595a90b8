/* executables.c - code object readers (sim format, krsim.h), executables, symbols, and the
 * AMD loader extension's view of them. */
#include <dlfcn.h>

#include <hsa/hsa_ven_amd_loader.h>

#include "sim.h"

#define EXEC_MAGIC 0x4b5245584543ull
#define SYM_MAGIC 0x4b5253594dull
#define READER_MAGIC 0x4b52524541ull
#define LCO_MAGIC 0x4b524c434full

typedef struct sim_reader {
  uint64_t magic;
  const krsim_code_object* co;
  size_t size;
} sim_reader;

typedef struct sim_symbol {
  uint64_t magic;
  struct sim_exec* exec;
  sim_agent* agent;
  uint32_t kind; /* HSA_SYMBOL_KIND_* */
  char name[80];  /* kernels: "<name>.kd" */
  uint64_t address; /* variable address or kernel object */
  uint64_t size;    /* variable bytes or kernarg bytes */
  bool is_const;
  struct sim_symbol* next;
} sim_symbol;

typedef struct sim_lco {
  uint64_t magic;
  struct sim_exec* exec;
  sim_agent* agent;
  const void* storage;
  size_t storage_size;
  void* code;       /* code segment in device memory: the kernel descriptors */
  size_t code_size;
  struct sim_lco* next;
} sim_lco;

typedef struct sim_exec {
  uint64_t magic;
  hsa_executable_state_t state;
  hsa_profile_t profile;
  sim_symbol* symbols; /* in load order */
  sim_symbol** tail;
  sim_lco* lcos;
  struct sim_exec* next;
} sim_exec;

static pthread_mutex_t g_x_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_exec* g_execs;

static sim_exec* exec_from(hsa_executable_t e) {
  sim_exec* x = (sim_exec*)(uintptr_t)e.handle;
  return x && x->magic == EXEC_MAGIC ? x : NULL;
}
static sim_symbol* sym_from(hsa_executable_symbol_t s) {
  sim_symbol* y = (sim_symbol*)(uintptr_t)s.handle;
  return y && y->magic == SYM_MAGIC ? y : NULL;
}
static hsa_executable_t exec_handle(sim_exec* x) {
  hsa_executable_t h = {(uint64_t)(uintptr_t)x};
  return h;
}
static hsa_executable_symbol_t sym_handle(sim_symbol* y) {
  hsa_executable_symbol_t h = {(uint64_t)(uintptr_t)y};
  return h;
}

/* ------------------------------------------------------------------------ readers */

hsa_status_t sim_hsa_code_object_reader_create_from_memory(const void* co, size_t size,
                                                           hsa_code_object_reader_t* out) {
  SIM_CHECK_INIT();
  if (!co || !out || size < sizeof(krsim_code_object)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const krsim_code_object* c = co;
  if (memcmp(c->magic, KRSIM_CO_MAGIC, 8) != 0 || c->version != KRSIM_CO_VERSION ||
      size < sizeof(krsim_code_object) + (size_t)c->count * sizeof(krsim_co_entry))
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  sim_reader* r = calloc(1, sizeof *r);
  if (!r) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  r->magic = READER_MAGIC;
  r->co = c;
  r->size = size;
  out->handle = (uint64_t)(uintptr_t)r;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_code_object_reader_destroy(hsa_code_object_reader_t rh) {
  SIM_CHECK_INIT();
  sim_reader* r = (sim_reader*)(uintptr_t)rh.handle;
  if (!r || r->magic != READER_MAGIC) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  r->magic = 0;
  free(r);
  return HSA_STATUS_SUCCESS;
}

/* -------------------------------------------------------------------- executables */

static hsa_status_t exec_create(hsa_profile_t profile, hsa_executable_t* out) {
  SIM_CHECK_INIT();
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_exec* x = calloc(1, sizeof *x);
  if (!x) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  x->magic = EXEC_MAGIC;
  x->state = HSA_EXECUTABLE_STATE_UNFROZEN;
  x->profile = profile;
  x->tail = &x->symbols;
  pthread_mutex_lock(&g_x_mu);
  x->next = g_execs;
  g_execs = x;
  pthread_mutex_unlock(&g_x_mu);
  *out = exec_handle(x);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_create_alt(hsa_profile_t p, hsa_default_float_rounding_mode_t m,
                                           const char* o, hsa_executable_t* out) {
  (void)m, (void)o;
  return exec_create(p, out);
}

hsa_status_t sim_hsa_executable_create(hsa_profile_t p, hsa_executable_state_t st, const char* o,
                                       hsa_executable_t* out) {
  (void)o;
  hsa_status_t s = exec_create(p, out);
  if (s == HSA_STATUS_SUCCESS && st == HSA_EXECUTABLE_STATE_FROZEN) exec_from(*out)->state = st;
  return s;
}

static void exec_free(sim_exec* x) {
  for (sim_symbol* y = x->symbols; y;) {
    sim_symbol* n = y->next;
    if (y->kind == HSA_SYMBOL_KIND_VARIABLE) sim_loader_free((void*)(uintptr_t)y->address);
    y->magic = 0;
    free(y);
    y = n;
  }
  for (sim_lco* l = x->lcos; l;) {
    sim_lco* n = l->next;
    if (l->code) sim_loader_free(l->code);
    l->magic = 0;
    free(l);
    l = n;
  }
  x->magic = 0;
  free(x);
}

hsa_status_t sim_hsa_executable_destroy(hsa_executable_t e) {
  SIM_CHECK_INIT();
  pthread_mutex_lock(&g_x_mu);
  sim_exec** pp = &g_execs;
  while (*pp && *pp != exec_from(e)) pp = &(*pp)->next;
  sim_exec* x = *pp;
  if (x) *pp = x->next;
  pthread_mutex_unlock(&g_x_mu);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  exec_free(x);
  return HSA_STATUS_SUCCESS;
}

void sim_executables_teardown(void) {
  pthread_mutex_lock(&g_x_mu);
  sim_exec* x = g_execs;
  g_execs = NULL;
  pthread_mutex_unlock(&g_x_mu);
  while (x) {
    sim_exec* n = x->next;
    exec_free(x);
    x = n;
  }
}

#define KD_SIZE 128 /* bytes per kernel descriptor in the code segment */
_Static_assert(sizeof(sim_kernel_desc) <= KD_SIZE, "kernel descriptor too large");

static sim_symbol* load_entry(sim_exec* x, sim_agent* ag, const krsim_co_entry* en,
                              sim_kernel_desc* kd, hsa_status_t* st) {
  sim_symbol* y = calloc(1, sizeof *y);
  if (!y) {
    *st = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    return NULL;
  }
  y->magic = SYM_MAGIC;
  y->exec = x;
  y->agent = ag;
  y->size = en->size;
  char name[65];
  memcpy(name, en->name, 64);
  name[64] = 0;
  if (en->kind == KRSIM_CO_KIND_VARIABLE) {
    y->kind = HSA_SYMBOL_KIND_VARIABLE;
    y->is_const = (en->flags & KRSIM_CO_FLAG_CONSTANT) != 0;
    snprintf(y->name, sizeof y->name, "%s", name);
    void* mem = sim_loader_alloc(ag, en->size);
    if (!mem) {
      free(y);
      *st = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
      return NULL;
    }
    if (en->init) memcpy(mem, en->init, en->size);
    else memset(mem, 0, en->size);
    y->address = (uint64_t)(uintptr_t)mem;
  } else if (en->kind == KRSIM_CO_KIND_KERNEL) {
    y->kind = HSA_SYMBOL_KIND_KERNEL;
    snprintf(y->name, sizeof y->name, "%s.kd", name);
    char fn_name[96];
    snprintf(fn_name, sizeof fn_name, KRSIM_KERNEL_PREFIX "%s", name);
    void* fn = dlsym(RTLD_DEFAULT, fn_name);
    if (!fn) {
      fprintf(stderr, "krsim: kernel %s: %s not found (link the application with -rdynamic)\n",
              name, fn_name);
      free(y);
      *st = HSA_STATUS_ERROR_VARIABLE_UNDEFINED;
      return NULL;
    }
    memset(kd, 0, KD_SIZE);
    kd->magic = SIM_KERNEL_MAGIC;
    kd->fn = (krsim_kernel_fn)fn;
    kd->kernarg_size = en->size;
    snprintf(kd->name, sizeof kd->name, "%s", name);
    y->address = (uint64_t)(uintptr_t)kd;
  } else {
    free(y);
    *st = HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
    return NULL;
  }
  return y;
}

hsa_status_t sim_hsa_executable_load_agent_code_object(hsa_executable_t e, hsa_agent_t agent,
                                                       hsa_code_object_reader_t rh, const char* o,
                                                       hsa_loaded_code_object_t* lco_out) {
  SIM_CHECK_INIT();
  (void)o;
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  sim_agent* ag = sim_agent_from(agent);
  if (!ag || !ag->is_gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  sim_reader* r = (sim_reader*)(uintptr_t)rh.handle;
  if (!r || r->magic != READER_MAGIC) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  if (x->state == HSA_EXECUTABLE_STATE_FROZEN) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  /* Kernel descriptors live in one code segment of device memory, like the real loader's. */
  size_t nk = 0;
  for (uint32_t i = 0; i < r->co->count; i++) nk += r->co->entries[i].kind == KRSIM_CO_KIND_KERNEL;
  char* code = nk ? sim_loader_alloc(ag, nk * KD_SIZE) : NULL;
  if (nk && !code) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_symbol *first = NULL, **tail = &first;
  hsa_status_t st = HSA_STATUS_SUCCESS;
  size_t ki = 0;
  for (uint32_t i = 0; i < r->co->count; i++) {
    const krsim_co_entry* en = &r->co->entries[i];
    sim_kernel_desc* kd = en->kind == KRSIM_CO_KIND_KERNEL ? (sim_kernel_desc*)(code + KD_SIZE * ki++) : NULL;
    sim_symbol* y = load_entry(x, ag, en, kd, &st);
    if (!y) break;
    *tail = y;
    tail = &y->next;
  }
  sim_lco* l = st == HSA_STATUS_SUCCESS ? calloc(1, sizeof *l) : NULL;
  if (st == HSA_STATUS_SUCCESS && !l) st = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (st != HSA_STATUS_SUCCESS) {
    if (code) sim_loader_free(code);
    sim_exec tmp = {.magic = EXEC_MAGIC, .symbols = first};
    sim_exec* heap = malloc(sizeof tmp);
    if (heap) {
      *heap = tmp;
      exec_free(heap);
    }
    return st;
  }
  l->magic = LCO_MAGIC;
  l->exec = x;
  l->agent = ag;
  l->storage = r->co;
  l->storage_size = r->size;
  l->code = code;
  l->code_size = nk * KD_SIZE;
  pthread_mutex_lock(&g_x_mu);
  *x->tail = first;
  if (first) x->tail = tail;
  l->next = x->lcos;
  x->lcos = l;
  pthread_mutex_unlock(&g_x_mu);
  if (lco_out) lco_out->handle = (uint64_t)(uintptr_t)l;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_freeze(hsa_executable_t e, const char* o) {
  SIM_CHECK_INIT();
  (void)o;
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (x->state == HSA_EXECUTABLE_STATE_FROZEN) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  x->state = HSA_EXECUTABLE_STATE_FROZEN;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_get_info(hsa_executable_t e, hsa_executable_info_t a, void* v) {
  SIM_CHECK_INIT();
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch ((int)a) {
    case HSA_EXECUTABLE_INFO_PROFILE: *(hsa_profile_t*)v = x->profile; break;
    case HSA_EXECUTABLE_INFO_STATE: *(hsa_executable_state_t*)v = x->state; break;
    case HSA_EXECUTABLE_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
      *(hsa_default_float_rounding_mode_t*)v = HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR;
      break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_validate_alt(hsa_executable_t e, const char* o, uint32_t* r) {
  SIM_CHECK_INIT();
  (void)o;
  if (!exec_from(e)) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!r) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *r = 0;
  return HSA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ symbols */

static bool name_matches(const sim_symbol* y, const char* name) {
  if (strcmp(y->name, name) == 0) return true;
  /* Kernels also answer to their bare name. */
  size_t n = strlen(name);
  return y->kind == HSA_SYMBOL_KIND_KERNEL && strlen(y->name) == n + 3 &&
         strncmp(y->name, name, n) == 0;
}

hsa_status_t sim_hsa_executable_get_symbol_by_name(hsa_executable_t e, const char* name,
                                                   const hsa_agent_t* agent,
                                                   hsa_executable_symbol_t* out) {
  SIM_CHECK_INIT();
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!name || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_agent* ag = agent ? sim_agent_from(*agent) : NULL;
  if (agent && !ag) return HSA_STATUS_ERROR_INVALID_AGENT;
  pthread_mutex_lock(&g_x_mu);
  sim_symbol* found = NULL;
  for (sim_symbol* y = x->symbols; y && !found; y = y->next)
    if ((!ag || y->agent == ag) && name_matches(y, name)) found = y;
  pthread_mutex_unlock(&g_x_mu);
  if (!found) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  *out = sym_handle(found);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_get_symbol(hsa_executable_t e, const char* module, const char* name,
                                           hsa_agent_t agent, int32_t cc,
                                           hsa_executable_symbol_t* out) {
  (void)module, (void)cc;
  return sim_hsa_executable_get_symbol_by_name(e, name, &agent, out);
}

static hsa_status_t copy_str(void* v, const char* s) {
  memcpy(v, s, strlen(s)); /* not NUL-terminated, as in the HSA spec */
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_executable_symbol_get_info(hsa_executable_symbol_t sh,
                                                hsa_executable_symbol_info_t a, void* v) {
  SIM_CHECK_INIT();
  sim_symbol* y = sym_from(sh);
  if (!y) return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
  if (!v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  bool var = y->kind == HSA_SYMBOL_KIND_VARIABLE;
  switch ((int)a) {
    case HSA_EXECUTABLE_SYMBOL_INFO_TYPE: *(hsa_symbol_kind_t*)v = (hsa_symbol_kind_t)y->kind; break;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH: *(uint32_t*)v = (uint32_t)strlen(y->name); break;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME: return copy_str(v, y->name);
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME_LENGTH: *(uint32_t*)v = 0; break;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME: break;
    case HSA_EXECUTABLE_SYMBOL_INFO_AGENT: *(hsa_agent_t*)v = sim_agent_handle(y->agent); break;
    case HSA_EXECUTABLE_SYMBOL_INFO_LINKAGE: *(hsa_symbol_linkage_t*)v = HSA_SYMBOL_LINKAGE_PROGRAM; break;
    case HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION: *(bool*)v = true; break;
    default:
      if (var) {
        switch ((int)a) {
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS: *(uint64_t*)v = y->address; return HSA_STATUS_SUCCESS;
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALLOCATION:
            *(hsa_variable_allocation_t*)v = HSA_VARIABLE_ALLOCATION_AGENT;
            return HSA_STATUS_SUCCESS;
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT:
            *(hsa_variable_segment_t*)v = y->is_const ? HSA_VARIABLE_SEGMENT_READONLY : HSA_VARIABLE_SEGMENT_GLOBAL;
            return HSA_STATUS_SUCCESS;
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALIGNMENT: *(uint32_t*)v = 16; return HSA_STATUS_SUCCESS;
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE: *(uint32_t*)v = (uint32_t)y->size; return HSA_STATUS_SUCCESS;
          case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST: *(bool*)v = y->is_const; return HSA_STATUS_SUCCESS;
          default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
      }
      switch ((int)a) {
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT: *(uint64_t*)v = y->address; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE: *(uint32_t*)v = (uint32_t)y->size; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT: *(uint32_t*)v = 16; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK: *(bool*)v = false; return HSA_STATUS_SUCCESS;
        case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_CALL_CONVENTION: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
        default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      }
  }
  return HSA_STATUS_SUCCESS;
}

/* Snapshot of matching symbols so callbacks run without the lock. */
static hsa_status_t iterate(sim_exec* x, sim_agent* ag, bool with_agent,
                            hsa_status_t (*cb_a)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*),
                            hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d) {
  pthread_mutex_lock(&g_x_mu);
  size_t n = 0;
  for (sim_symbol* y = x->symbols; y; y = y->next)
    if (!ag || y->agent == ag) n++;
  sim_symbol** list = malloc((n ? n : 1) * sizeof *list);
  if (!list) {
    pthread_mutex_unlock(&g_x_mu);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  n = 0;
  for (sim_symbol* y = x->symbols; y; y = y->next)
    if (!ag || y->agent == ag) list[n++] = y;
  pthread_mutex_unlock(&g_x_mu);
  hsa_status_t st = HSA_STATUS_SUCCESS;
  for (size_t i = 0; i < n && st == HSA_STATUS_SUCCESS; i++)
    st = with_agent ? cb_a(exec_handle(x), sim_agent_handle(list[i]->agent), sym_handle(list[i]), d)
                    : cb(exec_handle(x), sym_handle(list[i]), d);
  free(list);
  return st;
}

hsa_status_t sim_hsa_executable_iterate_agent_symbols(
    hsa_executable_t e, hsa_agent_t agent,
    hsa_status_t (*cb)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*), void* d) {
  SIM_CHECK_INIT();
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  sim_agent* ag = sim_agent_from(agent);
  if (!ag) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (g_faults.fail_symbol_iter) return HSA_STATUS_ERROR;
  return iterate(x, ag, true, cb, NULL, d);
}

hsa_status_t sim_hsa_executable_iterate_symbols(hsa_executable_t e,
                                                hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*),
                                                void* d) {
  SIM_CHECK_INIT();
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (g_faults.fail_symbol_iter) return HSA_STATUS_ERROR;
  return iterate(x, NULL, false, NULL, cb, d);
}

hsa_status_t sim_hsa_executable_iterate_program_symbols(
    hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d) {
  SIM_CHECK_INIT();
  (void)d;
  if (!exec_from(e)) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return HSA_STATUS_SUCCESS; /* the sim's variables are all agent allocations */
}

/* ------------------------------------------------------------------ loader extension */

hsa_status_t sim_loader_query_host_address(const void* dev, const void** host) {
  if (!dev || !host) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_alloc a;
  if (!sim_registry_find((uintptr_t)dev, &a) || a.kind != SIM_ALLOC_LOADER)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *host = dev; /* device memory is host-addressable in the sim */
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_loader_iterate_executables(hsa_status_t (*cb)(hsa_executable_t, void*), void* data) {
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_x_mu);
  hsa_status_t st = HSA_STATUS_SUCCESS;
  for (sim_exec* x = g_execs; x && st == HSA_STATUS_SUCCESS; x = x->next) st = cb(exec_handle(x), data);
  pthread_mutex_unlock(&g_x_mu);
  return st;
}

hsa_status_t sim_loader_query_executable(const void* dev, hsa_executable_t* out) {
  if (!dev || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uintptr_t p = (uintptr_t)dev;
  pthread_mutex_lock(&g_x_mu);
  for (sim_exec* x = g_execs; x; x = x->next)
    for (sim_symbol* y = x->symbols; y; y = y->next) {
      uint64_t len = y->kind == HSA_SYMBOL_KIND_VARIABLE ? (y->size ? y->size : 1) : KD_SIZE;
      if (p >= y->address && p < y->address + len) {
        *out = exec_handle(x);
        pthread_mutex_unlock(&g_x_mu);
        return HSA_STATUS_SUCCESS;
      }
    }
  pthread_mutex_unlock(&g_x_mu);
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t sim_loader_iterate_loaded_code_objects(
    hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_loaded_code_object_t, void*), void* data) {
  sim_exec* x = exec_from(e);
  if (!x) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_status_t st = HSA_STATUS_SUCCESS;
  for (sim_lco* l = x->lcos; l && st == HSA_STATUS_SUCCESS; l = l->next) {
    hsa_loaded_code_object_t h = {(uint64_t)(uintptr_t)l};
    st = cb(e, h, data);
  }
  return st;
}

hsa_status_t sim_loader_loaded_code_object_get_info(hsa_loaded_code_object_t lh, int attr, void* v) {
  sim_lco* l = (sim_lco*)(uintptr_t)lh.handle;
  if (!l || l->magic != LCO_MAGIC || !v) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attr) {
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_EXECUTABLE: *(hsa_executable_t*)v = exec_handle(l->exec); break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_KIND:
      *(uint32_t*)v = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_KIND_AGENT;
      break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_AGENT: *(hsa_agent_t*)v = sim_agent_handle(l->agent); break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_TYPE:
      *(uint32_t*)v = HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_MEMORY;
      break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_BASE:
      *(uint64_t*)v = (uint64_t)(uintptr_t)l->storage;
      break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_SIZE: *(uint64_t*)v = l->storage_size; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA: *(int64_t*)v = 0; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE: *(uint64_t*)v = (uint64_t)(uintptr_t)l->code; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE: *(uint64_t*)v = l->code_size; break;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

/* One segment per loaded code object that has kernels: its code segment. */
hsa_status_t sim_loader_segment_descriptors(hsa_ven_amd_loader_segment_descriptor_t* d, size_t* n) {
  if (!n || (!d && *n) || (d && !*n)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_x_mu);
  size_t total = 0;
  for (sim_exec* x = g_execs; x; x = x->next)
    for (sim_lco* l = x->lcos; l; l = l->next) total += l->code != NULL;
  if (*n == 0) {
    *n = total;
    pthread_mutex_unlock(&g_x_mu);
    return HSA_STATUS_SUCCESS;
  }
  if (*n != total) {
    pthread_mutex_unlock(&g_x_mu);
    return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
  }
  size_t i = 0;
  for (sim_exec* x = g_execs; x; x = x->next)
    for (sim_lco* l = x->lcos; l; l = l->next) {
      if (!l->code) continue;
      memset(&d[i], 0, sizeof d[i]);
      d[i].agent = sim_agent_handle(l->agent);
      d[i].executable = exec_handle(x);
      d[i].code_object_storage_type = HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_MEMORY;
      d[i].code_object_storage_base = l->storage;
      d[i].code_object_storage_size = l->storage_size;
      d[i].segment_base = l->code;
      d[i].segment_size = l->code_size;
      i++;
    }
  pthread_mutex_unlock(&g_x_mu);
  return HSA_STATUS_SUCCESS;
}
