// The drop-in libNVVM: libnvvm.so.<major>'s API, in front of the real library
// (docs/transparent.md). Every export catches everything: no C++ exception leaves the library.
#include <nvvm.h>

#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "core/cache.hpp"
#include "cuda/jit_library.hpp"
#include "dropin_common/forward.hpp"
#include "dropin_common/support.hpp"
#include "program.hpp"
#include "real_nvvm.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"

#define DROPIN_API extern "C" __attribute__((visibility("default")))

namespace progcache::dropin {
namespace {

PCACHE_DROPIN_NOTE();

__attribute__((constructor)) void on_load() {
  restrict_search_to_real_nvvm();
}

// Runs f: an exception becomes libNVVM's out-of-memory code, or NVVM_ERROR_INVALID_INPUT (libNVVM
// has no internal-error code).
template <class F>
nvvmResult guarded(const char *function, F &&f) noexcept {
  return guarded_call("libNVVM", function, NVVM_ERROR_OUT_OF_MEMORY, NVVM_ERROR_INVALID_INPUT, f);
}

// Runs f on the live drop-in program behind handle. A NULL handle is the real library's to
// answer; any other handle the drop-in did not make is NVVM_ERROR_INVALID_PROGRAM.
template <class F, class Real>
nvvmResult with_program(const char *function, nvvmProgram handle, F &&f, Real &&real) noexcept {
  return guarded(function, [&] {
    if (!handle) return real(real_nvvm());
    DropinNvvm *p = DropinNvvm::find(handle);
    return p ? f(*p) : NVVM_ERROR_INVALID_PROGRAM;
  });
}

// libNVVM's version and its IR's: asked of the real library once per build and kept in the
// cache's memos under its build, so that a warm process (numba-cuda asks at start) never loads it.
struct Versions {
  int v[6] = {};  // major, minor, IR major, IR minor, debug major, debug minor
};
nvvmResult versions(Versions *out) {
  // numba-cuda asks for the IR version five times a compile: the answer for a build is kept.
  static KeptAnswer<Versions> kept;
  const std::string build = real_nvvm_build();
  if (kept.find(build, out)) return NVVM_SUCCESS;
  auto keep = [&] {
    kept.keep(build, *out);
    return NVVM_SUCCESS;
  };
  Cache *cache = dropin_cache("libNVVM");
  const std::string name = "nvvm-versions/" + build;
  if (cache)
    if (const auto memo = cache->load_memo(name))
      if (std::sscanf(memo->c_str(), "%d.%d.%d.%d.%d.%d", &out->v[0], &out->v[1], &out->v[2],
                      &out->v[3], &out->v[4], &out->v[5]) == 6)
        return keep();
  const NvvmApi &real = real_nvvm();
  nvvmResult rc = real.version(&out->v[0], &out->v[1]);
  if (rc == NVVM_SUCCESS) rc = real.ir_version(&out->v[2], &out->v[3], &out->v[4], &out->v[5]);
  if (rc != NVVM_SUCCESS) return rc;
  std::string memo;
  for (int x : out->v) memo += (memo.empty() ? "" : ".") + std::to_string(x);
  if (cache) cache->save_memo(name, memo);
  return keep();
}

}  // namespace
}  // namespace progcache::dropin

using progcache::dropin::DropinNvvm;
using progcache::dropin::guarded;
using progcache::dropin::NvvmApi;
using progcache::dropin::NvvmOutput;
using progcache::dropin::real_nvvm;
using progcache::dropin::with_program;

DROPIN_API nvvmResult nvvmVersion(int *major, int *minor) {
  return guarded(__func__, [&] {
    if (!major || !minor) return real_nvvm().version(major, minor);
    progcache::dropin::Versions v;
    const nvvmResult rc = progcache::dropin::versions(&v);
    if (rc != NVVM_SUCCESS) return rc;
    *major = v.v[0];
    *minor = v.v[1];
    return NVVM_SUCCESS;
  });
}

DROPIN_API nvvmResult nvvmIRVersion(int *major_ir, int *minor_ir, int *major_dbg, int *minor_dbg) {
  return guarded(__func__, [&] {
    if (!major_ir || !minor_ir || !major_dbg || !minor_dbg)
      return real_nvvm().ir_version(major_ir, minor_ir, major_dbg, minor_dbg);
    progcache::dropin::Versions v;
    const nvvmResult rc = progcache::dropin::versions(&v);
    if (rc != NVVM_SUCCESS) return rc;
    *major_ir = v.v[2];
    *minor_ir = v.v[3];
    *major_dbg = v.v[4];
    *minor_dbg = v.v[5];
    return NVVM_SUCCESS;
  });
}

