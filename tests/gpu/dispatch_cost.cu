// The fixed cost of one replayed dispatch, piece by piece, over a PyTorch-like set of regions:
// per-region call patterns (one launch, copy, allocation or wait per region, as the engine made
// them before it batched them) timed next to batched alternatives, on the same live regions. kreplay's own
// kernels (kernels.cu) do the hashing, launched as kreplay launches them (256 threads, at most
// 65535 blocks, the legacy default stream).
//
//   dispatch_cost SIZES_FILE [REPS]     one region size in bytes per line (e.g. from a
//                                        replay's debug log: tests/gpu/replay_cost.sh)
//   dispatch_cost synthetic:N:BYTES [REPS]
//   dispatch_cost SIZES [REPS] VARS.cubin NVARS   also times cuModuleGetGlobal over NVARS
//                                        variables kv0..kv{NVARS-1} of a cubin (the engine
//                                        resolves every module variable by name per snapshot)
//
// Prints `RESULT name us X` (median of REPS, default 20) and what each stands for:
//   det_hash_per_region     the determinism check of one pass as replay.rs hash_regions does
//                           it on CUDA: per region, kreplay_hash_chunks over 4 KiB chunks,
//                           cuCtxSynchronize, a DtoH of its 16-byte hashes through a pinned
//                           buffer, copied out and folded to 64 bits on the host, then compared
//                           with pass 0's on the host
//   det_hash_launches_one_sync   the same launches back to back, one synchronize, one DtoH of
//                           all hashes, folded and compared on the host
//   det_hash_one_launch_devcmp   one launch over every region's chunks that hashes and compares
//                           with pass 0's hashes on the device (atomicMin of the first
//                           differing chunk), one synchronize, 8 bytes read back
//   snap_alloc_per_region   cuMemGetInfo + cuMemAlloc per region (device_alloc_copy)
//   snap_free_per_region    cuMemFree per region (the snapshot's drop, arena None)
//   snap_copy_sync_per_region   per region cuMemcpyDtoD + cuCtxSynchronize (dtod)
//   snap_copy_one_sync      every region's DtoD queued, one synchronize
//   snap_hash_sync_per_region   per region kreplay_hash_chunks (16 KiB) + synchronize
//                           (hash_into_device)
//   snap_hash_one_launch    one launch hashing every region's 16 KiB chunks into one buffer
//   snap_copy_one_launch    every region copied into one arena buffer by one kreplay_copy_runs
//                           launch (pieces of at most 1 MiB, the table uploaded each time)
//   module_get_global       one cuModuleGetGlobal by name (with a cubin argument)
//   ESTIMATE today_pP / fix_pP   the pieces summed for P passes, as the engine pays them today
//                           and with the batched calls (see the end of main)
//   graph_capture           capturing the one-pass restore + publication pair as a graph,
//                           instantiated and uploaded (per snapshot: new addresses each time)
//   restore_one_pass_clean  the one-pass restore kernel over every region, nothing changed
//   empty_launch_sync, sync_idle, memgetinfo, dtoh_16B   per-call floors
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>
#include "../../kreplay-tool/src/cuda/kernels.cu"

#define CK(x) do { cudaError_t ck_ = (x); if (ck_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(ck_)); exit(2); } } while (0)

static const unsigned BLOCK = 256, MAX_BLOCKS = 65535;  // as kreplay launches them
static unsigned blocks_for(size_t chunks) { return (unsigned)std::min<size_t>(std::max<size_t>(chunks, 1), MAX_BLOCKS); }
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Hashes every region's chunks in one launch: jobs holds 3 words per region (address, length,
// index of its first chunk among all `total`), chunk g's hash goes to out[2g], and with `prev`
// the first chunk whose hash differs from prev's goes to *first (atomicMin).
extern "C" __global__ void bench_hash_regions(const unsigned long long *jobs, unsigned long long njobs,
                                              unsigned long long total, unsigned long long chunk,
                                              unsigned long long seed, unsigned long long *out,
                                              const unsigned long long *prev, unsigned long long *first) {
  __shared__ unsigned long long s0[32], s1[32];
  const unsigned seed0 = (unsigned)seed, seed1 = (unsigned)(seed >> 32);
  for (unsigned long long g = blockIdx.x; g < total; g += gridDim.x) {
    unsigned long long lo = 0, hi = njobs;
    while (hi - lo > 1) {
      unsigned long long mid = (lo + hi) / 2;
      if (jobs[3 * mid + 2] <= g) lo = mid; else hi = mid;
    }
    const unsigned long long *job = jobs + 3 * lo;
    const unsigned char *base = (const unsigned char *)job[0];
    unsigned long long len = job[1], c = g - job[2], start = c * chunk;
    unsigned long long n = len - start < chunk ? len - start : chunk;
    unsigned long long t0, t1;
    chunk_hash(base + start, n, seed0, seed1, s0, s1, t0, t1, 0);
    if (threadIdx.x == 0) {
      out[2 * g] = t0;
      out[2 * g + 1] = t1;
      if (prev && (prev[2 * g] != t0 || prev[2 * g + 1] != t1)) atomicMin(first, g);
    }
    __syncthreads();
  }
}

