/* krsim_hip.h - writing HIP programs for the simulated ROCm in plain C.
 *
 * What this header defines, in the order a program uses it:
 *  - the HIP-side extras of the sim code object: a kernel entry's `init` points to a
 *    krsim_kernel_args (its argument layout: what real code objects carry as .args metadata),
 *    and the hidden kernel argument, a pointer to a krsim_var_table, through which device code
 *    reaches the module's __device__ variables in the executable it was dispatched from;
 *  - the registration entry points compiled HIP programs call (hip-clang emits these calls in
 *    a module constructor), with HIP's real signatures;
 *  - macros: KRSIM_KERNEL (a kernel: argument struct, layout, exported device function and a
 *    host stub that launches it), KRSIM_DEVICE_VAR, and KRSIM_MODULE (the code object, the
 *    fat-binary wrapper and the constructor/destructor that register them).
 *
 * Calling convention (see tests/rocm-sim/README.md, "HIP"): the kernarg segment holds the
 * explicit arguments packed with natural alignment (a C struct of them), then, at
 * hidden_offset (8-aligned), a `const krsim_var_table*`. The kernel's kernarg segment size
 * in the code object is hidden_offset + 8.
 */
#ifndef KRSIM_HIP_H
#define KRSIM_HIP_H

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "krsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ code-object extras */

#define KRSIM_KA_MAGIC "KRSIMKA" /* 8 bytes incl. NUL */
#define KRSIM_NO_HIDDEN 0xffffffffu

/* One explicit kernel argument: where it lies in the kernarg segment and how big it is. */
typedef struct krsim_arg {
  uint32_t offset;
  uint32_t size;
} krsim_arg;

/* A kernel's argument layout, pointed to by its code-object entry's `init`. */
typedef struct krsim_kernel_args {
  char magic[8];          /* KRSIM_KA_MAGIC */
  uint32_t count;         /* explicit arguments */
  uint32_t explicit_size; /* bytes of the explicit arguments (their struct's size) */
  uint32_t hidden_offset; /* offset of the krsim_var_table pointer, or KRSIM_NO_HIDDEN */
  uint32_t reserved;
  krsim_arg args[];
} krsim_kernel_args;

/* One module variable as loaded on the device a kernel runs on. */
typedef struct krsim_var_entry {
  const char* name; /* the code object's entry name */
  void* address;    /* device address placed by the HSA loader */
  uint64_t size;
} krsim_var_entry;

/* The module's variables, in code-object order; HIP builds one per module and device. */
typedef struct krsim_var_table {
  uint64_t count;
  krsim_var_entry entries[];
} krsim_var_table;

/* Device-side lookup of a module variable by name (NULL when absent). */
static inline void* krsim_var_lookup(const krsim_var_table* t, const char* name) {
  if (!t) return NULL;
  for (uint64_t i = 0; i < t->count; i++)
    if (strcmp(t->entries[i].name, name) == 0) return t->entries[i].address;
  return NULL;
}

/* ------------------------------------------------------------ registration ABI */

#define KRSIM_HIP_FATBIN_MAGIC 0x48495046u /* "HIPF", __hipFatMAGIC2 */

/* What hip-clang's __hip_fatbin_wrapper holds; `binary` points to a krsim_code_object. */
typedef struct krsim_fatbin_wrapper {
  int magic;
  int version;
  const void* binary;
  void* dummy;
} krsim_fatbin_wrapper;

void** __hipRegisterFatBinary(const void* data);
void __hipRegisterFunction(void** modules, const void* hostFunction, char* deviceFunction,
                           const char* deviceName, unsigned int threadLimit, uint3* tid,
                           uint3* bid, dim3* blockDim, dim3* gridDim, int* wSize);
void __hipRegisterVar(void** modules, void* var, char* hostVar, char* deviceVar, int ext,
                      size_t size, int constant, int global);
void __hipUnregisterFatBinary(void** modules);

/* ------------------------------------------------------------ macro plumbing */

#define KRSIM__CAT_(a, b) a##b
#define KRSIM__CAT(a, b) KRSIM__CAT_(a, b)
#define KRSIM__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, N, \
                     ...)                                                                     \
  N
#define KRSIM__NARG(...) \
  KRSIM__NARG_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
