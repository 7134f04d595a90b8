/* footprint - a large device footprint (many buffers) where each kernel writes only a small,
 * known fraction: one 8-byte word in every stride-th 4 KiB page of its buffer.
 * Usage: footprint [total_bytes=1GiB] [buffer_bytes=16MiB] [stride_pages=64] [rounds=2]
 * Prints `footprint`, `kernels`, `written_bytes` (distinct bytes any kernel wrote) and a checksum
 * over every buffer's full contents, which are verified word by word. */
#include <string.h>

#include "workload.h"

#define PAGE 4096u

KRSIM_KERNEL(touch, uint64_t*, buf, uint64_t, pages, uint64_t, stride, uint64_t, stamp) {
  KRSIM_FOR_EACH_X(d, i) {
    uint64_t page = i * args->stride;
    if (page < args->pages) args->buf[page * (PAGE / 8)] = args->stamp + page;
  }
}

#define FOOTPRINT_MODULE(K, V, C) K(touch)
KRSIM_MODULE(footprint_module, FOOTPRINT_MODULE)

static uint64_t stamp_of(uint64_t round, uint64_t buf) { return (round + 1) << 40 | buf << 20; }

int main(int argc, char** argv) {
  uint64_t total = wl_arg(argc, argv, 1, 1ull << 30), bsize = wl_arg(argc, argv, 2, 16ull << 20);
  uint64_t stride = wl_arg(argc, argv, 3, 64), rounds = wl_arg(argc, argv, 4, 2);
  if (bsize < PAGE || bsize % PAGE || total < bsize || stride == 0) return 2;
  uint64_t nbuf = total / bsize, pages = bsize / PAGE;
  uint64_t touched = (pages + stride - 1) / stride;
  uint64_t** bufs = calloc(nbuf, sizeof(*bufs));
  uint64_t* host = malloc(bsize);
  if (!bufs || !host) return 2;
  for (uint64_t b = 0; b < nbuf; b++) {
    HIP_CHECK(hipMalloc((void**)&bufs[b], bsize));
    HIP_CHECK(hipMemset(bufs[b], 0, bsize));
  }
  uint64_t kernels = 0;
  for (uint64_t r = 0; r < rounds; r++)
    for (uint64_t b = 0; b < nbuf; b++, kernels++)
      HIP_CHECK(touch(wl_dim((uint32_t)((touched + 63) / 64)), wl_dim(64), 0, NULL, bufs[b], pages,
                      stride, stamp_of(r, b)));
  HIP_CHECK(hipDeviceSynchronize());
  uint64_t h = WL_FNV_OFFSET;
  for (uint64_t b = 0; b < nbuf; b++) {
    HIP_CHECK(hipMemcpy(host, bufs[b], bsize, hipMemcpyDeviceToHost));
    for (uint64_t w = 0; w < bsize / 8; w++) {
      uint64_t page = w / (PAGE / 8);
      bool hit = w % (PAGE / 8) == 0 && page % stride == 0 && rounds > 0;
      uint64_t want = hit ? stamp_of(rounds - 1, b) + page : 0;
      WL_EXPECT(host[w] == want, "buffer %" PRIu64 " word %" PRIu64 ": %" PRIx64 " != %" PRIx64, b,
                w, host[w], want);
    }
    h = wl_fnv(h, host, bsize);
    HIP_CHECK(hipFree(bufs[b]));
  }
  printf("footprint: %" PRIu64 "\n", nbuf * bsize);
  printf("kernels: %" PRIu64 "\n", kernels);
  printf("written_bytes: %" PRIu64 "\n", rounds ? nbuf * touched * 8 : 0);
  printf("checksum: %016" PRIx64 "\n", h);
  return 0;
}
