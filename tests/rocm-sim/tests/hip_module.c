/* hip_module.c - registration (__hipRegisterFatBinary/Function/Var from a module constructor,
 * loaded lazily per device), device variables from kernels, symbol copies and addresses, the
 * module API (hipModuleLoadData, hipModuleGetFunction/GetGlobal, hipModuleLaunchKernel with
 * kernelParams and with an `extra` buffer), kernels without argument metadata, and one
 * executable per device. Run with KRSIM_GPUS=2 for the per-device part. */
#include "hip_check.h"

/* ------------------------------------------------ registered through KRSIM_MODULE */

KRSIM_DEVICE_VAR(uint32_t, table[4]) = {1, 2, 3, 4};
KRSIM_DEVICE_VAR(const uint32_t, coeff) = 10;

/* out[i] = table[i] * coeff + bias, and bumps table[3]. */
KRSIM_KERNEL(gather, uint32_t*, out, uint32_t, bias) {
  uint32_t* t = (uint32_t*)krsim_var_lookup(vars, "table");
  const uint32_t* c = KRSIM_VAR(coeff);
  if (!t || !c) return;
  KRSIM_FOR_EACH_X(d, i) {
    if (i < 4) args->out[i] = t[i] * *c + args->bias;
  }
  if (d->group_id[0] == 0) __atomic_fetch_add(&t[3], 1, __ATOMIC_RELAXED);
}

#define REG_MODULE(K, V, C) K(gather) V(table) C(coeff)
KRSIM_MODULE(reg_module, REG_MODULE)

/* ------------------------------------------------ loaded through the module API only */

KRSIM_DEVICE_VAR(uint64_t, mod_value) = 777;

KRSIM_KERNEL(mod_add, uint64_t*, out, uint32_t, add, uint64_t, mul) {
  uint64_t* v = KRSIM_VAR(mod_value);
  if (d->group_id[0] == 0) *args->out = *v * args->mul + args->add;
}

/* A kernel without argument metadata: kernarg_size/8 arguments of 8 bytes each. */
KRSIM_EXPORT void __krsim_kernel_raw_add(const krsim_dispatch* d, void* kernarg) {
  uint64_t* out;
  uint64_t add;
  memcpy(&out, kernarg, 8);
  memcpy(&add, (char*)kernarg + 8, 8);
  if (d->group_id[0] == 0) *out += add;
}

static const struct {
  char magic[8];
  uint32_t version, count;
  krsim_co_entry entries[3];
} mod_co = {KRSIM_CO_MAGIC,
            KRSIM_CO_VERSION,
            3,
            {{KRSIM_CO_KIND_KERNEL, 0, mod_add_kernarg_size, "mod_add", &mod_add_argdesc},
             {KRSIM_CO_KIND_KERNEL, 0, 16, "raw_add", NULL},
             {KRSIM_CO_KIND_VARIABLE, 0, sizeof(mod_value), "mod_value", &mod_value}}};

