// Device-side helpers of kreplay's CUDA backend: the per-chunk exact comparison, the
// per-chunk 128-bit hash (of one region, or of many in one launch), the one-pass restore of changed chunks (and the publication of its
// counters to the host) and the run copy the replay engine uses to restore only what a pass
// changed.
// Compiled to PTX (kernels.ptx, committed beside this file) with CUDA 13.0's nvcc:
//   nvcc -ptx -arch=compute_75 -o kernels.ptx kernels.cu
// on the GPU machine, or on any x86-64 machine with PyPI's nvidia-cuda-nvcc, nvidia-nvvm and
// nvidia-cuda-crt 13.0.88 and nvidia-cuda-runtime 13.0.* (their nvidia/cu13/bin on PATH): both
// give the same bytes. A newer NVVM writes a PTX version the 580 driver cannot load.
// and loaded at run time with cuModuleLoadData: kreplay has no build-time CUDA dependency.
// One block per chunk (grid-stride over chunks, or a stretch of consecutive chunks per block
// over a job table); 16-byte loads when both sides are aligned.

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

// Per-chunk 128-bit hash: two NH lanes (the universal hash of UMAC) over the chunk's 32-bit
// words. Each 16-byte word (x, y, z, w) at index i adds, with 32-bit additions and exact
// 32x32->64-bit products,
//   lane 0: (x + k0)(y + k1) + (z + k2)(w + k3)
//   lane 1: (x + k4)(z + k5) + (y + k6)(w + k7)
// where the keys are drawn from i and the caller's 64-bit seed (one per process, random).
// NH's collision bound for independent random keys is 2^-32 per lane; the two lanes pair
// the words differently, so a change is missed only when both miss (about 2^-64). A change of
// one word is missed only when both of its partners equal minus their keys. Sums do not
// depend on the thread schedule. Only 32-bit multiplies: 64-bit ones are emulated on the GPU
// and made the previous mix-based hash compute-bound at a fraction of memory bandwidth.
// Four words per thread in flight.
__device__ __forceinline__ unsigned long long nh(unsigned a, unsigned b) {
  return (unsigned long long)a * b;
}

__device__ __forceinline__ void nh_word(uint4 v, unsigned i, unsigned s0, unsigned s1,
                                        unsigned long long &h0, unsigned long long &h1) {
  unsigned k = i * 0x9e3779b1u + s0, j = i * 0x85ebca77u + s1;
  h0 += nh(v.x + k, v.y + j) + nh(v.z + (k ^ 0xc2b2ae3du), v.w + (j ^ 0x27d4eb2fu));
  h1 += nh(v.x + (k ^ 0x165667b1u), v.z + (j ^ 0xd3a2646cu)) +
        nh(v.y + (k ^ 0xfd7046c5u), v.w + (j ^ 0xb55a4f09u));
}

