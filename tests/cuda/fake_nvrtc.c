/* A test NVRTC: forwards every call to the real library ($PCACHE_TEST_REAL_NVRTC) and appends
 * one byte to $PCACHE_TEST_NVRTC_COUNT for each nvrtcCompileProgram, so tests can count compiles
 * across threads and processes. Built only for tests. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* This double's own settings and bookkeeping go through pointers the C library hands out, not
 * through this library's imports, which progcache observes as NVRTC's: a variable NVRTC reads is
 * keyed, and a file NVRTC writes makes a compile uncacheable. */
static const char *own_getenv(const char *name) {
  typedef char *(*getenv_t)(const char *);
  return ((getenv_t)dlsym(RTLD_DEFAULT, "getenv"))(name);
}

static void *real(const char *name) {
  static void *handle;
  if (!handle) {
    const char *path = own_getenv("PCACHE_TEST_REAL_NVRTC");
    handle = dlopen(path ? path : "libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      fprintf(stderr, "fake_nvrtc: %s\n", dlerror());
      abort();
    }
  }
  void *fn = dlsym(handle, name);
  if (!fn || fn == dlsym(RTLD_DEFAULT, name)) {
    Dl_info self, target;
    if (!fn || (dladdr(fn, &target) && dladdr((void *)real, &self) &&
                target.dli_fbase == self.dli_fbase)) {
      fprintf(stderr, "fake_nvrtc: %s does not resolve to a real NVRTC\n", name);
      abort();
    }
  }
  return fn;
}

#define FORWARD(ret, name, params, args) \
  ret name params {                      \
    typedef ret(*fn_t) params;           \
    return ((fn_t)real(#name))args;      \
  }

FORWARD(nvrtcResult, nvrtcVersion, (int *major, int *minor), (major, minor))
/* A newer NVRTC's code (13.5's NVRTC_ERROR_BUSY is 18), which the drop-in built with 13.0's header
 * must answer in the real library's words. */
const char *nvrtcGetErrorString(nvrtcResult r) {
  typedef const char *(*fn_t)(nvrtcResult);
  return (int)r == 18 ? "NVRTC_ERROR_BUSY" : ((fn_t)real("nvrtcGetErrorString"))(r);
}
FORWARD(nvrtcResult, nvrtcCreateProgram,
        (nvrtcProgram * p, const char *src, const char *name, int n, const char *const *h,
         const char *const *hn),
        (p, src, name, n, h, hn))
FORWARD(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * p), (p))
FORWARD(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram p, size_t *s), (p, s))
FORWARD(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram p, char *l), (p, l))
FORWARD(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram p, size_t *s), (p, s))
FORWARD(nvrtcResult, nvrtcGetPTX, (nvrtcProgram p, char *b), (p, b))
FORWARD(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram p, size_t *s), (p, s))
FORWARD(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram p, char *b), (p, b))
FORWARD(nvrtcResult, nvrtcGetLTOIRSize, (nvrtcProgram p, size_t *s), (p, s))
FORWARD(nvrtcResult, nvrtcGetLTOIR, (nvrtcProgram p, char *b), (p, b))
FORWARD(nvrtcResult, nvrtcAddNameExpression, (nvrtcProgram p, const char *e), (p, e))
FORWARD(nvrtcResult, nvrtcGetLoweredName, (nvrtcProgram p, const char *e, const char **l),
        (p, e, l))

nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int n, const char *const *opts) {
  typedef nvrtcResult (*fn_t)(nvrtcProgram, int, const char *const *);
  const char *count = own_getenv("PCACHE_TEST_NVRTC_COUNT");
  if (count) {
    typedef int (*open_t)(const char *, int, ...);
    open_t open_file = (open_t)dlsym(RTLD_DEFAULT, "open");
    int fd = open_file(count, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (write(fd, "c", 1) != 1) abort();
      close(fd);
    }
  }
  return ((fn_t)real("nvrtcCompileProgram"))(p, n, opts);
}
