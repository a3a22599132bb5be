/* A C consumer built with cc $(pkg-config --cflags --libs progcache). */
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

/* The kernel every consumer compiles (each consumer stands alone: copy its directory anywhere). */
static const char kConsumerKernel[] =
    "template <typename T> __global__ void fill(T *x, T v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = v;\n"
    "}\n";

int main(void) {
  const char *options[] = {"-arch=sm_90"};
  pcache_program p;
  pcache *cache = NULL;
  pcache_compiled *r = NULL;
  void *data = NULL;
  size_t size = 0;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = "fill.cu";
  p.source = kConsumerKernel;
  p.options = options;
  p.num_options = 1;
  if (pcache_open("memory:", NULL, &cache) != PCACHE_OK) return 1;
  if (pcache_compile(cache, &p, &r) != PCACHE_OK) {
    fprintf(stderr, "%s\n", pcache_last_error());
    return 1;
  }
  if (pcache_get(cache, pcache_compiled_key(r), PCACHE_KEY_SIZE, &data, &size) != PCACHE_OK)
    return 1;
  printf("pkgconfig_c: %zu-byte cubin read back\n", size);
  pcache_free(data);
  pcache_compiled_free(r);
  pcache_close(cache);
  return 0;
}
