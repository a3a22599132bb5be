/* Preloaded by `progcache run` (LD_PRELOAD): a program that dlopens libnvrtc.so.N by its full path
 * (cuda-pathfinder finds the nvidia-cuda-nvrtc wheel's, CuPy and cuda.core do the same) gets the
 * drop-in NVRTC instead, and the drop-in forwards to the very library the program asked for
 * ($PCACHE_NVRTC_LIBRARY), so that the command compiles with its own NVRTC, through the cache.
 * What it redirected, and what it could not (no drop-in for that major), goes to the file
 * $PCACHE_RUN_REPORT names, which `progcache run` reads when the command ends.
 *
 * Plain C and libc only: it lives in every process the command starts, before anything else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef void *(*dlopen_fn)(const char *, int);

/* Appends one line to the report file (O_APPEND: lines from several processes stay whole). */
static void report(const char *what, const char *path, const char *why) {
  const char *file = getenv("PCACHE_RUN_REPORT");
  if (!file || !*file) return;
  char line[PATH_MAX + 256];
  const int n = snprintf(line, sizeof line, "%s\t%s\t%s\n", what, path, why ? why : "");
  if (n <= 0) return;
  const int fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  if (write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
  }
  close(fd);
}

static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Whether the code at addr is progcache's own: a library in dir (the drop-in loading the real
 * NVRTC), or libprogcache (whose compiles observe the real NVRTC, and which is a cache itself). */
static int called_by_progcache(const void *addr, const char *dir) {
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname) return 0;
  const size_t n = strlen(dir);
  if (strncmp(info.dli_fname, dir, n) == 0 && info.dli_fname[n] == '/') return 1;
  const char *slash = strrchr(info.dli_fname, '/');
  return strncmp(slash ? slash + 1 : info.dli_fname, "libprogcache", 12) == 0;
}

/* The major of a file named libnvrtc.so.N[.x...], or -1. */
static int major_of_name(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (strncmp(base, "libnvrtc.so.", 12) != 0 || base[12] < '0' || base[12] > '9') return -1;
  return atoi(base + 12);
}

/* The major of libnvrtc at path: from its name, or, for the unversioned libnvrtc.so (a link to
 * libnvrtc.so.N), from the name it resolves to. -1 for anything else. */
static int nvrtc_major(const char *path) {
  const int major = major_of_name(path);
  if (major >= 0) return major;
  const char *slash = strrchr(path, '/');
  if (strcmp(slash ? slash + 1 : path, "libnvrtc.so") != 0) return -1;
  char real[PATH_MAX];
  return realpath(path, real) ? major_of_name(real) : -1;
}

EXPORT void *dlopen(const char *file, int mode) {
  static dlopen_fn real_dlopen;
  if (!real_dlopen) real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
  const char *dir = getenv("PCACHE_RUN_DROPIN_DIR");
  const int major = file && strchr(file, '/') ? nvrtc_major(file) : -1;
  if (major < 0 || !dir || !*dir || called_by_progcache(__builtin_return_address(0), dir))
    return real_dlopen(file, mode);
  char dropin[PATH_MAX];
  snprintf(dropin, sizeof dropin, "%s/libnvrtc.so.%d", dir, major);
  if (same_file(dropin, file)) return real_dlopen(file, mode);
  if (access(dropin, R_OK) != 0) {
    report("bypass", file, "no drop-in for this NVRTC major");
    return real_dlopen(file, mode);
  }
  /* The drop-in compiles with the library the program chose, unless the user chose one. */
  const char *chosen = getenv("PCACHE_NVRTC_LIBRARY");
  if (!chosen || !*chosen) {
    setenv("PCACHE_NVRTC_LIBRARY", file, 1);
  } else if (!same_file(chosen, file)) {
    report("other", file, chosen);
  }
  report("redirect", file, dropin);
  return real_dlopen(dropin, mode);
}
