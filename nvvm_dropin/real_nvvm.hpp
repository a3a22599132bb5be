// The real libNVVM behind the drop-in: found as pcache_compile finds it (never the drop-in itself,
// only the major the drop-in was built for), loaded on first need. A hit never needs it.
#pragma once

#include <nvvm.h>

#include <string>

namespace progcache::dropin {

// The real library's functions, loaded on first call (thread-safe; a failure is tried again on
// the next). Throws Error(cuda_unavailable) when there is no real libNVVM, or it lacks one.
struct NvvmApi {
  nvvmResult (*version)(int *, int *);
  nvvmResult (*ir_version)(int *, int *, int *, int *);
  nvvmResult (*create)(nvvmProgram *);
  nvvmResult (*destroy)(nvvmProgram *);
  nvvmResult (*add_module)(nvvmProgram, const char *, size_t, const char *);
  nvvmResult (*lazy_add_module)(nvvmProgram, const char *, size_t, const char *);
  nvvmResult (*verify)(nvvmProgram, int, const char **);
  nvvmResult (*compile)(nvvmProgram, int, const char **);
  nvvmResult (*result_size)(nvvmProgram, size_t *);
  nvvmResult (*result)(nvvmProgram, char *);
  nvvmResult (*log_size)(nvvmProgram, size_t *);
  nvvmResult (*log)(nvvmProgram, char *);
  const char *(*error_string)(nvvmResult);
};
const NvvmApi &real_nvvm();

// The real library's exact build ("libNVVM <build-id>"), read from its file.
std::string real_nvvm_build();

// Sets up the search for the real library: this drop-in's major, never this file. Runs when the
// drop-in is loaded.
void restrict_search_to_real_nvvm();

}  // namespace progcache::dropin
