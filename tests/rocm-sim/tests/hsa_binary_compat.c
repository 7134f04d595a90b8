/* hsa_binary_compat: built and linked against Debian's REAL libhsa-runtime64.so.1 (ROCm 5.2),
 * so it records the real symbol versions (hsa_init@ROCR_1, ...); run with LD_LIBRARY_PATH
 * pointing at the sim, it must load and pass unchanged. Uses deprecated aliases too. */
#include <dlfcn.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_test_util.h"

void __krsim_kernel_fill(const krsim_dispatch* d, void* kernarg) {
  int* out = *(int**)kernarg;
  for (uint32_t i = 0; i < d->workgroup[0]; i++) out[d->group_id[0] * d->workgroup[0] + i] = (int)(d->group_id[0] * 1000 + i);
}

int main(void) {
  CHECK_OK(hsa_init());
  /* Which library did the dynamic linker bind? It must be the sim. */
  Dl_info info;
  CHECK(dladdr((void*)hsa_init, &info) != 0);
  printf("hsa_init from %s\n", info.dli_fname);
  CHECK(strstr(info.dli_fname, "rocm-sim/build") != NULL);
  agents_t ag = get_agents();
  CHECK(ag.ngpu >= 1);
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE), karg = find_pool(ag.cpu, KERNARG);
  int* out = NULL;
  void* ka = NULL;
  CHECK_OK(hsa_amd_memory_pool_allocate(dev, 4 * 256, 0, (void**)&out));
  CHECK_OK(hsa_amd_memory_pool_allocate(karg, 64, 0, &ka));
  memcpy(ka, &out, sizeof out);
  static struct { krsim_code_object h; krsim_co_entry e[1]; } co = {
      .h = {.magic = KRSIM_CO_MAGIC, .version = 1, .count = 1},
      .e = {{.kind = 1, .size = 8, .name = "fill"}}};
  hsa_executable_t e = load_co(&co.h, sizeof co, ag.gpu[0]);
  hsa_queue_t* q;
  CHECK_OK(hsa_queue_create(ag.gpu[0], 128, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  hsa_signal_t s;
  CHECK_OK(hsa_signal_create(1, 0, NULL, &s));
  dispatch_kernel(q, kernel_object(e, "fill.kd", ag.gpu[0]), ka, 256, 64, 1, s);
  CHECK_EQ(hsa_signal_wait_acquire(s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(hsa_queue_load_read_index_acquire(q), 1);
  int host[256];
  CHECK_OK(hsa_memory_copy(host, out, sizeof host));
  CHECK_EQ(host[0], 0);
  CHECK_EQ(host[63], 63);
  CHECK_EQ(host[64], 1000);
  CHECK_EQ(host[255], 3063);
  hsa_amd_pointer_info_t pi;
  pi.size = sizeof pi;
  CHECK_OK(hsa_amd_pointer_info(out + 100, &pi, NULL, NULL, NULL));
  CHECK_EQ(pi.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK(pi.agentBaseAddress == out);
  /* Exports the sim does not implement answer with an error instead of failing to resolve. */
  hsa_isa_t isa;
  CHECK_EQ(hsa_isa_from_name("amdgcn-amd-amdhsa--gfx90a", &isa), HSA_STATUS_ERROR);
  CHECK_EQ(hsa_ext_image_destroy(ag.gpu[0], (hsa_ext_image_t){0}), HSA_STATUS_ERROR);
  hsa_signal_store_release(s, 5);
  CHECK_EQ(hsa_signal_load_acquire(s), 5);
  CHECK_OK(hsa_signal_destroy(s));
  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_executable_destroy(e));
  CHECK_OK(hsa_amd_memory_pool_free(out));
  CHECK_OK(hsa_amd_memory_pool_free(ka));
  CHECK_OK(hsa_shut_down());
  printf("hsa_binary_compat: PASS\n");
  return 0;
}
