/* hip_module.c - code objects in HSA executables: the module API (hipModuleLoadData,
 * hipModuleGetFunction, hipModuleGetGlobal) and the registration entry points compiled HIP
 * programs call (__hipRegisterFatBinary/Function/Var), loaded lazily per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

/* ---------------------------------------------------------------- modules */

static size_t co_bytes(const krsim_code_object* co) {
  return sizeof(krsim_code_object) + (size_t)co->count * sizeof(krsim_co_entry);
}

static bool co_valid(const void* image) {
  const krsim_code_object* co = image;
  return co && memcmp(co->magic, KRSIM_CO_MAGIC, sizeof(co->magic)) == 0 &&
         co->version == KRSIM_CO_VERSION;
}

/* Builds the module's variable table (fine-grained memory, read by device code). */
static hipError_t build_var_table(hipModule_t m) {
  const krsim_code_object* co = m->co;
  uint64_t nvars = 0;
  for (uint32_t i = 0; i < co->count; i++)
    if (co->entries[i].kind == KRSIM_CO_KIND_VARIABLE) nvars++;
  size_t bytes = sizeof(krsim_var_table) + nvars * sizeof(krsim_var_entry);
  void* mem;
  if (hsa_amd_memory_pool_allocate(krhip_rt.fine_pool, bytes, 0, &mem) != HSA_STATUS_SUCCESS)
    return hipErrorOutOfMemory;
  krsim_var_table* t = mem;
  t->count = 0;
  for (uint32_t i = 0; i < co->count; i++) {
    const krsim_co_entry* en = &co->entries[i];
    if (en->kind != KRSIM_CO_KIND_VARIABLE) continue;
    void* addr;
    size_t size;
    hipError_t e = krhip_module_global(m, en->name, &addr, &size);
    if (e != hipSuccess) {
      hsa_amd_memory_pool_free(mem);
      return e;
    }
    t->entries[t->count++] = (krsim_var_entry){en->name, addr, size};
  }
  m->var_table = t;
  return hipSuccess;
}

hipError_t krhip_module_load(const krsim_code_object* co, int device, hipModule_t* out) {
  if (!co_valid(co)) return hipErrorInvalidImage;
  hipModule_t m = calloc(1, sizeof(*m));
  if (!m) return hipErrorOutOfMemory;
  m->co = co;
  m->device = device;
  pthread_mutex_init(&m->mu, NULL);
  hsa_agent_t agent = krhip_rt.devices[device].agent;
  hipError_t e = hipErrorInvalidImage;
  if (hsa_code_object_reader_create_from_memory(co, co_bytes(co), &m->reader) != HSA_STATUS_SUCCESS)
    goto fail;
  if (hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL,
                                &m->exec) != HSA_STATUS_SUCCESS)
    goto fail_reader;
  if (hsa_executable_load_agent_code_object(m->exec, agent, m->reader, NULL, NULL) !=
          HSA_STATUS_SUCCESS ||
      hsa_executable_freeze(m->exec, NULL) != HSA_STATUS_SUCCESS)
    goto fail_exec;
  e = build_var_table(m);
  if (e != hipSuccess) goto fail_exec;
  *out = m;
  return hipSuccess;
fail_exec:
  hsa_executable_destroy(m->exec);
fail_reader:
  hsa_code_object_reader_destroy(m->reader);
fail:
  pthread_mutex_destroy(&m->mu);
  free(m);
  return e;
}

void krhip_module_unload(hipModule_t m) {
  krhip_device_sync(m->device);
  hipFunction_t f = m->functions;
  while (f) {
    hipFunction_t next = f->next;
    free(f);
    f = next;
  }
  if (m->var_table) hsa_amd_memory_pool_free(m->var_table);
  hsa_executable_destroy(m->exec);
  hsa_code_object_reader_destroy(m->reader);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static hsa_status_t find_symbol(hipModule_t m, const char* name, hsa_executable_symbol_t* sym) {
  hsa_agent_t agent = krhip_rt.devices[m->device].agent;
  return hsa_executable_get_symbol_by_name(m->exec, name, &agent, sym);
}

hipError_t krhip_module_function(hipModule_t m, const char* name, hipFunction_t* out) {
  if (strlen(name) >= 60) return hipErrorNotFound;
  pthread_mutex_lock(&m->mu);
  for (hipFunction_t f = m->functions; f; f = f->next) {
    if (strcmp(f->name, name) == 0) {
      pthread_mutex_unlock(&m->mu);
      *out = f;
      return hipSuccess;
    }
  }
  char kd[72];
  snprintf(kd, sizeof(kd), "%s.kd", name);
  hsa_executable_symbol_t sym;
  hsa_symbol_kind_t kind;
  hipError_t e = hipErrorNotFound;
  hipFunction_t f = NULL;
  if (find_symbol(m, kd, &sym) != HSA_STATUS_SUCCESS) goto out;
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind) !=
          HSA_STATUS_SUCCESS ||
      kind != HSA_SYMBOL_KIND_KERNEL)
    goto out;
  f = calloc(1, sizeof(*f));
  if (!f) {
    e = hipErrorOutOfMemory;
    goto out;
  }
  f->module = m;
  strcpy(f->name, name);
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                     &f->kernel_object) != HSA_STATUS_SUCCESS ||
      hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                                     &f->kernarg_size) != HSA_STATUS_SUCCESS) {
    free(f);
    e = hipErrorInvalidDeviceFunction;
    goto out;
  }
  hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
                                 &f->group_size);
  hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                                 &f->private_size);
  /* The argument layout is code-object metadata HIP reads itself, as real HIP does. */
  for (uint32_t i = 0; i < m->co->count; i++) {
    const krsim_co_entry* en = &m->co->entries[i];
    if (en->kind == KRSIM_CO_KIND_KERNEL && strcmp(en->name, name) == 0 && en->init &&
        memcmp(en->init, KRSIM_KA_MAGIC, 8) == 0)
      f->desc = en->init;
  }
  f->next = m->functions;
  m->functions = f;
  *out = f;
  e = hipSuccess;
