/* Test helper: compiles a file with NVRTC directly (no progcache), so that strace sees only what
 * NVRTC itself opens and probes. usage: nvrtc_raw NAME|- SOURCE_FILE [NVRTC options...]
 * NVRTC is opened with dlopen from $PCACHE_TEST_RAW_NVRTC, else PCACHE_RAW_NVRTC (set at build
 * time). Prints the nvrtcResult. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  /* $PCACHE_TEST_RAW_NVRTC chooses another NVRTC (NVRTC 12 from its wheel). */
  const char *chosen = getenv("PCACHE_TEST_RAW_NVRTC");
  void *lib = dlopen(chosen && *chosen ? chosen : PCACHE_RAW_NVRTC, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  typedef nvrtcResult (*create_t)(nvrtcProgram *, const char *, const char *, int,
                                  const char *const *, const char *const *);
  typedef nvrtcResult (*compile_t)(nvrtcProgram, int, const char *const *);
  typedef nvrtcResult (*destroy_t)(nvrtcProgram *);
  create_t create = (create_t)dlsym(lib, "nvrtcCreateProgram");
  compile_t compile = (compile_t)dlsym(lib, "nvrtcCompileProgram");
  destroy_t destroy = (destroy_t)dlsym(lib, "nvrtcDestroyProgram");
  FILE *f = fopen(argv[2], "rb");
  if (!f || !create || !compile || !destroy) return 2;
  static char source[1 << 22];
  size_t n = fread(source, 1, sizeof source - 1, f);
  fclose(f);
  source[n] = 0;
  nvrtcProgram p;
  if (create(&p, source, strcmp(argv[1], "-") ? argv[1] : NULL, 0, NULL, NULL)) return 2;
  nvrtcResult r = compile(p, argc - 3, (const char *const *)argv + 3);
  printf("%d\n", (int)r);
  destroy(&p);
  return 0;
}