// The hash of the chunk of `n` bytes at `p` (as above), summed over the block: the result is
// valid in thread 0 only. `s0`/`s1` are the block's 32-entry shared scratch; the caller
// synchronizes the block before they are used again. With `dst`, the chunk is also copied
// there from the same loads (a snapshot copied and hashed in one read).
__device__ __forceinline__ void chunk_hash(const unsigned char *p, unsigned long long n,
                                           unsigned seed0, unsigned seed1,
                                           unsigned long long *s0, unsigned long long *s1,
                                           unsigned long long &t0, unsigned long long &t1,
                                           unsigned char *dst) {
  unsigned long long h0 = 0, h1 = 0;
  // Chunks are at most 4 GiB (the engine's limit is far lower): word indexes fit 32 bits.
  unsigned words = ((((unsigned long long)p) | ((unsigned long long)dst)) & 15) ? 0 : (unsigned)(n / 16);
  const uint4 *q = (const uint4 *)p;
  uint4 *d = (uint4 *)dst;
  unsigned b = blockDim.x, w = threadIdx.x;
  for (; w + 3 * b < words; w += 4 * b) {
    uint4 v0 = q[w], v1 = q[w + b], v2 = q[w + 2 * b], v3 = q[w + 3 * b];
    if (d) {
      d[w] = v0;
      d[w + b] = v1;
      d[w + 2 * b] = v2;
      d[w + 3 * b] = v3;
    }
    nh_word(v0, w, seed0, seed1, h0, h1);
    nh_word(v1, w + b, seed0, seed1, h0, h1);
    nh_word(v2, w + 2 * b, seed0, seed1, h0, h1);
    nh_word(v3, w + 3 * b, seed0, seed1, h0, h1);
  }
  for (; w < words; w += b) {
    uint4 v = q[w];
    if (d) d[w] = v;
    nh_word(v, w, seed0, seed1, h0, h1);
  }
  // Tail bytes (and every byte of a chunk not 16-byte aligned): an odd multiplier is a
  // bijection, so a changed byte always changes its term.
  for (unsigned long long i = (unsigned long long)words * 16 + threadIdx.x; i < n; i += blockDim.x) {
    unsigned char c = p[i];
    if (dst) dst[i] = c;
    unsigned k = (unsigned)i * 0x9e3779b1u + seed0;
    h0 += nh(c + k, (seed1 ^ (unsigned)i) | 1u);
    h1 += nh(c + (k ^ 0x165667b1u), (seed0 + (unsigned)i) | 1u);
  }
  for (int o = 16; o > 0; o >>= 1) {
    h0 += __shfl_down_sync(0xffffffffu, h0, o);
    h1 += __shfl_down_sync(0xffffffffu, h1, o);
  }
  if ((threadIdx.x & 31) == 0) { s0[threadIdx.x >> 5] = h0; s1[threadIdx.x >> 5] = h1; }
  __syncthreads();
  t0 = 0;
  t1 = 0;
  if (threadIdx.x == 0) {
    for (unsigned i = 0; i < (blockDim.x + 31) / 32; i++) { t0 += s0[i]; t1 += s1[i]; }
    t0 ^= n;
  }
}

extern "C" __global__ void kreplay_hash_chunks(const unsigned char *base, unsigned long long len,
                                               unsigned long long chunk, unsigned long long seed,
                                               unsigned long long *out) {
  __shared__ unsigned long long s0[32], s1[32];
  const unsigned seed0 = (unsigned)seed, seed1 = (unsigned)(seed >> 32);
  for (unsigned long long c = blockIdx.x; c * chunk < len; c += gridDim.x) {
    unsigned long long start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    unsigned long long t0, t1;
    chunk_hash(base + start, n, seed0, seed1, s0, s1, t0, t1, 0);
    if (threadIdx.x == 0) {
      out[2 * c] = t0;
      out[2 * c + 1] = t1;
    }
    __syncthreads();
  }
}

// The last job of a job table of `stride`-word jobs whose first chunk (word 4) is at or
// before global chunk `g` (jobs of length 0 share their successor's first chunk and are
// passed over).
__device__ __forceinline__ unsigned long long job_of(const unsigned long long *jobs,
                                                     unsigned long long stride,
                                                     unsigned long long njobs,
                                                     unsigned long long g) {
  unsigned long long lo = 0, hi = njobs;
  while (hi - lo > 1) {
    unsigned long long mid = (lo + hi) / 2;
    if (jobs[stride * mid + 4] <= g) lo = mid; else hi = mid;
  }
  return lo;
}

// The stretch of the `total` chunks block `blockIdx.x` takes: consecutive chunks, so that the
// block finds the first one's job by a binary search and every later one's by stepping
// forward (a search per chunk over a table of thousands of pieces was a chain of a dozen
// dependent loads per 16 KiB chunk, and made the one-pass restore of a footprint cut into
// 4096 pieces half as fast as hashing it).
__device__ __forceinline__ void block_stretch(unsigned long long total, unsigned long long &begin,
                                              unsigned long long &end) {
  unsigned long long per = (total + gridDim.x - 1) / gridDim.x;
  begin = blockIdx.x * per;
  end = begin + per < total ? begin + per : total;
}

