// kreplay's device-side dirty check, measured side by side in one run on one buffer:
// the chunk hash kernel kreplay ships (kernels.cu, included below), the mix-based hash it
// replaced (kept here as the baseline), the exact comparison kernel, and the copy ceilings
// (device-to-device, pinned host-to-device), the copies also split across 2 and 4 streams.
// Then checks the shipped hash: the same input gives the same hashes, a changed byte
// changes exactly its chunk's hash, a write of the value already there changes nothing.
//   hash_bench MIB
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "../../kreplay-tool/src/cuda/kernels.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(2); } } while (0)

// The hash kernel kreplay shipped before (two lanes of splitmix64-mixed 64-bit words).
__device__ __forceinline__ unsigned long long old_mix(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
extern "C" __global__ void old_hash_chunks(const unsigned char *base, unsigned long long len,
                                           unsigned long long chunk, unsigned long long *out) {
  __shared__ unsigned long long s0[32], s1[32];
  for (unsigned long long c = blockIdx.x; c * chunk < len; c += gridDim.x) {
    unsigned long long start = c * chunk, n = len - start < chunk ? len - start : chunk;
    const unsigned char *p = base + start;
    unsigned long long h0 = 0, h1 = 0, words = (((unsigned long long)p) & 15) ? 0 : n / 16;
    for (unsigned long long w = threadIdx.x; w < words; w += blockDim.x) {
      uint4 v = ((const uint4 *)p)[w];
      unsigned long long lo = ((unsigned long long)v.y << 32) | v.x, hi = ((unsigned long long)v.w << 32) | v.z;
      unsigned long long k = w * 0x9e3779b97f4a7c15ull;
      h0 += old_mix(lo ^ k) + old_mix(hi ^ (k + 0x632be59bd9b4e019ull));
      h1 += old_mix(lo + 0xd6e8feb86659fd93ull * (w + 1)) ^ old_mix(hi - k);
    }
    for (int o = 16; o > 0; o >>= 1) { h0 += __shfl_down_sync(0xffffffffu, h0, o); h1 += __shfl_down_sync(0xffffffffu, h1, o); }
    if ((threadIdx.x & 31) == 0) { s0[threadIdx.x >> 5] = h0; s1[threadIdx.x >> 5] = h1; }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long t0 = 0, t1 = 0;
      for (unsigned i = 0; i < (blockDim.x + 31) / 32; i++) { t0 += s0[i]; t1 += s1[i]; }
      out[2 * c] = t0 ^ n; out[2 * c + 1] = t1;
    }
    __syncthreads();
  }
}

