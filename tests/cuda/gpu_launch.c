/* On a machine with a CUDA GPU: compiles examples/kernels.cu and a kernel that includes a header
 * from disk through the cache (a miss, then a hit), loads each with pcache_load_module, launches
 * the kernels with the real driver and checks their results; then edits the header and checks
 * that the next launch computes with the new value (the key follows the header).
 * Exit 0: every check passed; 1: a check failed; 77: no driver or no device (skipped).
 * usage: gpu_launch CACHE_URI KERNELS.cu WORK_DIR */
#include <dlfcn.h>
#include <progcache/progcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;
static CUresult (*cuInit_)(unsigned);
static CUresult (*cuMemAlloc_)(CUdeviceptr *, size_t);
static CUresult (*cuMemFree_)(CUdeviceptr);
static CUresult (*cuMemcpyHtoD_)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH_)(void *, CUdeviceptr, size_t);
static CUresult (*cuLaunchKernel_)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, void *, void **, void **);
static CUresult (*cuCtxSynchronize_)(void);

static int failures = 0;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      printf("FAIL: " __VA_ARGS__);           \
      printf(" (%s)\n", pcache_last_error()); \
      failures++;                             \
    } else {                                  \
      printf("ok: " __VA_ARGS__);             \
      printf("\n");                           \
    }                                         \
  } while (0)

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strdup(buf);
}

static pcache_program program(const char *name, const char *src, const char **opts, size_t nopts,
                              const char **exprs, size_t nexprs) {
  pcache_program p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = name;
  p.source = src;
  p.options = opts;
  p.num_options = nopts;
  p.name_expressions = exprs;
  p.num_name_expressions = nexprs;
  return p;
}

/* Launches fn_name(y, x, a, n) from m and checks y[i] == factor * x[i] + 1 for every element. */
static int run_scale_add(pcache_module *m, const char *fn_name, float a, float factor, int n) {
  void *f = NULL;
  if (pcache_module_get_function(m, fn_name, &f) != PCACHE_OK) return 0;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  CUdeviceptr dx, dy;
  int ok = cuMemAlloc_(&dx, n * sizeof(float)) == 0 && cuMemAlloc_(&dy, n * sizeof(float)) == 0 &&
           cuMemcpyHtoD_(dx, x, n * sizeof(float)) == 0 &&
           cuMemcpyHtoD_(dy, y, n * sizeof(float)) == 0;
  void *args[] = {&dy, &dx, &a, &n};
  ok = ok &&
       cuLaunchKernel_((CUfunction)f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL) == 0;
  ok = ok && cuCtxSynchronize_() == 0 && cuMemcpyDtoH_(y, dy, n * sizeof(float)) == 0;
  for (int i = 0; ok && i < n; i++) ok = y[i] == factor * (float)i + 1.0f;
  cuMemFree_(dx);
  cuMemFree_(dy);
  free(x);
  free(y);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    printf("skipped: no CUDA driver (%s)\n", dlerror());
    return 77;
  }
#define LOAD(sym, name) *(void **)&sym = dlsym(cuda, name)
  LOAD(cuInit_, "cuInit");
  LOAD(cuMemAlloc_, "cuMemAlloc_v2");
  LOAD(cuMemFree_, "cuMemFree_v2");
  LOAD(cuMemcpyHtoD_, "cuMemcpyHtoD_v2");
  LOAD(cuMemcpyDtoH_, "cuMemcpyDtoH_v2");
  LOAD(cuLaunchKernel_, "cuLaunchKernel");
  LOAD(cuCtxSynchronize_, "cuCtxSynchronize");
  if (!cuInit_ || cuInit_(0) != 0) {
    printf("skipped: cuInit failed (no device?)\n");
    return 77;
  }
  pcache *c = NULL;
  if (pcache_open(argv[1], NULL, &c) != PCACHE_OK) {
    printf("FAIL: open: %s\n", pcache_last_error());
    return 1;
  }
  const char *src = read_all(argv[2]);
  const char *opts[] = {"-arch=sm_90", "--std=c++17"};
  const char *exprs[] = {"scale_add<float>"};
  pcache_program p = program("kernels.cu", src, opts, 2, exprs, 1);
  for (int round = 0; round < 2; round++) {
    pcache_module *m = NULL;
    pcache_status st = pcache_load_module(c, &p, &m);
    CHECK(st == PCACHE_OK, "load_module round %d", round);
    if (st != PCACHE_OK) continue;
    CHECK(pcache_compiled_from_cache(pcache_module_compiled(m)) == round, "round %d is a %s", round,
          round ? "hit" : "miss");
    CHECK(run_scale_add(m, "scale_add<float>", 2.5f, 2.5f, 1 << 20),
          "scale_add<float> computes a*x+y on the GPU (round %d)", round);
    CHECK(pcache_module_unload(m) == PCACHE_OK, "unload round %d", round);
  }
  /* A kernel whose constant comes from a header on disk: edit it, and the next load computes
   * with the new value. */
  char header[4096], kernel[4096];
  snprintf(header, sizeof header, "%s/coef.h", argv[3]);
  snprintf(kernel, sizeof kernel, "%s/coef.cu", argv[3]);
  const char *coef_src =
      "#include \"coef.h\"\n"
      "extern \"C\" __global__ void scale_add_coef(float *y, const float *x, float a, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = COEF * a * x[i] + y[i];"
      " }\n";
  const char *coef_opts[] = {"-arch=sm_90"};
  for (int version = 1; version <= 2; version++) {
    FILE *h = fopen(header, "w");
    fprintf(h, "#define COEF %d.0f\n", version);
    fclose(h);
    pcache_program q = program(kernel, coef_src, coef_opts, 1, NULL, 0);
    for (int round = 0; round < 2; round++) {
      pcache_module *m = NULL;
      CHECK(pcache_load_module(c, &q, &m) == PCACHE_OK, "header version %d, round %d loads",
            version, round);
      if (!m) continue;
      CHECK(pcache_compiled_from_cache(pcache_module_compiled(m)) == round,
            "header version %d, round %d is a %s", version, round, round ? "hit" : "miss");
      CHECK(run_scale_add(m, "scale_add_coef", 3.0f, 3.0f * (float)version, 4096),
            "header version %d computes with COEF=%d (round %d)", version, version, round);
      pcache_module_unload(m);
    }
  }
  pcache_close(c);
  printf("gpu launch: %d failed\n", failures);
  return failures ? 1 : 0;
}
