/* Test helper: compiles a file with NVRTC directly (no progcache), so that strace sees only what
 * NVRTC itself opens and probes. usage: nvrtc_raw NAME|- SOURCE_FILE [NVRTC options...]
 * Prints the nvrtcResult; writes nothing else. */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  FILE *f = fopen(argv[2], "rb");
  if (!f) return 2;
  static char source[1 << 22];
  size_t n = fread(source, 1, sizeof source - 1, f);
  fclose(f);
  source[n] = 0;
  nvrtcProgram p;
  if (nvrtcCreateProgram(&p, source, strcmp(argv[1], "-") ? argv[1] : NULL, 0, NULL, NULL))
    return 2;
  nvrtcResult r = nvrtcCompileProgram(p, argc - 3, (const char *const *)argv + 3);
  printf("%d\n", (int)r);
  nvrtcDestroyProgram(&p);
  return 0;
}