DROPIN_API const char *nvvmGetErrorString(nvvmResult result) {
  // libNVVM's own words (the enumerator's name); a code newer than this header, the real
  // library's, which may know it.
  static const char *const kNames[] = {
      "NVVM_SUCCESS",
      "NVVM_ERROR_OUT_OF_MEMORY",
      "NVVM_ERROR_PROGRAM_CREATION_FAILURE",
      "NVVM_ERROR_IR_VERSION_MISMATCH",
      "NVVM_ERROR_INVALID_INPUT",
      "NVVM_ERROR_INVALID_PROGRAM",
      "NVVM_ERROR_INVALID_IR",
      "NVVM_ERROR_INVALID_OPTION",
      "NVVM_ERROR_NO_MODULE_IN_PROGRAM",
      "NVVM_ERROR_COMPILATION",
  };
  const int i = int(result);
  if (i >= 0 && i < int(sizeof kNames / sizeof *kNames)) return kNames[i];
  try {
    if (const char *real = real_nvvm().error_string(result)) return real;
  } catch (...) {  // no real libNVVM to ask: its answer for a code it does not know
  }
  return "NVVM_ERROR not found";
}

DROPIN_API nvvmResult nvvmCreateProgram(nvvmProgram *prog) {
  return guarded(__func__, [&] { return DropinNvvm::create(prog); });
}

DROPIN_API nvvmResult nvvmDestroyProgram(nvvmProgram *prog) {
  return guarded(__func__, [&] {
    if (!prog || !*prog) return real_nvvm().destroy(prog);
    return DropinNvvm::destroy(prog);
  });
}

DROPIN_API nvvmResult nvvmAddModuleToProgram(nvvmProgram prog, const char *buffer, size_t size,
                                             const char *name) {
  return with_program(
      __func__, prog, [&](DropinNvvm &p) { return p.add_module(false, buffer, size, name); },
      [&](const NvvmApi &real) { return real.add_module(prog, buffer, size, name); });
}

DROPIN_API nvvmResult nvvmLazyAddModuleToProgram(nvvmProgram prog, const char *buffer, size_t size,
                                                 const char *name) {
  return with_program(
      __func__, prog, [&](DropinNvvm &p) { return p.add_module(true, buffer, size, name); },
      [&](const NvvmApi &real) { return real.lazy_add_module(prog, buffer, size, name); });
}

DROPIN_API nvvmResult nvvmVerifyProgram(nvvmProgram prog, int num_options, const char **options) {
  return with_program(
      __func__, prog, [&](DropinNvvm &p) { return p.verify(num_options, options); },
      [&](const NvvmApi &real) { return real.verify(prog, num_options, options); });
}

DROPIN_API nvvmResult nvvmCompileProgram(nvvmProgram prog, int num_options, const char **options) {
  return with_program(
      __func__, prog, [&](DropinNvvm &p) { return p.compile(num_options, options); },
      [&](const NvvmApi &real) { return real.compile(prog, num_options, options); });
}

#define DROPIN_GETTERS(Name, which, size_member, data_member)                      \
  DROPIN_API nvvmResult nvvmGet##Name##Size(nvvmProgram prog, size_t *size) {      \
    return with_program(                                                           \
        __func__, prog, [&](DropinNvvm &p) { return p.output_size(which, size); }, \
        [&](const NvvmApi &real) { return real.size_member(prog, size); });        \
  }                                                                                \
  DROPIN_API nvvmResult nvvmGet##Name(nvvmProgram prog, char *buffer) {            \
    return with_program(                                                           \
        __func__, prog, [&](DropinNvvm &p) { return p.output(which, buffer); },    \
        [&](const NvvmApi &real) { return real.data_member(prog, buffer); });      \
  }
DROPIN_GETTERS(CompiledResult, NvvmOutput::result, result_size, result)
DROPIN_GETTERS(ProgramLog, NvvmOutput::log, log_size, log)

// libNVVM's exports that no header declares: forwarded to the real library's.
namespace progcache::dropin {
namespace {
void *real_private(const char *name) noexcept {
  return real_function_or_abort(kNvvmLibrary, "libNVVM", name);
}
}  // namespace
}  // namespace progcache::dropin
PCACHE_DROPIN_FORWARD(__nvvmHandle, progcache::dropin::real_private);
PCACHE_DROPIN_FORWARD(__nvvmHandleTarget, progcache::dropin::real_private);
PCACHE_DROPIN_FORWARD(nvvmDisableConcurrentAPI, progcache::dropin::real_private);