out:
  pthread_mutex_unlock(&m->mu);
  return e;
}

hipError_t krhip_module_global(hipModule_t m, const char* name, void** addr, size_t* size) {
  hsa_executable_symbol_t sym;
  hsa_symbol_kind_t kind;
  if (find_symbol(m, name, &sym) != HSA_STATUS_SUCCESS ||
      hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind) !=
          HSA_STATUS_SUCCESS ||
      kind != HSA_SYMBOL_KIND_VARIABLE)
    return hipErrorNotFound;
  uint64_t address = 0;
  uint32_t bytes = 0;
  if (hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address) !=
          HSA_STATUS_SUCCESS ||
      hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &bytes) !=
          HSA_STATUS_SUCCESS)
    return hipErrorNotFound;
  *addr = (void*)(uintptr_t)address;
  *size = bytes;
  return hipSuccess;
}

/* Accepts a krsim code object or a fat-binary wrapper around one. */
static const krsim_code_object* image_co(const void* image) {
  const krsim_fatbin_wrapper* w = image;
  if (w && (unsigned)w->magic == KRSIM_HIP_FATBIN_MAGIC && co_valid(w->binary)) return w->binary;
  return co_valid(image) ? image : NULL;
}

HIP_EXPORT hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  if (!module || !image) return krhip_ret(hipErrorInvalidValue);
  hipError_t e = krhip_init();
  if (e != hipSuccess) return krhip_ret(e);
  const krsim_code_object* co = image_co(image);
  if (!co) return krhip_ret(hipErrorInvalidImage);
  return krhip_ret(krhip_module_load(co, krhip_current_device(), module));
}

HIP_EXPORT hipError_t hipModuleLoadDataEx(hipModule_t* module, const void* image,
                                          unsigned int numOptions, hipJitOption* options,
                                          void** optionValues) {
  (void)numOptions;
  (void)options;
  (void)optionValues;
  return hipModuleLoadData(module, image);
}

HIP_EXPORT hipError_t hipModuleUnload(hipModule_t module) {
  if (!module) return krhip_ret(hipErrorInvalidResourceHandle);
  krhip_module_unload(module);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module,
                                           const char* kname) {
  if (!function || !kname) return krhip_ret(hipErrorInvalidValue);
  if (!module) return krhip_ret(hipErrorInvalidResourceHandle);
  return krhip_ret(krhip_module_function(module, kname, function));
}

HIP_EXPORT hipError_t hipModuleGetGlobal(hipDeviceptr_t* dptr, size_t* bytes, hipModule_t hmod,
                                         const char* name) {
  if (!name) return krhip_ret(hipErrorInvalidValue);
  if (!hmod) return krhip_ret(hipErrorInvalidResourceHandle);
  void* addr;
  size_t size;
  hipError_t e = krhip_module_global(hmod, name, &addr, &size);
  if (e != hipSuccess) return krhip_ret(e);
  if (dptr) *dptr = addr;
  if (bytes) *bytes = size;
  return hipSuccess;
}

/* ---------------------------------------------------------------- registration */

typedef struct reg_fatbin {
  const krsim_code_object* co;
  pthread_mutex_t mu; /* guards lazy loading */
  hipModule_t modules[KRHIP_MAX_DEVICES];
} reg_fatbin;

typedef struct reg_symbol {
  const void* host; /* host stub function or host shadow variable */
  reg_fatbin* fb;
  char name[64];
  bool is_var;
  hipFunction_t functions[KRHIP_MAX_DEVICES]; /* resolved kernels, per device */
  struct reg_symbol* next;
} reg_symbol;

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static reg_symbol* reg_symbols;

