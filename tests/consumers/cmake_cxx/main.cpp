// A C++ consumer built with find_package(progcache CONFIG): compile through a cache, read back.
#include <progcache/progcache.h>

#include <cstdio>
#include <cstring>
#include <string>

/* The kernel every consumer compiles (each consumer stands alone: copy its directory anywhere). */
static const char kConsumerKernel[] =
    "template <typename T> __global__ void fill(T *x, T v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = v;\n"
    "}\n";

int main(int argc, char **argv) {
  const std::string uri = argc > 1 ? argv[1] : "memory:";
  const char *options[] = {"-arch=sm_90"};
  const char *exprs[] = {"fill<int>"};
  pcache_program p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = "fill.cu";
  p.source = kConsumerKernel;
  p.options = options;
  p.num_options = 1;
  p.name_expressions = exprs;
  p.num_name_expressions = 1;
  pcache *cache = nullptr;
  if (pcache_open(uri.c_str(), nullptr, &cache) != PCACHE_OK)
    return std::fprintf(stderr, "%s\n", pcache_last_error()), 1;
  pcache_compiled *r = nullptr;
  if (pcache_compile(cache, &p, &r) != PCACHE_OK)
    return std::fprintf(stderr, "%s\n", pcache_last_error()), 1;
  void *data = nullptr;
  size_t size = 0, compiled_size = 0;
  pcache_compiled_data(r, &compiled_size);
  if (pcache_get(cache, pcache_compiled_key(r), PCACHE_KEY_SIZE, &data, &size) != PCACHE_OK ||
      size != compiled_size)
    return std::fprintf(stderr, "read back failed: %s\n", pcache_last_error()), 1;
  std::printf("cmake_cxx: %zu-byte cubin, fill<int> = %s\n", size,
              pcache_compiled_lowered_name(r, "fill<int>"));
  pcache_free(data);
  pcache_compiled_free(r);
  pcache_close(cache);
  return 0;
}
