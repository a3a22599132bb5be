/* An NVRTC client that loads NVRTC as cuda-pathfinder does: dlopen of a full path (argv[1]). It
 * compiles one kernel and writes to OUTDIR its status, nvrtcVersion, log and cubin, and to MAPS
 * the lines of /proc/self/maps that name an nvrtc library. The drop-in test runs it plainly and
 * through `progcache run`, and compares.
 * Usage: dlopen_client LIBNVRTC OUTDIR MAPS */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(void **, const char *, const char *, int, const char *const *,
                         const char *const *);
typedef int (*compile_fn)(void *, int, const char *const *);
typedef int (*size_fn)(void *, size_t *);
typedef int (*get_fn)(void *, char *);
typedef int (*version_fn)(int *, int *);
typedef const char *(*error_string_fn)(int);

static void *need(void *lib, const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "no %s\n", name);
    exit(2);
  }
  return f;
}

static void write_file(const char *dir, const char *name, const char *data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n) exit(3);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int major = 0, minor = 0;
  ((version_fn)need(lib, "nvrtcVersion"))(&major, &minor);
  void *prog = NULL;
  const char *src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 3.0f; }\n";
  int r = ((create_fn)need(lib, "nvrtcCreateProgram"))(&prog, src, "k.cu", 0, NULL, NULL);
  const char *opts[] = {"-arch=sm_90"};
  if (r == 0) r = ((compile_fn)need(lib, "nvrtcCompileProgram"))(prog, 1, opts);
  char text[256];
  /* $ASK_ERROR_18: also the words for code 18 (a newer NVRTC's; the drop-in asks the real one). */
  const char *error18 =
      getenv("ASK_ERROR_18") ? ((error_string_fn)need(lib, "nvrtcGetErrorString"))(18) : "-";
  const int n = snprintf(text, sizeof text, "version %d.%d\ncompile %d\nerror 18: %s\n", major,
                         minor, r, error18);
  write_file(argv[2], "transcript.txt", text, (size_t)n);
  size_t size = 0;
  if (r == 0 && ((size_fn)need(lib, "nvrtcGetCUBINSize"))(prog, &size) == 0) {
    char *cubin = malloc(size);
    if (((get_fn)need(lib, "nvrtcGetCUBIN"))(prog, cubin) == 0)
      write_file(argv[2], "k.cubin", cubin, size);
    free(cubin);
  }
  FILE *maps = fopen("/proc/self/maps", "r"), *out = fopen(argv[3], "w");
  char line[4096];
  while (maps && out && fgets(line, sizeof line, maps))
    if (strstr(line, "nvrtc")) fputs(line, out);
  if (maps) fclose(maps);
  if (out) fclose(out);
  return r;
}
