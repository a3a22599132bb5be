// The drop-in NVRTC: libnvrtc.so.<major>'s API and symbol versions, in front of the real library
// (docs/transparent.md). Every export catches everything: no C++ exception leaves the library.
#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "core/cache.hpp"
#include "cuda/elf_file.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/nvrtc_identity.hpp"
#include "program.hpp"
#include "real_nvrtc.hpp"
#include "util/error.hpp"

#define DROPIN_API extern "C" __attribute__((visibility("default")))

namespace progcache::dropin {
namespace {

PCACHE_DROPIN_NOTE();

__attribute__((constructor)) void on_load() {
  restrict_search_to_real_nvrtc();
}

// Runs f: an exception becomes NVRTC's out-of-memory code, or an internal error.
template <class F>
nvrtcResult guarded(const char *function, F &&f) noexcept {
  return guarded_call("NVRTC", function, NVRTC_ERROR_OUT_OF_MEMORY, NVRTC_ERROR_INTERNAL_ERROR, f);
}

// Runs f on the live drop-in program behind handle; NVRTC_ERROR_INVALID_PROGRAM for any other.
template <class F>
nvrtcResult with_program(const char *function, nvrtcProgram handle, F &&f) noexcept {
  return guarded(function, [&] {
    DropinProgram *p = DropinProgram::find(handle);
    return p ? f(*p) : NVRTC_ERROR_INVALID_PROGRAM;
  });
}

// nvrtcVersion without loading NVRTC: the builtins library it names carries major.minor
// ("libnvrtc-builtins.so.13.0"), read from the file and remembered. Zero when it cannot tell.
bool version_from_files(int *major, int *minor) {
  const NvrtcIdentity id = current_nvrtc_identity(locate_nvrtc(dropin_cache()), dropin_cache());
  const size_t at = id.builtins_path.rfind(".so.");
  if (at == std::string::npos) return false;
  return std::sscanf(id.builtins_path.c_str() + at + 4, "%d.%d", major, minor) == 2;
}

// The architectures the real NVRTC supports: asked of it once per build and kept in the cache's
// memos under its identity (the build-ids of libnvrtc and its builtins), so that a warm process
// (jitify2 and cuda-bindings ask at start) never loads it. Empty when the memo cannot be used.
std::vector<int> supported_archs() {
  // numba-cuda asks twice a compile: the answer for an identity is also kept in the process.
  static KeptAnswer<std::vector<int>> kept;
  Cache *cache = dropin_cache();
  const std::string name =
      "nvrtc-archs/" + current_nvrtc_identity(locate_nvrtc(cache), cache).key_text();
  std::vector<int> archs;
  if (kept.find(name, &archs)) return archs;
  if (cache)
    if (const auto memo = cache->load_memo(name)) {
      for (size_t at = 0; at < memo->size();) {
        const size_t comma = memo->find(',', at);
        archs.push_back(std::atoi(memo->substr(at, comma - at).c_str()));
        at = comma == std::string::npos ? memo->size() : comma + 1;
      }
      if (!archs.empty() && std::all_of(archs.begin(), archs.end(), [](int a) { return a > 0; })) {
        kept.keep(name, archs);
        return archs;
      }
      archs.clear();
    }
  const NvrtcApi &real = real_nvrtc();
  int n = 0;
  if (require(real.num_supported_archs, "nvrtcGetNumSupportedArchs")(&n) != NVRTC_SUCCESS ||
      n <= 0 || n > 4096)
    return {};
  archs.assign(static_cast<size_t>(n), 0);
  if (require(real.supported_archs, "nvrtcGetSupportedArchs")(archs.data()) != NVRTC_SUCCESS)
    return {};
  std::string memo;
  for (int a : archs) memo += (memo.empty() ? "" : ",") + std::to_string(a);
  if (cache) cache->save_memo(name, memo);
  kept.keep(name, archs);
  return archs;
}

}  // namespace
}  // namespace progcache::dropin

using progcache::dropin::DropinProgram;
using progcache::dropin::guarded;
using progcache::dropin::OutputKind;
using progcache::dropin::real_nvrtc;
using progcache::dropin::require;
using progcache::dropin::with_program;

DROPIN_API const char *nvrtcGetErrorString(nvrtcResult result) {
  // NVRTC's own words: the enumerator's name (nvrtc.h), "NVRTC_ERROR unknown" for the rest.
  static const char *const kNames[] = {
    "NVRTC_SUCCESS",
    "NVRTC_ERROR_OUT_OF_MEMORY",
    "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
    "NVRTC_ERROR_INVALID_INPUT",
    "NVRTC_ERROR_INVALID_PROGRAM",
    "NVRTC_ERROR_INVALID_OPTION",
    "NVRTC_ERROR_COMPILATION",
    "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    "NVRTC_ERROR_INTERNAL_ERROR",
    "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
    "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
    "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
    "NVRTC_ERROR_PCH_CREATE",
    "NVRTC_ERROR_CANCELLED",
#if PCACHE_NVRTC_MAJOR >= 13
    "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED"
#endif
  };
  const int i = int(result);
  if (i >= 0 && i < int(sizeof kNames / sizeof *kNames)) return kNames[i];
  // A code newer than the header this drop-in was built with (13.5's NVRTC_ERROR_BUSY is 18):
  // the real library, which may know it, answers in its own words.
  try {
    if (const char *real = real_nvrtc().error_string(result)) return real;
  } catch (...) {  // no real NVRTC to ask: NVRTC's own answer for a code it does not know
  }
  return "NVRTC_ERROR unknown";
}