HIP_EXPORT void** __hipRegisterFatBinary(const void* data) {
  const krsim_fatbin_wrapper* w = data;
  if (!w || (unsigned)w->magic != KRSIM_HIP_FATBIN_MAGIC || !co_valid(w->binary)) return NULL;
  reg_fatbin* fb = calloc(1, sizeof(*fb));
  void** handle = calloc(1, sizeof(void*));
  if (!fb || !handle) {
    free(fb);
    free(handle);
    return NULL;
  }
  fb->co = w->binary;
  pthread_mutex_init(&fb->mu, NULL);
  *handle = fb;
  return handle;
}

static void register_symbol(void** modules, const void* host, const char* name, bool is_var) {
  if (!modules || !*modules || !host || !name || strlen(name) >= sizeof(((reg_symbol*)0)->name))
    return;
  reg_symbol* r = calloc(1, sizeof(*r));
  if (!r) return;
  r->host = host;
  r->fb = *modules;
  r->is_var = is_var;
  strcpy(r->name, name);
  pthread_rwlock_wrlock(&reg_lock);
  r->next = reg_symbols;
  reg_symbols = r;
  pthread_rwlock_unlock(&reg_lock);
}

HIP_EXPORT void __hipRegisterFunction(void** modules, const void* hostFunction,
                                      char* deviceFunction, const char* deviceName,
                                      unsigned int threadLimit, uint3* tid, uint3* bid,
                                      dim3* blockDim, dim3* gridDim, int* wSize) {
  (void)deviceFunction;
  (void)threadLimit;
  (void)tid;
  (void)bid;
  (void)blockDim;
  (void)gridDim;
  (void)wSize;
  register_symbol(modules, hostFunction, deviceName, false);
}

HIP_EXPORT void __hipRegisterVar(void** modules, void* var, char* hostVar, char* deviceVar,
                                 int ext, size_t size, int constant, int global) {
  (void)hostVar;
  (void)ext;
  (void)size;
  (void)constant;
  (void)global;
  register_symbol(modules, var, deviceVar, true);
}

HIP_EXPORT void __hipUnregisterFatBinary(void** modules) {
  if (!modules || !*modules) return;
  reg_fatbin* fb = *modules;
  pthread_rwlock_wrlock(&reg_lock);
  reg_symbol** link = &reg_symbols;
  while (*link) {
    reg_symbol* r = *link;
    if (r->fb == fb) {
      *link = r->next;
      free(r);
    } else {
      link = &r->next;
    }
  }
  pthread_rwlock_unlock(&reg_lock);
  for (int d = 0; d < KRHIP_MAX_DEVICES; d++)
    if (fb->modules[d]) krhip_module_unload(fb->modules[d]);
  pthread_mutex_destroy(&fb->mu);
  free(fb);
  free(modules);
}

/* The fat binary's module on a device, loading it on first use. */
static hipError_t fatbin_module(reg_fatbin* fb, int device, hipModule_t* out) {
  pthread_mutex_lock(&fb->mu);
  hipError_t e = hipSuccess;
  if (!fb->modules[device]) e = krhip_module_load(fb->co, device, &fb->modules[device]);
  *out = fb->modules[device];
  pthread_mutex_unlock(&fb->mu);
  return e;
}

static reg_symbol* find_registered(const void* host, bool is_var) {
  reg_symbol* r = reg_symbols;
  while (r && !(r->host == host && r->is_var == is_var)) r = r->next;
  return r;
}

hipError_t krhip_registered_function(const void* host_fn, int dev, hipFunction_t* out) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return e;
  if (dev < 0) dev = krhip_current_device();
  pthread_rwlock_rdlock(&reg_lock);
  reg_symbol* r = find_registered(host_fn, false);
  if (!r) {
    pthread_rwlock_unlock(&reg_lock);
    return hipErrorInvalidDeviceFunction;
  }
  hipFunction_t f = __atomic_load_n(&r->functions[dev], __ATOMIC_ACQUIRE);
  if (!f) {
    hipModule_t m;
    e = fatbin_module(r->fb, dev, &m);
    if (e == hipSuccess) e = krhip_module_function(m, r->name, &f);
    if (e == hipSuccess) __atomic_store_n(&r->functions[dev], f, __ATOMIC_RELEASE);
    else if (e == hipErrorNotFound) e = hipErrorInvalidDeviceFunction;
  }
  pthread_rwlock_unlock(&reg_lock);
  *out = f;
  return e;
}

hipError_t krhip_registered_var(const void* shadow, void** addr, size_t* size) {
  hipError_t e = krhip_init();
  if (e != hipSuccess) return e;
  pthread_rwlock_rdlock(&reg_lock);
  reg_symbol* r = find_registered(shadow, true);
  if (!r) {
    pthread_rwlock_unlock(&reg_lock);
    return hipErrorInvalidSymbol;
  }
  hipModule_t m;
  e = fatbin_module(r->fb, krhip_current_device(), &m);
  if (e == hipSuccess) e = krhip_module_global(m, r->name, addr, size);
  if (e == hipErrorNotFound) e = hipErrorInvalidSymbol;
  pthread_rwlock_unlock(&reg_lock);
  return e;
}
