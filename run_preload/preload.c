/* Preloaded by `progcache run` (LD_PRELOAD): a program that dlopens libnvrtc.so.N,
 * libnvJitLink.so.N or libnvvm.so.N by its full path (cuda-pathfinder finds the NVIDIA wheels' or
 * the toolkit's, CuPy and cuda.core do the same) gets the drop-in instead, and the drop-in forwards
 * to the very library the program asked for ($PCACHE_NVRTC_LIBRARY, $PCACHE_NVJITLINK_LIBRARY,
 * $PCACHE_NVVM_LIBRARY), so that the command compiles with its own library, through the cache. What
 * it redirected, and what it could not (no drop-in for that major), goes to the file
 * $PCACHE_RUN_REPORT names, which `progcache run` reads when the command ends.
 *
 * It is also `progcache run`'s gate (cli/run_gate.hpp): the first process of a command that
 * `run` starts while it checks the cache waits here, before its main, until the check has
 * passed, and ends without running a line of its own when it has not.
 *
 * Plain C and libc only: it lives in every process the command starts, before anything else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef void *(*dlopen_fn)(const char *, int);

/* Appends one line to each report file in $PCACHE_RUN_REPORT (FILE:FILE..., the innermost run's
 * first: src/core/run_report.hpp), with O_APPEND (lines from several processes stay whole); only
 * to a regular file that starts with the report's magic. */