DROPIN_API nvrtcResult nvrtcVersion(int *major, int *minor) {
  return guarded(__func__, [&] {
    if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
    if (progcache::dropin::version_from_files(major, minor)) return NVRTC_SUCCESS;
    return real_nvrtc().version(major, minor);
  });
}

DROPIN_API nvrtcResult nvrtcGetNumSupportedArchs(int *num_archs) {
  return guarded(__func__, [&] {
    const std::vector<int> archs =
        num_archs ? progcache::dropin::supported_archs() : std::vector<int>();
    if (archs.empty()) return require(real_nvrtc().num_supported_archs, __func__)(num_archs);
    *num_archs = int(archs.size());
    return NVRTC_SUCCESS;
  });
}

DROPIN_API nvrtcResult nvrtcGetSupportedArchs(int *archs) {
  return guarded(__func__, [&] {
    const std::vector<int> known =
        archs ? progcache::dropin::supported_archs() : std::vector<int>();
    if (known.empty()) return require(real_nvrtc().supported_archs, __func__)(archs);
    std::copy(known.begin(), known.end(), archs);
    return NVRTC_SUCCESS;
  });
}

DROPIN_API nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                                          int num_headers, const char *const *headers,
                                          const char *const *include_names) {
  return guarded(__func__, [&] {
    return DropinProgram::create(prog, src, name, num_headers, headers, include_names);
  });
}

DROPIN_API nvrtcResult __nvrtcCPEx(nvrtcProgram *prog, const char *src, const char *name,
                                   int num_headers, const char *const *headers,
                                   const char *const *include_names, int num_extensions,
                                   void *extensions, void **extension_args);
DROPIN_API nvrtcResult __nvrtcCPEx(nvrtcProgram *prog, const char *src, const char *name,
                                   int num_headers, const char *const *headers,
                                   const char *const *include_names, int num_extensions,
                                   void *extensions, void **extension_args) {
  return guarded(__func__, [&] {
    const auto create_ex = require(real_nvrtc().create_ex, __func__);
    nvrtcProgram real = nullptr;
    const nvrtcResult rc = create_ex(&real, src, name, num_headers, headers, include_names,
                                     num_extensions, extensions, extension_args);
    if (rc != NVRTC_SUCCESS || !prog) return rc;
    return DropinProgram::adopt_real(prog, real);
  });
}

DROPIN_API nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  return guarded(__func__, [&] { return DropinProgram::destroy(prog); });
}

DROPIN_API nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options,
                                           const char *const *options) {
  return with_program(__func__, prog,
                      [&](DropinProgram &p) { return p.compile(num_options, options); });
}

#define DROPIN_OUTPUT_GETTERS(Name, kind)                                                          \
  DROPIN_API nvrtcResult nvrtcGet##Name##Size(nvrtcProgram prog, size_t *size) {                   \
    return with_program(__func__, prog,                                                            \
                        [&](DropinProgram &p) { return p.output_size(kind, size); });              \
  }                                                                                                \
  DROPIN_API nvrtcResult nvrtcGet##Name(nvrtcProgram prog, char *buffer) {                         \
    return with_program(__func__, prog, [&](DropinProgram &p) { return p.output(kind, buffer); }); \
  }
DROPIN_OUTPUT_GETTERS(PTX, OutputKind::ptx)
DROPIN_OUTPUT_GETTERS(CUBIN, OutputKind::cubin)
DROPIN_OUTPUT_GETTERS(LTOIR, OutputKind::ltoir)
DROPIN_OUTPUT_GETTERS(OptiXIR, OutputKind::optixir)
#if PCACHE_NVRTC_MAJOR == 12
// NVRTC 12's deprecated names of the LTO-IR getters (nvrtc.h: "Please use nvrtcGetLTOIR").
DROPIN_OUTPUT_GETTERS(NVVM, OutputKind::ltoir)
#endif

DROPIN_API nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  return with_program(__func__, prog, [&](DropinProgram &p) { return p.log_size(size); });
}

DROPIN_API nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  return with_program(__func__, prog, [&](DropinProgram &p) { return p.log(log); });
}

DROPIN_API nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *const expression) {
  return with_program(__func__, prog,
                      [&](DropinProgram &p) { return p.add_name_expression(expression); });
}

DROPIN_API nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *const expression,
                                           const char **lowered) {
  return with_program(__func__, prog,
                      [&](DropinProgram &p) { return p.lowered_name(expression, lowered); });
}

DROPIN_API nvrtcResult nvrtcGetPCHHeapSize(size_t *size) {
  return guarded(__func__, [&] { return require(real_nvrtc().get_pch_heap_size, __func__)(size); });
}

DROPIN_API nvrtcResult nvrtcSetPCHHeapSize(size_t size) {
  return guarded(__func__, [&] { return require(real_nvrtc().set_pch_heap_size, __func__)(size); });
}

DROPIN_API nvrtcResult nvrtcGetPCHCreateStatus(nvrtcProgram prog) {
  return with_program(__func__, prog, [&](DropinProgram &p) { return p.pch_create_status(); });
}

DROPIN_API nvrtcResult nvrtcGetPCHHeapSizeRequired(nvrtcProgram prog, size_t *size) {
  return with_program(__func__, prog,
                      [&](DropinProgram &p) { return p.pch_heap_size_required(size); });
}

DROPIN_API nvrtcResult nvrtcSetFlowCallback(nvrtcProgram prog, int (*callback)(void *, void *),
                                            void *payload) {
  return with_program(__func__, prog,
                      [&](DropinProgram &p) { return p.set_flow_callback(callback, payload); });
}
