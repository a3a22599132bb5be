/* Test helper, LD_PRELOADed into nvrtc_raw: appends the name of every variable of the environment
 * a libnvrtc* library asks getenv or secure_getenv for to $PCACHE_TEST_GETENV_LOG, one a line, so
 * tests can check that progcache keys each one (tests/core/deps_strace_test.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef char *(*getenv_t)(const char *);

static void log_name(const char *name, void *caller) {
  Dl_info info;
  if (!name || !dladdr(caller, &info) || !info.dli_fname) return;
  const char *base = strrchr(info.dli_fname, '/');
  if (strncmp(base ? base + 1 : info.dli_fname, "libnvrtc", 8) != 0) return;
  static getenv_t real;
  if (!real) real = (getenv_t)dlsym(RTLD_NEXT, "getenv");
  const char *path = real("PCACHE_TEST_GETENV_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "%s\n", name);
  fclose(f);
}

char *getenv(const char *name) {
  static getenv_t real;
  if (!real) real = (getenv_t)dlsym(RTLD_NEXT, "getenv");
  log_name(name, __builtin_return_address(0));
  return real(name);
}

char *secure_getenv(const char *name) {
  static getenv_t real;
  if (!real) real = (getenv_t)dlsym(RTLD_NEXT, "secure_getenv");
  log_name(name, __builtin_return_address(0));
  return real(name);
}