static void test_registered(test_agents ag) {
  uint32_t got[4];
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  for (int i = 0; i < 4; i++) CHECK_EQ(got[i], i + 1);
  size_t size = 0;
  CHECK_HIP(hipGetSymbolSize(&size, &table));
  CHECK_EQ(size, 16);
  void* addr = NULL;
  CHECK_HIP(hipGetSymbolAddress(&addr, &table));
  CHECK(addr != (void*)&table);
  hsa_amd_pointer_info_t pi = pointer_info(addr);
  CHECK_EQ(pi.type, HSA_EXT_POINTER_TYPE_HSA);
  CHECK_EQ(pi.agentOwner.handle, ag.gpu[0].handle);

  uint32_t newer[2] = {50, 60};
  CHECK_HIP(hipMemcpyToSymbol(&table, newer, sizeof(newer), 4, hipMemcpyHostToDevice));
  uint32_t* out;
  CHECK_HIP(hipMalloc((void**)&out, 4 * sizeof(uint32_t)));
  CHECK_HIP(gather(d3(1, 1, 1), d3(4, 1, 1), 0, NULL, out, 7));
  CHECK_HIP(hipMemcpy(got, out, sizeof(got), hipMemcpyDeviceToHost));
  CHECK_EQ(got[0], 1 * 10 + 7);
  CHECK_EQ(got[1], 50 * 10 + 7);
  CHECK_EQ(got[2], 60 * 10 + 7);
  CHECK_EQ(got[3], 4 * 10 + 7);
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(got[3], 5); /* one bump per launch */
  uint32_t c = 0;
  CHECK_HIP(hipMemcpyFromSymbol(&c, &coeff, sizeof(c), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(c, 10);

  /* Errors: unknown symbols, out-of-range copies, wrong directions. */
  int unknown;
  CHECK_HIP_IS(hipGetSymbolAddress(&addr, &unknown), hipErrorInvalidSymbol);
  CHECK_HIP_IS(hipMemcpyToSymbol(&table, newer, 8, 12, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_HIP_IS(hipMemcpyToSymbol(&table, newer, 4, 0, hipMemcpyDeviceToHost),
               hipErrorInvalidMemcpyDirection);
  (void)hipGetLastError();
  CHECK_HIP(hipFree(out));
  puts("ok registered");
}

static void test_module_api(void) {
  hipModule_t m1, m2;
  CHECK_HIP(hipModuleLoadData(&m1, &mod_co));
  CHECK_HIP(hipModuleLoadData(&m2, &mod_co));
  hipFunction_t f1, raw;
  CHECK_HIP(hipModuleGetFunction(&f1, m1, "mod_add"));
  CHECK_HIP(hipModuleGetFunction(&raw, m1, "raw_add"));
  CHECK_HIP_IS(hipModuleGetFunction(&raw, m1, "nope"), hipErrorNotFound);
  CHECK_HIP_IS(hipModuleGetFunction(&raw, m1, "mod_value"), hipErrorNotFound);

  void* g1;
  void* g2;
  size_t bytes = 0;
  CHECK_HIP(hipModuleGetGlobal(&g1, &bytes, m1, "mod_value"));
  CHECK_EQ(bytes, 8);
  CHECK_HIP(hipModuleGetGlobal(&g2, NULL, m2, "mod_value"));
  CHECK(g1 != g2); /* one executable per load */
  CHECK_HIP_IS(hipModuleGetGlobal(&g2, NULL, m2, "mod_add"), hipErrorNotFound);
  uint64_t v = 0;
  CHECK_HIP(hipMemcpy(&v, g1, 8, hipMemcpyDeviceToHost));
  CHECK_EQ(v, 777);
  uint64_t nv = 1000;
  CHECK_HIP(hipMemcpy(g2, &nv, 8, hipMemcpyHostToDevice));

  uint64_t* out;
  CHECK_HIP(hipMalloc((void**)&out, 8));
  uint32_t add = 5;
  uint64_t mul = 3;
  void* params[] = {&out, &add, &mul};
  CHECK_HIP(hipModuleLaunchKernel(f1, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
  CHECK_HIP(hipMemcpy(&v, out, 8, hipMemcpyDeviceToHost));
  CHECK_EQ(v, 777 * 3 + 5);

  /* The same kernel of the second module sees that module's variable; arguments come as one
   * packed buffer through `extra`. */
  hipFunction_t f2;
  CHECK_HIP(hipModuleGetFunction(&f2, m2, "mod_add"));
  mod_add_args packed = {out, 9, 2};
  size_t packed_size = sizeof(packed);
  void* extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &packed, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, HIP_LAUNCH_PARAM_END};
  CHECK_HIP(hipModuleLaunchKernel(f2, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
  CHECK_HIP(hipMemcpy(&v, out, 8, hipMemcpyDeviceToHost));
  CHECK_EQ(v, 1000 * 2 + 9);
  CHECK_HIP_IS(hipModuleLaunchKernel(f2, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra),
               hipErrorInvalidValue);

  /* No metadata: two 8-byte arguments. */
  uint64_t plus = 11;
  void* raw_params[] = {&out, &plus};
  CHECK_HIP(hipModuleLaunchKernel(raw, 1, 1, 1, 1, 1, 1, 0, NULL, raw_params, NULL));
  CHECK_HIP(hipMemcpy(&v, out, 8, hipMemcpyDeviceToHost));
  CHECK_EQ(v, 2009 + 11);

  static const char garbage[64] = "not a code object";
  hipModule_t bad;
  CHECK_HIP_IS(hipModuleLoadData(&bad, garbage), hipErrorInvalidImage);
  (void)hipGetLastError();
  CHECK_HIP(hipModuleUnload(m1));
  CHECK_HIP(hipModuleUnload(m2));
  CHECK_EQ(pointer_info(g1).type, HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_HIP(hipFree(out));
  puts("ok module_api");
}

static void test_per_device(test_agents ag, int count) {
  if (count < 2) return;
  void* a0;
  void* a1;
  CHECK_HIP(hipSetDevice(0));
  CHECK_HIP(hipGetSymbolAddress(&a0, &table));
  CHECK_HIP(hipSetDevice(1));
  int dev = -1;
  CHECK_HIP(hipGetDevice(&dev));
  CHECK_EQ(dev, 1);
  CHECK_HIP(hipGetSymbolAddress(&a1, &table));
  CHECK(a0 != a1);
  CHECK_EQ(pointer_info(a1).agentOwner.handle, ag.gpu[1].handle);
  /* Device 1's copy starts from the initializer and only device-1 launches bump it. */
  uint32_t got[4];
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(got[1], 2);
  CHECK_EQ(got[3], 4);
  uint32_t* out;
  CHECK_HIP(hipMalloc((void**)&out, 16));
  CHECK_EQ(pointer_info(out).agentOwner.handle, ag.gpu[1].handle);
  CHECK_HIP(gather(d3(1, 1, 1), d3(4, 1, 1), 0, NULL, out, 0));
  CHECK_HIP(hipMemcpy(got, out, sizeof(got), hipMemcpyDeviceToHost));
  CHECK_EQ(got[1], 20);
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(got[3], 5);
  /* A launch on a device-1 stream from device 0 runs device 1's executable. */
  hipStream_t s1;
  CHECK_HIP(hipStreamCreate(&s1));
  CHECK_HIP(hipSetDevice(0));
  CHECK_HIP(gather(d3(1, 1, 1), d3(4, 1, 1), 0, s1, out, 0));
  CHECK_HIP(hipStreamSynchronize(s1));
  CHECK_HIP(hipStreamDestroy(s1));
  CHECK_HIP(hipSetDevice(1));
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(got[3], 6);
  CHECK_HIP(hipMemcpy(got, out, sizeof(got), hipMemcpyDeviceToHost));
  CHECK_EQ(got[3], 50);
  /* hipMemcpyPeer from device 1 memory to device 0 memory; a stream waits for an event. */
  uint32_t* out1;
  CHECK_HIP(hipMalloc((void**)&out1, 16));
  CHECK_HIP(gather(d3(1, 1, 1), d3(4, 1, 1), 0, NULL, out1, 1));
  hipEvent_t ev;
  CHECK_HIP(hipEventCreate(&ev));
  CHECK_HIP(hipEventRecord(ev, NULL));
  CHECK_HIP(hipSetDevice(0));
  CHECK_HIP(hipStreamWaitEvent(NULL, ev, 0));
  uint32_t* out0;
  CHECK_HIP(hipMalloc((void**)&out0, 16));
  CHECK_HIP(hipMemcpyPeer(out0, 0, out1, 1, 16));
  CHECK_HIP(hipMemcpy(got, out0, sizeof(got), hipMemcpyDeviceToHost));
  CHECK_EQ(got[1], 21);
  CHECK_EQ(pointer_info(out0).agentOwner.handle, ag.gpu[0].handle);
  CHECK_HIP(hipEventDestroy(ev));
  CHECK_HIP(hipFree(out0));
  CHECK_HIP(hipSetDevice(1));
  CHECK_HIP(hipFree(out1));
  CHECK_HIP(hipFree(out));
  CHECK_HIP(hipSetDevice(0));
  CHECK_HIP(hipMemcpyFromSymbol(got, &table, sizeof(got), 0, hipMemcpyDeviceToHost));
  CHECK_EQ(got[1], 50);
  CHECK_EQ(got[3], 5);
  CHECK_HIP_IS(hipSetDevice(count), hipErrorInvalidDevice);
  (void)hipGetLastError();
  puts("ok per_device");
}

int main(void) {
  CHECK_HIP(hipInit(0));
  int count = 0;
  CHECK_HIP(hipGetDeviceCount(&count));
  printf("devices: %d\n", count);
  test_agents ag = agents();
  CHECK_EQ(ag.ngpu, count);
  test_registered(ag);
  test_module_api();
  test_per_device(ag, count);
  puts("PASS");
  return 0;
}
