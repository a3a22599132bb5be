/* A C consumer that dlopen()s libprogcache.so.1 and resolves symbols by name, as FFI callers do,
 * checking pcache_version() against the header it was built with. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

/* The kernel every consumer compiles (each consumer stands alone: copy its directory anywhere). */
static const char kConsumerKernel[] =
    "template <typename T> __global__ void fill(T *x, T v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = v;\n"
    "}\n";

#define LOAD(name)                                           \
  name##_fn name = (name##_fn)dlsym(lib, #name);             \
  if (!name) {                                               \
    fprintf(stderr, "dlopen_c: missing symbol %s\n", #name); \
    return 1;                                                \
  }

typedef uint32_t (*pcache_version_fn)(void);
typedef pcache_status (*pcache_open_fn)(const char *, const pcache_options *, pcache **);
typedef pcache_status (*pcache_compile_fn)(pcache *, const pcache_program *, pcache_compiled **);
typedef const uint8_t *(*pcache_compiled_key_fn)(const pcache_compiled *);
typedef pcache_status (*pcache_get_fn)(pcache *, const void *, size_t, void **, size_t *);
typedef void (*pcache_free_fn)(void *);
typedef void (*pcache_compiled_free_fn)(pcache_compiled *);
typedef pcache_status (*pcache_close_fn)(pcache *);
typedef const char *(*pcache_last_error_fn)(void);

int main(void) {
  void *lib = dlopen("libprogcache.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen_c: %s\n", dlerror());
    return 1;
  }
  LOAD(pcache_version)
  LOAD(pcache_open)
  LOAD(pcache_compile)
  LOAD(pcache_compiled_key)
  LOAD(pcache_get)
  LOAD(pcache_free)
  LOAD(pcache_compiled_free)
  LOAD(pcache_close)
  LOAD(pcache_last_error)
  if (pcache_version() != PCACHE_VERSION_NUMBER) {
    fprintf(stderr, "dlopen_c: library version %u, header %u\n", pcache_version(),
            PCACHE_VERSION_NUMBER);
    return 1;
  }
  const char *options[] = {"-arch=sm_90"};
  pcache_program p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = "fill.cu";
  p.source = kConsumerKernel;
  p.options = options;
  p.num_options = 1;
  pcache *cache = NULL;
  pcache_compiled *r = NULL;
  void *data = NULL;
  size_t size = 0;
  if (pcache_open("memory:", NULL, &cache) != PCACHE_OK ||
      pcache_compile(cache, &p, &r) != PCACHE_OK ||
      pcache_get(cache, pcache_compiled_key(r), PCACHE_KEY_SIZE, &data, &size) != PCACHE_OK) {
    fprintf(stderr, "dlopen_c: %s\n", pcache_last_error());
    return 1;
  }
  printf("dlopen_c: version %u, %zu-byte cubin read back\n", pcache_version(), size);
  pcache_free(data);
  pcache_compiled_free(r);
  pcache_close(cache);
  dlclose(lib);
  return 0;
}