/* Applies M(ctx, type, name) to each (type, name) pair, up to 8 pairs. */
#define KRSIM__P2(M, c, t, n) M(c, t, n)
#define KRSIM__P4(M, c, t, n, ...) M(c, t, n) KRSIM__P2(M, c, __VA_ARGS__)
#define KRSIM__P6(M, c, t, n, ...) M(c, t, n) KRSIM__P4(M, c, __VA_ARGS__)
#define KRSIM__P8(M, c, t, n, ...) M(c, t, n) KRSIM__P6(M, c, __VA_ARGS__)
#define KRSIM__P10(M, c, t, n, ...) M(c, t, n) KRSIM__P8(M, c, __VA_ARGS__)
#define KRSIM__P12(M, c, t, n, ...) M(c, t, n) KRSIM__P10(M, c, __VA_ARGS__)
#define KRSIM__P14(M, c, t, n, ...) M(c, t, n) KRSIM__P12(M, c, __VA_ARGS__)
#define KRSIM__P16(M, c, t, n, ...) M(c, t, n) KRSIM__P14(M, c, __VA_ARGS__)
#define KRSIM__PAIRS(M, c, ...) KRSIM__CAT(KRSIM__P, KRSIM__NARG(__VA_ARGS__))(M, c, __VA_ARGS__)
#define KRSIM__FIELD(c, t, n) t n;
#define KRSIM__PARAM(c, t, n) , t n
#define KRSIM__ADDR(c, t, n) (void*)&n,
#define KRSIM__DESC(c, t, n) {(uint32_t)offsetof(c, n), (uint32_t)sizeof(t)},
#define KRSIM__HIDDEN(sz) ((((uint32_t)(sz)) + 7u) & ~7u)
#define KRSIM_EXPORT __attribute__((visibility("default"), used))

/* ------------------------------------------------------------ kernels */

/* KRSIM_KERNEL(name, type0, arg0, type1, arg1, ...) { body }
 * Defines: `name##_args` (the explicit arguments), `name##_argdesc` (their layout), the device
 * function `__krsim_kernel_<name>` (exported; the HSA loader finds it by name), and the host
 * stub `hipError_t name(dim3 grid, dim3 block, size_t shmem, hipStream_t stream, args...)`
 * that launches it with hipLaunchKernel, as a hip-clang stub does. The body runs once per
 * workgroup with `d` (const krsim_dispatch*), `args` (const name##_args*) and `vars`
 * (const krsim_var_table*) in scope. From 1 to 8 arguments. */
