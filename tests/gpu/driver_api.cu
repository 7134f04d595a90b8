// A driver-API program (linked against libcuda, no runtime API for the kernel): loads the
// module image given on the command line (PTX, cubin or fatbin of tests/gpu/module_vars.cu),
// launches `bump` once with cuLaunchKernel, prints the buffer sum and the __device__ counter.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda.h>

#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char *s = 0; cuGetErrorName(r, &s); \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s ? s : "?"); exit(2); } } while (0)

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: driver_api IMAGE\n"); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  std::vector<char> img;
  char buf[65536]; size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) img.insert(img.end(), buf, buf + k);
  fclose(f);
  img.push_back(0);
  CK(cuInit(0));
  CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, img.data()));
  CK(cuModuleGetFunction(&fn, mod, "bump"));
  const int n = 1 << 16;
  std::vector<float> h(n);
  for (int i = 0; i < n; i++) h[i] = (float)(i % 13);
  CUdeviceptr d, counter; size_t csize;
  CK(cuMemAlloc(&d, n * sizeof(float)));
  CK(cuMemcpyHtoD(d, h.data(), n * sizeof(float)));
  CK(cuModuleGetGlobal(&counter, &csize, mod, "bumps"));
  unsigned zero = 0, c = 0;
  CK(cuMemcpyHtoD(counter, &zero, sizeof zero));
  int nn = n;
  void *args[] = { &d, &nn };
  CK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
  CK(cuCtxSynchronize());
  CK(cuMemcpyDtoH(h.data(), d, n * sizeof(float)));
  CK(cuMemcpyDtoH(&c, counter, sizeof c));
  double s = 0;
  for (float v : h) s += v;
  printf("sum %.1f\nbumps %u\n", s, c);
  return 0;
}