extern "C" __global__ void bench_fill(unsigned *p, size_t words, unsigned salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned)(i * 2654435761u) ^ salt;
}
extern "C" __global__ void bench_empty() {}

static double snap_copy_one_launch_or(double a, double b) { return std::min(a, b); }
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: dispatch_cost SIZES_FILE|synthetic:N:BYTES [REPS]\n"); return 2; }
  int reps = argc > 2 ? atoi(argv[2]) : 20;
  std::vector<size_t> sizes;
  std::string src = argv[1];
  if (src.rfind("synthetic:", 0) == 0) {
    size_t n = 0, b = 0;
    sscanf(src.c_str() + 10, "%zu:%zu", &n, &b);
    sizes.assign(n, b);
  } else {
    std::ifstream f(src);
    unsigned long long s;
    while (f >> s) if (s) sizes.push_back(s);
  }
  if (sizes.empty()) { fprintf(stderr, "no region sizes\n"); return 2; }
  size_t total = 0, biggest = 0;
  for (size_t s : sizes) { total += s; biggest = std::max(biggest, s); }
  const size_t R = sizes.size();
  auto chunks_of = [](size_t len, size_t chunk) { return (len + chunk - 1) / chunk; };
  size_t c4 = 0, c16 = 0;
  for (size_t s : sizes) { c4 += chunks_of(s, 4096); c16 += chunks_of(s, 16384); }
  printf("regions %zu bytes %zu (%.1f MB) biggest %zu chunks4K %zu chunks16K %zu reps %d\n", R, total, total / 1e6, biggest, c4, c16, reps);

  // The live regions, one allocation each (PyTorch's caching allocator segments are separate
  // cuMemAlloc ranges too), filled with data.
  std::vector<unsigned char *> live(R);
  for (size_t i = 0; i < R; i++) {
    CK(cudaMalloc(&live[i], sizes[i]));
    bench_fill<<<1024, 256>>>((unsigned *)live[i], sizes[i] / 4, (unsigned)i);
  }
  CK(cudaDeviceSynchronize());
  const unsigned long long seed = 0x9d2c5680a3b1f24dull;

  auto timed = [&](const char *name, std::function<void()> setup, std::function<void()> fn) {
    std::vector<double> t;
    for (int r = 0; r < reps + 1; r++) {
      if (setup) setup();
      CK(cudaDeviceSynchronize());
      double t0 = now_us();
      fn();
      CK(cudaDeviceSynchronize());
      if (r) t.push_back(now_us() - t0);  // the first is a warm-up
    }
    CK(cudaGetLastError());
    double m = median(t);
    printf("RESULT %s us %.1f per_region_us %.2f\n", name, m, m / R);
    return m;
  };

  // Floors.
  bench_empty<<<1, 1>>>();
  CK(cudaDeviceSynchronize());
  unsigned long long *dsmall;
  CK(cudaMalloc(&dsmall, 4096));
  void *psmall;
  CK(cudaMallocHost(&psmall, 4096));
  {
    std::vector<double> a, b, c, d;
    for (int r = 0; r < 200; r++) {
      double t0 = now_us(); bench_empty<<<1, 256>>>(); CK(cudaDeviceSynchronize()); double t1 = now_us();
      CK(cudaDeviceSynchronize()); double t2 = now_us();
      size_t fr, to; CK(cudaMemGetInfo(&fr, &to)); double t3 = now_us();
      CK(cudaMemcpy(psmall, dsmall, 16, cudaMemcpyDeviceToHost)); double t4 = now_us();
      a.push_back(t1 - t0); b.push_back(t2 - t1); c.push_back(t3 - t2); d.push_back(t4 - t3);
    }
    printf("RESULT empty_launch_sync us %.2f\nRESULT sync_idle us %.2f\nRESULT memgetinfo us %.2f\nRESULT dtoh_16B us %.2f\n",
           median(a), median(b), median(c), median(d));
  }

  // --- The determinism check of one pass (4 KiB blocks).
  unsigned long long *hout, *hprev, *dfirst;
  CK(cudaMalloc(&hout, c4 * 16));
  CK(cudaMalloc(&hprev, c4 * 16));
  CK(cudaMalloc(&dfirst, 8));
  unsigned char *pinned;  // as kernel_buffers.rs: a pinned buffer the size of the output
  CK(cudaMallocHost((void **)&pinned, std::max<size_t>(c4 * 16, biggest / 4096 * 17 + 64)));
  std::vector<std::vector<unsigned long long>> first_pass;
  auto fold_compare = [&](std::vector<std::vector<unsigned long long>> &now) {
    if (first_pass.empty()) { first_pass = now; return; }
    size_t diff = 0;
    for (size_t i = 0; i < R; i++) diff += now[i] != first_pass[i];
    if (diff) printf("unexpected: %zu regions differ\n", diff);
  };
  auto per_region = [&] {
    std::vector<std::vector<unsigned long long>> out;
    out.reserve(R);
    std::vector<std::array<unsigned long long, 2>> wide;
    for (size_t i = 0; i < R; i++) {
      size_t n = chunks_of(sizes[i], 4096);
      wide.assign(n, {0, 0});
      kreplay_hash_chunks<<<blocks_for(n), BLOCK>>>(live[i], sizes[i], 4096, seed, hout);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(pinned, hout, n * 16, cudaMemcpyDeviceToHost));
      memcpy(wide.data(), pinned, n * 16);
      std::vector<unsigned long long> folded(n);
      for (size_t k = 0; k < n; k++) folded[k] = wide[k][0] ^ ((wide[k][1] << 29) | (wide[k][1] >> 35));
      out.push_back(std::move(folded));
    }
    fold_compare(out);
  };
  double det_hash_per_region = timed("det_hash_per_region", nullptr, per_region);
  first_pass.clear();
  std::vector<size_t> first4(R + 1, 0), first16(R + 1, 0);
  for (size_t i = 0; i < R; i++) { first4[i + 1] = first4[i] + chunks_of(sizes[i], 4096); first16[i + 1] = first16[i] + chunks_of(sizes[i], 16384); }
  auto launches_one_sync = [&] {
    for (size_t i = 0; i < R; i++) {
      size_t n = chunks_of(sizes[i], 4096);
      kreplay_hash_chunks<<<blocks_for(n), BLOCK>>>(live[i], sizes[i], 4096, seed, hout + 2 * first4[i]);
    }
    CK(cudaMemcpy(pinned, hout, c4 * 16, cudaMemcpyDeviceToHost));
    std::vector<std::vector<unsigned long long>> out(R);
    const unsigned long long *w = (const unsigned long long *)pinned;
    for (size_t i = 0; i < R; i++) {
      out[i].resize(first4[i + 1] - first4[i]);
      for (size_t k = first4[i]; k < first4[i + 1]; k++) out[i][k - first4[i]] = w[2 * k] ^ ((w[2 * k + 1] << 29) | (w[2 * k + 1] >> 35));
    }
    fold_compare(out);
  };
  double det_hash_launches_one_sync = timed("det_hash_launches_one_sync", nullptr, launches_one_sync);
  auto make_jobs = [&](const std::vector<size_t> &first, std::vector<unsigned long long> &tab) {
    tab.clear();
    for (size_t i = 0; i < R; i++) tab.insert(tab.end(), {(unsigned long long)live[i], sizes[i], first[i]});
  };
  std::vector<unsigned long long> tab4, tab16;
  make_jobs(first4, tab4);
  make_jobs(first16, tab16);
  unsigned long long *djobs4, *djobs16;
  CK(cudaMalloc(&djobs4, tab4.size() * 8));
  CK(cudaMalloc(&djobs16, tab16.size() * 8));
  CK(cudaMemcpy(djobs4, tab4.data(), tab4.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(djobs16, tab16.data(), tab16.size() * 8, cudaMemcpyHostToDevice));
  // Pass 0's hashes.
  bench_hash_regions<<<blocks_for(c4), BLOCK>>>(djobs4, R, c4, 4096, seed, hprev, nullptr, nullptr);
  CK(cudaDeviceSynchronize());
  unsigned long long *pfirst = (unsigned long long *)psmall;
  double det_hash_one_launch_devcmp = timed("det_hash_one_launch_devcmp", nullptr, [&] {
    CK(cudaMemsetAsync(dfirst, 0xff, 8));
    bench_hash_regions<<<blocks_for(c4), BLOCK>>>(djobs4, R, c4, 4096, seed, hout, hprev, dfirst);
    CK(cudaMemcpy(pfirst, dfirst, 8, cudaMemcpyDeviceToHost));
    if (*pfirst != ~0ull) printf("unexpected: chunk %llu differs\n", *pfirst);
  });

  // --- The snapshot.
  std::vector<unsigned char *> copies(R, nullptr);
  std::vector<double> alloc_t, free_t;
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now_us();
    for (size_t i = 0; i < R; i++) {
      size_t fr, to;
      CK(cudaMemGetInfo(&fr, &to));
      CK(cudaMalloc(&copies[i], sizes[i]));
    }
    double t1 = now_us();
    for (size_t i = 0; i < R; i++) CK(cudaFree(copies[i]));
    double t2 = now_us();
    if (r) { alloc_t.push_back(t1 - t0); free_t.push_back(t2 - t1); }
  }
  double snap_alloc_per_region = median(alloc_t), snap_free_per_region = median(free_t);
  printf("RESULT snap_alloc_per_region us %.1f per_region_us %.2f\n", median(alloc_t), median(alloc_t) / R);
  printf("RESULT snap_free_per_region us %.1f per_region_us %.2f\n", median(free_t), median(free_t) / R);
  for (size_t i = 0; i < R; i++) CK(cudaMalloc(&copies[i], sizes[i]));
  double snap_copy_sync_per_region = timed("snap_copy_sync_per_region", nullptr, [&] {
    for (size_t i = 0; i < R; i++) { CK(cudaMemcpy(copies[i], live[i], sizes[i], cudaMemcpyDeviceToDevice)); CK(cudaDeviceSynchronize()); }
  });
  timed("snap_copy_one_sync", nullptr, [&] {
    for (size_t i = 0; i < R; i++) CK(cudaMemcpyAsync(copies[i], live[i], sizes[i], cudaMemcpyDeviceToDevice, 0));
  });
  unsigned char *arena;
  CK(cudaMalloc(&arena, total + 256 * R));
  double snap_copy_one_sync_arena = timed("snap_copy_one_sync_arena", nullptr, [&] {
    size_t off = 0;
    for (size_t i = 0; i < R; i++) { CK(cudaMemcpyAsync(arena + off, live[i], sizes[i], cudaMemcpyDeviceToDevice, 0)); off += (sizes[i] + 255) / 256 * 256; }
  });
  std::vector<unsigned long long> runs;
  {
    size_t off = 0;
    for (size_t i = 0; i < R; i++) {
      for (size_t o = 0; o < sizes[i]; o += 1 << 20)
        runs.insert(runs.end(), {(unsigned long long)(arena + off + o), (unsigned long long)(live[i] + o), (unsigned long long)std::min<size_t>(1 << 20, sizes[i] - o)});
      off += (sizes[i] + 255) / 256 * 256;
    }
  }
  unsigned long long *druns;
  CK(cudaMalloc(&druns, runs.size() * 8));
  double copy_one_launch = timed("snap_copy_one_launch", nullptr, [&] {
    CK(cudaMemcpy(druns, runs.data(), runs.size() * 8, cudaMemcpyHostToDevice));
    kreplay_copy_runs<<<blocks_for(runs.size() / 3), BLOCK>>>(druns, runs.size() / 3);
  });
  unsigned long long *shash;
  CK(cudaMalloc(&shash, c16 * 16));
  double snap_hash_sync_per_region = timed("snap_hash_sync_per_region", nullptr, [&] {
    for (size_t i = 0; i < R; i++) {
      size_t n = chunks_of(sizes[i], 16384);
      kreplay_hash_chunks<<<blocks_for(n), BLOCK>>>(live[i], sizes[i], 16384, seed, shash + 2 * first16[i]);
      CK(cudaDeviceSynchronize());
    }
  });
  double snap_hash_one_launch = timed("snap_hash_one_launch", nullptr, [&] {
    bench_hash_regions<<<blocks_for(c16), BLOCK>>>(djobs16, R, c16, 16384, seed, shash, nullptr, nullptr);
  });
  // The one-pass restore over every region, nothing changed (hashes just taken).
  std::vector<unsigned long long> rtab;
  for (size_t i = 0; i < R; i++) rtab.insert(rtab.end(), {(unsigned long long)live[i], (unsigned long long)copies[i], sizes[i], (unsigned long long)(shash + 2 * first16[i]), first16[i], 0, 0});
  unsigned long long *drtab, *counts;
  CK(cudaMalloc(&drtab, rtab.size() * 8));
  CK(cudaMemcpy(drtab, rtab.data(), rtab.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&counts, (3 * R + 1) * 8));
  CK(cudaMemset(counts, 0, (3 * R + 1) * 8));
  double restore_one_pass_clean = timed("restore_one_pass_clean", nullptr, [&] {
    kreplay_restore_regions<<<blocks_for(c16), BLOCK>>>(drtab, R, c16, 16384, seed, counts);
  });
  unsigned long long *mapped_h, *mapped_d;
  CK(cudaHostAlloc((void **)&mapped_h, (3 * R + 1) * 8, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&mapped_d, mapped_h, 0));
  std::vector<double> cap_t, launch_t;
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now_us();
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    kreplay_restore_regions<<<blocks_for(c16), BLOCK, 0, s>>>(drtab, R, c16, 16384, seed, counts);
    kreplay_publish_counts<<<1, BLOCK, 0, s>>>(counts, 3 * R, mapped_d);
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
    CK(cudaGraphUpload(ge, 0));
    CK(cudaStreamDestroy(s));
    double t1 = now_us();
    CK(cudaGraphLaunch(ge, 0));
    CK(cudaDeviceSynchronize());
    double t2 = now_us();
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    if (r) { cap_t.push_back(t1 - t0); launch_t.push_back(t2 - t1); }
  }
  printf("RESULT graph_capture us %.1f\nRESULT graph_launch_restore_sync us %.1f\n", median(cap_t), median(launch_t));
  double restore_graph = median(launch_t);

  // cuModuleGetGlobal by name, as resolve_module_variables does for every variable of every
  // loaded module at every snapshot.
  double get_global = 0;
  if (argc > 4) {
    int nvars = atoi(argv[4]);
    CUmodule m;
    CUresult r = cuModuleLoad(&m, argv[3]);
    if (r != CUDA_SUCCESS) {
      printf("cuModuleLoad(%s) failed: %d\n", argv[3], (int)r);
    } else {
      std::vector<double> t;
      char name[32];
      for (int rep = 0; rep < 5; rep++) {
        double t0 = now_us();
        for (int i = 0; i < nvars; i++) {
          snprintf(name, sizeof name, "kv%d", i);
          CUdeviceptr p; size_t sz;
          if (cuModuleGetGlobal(&p, &sz, m, name) != CUDA_SUCCESS) { printf("cuModuleGetGlobal(%s) failed\n", name); break; }
        }
        t.push_back((now_us() - t0) / nvars);
      }
      get_global = median(t);
      printf("RESULT module_get_global us %.3f (%d variables)\n", get_global, nvars);
    }
  }

  // What one replayed dispatch pays for these regions at P passes (module variables resolved
  // once per region too, at the measured per-call cost; the passes themselves left out).
  for (int P : {2, 10}) {
    double today = R * get_global + snap_alloc_per_region + snap_copy_sync_per_region + snap_hash_sync_per_region +
                   P * det_hash_per_region + (P - 1) * restore_graph + snap_free_per_region;
    double fix = snap_copy_one_launch_or(copy_one_launch, snap_copy_one_sync_arena) + snap_hash_one_launch +
                 P * det_hash_one_launch_devcmp + (P - 1) * restore_graph;
    printf("ESTIMATE today_p%d us %.0f  fix_p%d us %.0f  (fix: arena, one copy launch, one hash launch, one-launch determinism hash compared on the device)\n", P, today, P, fix);
  }

  (void)det_hash_launches_one_sync;
  (void)restore_one_pass_clean;
  printf("dispatch_cost done\n");
  return 0;
}
