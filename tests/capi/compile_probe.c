/* Test helper: compiles (or loads) a CUDA source file through a cache in a fresh process and
 * reports what happened on one line: "status=<n> hit=<0|1> nvrtc_mapped=<0|1> lowered=<name>".
 * usage: compile_probe URI FILE.cu [load] */
#include <progcache/progcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nvrtc_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "libnvrtc")) found = 1;
  if (f) fclose(f);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  FILE *f = fopen(argv[2], "rb");
  if (!f) return 2;
  static char source[1 << 20];
  size_t n = fread(source, 1, sizeof source - 1, f);
  fclose(f);
  source[n] = 0;
  const char *options[] = {"-arch=sm_90", "--std=c++17"};
  const char *exprs[] = {"scale_add<float>"};
  pcache_program prog;
  memset(&prog, 0, sizeof prog);
  prog.struct_size = sizeof prog;
  prog.name = "kernels.cu";
  prog.source = source;
  prog.options = options;
  prog.num_options = 2;
  prog.name_expressions = exprs;
  prog.num_name_expressions = 1;
  pcache *cache = NULL;
  pcache_status st = pcache_open(argv[1], NULL, &cache);
  if (st != PCACHE_OK) {
    printf("status=%d open failed: %s\n", st, pcache_last_error());
    return 1;
  }
  if (argc > 3 && strcmp(argv[3], "load") == 0) {
    pcache_module *m = NULL;
    st = pcache_load_module(cache, &prog, &m);
    void *fn = NULL;
    pcache_status fst = m ? pcache_module_get_function(m, "scale_add<float>", &fn) : -99;
    printf("status=%d function=%d message=%s\n", st, fst, pcache_last_error());
    pcache_module_unload(m);
  } else {
    pcache_compiled *r = NULL;
    st = pcache_compile(cache, &prog, &r);
    printf("status=%d hit=%d nvrtc_mapped=%d lowered=%s\n", st, pcache_compiled_from_cache(r),
           nvrtc_mapped(), r ? pcache_compiled_lowered_name(r, "scale_add<float>") : "");
    pcache_compiled_free(r);
  }
  pcache_close(cache);
  return st == PCACHE_OK ? 0 : 1;
}
