// The module tests/gpu/driver_api.cu loads, and the source of kreplay-tool's cubin/fatbin
// fixtures (kreplay-tool/tests/fixtures/): writable, initialized, namespaced and constant
// module-scope variables. The write to ns::scoped is a deliberate race (threads i, i+4, ...
// store different values in one slot): kreplay's determinism check must report `bump`.
__device__ unsigned bumps;
__device__ float table[256] = {1.0f};
namespace ns { __device__ int scoped[4]; }
__constant__ float coeffs[16];

extern "C" __global__ void bump(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { p[i] += 1.0f + coeffs[0] + table[0] * 0.0f; atomicAdd(&bumps, 1u); ns::scoped[i & 3] = i; }
}
