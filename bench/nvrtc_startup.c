/* An application's start-up as the drop-in sees it: 20 kernels (or the count given as the first
 * argument, each its own program) compiled with NVRTC (linked with -lnvrtc, nothing of progcache),
 * each program's cubin fetched, then exit. bench/dropin_startup.py times whole runs of it on the
 * real NVRTC and through `progcache run`; two counts give the cost of one more hit
 * (bench/analysis.md). */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  const int kernels = argc > 1 ? atoi(argv[1]) : 20;
  for (int i = 0; i < kernels; ++i) {
    char source[1024], name[32];
    snprintf(source, sizeof source,
             "template <typename T> __device__ T f%d(T v) { return v * T(%d) + T(1); }\n"
             "extern \"C\" __global__ void k%d(float *x, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "  if (i < n) x[i] = f%d(x[i]) + __sinf(x[i]);\n"
             "}\n",
             i, i + 2, i, i);
    snprintf(name, sizeof name, "k%d.cu", i);
    nvrtcProgram p;
    const char *options[] = {"-arch=sm_90", "-default-device"};
    size_t size = 0;
    if (nvrtcCreateProgram(&p, source, name, 0, NULL, NULL) != NVRTC_SUCCESS ||
        nvrtcCompileProgram(p, 2, options) != NVRTC_SUCCESS ||
        nvrtcGetCUBINSize(p, &size) != NVRTC_SUCCESS) {
      fprintf(stderr, "kernel %d failed\n", i);
      return 1;
    }
    char *cubin = malloc(size);
    if (!cubin || nvrtcGetCUBIN(p, cubin) != NVRTC_SUCCESS) return 1;
    free(cubin);
    nvrtcDestroyProgram(&p);
  }
  return 0;
}