static void report(const char *what, const char *path, const char *why) {
  static const char magic[8] = {'P', 'C', 'R', 'U', 'N', 0, 0, 1};
  const char *list = getenv("PCACHE_RUN_REPORT");
  if (!list || !*list) return;
  char line[PATH_MAX + 256];
  const int n = snprintf(line, sizeof line, "%s\t%s\t%s\n", what, path, why ? why : "");
  if (n <= 0) return;
  const size_t size = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  for (const char *file = list; *file;) {
    const char *colon = strchr(file, ':');
    const size_t len = colon ? (size_t)(colon - file) : strlen(file);
    char name[PATH_MAX];
    if (len > 0 && len < sizeof name) {
      memcpy(name, file, len);
      name[len] = '\0';
      const int fd = open(name, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
      struct stat st;
      char head[sizeof magic];
      if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
          pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
          memcmp(head, magic, sizeof magic) == 0 && write(fd, line, size) < 0) {
      }
      if (fd >= 0) close(fd);
    }
    file += len + (colon ? 1 : 0);
  }
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

/* The libraries that have drop-ins: the file name's prefix before the major, the variable that
 * names the real library to a drop-in, and the words for messages. */
struct fronted {
  const char *prefix, *unversioned, *env, *what;
};
static const struct fronted kFronted[] = {
    {"libnvrtc.so.", "libnvrtc.so", "PCACHE_NVRTC_LIBRARY", "NVRTC"},
    {"libnvJitLink.so.", "libnvJitLink.so", "PCACHE_NVJITLINK_LIBRARY", "nvJitLink"},
    {"libnvvm.so.", "libnvvm.so", "PCACHE_NVVM_LIBRARY", "libNVVM"},
};

/* The major of a file named PREFIX N[.x...], or -1. */
static int major_of_name(const struct fronted *lib, const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  const size_t n = strlen(lib->prefix);
  if (strncmp(base, lib->prefix, n) != 0 || base[n] < '0' || base[n] > '9') return -1;
  return atoi(base + n);
}

/* The library at path and its major: from its name, or, for the unversioned name (a link to
 * PREFIX N), from the name it resolves to. Null for anything else. */
static const struct fronted *fronted_library(const char *path, int *major) {
  for (size_t i = 0; i < sizeof kFronted / sizeof *kFronted; ++i) {
    const struct fronted *lib = &kFronted[i];
    if ((*major = major_of_name(lib, path)) >= 0) return lib;
    const char *slash = strrchr(path, '/');
    if (strcmp(slash ? slash + 1 : path, lib->unversioned) != 0) continue;
    char real[PATH_MAX];
    if (realpath(path, real) && (*major = major_of_name(lib, real)) >= 0) return lib;
  }
  return NULL;
}

/* A bare unversioned name (dlopen("libnvvm.so"): cuda-pathfinder asks so) where the drop-in
 * directory has no link of that name (a wheel cannot hold one): the drop-in of the highest major
 * there, which the loader would not find by that name. 0 when there is none, or the directory
 * has the name (the loader finds it first on LD_LIBRARY_PATH). */
static int unversioned_dropin(const char *file, const char *dir, char *out, size_t size) {
  for (size_t i = 0; i < sizeof kFronted / sizeof *kFronted; ++i) {
    const struct fronted *lib = &kFronted[i];
    if (strcmp(file, lib->unversioned) != 0) continue;
    snprintf(out, size, "%s/%s", dir, lib->unversioned);
    if (access(out, R_OK) == 0) return 0;
    for (int major = 99; major >= 0; --major) {
      snprintf(out, size, "%s/%s%d", dir, lib->prefix, major);
      if (access(out, R_OK) == 0) return 1;
    }
  }
  return 0;
}

/* PCACHE_RUN_GATE=FD:INODE, set by `progcache run` for the command's first process: FD is a
 * socket `run` holds the other end of. Says it waits ('w'), then waits for 'g'; anything else
 * (`run`'s check failed, or `run` ended) ends this process with 125 before its main. The variable
 * is taken out of the environment, and the descriptor closed, so that nothing the command starts
 * inherits either; a descriptor that is no longer that socket (closed, its number reused) is
 * left alone and nothing waits. */
__attribute__((constructor)) static void wait_at_the_gate(void) {
  const char *gate = getenv("PCACHE_RUN_GATE");
  if (!gate) return;
  char *end = NULL;
  errno = 0;
  const long fd = strtol(gate, &end, 10);
  const unsigned long long inode = *end == ':' ? strtoull(end + 1, NULL, 10) : 0;
  unsetenv("PCACHE_RUN_GATE");
  struct stat st;
  if (errno != 0 || fd < 0 || fd > 1 << 20 || fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
      (unsigned long long)st.st_ino != inode)
    return;
  const char waiting = 'w';
  (void)send((int)fd, &waiting, 1, MSG_NOSIGNAL);
  char verdict = 0;
  ssize_t n;
  do {
    n = read((int)fd, &verdict, 1);
  } while (n < 0 && errno == EINTR);
  close((int)fd);
  if (n != 1 || verdict != 'g') _exit(125);
}

EXPORT void *dlopen(const char *file, int mode) {
  static dlopen_fn real_dlopen;
  if (!real_dlopen) real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
  const char *dir = getenv("PCACHE_RUN_DROPIN_DIR");
  char bare[PATH_MAX];
  if (file && !strchr(file, '/') && dir && *dir &&
      !called_by_progcache(__builtin_return_address(0), dir) &&
      unversioned_dropin(file, dir, bare, sizeof bare)) {
    report("redirect", file, bare);
    return real_dlopen(bare, mode);
  }
  int major = -1;
  const struct fronted *lib = file && strchr(file, '/') ? fronted_library(file, &major) : NULL;
  if (!lib || !dir || !*dir || called_by_progcache(__builtin_return_address(0), dir))
    return real_dlopen(file, mode);
  char dropin[PATH_MAX];
  snprintf(dropin, sizeof dropin, "%s/%s%d", dir, lib->prefix, major);
  if (same_file(dropin, file)) return real_dlopen(file, mode);
  if (access(dropin, R_OK) != 0) {
    char why[128];
    snprintf(why, sizeof why, "no drop-in for this %s major", lib->what);
    report("bypass", file, why);
    return real_dlopen(file, mode);
  }
  /* The drop-in runs the library the program chose, unless the user chose one. */
  const char *chosen = getenv(lib->env);
  if (!chosen || !*chosen) {
    setenv(lib->env, file, 1);
  } else if (!same_file(chosen, file)) {
    report("other", file, chosen);
  }
  report("redirect", file, dropin);
  return real_dlopen(dropin, mode);
}