extern "C" __global__ void fill(unsigned *p, size_t words, unsigned salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned)(i * 2654435761u) ^ salt;
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static const unsigned BLOCK = 256, MAX_BLOCKS = 65535;  // as kreplay launches them
static unsigned blocks_for(size_t chunks) { return (unsigned)std::min<size_t>(std::max<size_t>(chunks, 1), MAX_BLOCKS); }

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoull(argv[1], 0, 10) : 1024, bytes = mib << 20;
  unsigned char *a, *b;
  unsigned long long *h;
  unsigned char *dirty;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&h, (bytes / 4096 + 1) * 16));
  CK(cudaMalloc(&dirty, bytes / 4096 + 1));
  fill<<<4096, 256>>>((unsigned *)a, bytes / 4, 0x1234u);
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  void *pinned;
  CK(cudaMallocHost(&pinned, bytes));
  memset(pinned, 7, bytes);
  CK(cudaDeviceSynchronize());
  const unsigned long long seed = 0x9d2c5680a3b1f24dull;
  auto timed = [&](const char *what, size_t chunk, auto fn) {
    double best = 1e30;
    for (int r = 0; r < 7; r++) { CK(cudaDeviceSynchronize()); double t0 = now_ms(); fn(); CK(cudaDeviceSynchronize()); best = std::min(best, now_ms() - t0); }
    CK(cudaGetLastError());
    if (chunk) printf("RESULT %s_chunk%zuK_%zuMiB ms %.3f GB/s %.0f\n", what, chunk >> 10, mib, best, bytes / best / 1e6);
    else printf("RESULT %s_%zuMiB ms %.3f GB/s %.0f\n", what, mib, best, bytes / best / 1e6);
    return best;
  };
  timed("d2d_copy", 0, [&] { CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  timed("pinned_h2d_copy", 0, [&] { CK(cudaMemcpy(a, pinned, bytes, cudaMemcpyHostToDevice)); });
  fill<<<4096, 256>>>((unsigned *)a, bytes / 4, 0x1234u);
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  for (int ns : {2, 4}) {
    std::vector<cudaStream_t> st(ns);
    for (auto &s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t piece = bytes / ns;
    char name[64];
    snprintf(name, sizeof name, "d2d_copy_%dstreams", ns);
    timed(name, 0, [&] { for (int i = 0; i < ns; i++) CK(cudaMemcpyAsync(b + i * piece, a + i * piece, piece, cudaMemcpyDeviceToDevice, st[i])); });
    snprintf(name, sizeof name, "pinned_h2d_copy_%dstreams", ns);
    timed(name, 0, [&] { for (int i = 0; i < ns; i++) CK(cudaMemcpyAsync(b + i * piece, (char *)pinned + i * piece, piece, cudaMemcpyHostToDevice, st[i])); });
    for (auto &s : st) CK(cudaStreamDestroy(s));
  }
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  for (size_t chunk : {16u << 10, 64u << 10, 256u << 10}) {
    size_t chunks = (bytes + chunk - 1) / chunk;
    timed("old_hash", chunk, [&] { old_hash_chunks<<<blocks_for(chunks), BLOCK>>>(a, bytes, chunk, h); });
    timed("new_hash", chunk, [&] { kreplay_hash_chunks<<<blocks_for(chunks), BLOCK>>>(a, bytes, chunk, seed, h); });
    timed("compare", chunk, [&] { kreplay_compare_chunks<<<blocks_for(chunks), BLOCK>>>(a, b, bytes, chunk, dirty); });
  }

  // Checks of the shipped hash, 16 KiB chunks (kreplay's default).
  size_t chunk = 16 << 10, chunks = (bytes + chunk - 1) / chunk;
  std::vector<unsigned long long> h1(2 * chunks), h2(2 * chunks);
  auto hash = [&](std::vector<unsigned long long> &out, const unsigned char *p, size_t len) {
    kreplay_hash_chunks<<<blocks_for((len + chunk - 1) / chunk), BLOCK>>>(p, len, chunk, seed, h);
    CK(cudaMemcpy(out.data(), h, ((len + chunk - 1) / chunk) * 16, cudaMemcpyDeviceToHost));
  };
  int fails = 0;
  auto check = [&](const char *what, long got, long want) {
    printf("%s %s (%ld, want %ld)\n", got == want ? "PASS" : "FAIL", what, got, want);
    fails += got != want;
  };
  auto differing = [&]() { long d = 0; for (size_t c = 0; c < chunks; c++) d += h1[2 * c] != h2[2 * c] || h1[2 * c + 1] != h2[2 * c + 1]; return d; };
  hash(h1, a, bytes);
  hash(h2, a, bytes);
  check("hash_same_input_same_hashes", differing(), 0);
  long distinct = 0;
  for (size_t c = 1; c < chunks; c++) distinct += h1[2 * c] != h1[2 * c - 2];
  check("hash_neighbour_chunks_differ", distinct, (long)chunks - 1);
  // 1000 single-byte changes at pseudo-random offsets, one at a time: each changes exactly
  // its own chunk's hash, and writing the old byte back restores the original hashes.
  long missed = 0, wrong_chunk = 0, not_restored = 0;
  unsigned long long x = 88172645463325252ull;
  for (int t = 0; t < 1000; t++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    size_t off = x % bytes;
    unsigned char old, nw;
    CK(cudaMemcpy(&old, a + off, 1, cudaMemcpyDeviceToHost));
    nw = old ^ (unsigned char)(1u << (t % 8));
    CK(cudaMemcpy(a + off, &nw, 1, cudaMemcpyHostToDevice));
    hash(h2, a, bytes);
    long d = differing();
    bool own = h1[2 * (off / chunk)] != h2[2 * (off / chunk)] || h1[2 * (off / chunk) + 1] != h2[2 * (off / chunk) + 1];
    missed += !own;
    wrong_chunk += d != (own ? 1 : 0);
    CK(cudaMemcpy(a + off, &old, 1, cudaMemcpyHostToDevice));
    if (t % 100 == 0) { hash(h2, a, bytes); not_restored += differing() != 0; }
  }
  check("hash_single_byte_changes_missed", missed, 0);
  check("hash_single_byte_changes_other_chunks", wrong_chunk, 0);
  check("hash_restored_bytes_same_hashes", not_restored, 0);
  // The same value written again: nothing changes.
  CK(cudaMemcpy(a + 12345, a + 12345, 4096, cudaMemcpyDeviceToDevice));
  hash(h2, a, bytes);
  check("hash_same_value_written_unchanged", differing(), 0);
  // Two words swapped inside one 16-byte word and across words: position matters.
  unsigned wbuf[8];
  CK(cudaMemcpy(wbuf, a + 4096, 32, cudaMemcpyDeviceToHost));
  std::swap(wbuf[0], wbuf[5]);
  CK(cudaMemcpy(a + 4096, wbuf, 32, cudaMemcpyHostToDevice));
  hash(h2, a, bytes);
  check("hash_swapped_words_detected", differing(), 1);
  printf("hash_bench_failures %d\n", fails);
  return fails;
}
