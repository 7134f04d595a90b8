// Restore-cost ceilings and CUPTI's checkpoint API on the same buffer, one run, side by side
// with what `kreplay replay` reports for tests/gpu/replay_cases.cu footprint (same size, same
// dirty fraction): device-to-device copy, pinned host-to-device copy, pageable host-to-device
// copy of the footprint, kreplay's hashing pass and its one-pass restore kernel alone, and
// cuptiCheckpointSave/Restore. Exits non-zero when the one-pass kernel restores wrongly.
//   restore_bench MIB DIRTY_PERMILLE[,DIRTY_PERMILLE...]  (0: nothing written)
// SKIP_CUPTI=1 in the environment leaves CUPTI out.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  auto timed = [&](const char *what, auto fn) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) { double t0 = now_ms(); fn(); CK(cudaDeviceSynchronize()); best = std::min(best, now_ms() - t0); }
    printf("RESULT %s_ms_%zuMiB %.3f\n", what, mib, best);
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
  // replayed kernel writes it, then one kreplay_restore_changed. Checks that it wrote back
  // exactly the touched chunks and that the buffer equals the copy afterwards.
  {
    const unsigned long long seed = 0x5eedull;
    const unsigned blocks = (unsigned)(chunks < 65535 ? chunks : 65535);
    unsigned long long *expected;
    unsigned char *flags;
    CK(cudaMalloc(&expected, chunks * 16));
    CK(cudaMalloc(&flags, chunks));
    CK(cudaMemset(p, 0, bytes));
    CK(cudaMemcpy(copy, p, bytes, cudaMemcpyDeviceToDevice));
    kreplay_hash_chunks<<<blocks, 256>>>((const unsigned char *)copy, bytes, chunk, seed, expected);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned char> got(chunks);
    for (size_t permille : permilles) {
      size_t stride = permille ? (1000 / permille) * 1024 : words, touched = permille ? (words + stride - 1) / stride : 0;
      // The chunks the touched words fall in.
      std::vector<unsigned char> want(chunks, 0);
      for (size_t t = 0; t < touched; t++) want[t * stride * 4 / chunk] = 1;
      long want_n = 0;
      for (auto w : want) want_n += w;
      double best = 1e30;
      long wrong_flags = 0, left_dirty = 0;
      for (int r = 0; r < 5; r++) {
        if (touched) touch_strided<<<(unsigned)((touched + 255) / 256), 256>>>(p, words, stride);
        CK(cudaDeviceSynchronize());
        double t0 = now_ms();
        kreplay_restore_changed<<<blocks, 256>>>((unsigned char *)p, (const unsigned char *)copy, bytes, chunk, seed, expected, flags);
        CK(cudaDeviceSynchronize());
        best = std::min(best, now_ms() - t0);
        CK(cudaMemcpy(got.data(), flags, chunks, cudaMemcpyDeviceToHost));
        for (size_t c = 0; c < chunks; c++) wrong_flags += got[c] != want[c];
        kreplay_compare_chunks<<<blocks, 256>>>((const unsigned char *)p, (const unsigned char *)copy, bytes, chunk, flags);
        CK(cudaMemcpy(got.data(), flags, chunks, cudaMemcpyDeviceToHost));
        for (auto g : got) left_dirty += g != 0;
      }
      printf("RESULT one_pass_restore_ms_%zuMiB_%zupm %.3f dirty_chunks %ld\n", mib, permille, best, want_n);
      printf("%s one_pass_restore_%zuMiB_%zupm: %ld wrong flags, %ld chunks left differing over 5 restores\n",
             wrong_flags || left_dirty ? "FAIL" : "PASS", mib, permille, wrong_flags, left_dirty);
      if (wrong_flags || left_dirty) failures++;
    }
    CK(cudaFree(expected));
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
