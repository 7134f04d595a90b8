/* devices - allocations on two devices and kernels named two ways (a registered host stub and
 * a module function), for kreplay trace's kernel names and per-device live bytes.
 * Usage: devices [launches=3] [wait=0]. Needs KRSIM_GPUS >= 2.
 * On the main thread, in this order: hipMalloc 4096 before any hipSetDevice; hipSetDevice(1),
 * hipMalloc 8192 and 12288, hipFree the 8192; hipSetDevice(0), hipMalloc 16384. Then (with
 * wait=1: after printing `ready` and reading a line from stdin, so a tracer can attach
 * between), `launches` launches of `scale` through its
 * host stub (hipLaunchKernel) and `launches` of `mod_fill` through hipModuleGetFunction and
 * hipModuleLaunchKernel. Frees the 4096; leaks the 12288 (device 1) and the 16384 (device 0).
 * Prints `leaked: 28672` and a checksum of the values read back. */
#include "workload.h"

KRSIM_KERNEL(scale, uint32_t*, out, uint32_t, n, uint32_t, factor) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->out[i] = args->out[i] * args->factor + 1;
  }
}

#define DEVICES_MODULE(K, V, C) K(scale)
KRSIM_MODULE(devices_module, DEVICES_MODULE)

/* Loaded only through the module API. */
KRSIM_KERNEL(mod_fill, uint32_t*, out, uint32_t, n, uint32_t, value) {
  KRSIM_FOR_EACH_X(d, i) {
    if (i < args->n) args->out[i] = args->value;
  }
}

static const struct {
  char magic[8];
  uint32_t version, count;
  krsim_co_entry entries[1];
} fill_co = {KRSIM_CO_MAGIC,
             KRSIM_CO_VERSION,
             1,
             {{KRSIM_CO_KIND_KERNEL, 0, mod_fill_kernarg_size, "mod_fill", &mod_fill_argdesc}}};

int main(int argc, char** argv) {
  uint64_t launches = wl_arg(argc, argv, 1, 3), wait = wl_arg(argc, argv, 2, 0);
  void *unset, *d1a, *d1b, *d0;
  HIP_CHECK(hipMalloc(&unset, 4096));
  HIP_CHECK(hipSetDevice(1));
  HIP_CHECK(hipMalloc(&d1a, 8192));
  HIP_CHECK(hipMalloc(&d1b, 12288));
  HIP_CHECK(hipFree(d1a));
  HIP_CHECK(hipSetDevice(0));
  HIP_CHECK(hipMalloc(&d0, 16384));
  if (wait) {
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin)) return 2;
  }

  const uint32_t n = 1024;
  hipModule_t mod;
  hipFunction_t fill;
  HIP_CHECK(hipModuleLoadData(&mod, &fill_co));
  HIP_CHECK(hipModuleGetFunction(&fill, mod, "mod_fill"));
  for (uint64_t i = 0; i < launches; i++) {
    mod_fill_args a = {(uint32_t*)d0, n, (uint32_t)i + 1};
    void* params[] = {&a.out, &a.n, &a.value};
    HIP_CHECK(hipModuleLaunchKernel(fill, n / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    HIP_CHECK(scale(wl_dim(n / 256), wl_dim(256), 0, NULL, (uint32_t*)d0, n, 3));
  }
  HIP_CHECK(hipDeviceSynchronize());
  uint32_t got[4];
  HIP_CHECK(hipMemcpy(got, d0, sizeof(got), hipMemcpyDeviceToHost));
  /* The last fill wrote `launches`, then one scale: launches * 3 + 1. */
  WL_EXPECT(got[0] == (uint32_t)launches * 3 + 1, "got %u", got[0]);
  HIP_CHECK(hipFree(unset));
  printf("leaked: %d\n", 12288 + 16384);
  printf("checksum: %016" PRIx64 "\n", wl_fnv(WL_FNV_OFFSET, got, sizeof(got)));
  return 0;
}