// `j` (the job of an earlier chunk) stepped forward to the job of chunk `g` (as job_of).
__device__ __forceinline__ unsigned long long job_step(const unsigned long long *jobs,
                                                       unsigned long long stride,
                                                       unsigned long long njobs,
                                                       unsigned long long j,
                                                       unsigned long long g) {
  while (j + 1 < njobs && jobs[stride * (j + 1) + 4] <= g) j++;
  return j;
}

// kreplay_hash_chunks over many regions in one launch. `jobs` holds `njobs` regions of 6
// words each: address, where to copy the region to (0: nowhere), length, address of the
// region's output (16 bytes per chunk), index of the region's first chunk among all `total`
// chunks (increasing), unused. Each block takes a stretch of chunks and, for each, finds its
// region, copies the chunk when asked (from the same loads it hashes) and writes the chunk's
// hash where kreplay_hash_chunks would have written it for that region alone.
// The kernels that walk a job table carry __launch_bounds__(256, 6): at most 40 registers,
// so six blocks of 256 threads fit on an SM. A chunk's hash is one round of loads per thread
// and these kernels are bound by how many chunks are in flight: unbounded, the restore used
// 56 registers (four blocks an SM) and ran 10-20% slower on the H200; eight blocks (32
// registers) spilled and was slower again (docs/gpu/h200-replay-cost.md).
#define KREPLAY_TABLE_BOUNDS __launch_bounds__(256, 6)

extern "C" __global__ void KREPLAY_TABLE_BOUNDS kreplay_hash_regions(const unsigned long long *jobs,
                                                unsigned long long njobs,
                                                unsigned long long total,
                                                unsigned long long chunk,
                                                unsigned long long seed) {
  __shared__ unsigned long long s0[32], s1[32];
  const unsigned seed0 = (unsigned)seed, seed1 = (unsigned)(seed >> 32);
  unsigned long long begin, end;
  block_stretch(total, begin, end);
  unsigned long long j = begin < end ? job_of(jobs, 6, njobs, begin) : 0;
  for (unsigned long long g = begin; g < end; g++) {
    j = job_step(jobs, 6, njobs, j, g);
    const unsigned long long *job = jobs + 6 * j;
    const unsigned char *base = (const unsigned char *)job[0];
    const unsigned long long len = job[2];
    unsigned long long *out = (unsigned long long *)job[3];
    unsigned long long c = g - job[4], start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    unsigned char *copy = job[1] ? (unsigned char *)job[1] + start : 0;
    unsigned long long t0, t1;
    chunk_hash(base + start, n, seed0, seed1, s0, s1, t0, t1, copy);
    if (threadIdx.x == 0) {
      out[2 * c] = t0;
      out[2 * c + 1] = t1;
    }
    __syncthreads();
  }
}

