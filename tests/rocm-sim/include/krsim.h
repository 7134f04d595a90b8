/* krsim.h - public extension header of the simulated ROCm runtime (kreplay's test bed).
 *
 * Two things live here:
 *  1. The sim code-object format: the contract between libhsa-runtime64 (the loader) and
 *     libamdhip64 / applications (the producers).
 *  2. Declarations of HSA APIs that Debian's ROCm 5.2 headers lack but current ROCR has
 *     (vmem, extra allocate flags, RESERVED_ADDR pointer type), so C code built against the
 *     5.2 headers can call them. Signatures follow ROCR-Runtime's hsa_ext_amd.h.
 *
 * Include after <hsa/hsa.h> and <hsa/hsa_ext_amd.h>.
 */
#ifndef KRSIM_H
#define KRSIM_H

#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- code objects */

#define KRSIM_CO_MAGIC "KRSIMCO" /* 8 bytes incl. NUL */
#define KRSIM_CO_VERSION 1u
#define KRSIM_CO_KIND_VARIABLE 0u
#define KRSIM_CO_KIND_KERNEL 1u
#define KRSIM_CO_FLAG_CONSTANT 1u

typedef struct krsim_co_entry {
  uint32_t kind;   /* 0 variable, 1 kernel */
  uint32_t flags;  /* bit0: constant */
  uint64_t size;   /* variable bytes, or kernarg segment bytes */
  char name[64];   /* NUL-terminated; kernels: without the ".kd" suffix */
  const void* init; /* variable's initial bytes (size of them) or NULL for zeros */
} krsim_co_entry;

typedef struct krsim_code_object {
  char magic[8];    /* KRSIM_CO_MAGIC */
  uint32_t version; /* 1 */
  uint32_t count;
  krsim_co_entry entries[];
} krsim_code_object;

/* A kernel's "device code" is a C function exported by the application (link with -rdynamic):
 *   void __krsim_kernel_<name>(const krsim_dispatch* d, void* kernarg);
 * called once per workgroup. Kernel symbols are named "<name>.kd" (as with code object v3+);
 * hsa_executable_get_symbol_by_name also accepts the bare "<name>". */
typedef struct krsim_dispatch {
  uint32_t grid[3], workgroup[3], group_id[3];
  uint32_t dims;
  void* group_segment;
} krsim_dispatch;

typedef void (*krsim_kernel_fn)(const krsim_dispatch* d, void* kernarg);

#define KRSIM_KERNEL_PREFIX "__krsim_kernel_"

/* ------------------------------------------- APIs newer than the ROCm 5.2 headers */

#ifndef KRSIM_NO_NEW_HSA_DECLS
/* hsa_amd_memory_pool_allocate flags (hsa_amd_memory_pool_flag_t in current ROCR). */
#define HSA_AMD_MEMORY_POOL_STANDARD_FLAG 0u
#define HSA_AMD_MEMORY_POOL_PCIE_FLAG (1u << 0)
#define HSA_AMD_MEMORY_POOL_CONTIGUOUS_FLAG (1u << 1)
#define HSA_AMD_MEMORY_POOL_EXECUTABLE_FLAG (1u << 2)

/* hsa_amd_pointer_type_t value added after 5.2. */
#define HSA_EXT_POINTER_TYPE_RESERVED_ADDR 5

typedef struct hsa_amd_vmem_alloc_handle_s {
  uint64_t handle;
} hsa_amd_vmem_alloc_handle_t;

typedef enum {
  MEMORY_TYPE_NONE,
  MEMORY_TYPE_PINNED,
} hsa_amd_memory_type_t;

hsa_status_t hsa_amd_vmem_address_reserve(void** va, size_t size, uint64_t address, uint64_t flags);
hsa_status_t hsa_amd_vmem_address_free(void* va, size_t size);
hsa_status_t hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                        hsa_amd_memory_type_t type, uint64_t flags,
                                        hsa_amd_vmem_alloc_handle_t* memory_handle);
hsa_status_t hsa_amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle);
hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                              hsa_amd_vmem_alloc_handle_t memory_handle, uint64_t flags);
hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size);
#endif

#ifdef __cplusplus
}
#endif

#endif /* KRSIM_H */