#define KRSIM_KERNEL(name, ...)                                                                 \
  typedef struct name##_args {                                                                 \
    KRSIM__PAIRS(KRSIM__FIELD, _, __VA_ARGS__)                                                 \
  } name##_args;                                                                               \
  static const struct {                                                                        \
    char magic[8];                                                                             \
    uint32_t count, explicit_size, hidden_offset, reserved;                                    \
    krsim_arg args[KRSIM__NARG(__VA_ARGS__) / 2];                                              \
  } name##_argdesc = {KRSIM_KA_MAGIC, KRSIM__NARG(__VA_ARGS__) / 2, sizeof(name##_args),       \
                      KRSIM__HIDDEN(sizeof(name##_args)), 0,                                   \
                      {KRSIM__PAIRS(KRSIM__DESC, name##_args, __VA_ARGS__)}};                  \
  enum { name##_kernarg_size = KRSIM__HIDDEN(sizeof(name##_args)) + 8 };                       \
  static void name##_body(const krsim_dispatch* d, const name##_args* args,                    \
                          const krsim_var_table* vars);                                        \
  KRSIM_EXPORT void __krsim_kernel_##name(const krsim_dispatch* d, void* kernarg) {            \
    const krsim_var_table* vars;                                                               \
    memcpy(&vars, (const char*)kernarg + KRSIM__HIDDEN(sizeof(name##_args)), sizeof(vars));    \
    name##_body(d, (const name##_args*)kernarg, vars);                                         \
  }                                                                                            \
  hipError_t name(dim3 grid, dim3 block, size_t shmem,                                         \
                  hipStream_t stream KRSIM__PAIRS(KRSIM__PARAM, _, __VA_ARGS__)) {             \
    void* kargs[] = {KRSIM__PAIRS(KRSIM__ADDR, _, __VA_ARGS__)};                               \
    return hipLaunchKernel((const void*)name, grid, block, kargs, shmem, stream);              \
  }                                                                                            \
  static void name##_body(__attribute__((unused)) const krsim_dispatch* d,                   \
                          __attribute__((unused)) const name##_args* args,                     \
                          __attribute__((unused)) const krsim_var_table* vars)

/* A 1-D loop over this workgroup's work-items that lie inside the grid (x dimension). */
#define KRSIM_FOR_EACH_X(d, i)                                                                 \
  for (uint64_t i = (uint64_t)(d)->group_id[0] * (d)->workgroup[0],                            \
                i##_end = i + (d)->workgroup[0] < (d)->grid[0] ? i + (d)->workgroup[0]         \
                                                                 : (d)->grid[0];               \
       i < i##_end; i++)

/* Device-side pointer to module variable `name` (declared with KRSIM_DEVICE_VAR). */
#define KRSIM_VAR(name) ((__typeof__(name)*)krsim_var_lookup(vars, #name))

/* Declares a __device__ variable: its host shadow (whose initializer is the device
 * variable's initial value, as with hip-clang) and the name device code uses. */
#define KRSIM_DEVICE_VAR(type, name) type name

/* ------------------------------------------------------------ modules */

#define KRSIM__CO_K(name)                                                                      \
  {KRSIM_CO_KIND_KERNEL, 0, name##_kernarg_size, #name, &name##_argdesc},
#define KRSIM__CO_V(name) {KRSIM_CO_KIND_VARIABLE, 0, sizeof(name), #name, &name},
#define KRSIM__CO_C(name)                                                                      \
  {KRSIM_CO_KIND_VARIABLE, KRSIM_CO_FLAG_CONSTANT, sizeof(name), #name, &name},
#define KRSIM__REG_K(name)                                                                     \
  __hipRegisterFunction(krsim__h, (const void*)name, (char*)#name, #name, (unsigned)-1, NULL,  \
                        NULL, NULL, NULL, NULL);
#define KRSIM__REG_V(name)                                                                     \
  __hipRegisterVar(krsim__h, (void*)&name, (char*)#name, (char*)#name, 0, sizeof(name), 0, 0);
#define KRSIM__REG_C(name)                                                                     \
  __hipRegisterVar(krsim__h, (void*)&name, (char*)#name, (char*)#name, 0, sizeof(name), 1, 0);

/* KRSIM_MODULE(mod, LIST) where `#define LIST(K, V, C) K(kernel) V(device_var) C(const_var)`.
 * Emits the code object `mod##_co`, its fat-binary wrapper, and a constructor registering
 * every kernel and variable (a destructor unregisters), as hip-clang's module ctor does. */
#define KRSIM_MODULE(mod, LIST)                                                                \
  static const struct {                                                                        \
    char magic[8];                                                                             \
    uint32_t version, count;                                                                   \
    krsim_co_entry entries[sizeof((krsim_co_entry[]){LIST(KRSIM__CO_K, KRSIM__CO_V,            \
                                                          KRSIM__CO_C)}) /                     \
                           sizeof(krsim_co_entry)];                                            \
  } mod##_co = {KRSIM_CO_MAGIC, KRSIM_CO_VERSION,                                              \
                sizeof((krsim_co_entry[]){LIST(KRSIM__CO_K, KRSIM__CO_V, KRSIM__CO_C)}) /      \
                    sizeof(krsim_co_entry),                                                    \
                {LIST(KRSIM__CO_K, KRSIM__CO_V, KRSIM__CO_C)}};                                \
  static const krsim_fatbin_wrapper mod##_wrapper = {(int)KRSIM_HIP_FATBIN_MAGIC, 1, &mod##_co, \
                                                     NULL};                                    \
  static void** mod##_handle;                                                                  \
  __attribute__((constructor)) static void mod##_register(void) {                              \
    void** krsim__h = __hipRegisterFatBinary(&mod##_wrapper);                                  \
    mod##_handle = krsim__h;                                                                   \
    LIST(KRSIM__REG_K, KRSIM__REG_V, KRSIM__REG_C)                                             \
  }                                                                                            \
  __attribute__((destructor)) static void mod##_unregister(void) {                             \
    __hipUnregisterFatBinary(mod##_handle);                                                    \
  }

#ifdef __cplusplus
}
#endif

#endif /* KRSIM_HIP_H */