// Copies `n` bytes from `src` to `dst` with the whole block, 16 bytes per load when both are
// aligned, four loads per thread in flight.
__device__ __forceinline__ void block_copy(unsigned char *__restrict__ dst,
                                           const unsigned char *__restrict__ src,
                                           unsigned long long n) {
  unsigned long long words = ((((unsigned long long)dst) | ((unsigned long long)src)) & 15) ? 0 : n / 16;
  uint4 *d = (uint4 *)dst;
  const uint4 *s = (const uint4 *)src;
  unsigned long long b = blockDim.x, w = threadIdx.x;
  for (; w + 3 * b < words; w += 4 * b) {
    uint4 v0 = s[w], v1 = s[w + b], v2 = s[w + 2 * b], v3 = s[w + 3 * b];
    d[w] = v0;
    d[w + b] = v1;
    d[w + 2 * b] = v2;
    d[w + 3 * b] = v3;
  }
  for (; w < words; w += b) d[w] = s[w];
  for (unsigned long long i = words * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

// A whole device-resident restore in one pass and one launch. `jobs` holds `njobs` regions
// of 7 words each: live address, snapshot copy address, length, address of the snapshot's
// hashes (16 bytes per chunk, from kreplay_hash_chunks with the same seed), index of the
// region's first chunk among all `total` chunks (increasing), the address where the live
// chunks' hashes are kept (16 bytes per chunk; 0: not kept) and the address of reference
// hashes to compare the live ones with (16 bytes per chunk; 0: none). Each block takes a
// stretch of chunks; for each it hashes the live chunk as kreplay_hash_chunks does, keeps
// that hash where asked (the determinism check of the pass that wrote it: no second read of
// the footprint), adds 1 to counts[3j + 2] when it differs from the reference (that check's
// comparison, with no launch of its own), compares it with the snapshot's and, when they
// differ, copies the chunk back from the copy and adds 1 and its length to counts[3j] and
// counts[3j + 1] (never reset: the host reads the growth). Neither hashes nor runs go through
// the host. Unchanged chunks are read once; changed ones are read, then rewritten from the
// copy.
extern "C" __global__ void KREPLAY_TABLE_BOUNDS kreplay_restore_regions(const unsigned long long *jobs,
                                                   unsigned long long njobs,
                                                   unsigned long long total,
                                                   unsigned long long chunk,
                                                   unsigned long long seed,
                                                   unsigned long long *counts) {
  __shared__ unsigned long long s0[32], s1[32];
  __shared__ int changed;
  const unsigned seed0 = (unsigned)seed, seed1 = (unsigned)(seed >> 32);
  unsigned long long begin, end;
  block_stretch(total, begin, end);
  unsigned long long lo = begin < end ? job_of(jobs, 7, njobs, begin) : 0;
  for (unsigned long long g = begin; g < end; g++) {
    lo = job_step(jobs, 7, njobs, lo, g);
    const unsigned long long *job = jobs + 7 * lo;
    unsigned char *live = (unsigned char *)job[0];
    const unsigned char *copy = (const unsigned char *)job[1];
    const unsigned long long len = job[2], *expected = (const unsigned long long *)job[3];
    unsigned long long c = g - job[4], start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    // The hashes this chunk's is compared with, loaded before the chunk is read, so that
    // their latency hides behind the chunk's.
    unsigned long long e0 = 0, e1 = 0, r0 = 0, r1 = 0;
    const unsigned long long *ref = (const unsigned long long *)job[6];
    if (threadIdx.x == 0) {
      e0 = expected[2 * c];
      e1 = expected[2 * c + 1];
      if (ref) {
        r0 = ref[2 * c];
        r1 = ref[2 * c + 1];
      }
    }
    unsigned long long t0, t1;
    chunk_hash(live + start, n, seed0, seed1, s0, s1, t0, t1, 0);
    if (threadIdx.x == 0) {
      if (job[5]) {
        unsigned long long *kept = (unsigned long long *)job[5];
        kept[2 * c] = t0;
        kept[2 * c + 1] = t1;
      }
      if (ref && (t0 != r0 || t1 != r1)) atomicAdd(counts + 3 * lo + 2, 1ull);
      changed = t0 != e0 || t1 != e1;
      if (changed) {
        atomicAdd(counts + 3 * lo, 1ull);
        atomicAdd(counts + 3 * lo + 1, n);
      }
    }
    __syncthreads();
    if (changed) block_copy(live + start, copy + start, n);
    __syncthreads();
  }
}

// Publishes the one-pass restore's counters to the host, run right after
// kreplay_restore_regions on the same stream: copies the `n` counters into `host_out` (mapped,
// pinned host memory of n + 1 words), then adds one to the sequence number in counts[n] and
// writes it after them. The host watches that word instead of copying the counters back after
// the kernel: that copy is a quarter of a small restore (docs/gpu/h200-restore.md). The
// sequence number lives on the device so that the pair of kernels can be replayed as one
// captured graph without new parameters. (The last block of the restore kernel itself could
// publish, but the ticket every block then takes before it retires costs more than the copy
// saves on large footprints, where the blocks number tens of thousands.) One block.
extern "C" __global__ void kreplay_publish_counts(unsigned long long *counts, unsigned long long n,
                                                  volatile unsigned long long *host_out) {
  if (host_out == 0) return;
  for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) host_out[i] = counts[i];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long seq = counts[n] + 1;
    counts[n] = seq;
    host_out[n] = seq;
    __threadfence_system();
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
