// Device-side helpers of kreplay's CUDA backend: the per-chunk exact comparison and the
// per-chunk 128-bit hash the replay engine uses to restore only what a pass changed.
// Compiled to PTX (kernels.ptx, committed beside this file) on the GPU machine with
//   nvcc -ptx -arch=compute_75 -o kernels.ptx kernels.cu
// and loaded at run time with cuModuleLoadData: kreplay has no build-time CUDA dependency.
// One block per chunk (grid-stride over chunks); 16-byte loads when both sides are aligned.

__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
  // splitmix64's finalizer: a bijection of 64-bit words.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

extern "C" __global__ void kreplay_compare_chunks(const unsigned char *a, const unsigned char *b,
                                                  unsigned long long len, unsigned long long chunk,
                                                  unsigned char *dirty) {
  for (unsigned long long c = blockIdx.x; c * chunk < len; c += gridDim.x) {
    unsigned long long start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    const unsigned char *pa = a + start, *pb = b + start;
    int diff = 0;
    unsigned long long words = ((((unsigned long long)pa) | ((unsigned long long)pb)) & 15) ? 0 : n / 16;
    for (unsigned long long w = threadIdx.x; w < words && !diff; w += blockDim.x) {
      uint4 x = ((const uint4 *)pa)[w], y = ((const uint4 *)pb)[w];
      diff = (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    for (unsigned long long i = words * 16 + threadIdx.x; i < n && !diff; i += blockDim.x)
      diff = pa[i] != pb[i];
    diff = __syncthreads_or(diff);
    if (threadIdx.x == 0) dirty[c] = diff ? 1 : 0;
    __syncthreads();
  }
}

// Two 64-bit lanes, each a sum over the chunk's 16-byte words (and tail bytes) of a bijective
// mix of the word keyed by its position. Integer sums are order-independent, so the result
// does not depend on the thread schedule. A change of one word always changes both lanes.
extern "C" __global__ void kreplay_hash_chunks(const unsigned char *base, unsigned long long len,
                                               unsigned long long chunk, unsigned long long *out) {
  __shared__ unsigned long long s0[32], s1[32];
  for (unsigned long long c = blockIdx.x; c * chunk < len; c += gridDim.x) {
    unsigned long long start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    const unsigned char *p = base + start;
    unsigned long long h0 = 0, h1 = 0;
    unsigned long long words = (((unsigned long long)p) & 15) ? 0 : n / 16;
    for (unsigned long long w = threadIdx.x; w < words; w += blockDim.x) {
      uint4 v = ((const uint4 *)p)[w];
      unsigned long long lo = ((unsigned long long)v.y << 32) | v.x;
      unsigned long long hi = ((unsigned long long)v.w << 32) | v.z;
      unsigned long long k = w * 0x9e3779b97f4a7c15ull;
      h0 += mix(lo ^ k) + mix(hi ^ (k + 0x632be59bd9b4e019ull));
      h1 += mix(lo + 0xd6e8feb86659fd93ull * (w + 1)) ^ mix(hi - k);
    }
    for (unsigned long long i = words * 16 + threadIdx.x; i < n; i += blockDim.x) {
      unsigned long long k = (i + 1) * 0xc2b2ae3d27d4eb4full;
      h0 += mix(p[i] ^ k);
      h1 += mix(p[i] + (k << 1));
    }
    for (int o = 16; o > 0; o >>= 1) {
      h0 += __shfl_down_sync(0xffffffffu, h0, o);
      h1 += __shfl_down_sync(0xffffffffu, h1, o);
    }
    if ((threadIdx.x & 31) == 0) { s0[threadIdx.x >> 5] = h0; s1[threadIdx.x >> 5] = h1; }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long t0 = 0, t1 = 0;
      for (unsigned i = 0; i < (blockDim.x + 31) / 32; i++) { t0 += s0[i]; t1 += s1[i]; }
      out[2 * c] = t0 ^ n;
      out[2 * c + 1] = t1;
    }
    __syncthreads();
  }
}

// A restore's dirty runs in one launch: run r copies runs[3r + 2] bytes from runs[3r + 1] to
// runs[3r]. The host splits runs so none is large (one block copies one run).
extern "C" __global__ void kreplay_copy_runs(const unsigned long long *runs, unsigned long long n) {
  for (unsigned long long r = blockIdx.x; r < n; r += gridDim.x) {
    unsigned long long dst = runs[3 * r], src = runs[3 * r + 1], len = runs[3 * r + 2];
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (((dst | src | len) & 15) == 0) {
      for (unsigned long long w = threadIdx.x; w < len / 16; w += blockDim.x)
        ((uint4 *)d)[w] = ((const uint4 *)s)[w];
    } else {
      for (unsigned long long i = threadIdx.x; i < len; i += blockDim.x) d[i] = s[i];
    }
  }
}
