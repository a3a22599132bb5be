/* progcache demo: compiles a real templated kernel through the default (SQLite) cache twice,
 * printing the miss (NVRTC) time, the hit time, the speedup and a lowered kernel name.
 * The kernel is examples/kernels.cu, embedded here so the demo runs from anywhere. */
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

static const char kSource[] =
    "// Example kernels for progcache: templates instantiated through NVRTC name expressions.\n"
    "//   progcache compile examples/kernels.cu --arch sm_90 -- --std=c++17\n"
    "\n"
    "template <typename T>\n"
    "struct Axpy {\n"
    "  T a;\n"
    "  __device__ T operator()(T x, T y) const { return a * x + y; }\n"
    "};\n"
    "\n"
    "// y[i] = a * x[i] + y[i] over a grid-stride loop.\n"
    "template <typename T>\n"
    "__global__ void scale_add(T *y, const T *x, T a, int n) {\n"
    "  const Axpy<T> op{a};\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    y[i] = op(x[i], y[i]);\n"
    "}\n"
    "\n"
    "// Sums each block's slice of x into out[blockIdx.x] with a shared-memory tree reduction.\n"
    "template <typename T, int BLOCK>\n"
    "__global__ void block_sum(const T *x, T *out, int n) {\n"
    "  __shared__ T partial[BLOCK];\n"
    "  T acc = T(0);\n"
    "  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += x[i];\n"
    "  partial[threadIdx.x] = acc;\n"
    "  __syncthreads();\n"
    "#pragma unroll\n"
    "  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {\n"
    "    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];\n"
    "}\n"
    "\n";

static int fail(const char *what, pcache_status st) {
  fprintf(stderr, "progcache-demo: %s: %s: %s\n", what, pcache_status_string(st),
          pcache_last_error());
  return 1;
}

int main(void) {
  const char *options[] = {"-arch=sm_90", "--std=c++17"};
  const char *exprs[] = {"scale_add<float>", "block_sum<float, 256>"};
  pcache_program prog;
  pcache *cache = NULL;
  pcache_compiled *miss = NULL, *hit = NULL;
  pcache_status st;
  double miss_ms, hit_ms;
  size_t size = 0;

  memset(&prog, 0, sizeof prog);
  prog.struct_size = sizeof prog;
  prog.name = "kernels.cu";
  prog.source = kSource;
  prog.code_type = PCACHE_CODE_CXX;
  prog.target = PCACHE_TARGET_CUBIN;
  prog.options = options;
  prog.num_options = 2;
  prog.name_expressions = exprs;
  prog.num_name_expressions = 2;

  st = pcache_open(NULL, NULL, &cache); /* the default cache: $PCACHE_DIR or ~/.cache/progcache */
  if (st != PCACHE_OK) return fail("open the default cache", st);

  st = pcache_compile(cache, &prog, &miss);
  if (st != PCACHE_OK) return fail("compile", st);
  if (pcache_compiled_from_cache(miss)) {
    /* Cached by an earlier run: drop the entry so that this run shows a real miss. */
    pcache_delete(cache, pcache_compiled_key(miss), PCACHE_KEY_SIZE);
    pcache_compiled_free(miss);
    st = pcache_compile(cache, &prog, &miss);
    if (st != PCACHE_OK) return fail("compile", st);
  }
  st = pcache_compile(cache, &prog, &hit);
  if (st != PCACHE_OK) return fail("compile (second time)", st);

  miss_ms = pcache_compiled_elapsed_us(miss) / 1000.0;
  hit_ms = pcache_compiled_elapsed_us(hit) / 1000.0;
  pcache_compiled_data(hit, &size);
  printf("first compile:  %-4s %10.3f ms  (NVRTC %u.%u)\n",
         pcache_compiled_from_cache(miss) ? "hit" : "miss", miss_ms,
         pcache_compiled_nvrtc_version(miss) / 1000,
         pcache_compiled_nvrtc_version(miss) % 1000 / 10);
  printf("second compile: %-4s %10.3f ms  (%zu-byte cubin from the cache)\n",
         pcache_compiled_from_cache(hit) ? "hit" : "miss", hit_ms, size);
  printf("speedup:        %.0fx\n", hit_ms > 0 ? miss_ms / hit_ms : 0.0);
  printf("lowered name:   scale_add<float> -> %s\n",
         pcache_compiled_lowered_name(hit, "scale_add<float>"));
  printf("lowered name:   block_sum<float, 256> -> %s\n",
         pcache_compiled_lowered_name(hit, "block_sum<float, 256>"));
  pcache_compiled_free(miss);
  pcache_compiled_free(hit);
  pcache_close(cache);
  return 0;
}
