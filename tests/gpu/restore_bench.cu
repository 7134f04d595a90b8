// Restore-cost ceilings and CUPTI's checkpoint API on the same buffer, one run, side by side
// with what `kreplay replay` reports for tests/gpu/replay_cases.cu footprint (same size, same
// dirty fraction): device-to-device copy, pinned host-to-device copy, pageable host-to-device
// copy of the footprint, kreplay's hashing pass and its one-pass restore kernel alone (waited
// for with a sync, then with its counters published into mapped memory by
// kreplay_publish_counts, launched behind it or captured with it as a graph, as kreplay does),
// and cuptiCheckpointSave/Restore. Exits non-zero when the one-pass kernel restores wrongly or
// a publication differs from the device's counters.
//   restore_bench MIB DIRTY_PERMILLE[,DIRTY_PERMILLE...]  (0: nothing written)
// SKIP_CUPTI=1 in the environment leaves CUPTI out.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_checkpoint.h>
#include "../../kreplay-tool/src/cuda/kernels.cu"
using namespace NV::Cupti::Checkpoint;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(2); } } while (0)

extern "C" __global__ void touch_strided(unsigned *p, size_t words, size_t stride) {
  size_t i = (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * stride;
  if (i < words) p[i] += 1;
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoull(argv[1], 0, 10) : 1024;
  std::vector<size_t> permilles;
  for (char *t = strtok(argc > 2 ? argv[2] : (char *)"10", ","); t; t = strtok(0, ",")) permilles.push_back(strtoull(t, 0, 10));
  size_t bytes = mib << 20, words = bytes / 4;
  int failures = 0;
  // kreplay checks 16 KiB chunks (its default).
  const size_t chunk = 16 << 10, chunks = (bytes + chunk - 1) / chunk;
  unsigned *p, *copy;
  CK(cudaMalloc(&p, bytes));
  CK(cudaMalloc(&copy, bytes));
  CK(cudaMemset(p, 0, bytes));
  void *pinned, *pageable = malloc(bytes);
  CK(cudaMallocHost(&pinned, bytes));
  memset(pageable, 0, bytes);
  CK(cudaDeviceSynchronize());
  // Best of 5 (what the tables compare), then the mean of the same 5 (kreplay's summary
  // reports a mean per restore).
  auto timed = [&](const char *what, auto fn) {
    double best = 1e30, sum = 0;
    for (int r = 0; r < 5; r++) {
      double t0 = now_ms();
      fn();
      CK(cudaDeviceSynchronize());
      double t = now_ms() - t0;
      best = std::min(best, t);
      sum += t;
    }
    printf("RESULT %s_ms_%zuMiB %.3f mean %.3f\n", what, mib, best, sum / 5);
    return best;
  };
  timed("d2d_copy", [&] { CK(cudaMemcpy(copy, p, bytes, cudaMemcpyDeviceToDevice)); });
  timed("pinned_h2d_copy", [&] { CK(cudaMemcpy(p, pinned, bytes, cudaMemcpyHostToDevice)); });
  timed("pageable_h2d_copy", [&] { CK(cudaMemcpy(p, pageable, bytes, cudaMemcpyHostToDevice)); });
  // The hashing pass kreplay's check makes (its kernel, its launch shape).
  unsigned long long *hashes;
  CK(cudaMalloc(&hashes, (chunks + 1) * 16));
  timed("hash_pass", [&] { kreplay_hash_chunks<<<(unsigned)(chunks < 65535 ? chunks : 65535), 256>>>((const unsigned char *)p, bytes, chunk, 0x5eedull, hashes); });
  CK(cudaFree(hashes));
  CK(cudaMemset(p, 0, bytes));
  // The dirty chunks' bytes as one copy, per dirty fraction (a lower bound: kreplay's runs
  // are scattered).
  for (size_t permille : permilles) {
    size_t stride = permille ? (1000 / permille) * 1024 : words, touched = permille ? (words + stride - 1) / stride : 0;
    size_t dirty = stride * 4 >= chunk ? touched * chunk : bytes;
    if (dirty > bytes) dirty = bytes;
    char name[64];
    snprintf(name, sizeof name, "dirty_chunks_d2d_copy_%zupm", permille);
    timed(name, [&] { if (dirty) CK(cudaMemcpy(copy, p, dirty, cudaMemcpyDeviceToDevice)); });
  }

  // kreplay's one-pass restore kernel alone (the launch kreplay makes, without the tool
  // around it): the snapshot copy and its hashes on the device, the fraction written as the
  // replayed kernel writes it, then one kreplay_restore_regions. Checks that it counted exactly
  // the touched chunks and that the buffer equals the copy afterwards; then the same with the
  // buffer split into three regions (the middle one unaligned, every last chunk short).
  {
    const unsigned long long seed = 0x5eedull;
    // ONE_PASS_BLOCKS=N launches the restore kernel over at most N blocks (kreplay's cap).
    size_t cap = getenv("ONE_PASS_BLOCKS") ? strtoull(getenv("ONE_PASS_BLOCKS"), 0, 10) : 65535;
    const unsigned blocks = (unsigned)(chunks < cap ? chunks : cap);
    printf("one-pass restore kernel: %u blocks\n", blocks);
    unsigned long long *expected, *jobs, *counts;
    unsigned char *flags;
    CK(cudaMalloc(&expected, (chunks + 8) * 16));
    CK(cudaMalloc(&jobs, 3 * 7 * 8));
    CK(cudaMalloc(&counts, 3 * 24 + 8));
    unsigned long long *hout, *hout_dev, seq = 0;
    CK(cudaHostAlloc(&hout, 3 * 24 + 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&hout_dev, hout, 0));
    memset(hout, 0, 3 * 24 + 8);
    CK(cudaMalloc(&flags, chunks));
    std::vector<unsigned char> got(chunks);
    // ONE_PASS_IDLE_US=N: the GPU idles N us before each timed restore, as between kreplay's
    // passes (host work), instead of running back to back.
    unsigned gap_us = getenv("ONE_PASS_IDLE_US") ? (unsigned)atoi(getenv("ONE_PASS_IDLE_US")) : 0;
    // Region bounds: one region, or three.
    size_t a = ((bytes / 3) & ~(size_t)4095) + 100, b2 = a + bytes / 3 + 1;
    std::vector<std::vector<size_t>> layouts = {{0, bytes}, {0, a, b2, bytes}};
    for (size_t li = 0; li < layouts.size(); li++) {
      auto &lb = layouts[li];
      size_t nj = lb.size() - 1;
      CK(cudaMemset(p, 0, bytes));
      CK(cudaMemcpy(copy, p, bytes, cudaMemcpyDeviceToDevice));
      std::vector<unsigned long long> table;
      size_t first = 0;
      for (size_t j = 0; j < nj; j++) {
        size_t len = lb[j + 1] - lb[j], nc = (len + chunk - 1) / chunk;
        unsigned long long *exp_j = expected + 2 * (first + j);  // room for every region's chunks
        kreplay_hash_chunks<<<blocks, 256>>>((const unsigned char *)copy + lb[j], len, chunk, seed, exp_j);
        table.insert(table.end(), {(unsigned long long)((char *)p + lb[j]), (unsigned long long)((char *)copy + lb[j]),
                                   len, (unsigned long long)exp_j, first, 0, 0});
        first += nc;
      }
      CK(cudaMemcpy(jobs, table.data(), table.size() * 8, cudaMemcpyHostToDevice));
      CK(cudaMemset(counts, 0, 3 * 24 + 8));
      memset(hout, 0, 3 * 24 + 8);
      seq = 0;
      // The restore and the publication, captured once as one graph.
      cudaStream_t cs;
      CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
      CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
      kreplay_restore_regions<<<blocks, 256, 0, cs>>>(jobs, nj, first, chunk, seed, counts);
      kreplay_publish_counts<<<1, 256, 0, cs>>>(counts, 3 * nj, hout_dev);
      cudaGraph_t g;
      CK(cudaStreamEndCapture(cs, &g));
      cudaGraphExec_t graph;
      CK(cudaGraphInstantiate(&graph, g, 0));
      std::vector<unsigned long long> seen(3 * nj, 0), now(3 * nj);
      for (size_t permille : permilles) {
        size_t stride = permille ? (1000 / permille) * 1024 : words, touched = permille ? (words + stride - 1) / stride : 0;
        // The touched chunks of each region.
        std::vector<long> want(nj, 0);
        for (size_t j = 0; j < nj; j++) {
          long last = -1;
          for (size_t t = 0; t < touched; t++) {
            size_t off = t * stride * 4;
            if (off < lb[j] || off >= lb[j + 1]) continue;
            long c = (long)((off - lb[j]) / chunk);
            if (c != last) { want[j]++; last = c; }
          }
        }
        double best = 1e30, best_launch = 1e30, best_read = 1e30, best_mapped = 1e30, best_graph = 1e30;
        long wrong_counts = 0, left_dirty = 0;
        // Restores rotate through three ways: 0: launch, wait, then copy the counters back.
        // 1: as kreplay does, kreplay_publish_counts, launched right after, writes the counters
        // and a sequence number into mapped host memory and the host watches that word. 2: the
        // same two kernels as one graph captured once. The published counters are checked
        // against the device's below.
        for (int r = 0; r < 15; r++) {
          if (touched) touch_strided<<<(unsigned)((touched + 255) / 256), 256>>>(p, words, stride);
          CK(cudaDeviceSynchronize());
          if (gap_us) usleep(gap_us);
          double t0 = now_ms();
          if (r % 3) {
            unsigned long long want_seq = ++seq;
            if (r % 3 == 1) {
              kreplay_restore_regions<<<blocks, 256>>>(jobs, nj, first, chunk, seed, counts);
              kreplay_publish_counts<<<1, 256>>>(counts, 3 * nj, hout_dev);
            } else {
              CK(cudaGraphLaunch(graph, 0));
            }
            while (((volatile unsigned long long *)hout)[2 * nj] != want_seq) {}
            double t = now_ms() - t0;
            if (r % 3 == 1) best_mapped = std::min(best_mapped, t); else best_graph = std::min(best_graph, t);
            CK(cudaDeviceSynchronize());
          } else {
            kreplay_restore_regions<<<blocks, 256>>>(jobs, nj, first, chunk, seed, counts);
            best_launch = std::min(best_launch, now_ms() - t0);
            CK(cudaDeviceSynchronize());
            best = std::min(best, now_ms() - t0);
          }
          // The counters' read alone, after the kernel (kreplay's fallback reads them so).
          double t1 = now_ms();
          CK(cudaMemcpy(now.data(), counts, 3 * nj * 8, cudaMemcpyDeviceToHost));
          if (r % 3 == 0) best_read = std::min(best_read, now_ms() - t1);
          if (r % 3)
            for (size_t i = 0; i < 3 * nj; i++) wrong_counts += hout[i] != now[i];
          for (size_t j = 0; j < nj; j++) wrong_counts += (long)(now[3 * j] - seen[3 * j]) != want[j];
          seen = now;
          kreplay_compare_chunks<<<blocks, 256>>>((const unsigned char *)p, (const unsigned char *)copy, bytes, chunk, flags);
          CK(cudaMemcpy(got.data(), flags, chunks, cudaMemcpyDeviceToHost));
          for (auto g : got) left_dirty += g != 0;
        }
        long want_n = 0;
        for (long w : want) want_n += w;
        if (li == 0)
          printf("RESULT one_pass_restore_ms_%zuMiB_%zupm%s %.3f dirty_chunks %ld launch_ms %.4f counter_read_ms %.4f mapped_ms %.3f graph_ms %.3f\n", mib,
                 permille, gap_us ? "_after_idle" : "", best, want_n, best_launch, best_read, best_mapped, best_graph);
        printf("%s one_pass_restore_%zuregions_%zuMiB_%zupm: %ld wrong counts, %ld chunks left differing over 15 restores\n",
               wrong_counts || left_dirty ? "FAIL" : "PASS", nj, mib, permille, wrong_counts, left_dirty);
        if (wrong_counts || left_dirty) failures++;
      }
    }
    CK(cudaFree(expected));
    CK(cudaFree(jobs));
    CK(cudaFree(counts));
    CK(cudaFreeHost(hout));
    CK(cudaFree(flags));
    CK(cudaMemset(p, 0, bytes));
  }

  // Only the measured buffer stays: CUPTI checkpoints every allocation of the context.
  CK(cudaFree(copy));
  if (getenv("SKIP_CUPTI")) return failures;
  CK(cudaFreeHost(pinned));
  free(pageable);
  CUcontext ctx;
  cuCtxGetCurrent(&ctx);
  // CUPTI's checkpoint with its defaults (the copy in host memory), with device memory
  // reserved for it, and with that plus CUPTI_CHECKPOINT_OPT_TRANSFER (restore only the
  // blocks that changed). A CUPTI error is reported, not fatal.
  struct { const char *where; size_t reserve_mb; unsigned char opt; } variants[] = {
    { "host", 0, 0 }, { "device", 2 * mib + 256, 0 }, { "device_changed_only", 2 * mib + 256, 1 } };
  for (size_t permille : permilles) {
    size_t stride = permille ? (1000 / permille) * 1024 : words, touched = permille ? (words + stride - 1) / stride : 0;
    for (auto &v : variants) {
      CUpti_Checkpoint cp;
      memset(&cp, 0, sizeof cp);
      cp.structSize = CUpti_Checkpoint_STRUCT_SIZE;
      cp.ctx = ctx;
      cp.allowOverwrite = 1;
      cp.reserveDeviceMB = v.reserve_mb;
      cp.optimizations = v.opt;
      double t0 = now_ms();
      CUptiResult r = cuptiCheckpointSave(&cp);
      if (r != CUPTI_SUCCESS) { printf("RESULT cupti_checkpoint_save_%s FAILED %d\n", v.where, (int)r); continue; }
      printf("RESULT cupti_checkpoint_save_%s_ms_%zuMiB_%zupm %.3f\n", v.where, mib, permille, now_ms() - t0);
      double best = 1e30; int failed = 0;
      for (int k = 0; k < 5 && !failed; k++) {
        if (touched) touch_strided<<<(unsigned)((touched + 255) / 256), 256>>>(p, words, stride);
        CK(cudaDeviceSynchronize());
        double t1 = now_ms();
        r = cuptiCheckpointRestore(&cp);
        CK(cudaDeviceSynchronize());
        if (r != CUPTI_SUCCESS) { printf("RESULT cupti_checkpoint_restore_%s FAILED at restore %d: %d\n", v.where, k + 1, (int)r); failed = 1; }
        best = std::min(best, now_ms() - t1);
      }
      if (!failed) printf("RESULT cupti_checkpoint_restore_%s_ms_%zuMiB_%zupm %.3f\n", v.where, mib, permille, best);
      unsigned first = 1;
      CK(cudaMemcpy(&first, p, 4, cudaMemcpyDeviceToHost));
      if (first != 0) printf("cupti_%s_%zupm_restored_first_word %u (want 0)\n", v.where, permille, first);
      cuptiCheckpointFree(&cp);
    }
  }
  return failures;
}
