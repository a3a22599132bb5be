// The drop-in nvJitLink: libnvJitLink.so.<major>'s API and symbol version, in front of the real
// library (docs/transparent.md). Each function is exported under its plain name (what dlsym
// callers such as cuda.bindings use) and its versioned one (what nvJitLink.h's inline wrappers
// call). Every export catches everything: no C++ exception leaves the library.
#include <nvJitLink.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "core/cache.hpp"
#include "cuda/jit_library.hpp"
#include "dropin_common/forward.hpp"
#include "dropin_common/support.hpp"
#include "link.hpp"
#include "real_nvjitlink.hpp"
#include "util/error.hpp"

#define DROPIN_API extern "C" __attribute__((visibility("default")))

namespace progcache::dropin {
namespace {

PCACHE_DROPIN_NOTE();

__attribute__((constructor)) void on_load() {
  restrict_search_to_real_nvjitlink();
}

// Runs f: an exception becomes NVJITLINK_ERROR_INTERNAL (nvJitLink has no code for running out
// of memory).
template <class F>
nvJitLinkResult guarded(const char *function, F &&f) noexcept {
  return guarded_call("nvJitLink", function, NVJITLINK_ERROR_INTERNAL, NVJITLINK_ERROR_INTERNAL, f);
}

// Runs f on the live drop-in link behind handle. A NULL handle is the real library's to answer;
// any other handle the drop-in did not make is refused as nvJitLink refuses input it cannot use.
template <class F, class Real>
nvJitLinkResult with_link(const char *function, nvJitLinkHandle handle, F &&f,
                          Real &&real) noexcept {
  return guarded(function, [&] {
    if (!handle) return real(real_nvjitlink());
    DropinLink *link = DropinLink::find(handle);
    return link ? f(*link) : NVJITLINK_ERROR_INVALID_INPUT;
  });
}

// nvJitLinkVersion without loading nvJitLink: asked of the real library once per build and kept
// in the cache's memos under its build, and for the process.
nvJitLinkResult version(unsigned int *major, unsigned int *minor) {
  if (!major || !minor) return real_nvjitlink().version(major, minor);  // its answer to NULLs
  static KeptAnswer<std::pair<unsigned int, unsigned int>> kept;
  const std::string build = real_nvjitlink_build();
  std::pair<unsigned int, unsigned int> v;
  if (kept.find(build, &v)) {
    *major = v.first;
    *minor = v.second;
    return NVJITLINK_SUCCESS;
  }
  Cache *cache = dropin_cache("nvJitLink");
  const std::string name = "nvjitlink-version/" + build;
  if (cache)
    if (const auto memo = cache->load_memo(name))
      if (std::sscanf(memo->c_str(), "%u.%u", major, minor) == 2) {
        kept.keep(build, {*major, *minor});
        return NVJITLINK_SUCCESS;
      }
  const nvJitLinkResult rc = real_nvjitlink().version(major, minor);
  if (rc != NVJITLINK_SUCCESS) return rc;
  if (cache) cache->save_memo(name, std::to_string(*major) + "." + std::to_string(*minor));
  kept.keep(build, {*major, *minor});
  return rc;
}

}  // namespace
}  // namespace progcache::dropin

using progcache::dropin::DropinLink;
using progcache::dropin::guarded;
using progcache::dropin::LinkOutput;
using progcache::dropin::NvJitLinkApi;
using progcache::dropin::real_nvjitlink;
using progcache::dropin::with_link;

// nvJitLink.h declares the plain names only as inline wrappers, which NVJITLINK_NO_INLINE hides:
// these definitions are the declarations.
#pragma GCC diagnostic ignored "-Wmissing-declarations"

// Each function under both names: `plain` and its versioned alias `versioned`.
#define DROPIN_ALIAS(plain, versioned) \
  DROPIN_API __attribute__((alias(#plain))) decltype(plain) versioned;

DROPIN_API nvJitLinkResult nvJitLinkCreate(nvJitLinkHandle *handle, uint32_t num_options,
                                           const char **options) {
  return guarded(__func__, [&] { return DropinLink::create(handle, num_options, options); });
}

DROPIN_API nvJitLinkResult nvJitLinkDestroy(nvJitLinkHandle *handle) {
  return guarded(__func__, [&] {
    if (!handle || !*handle) return real_nvjitlink().destroy(handle);
    return DropinLink::destroy(handle);
  });
}

DROPIN_API nvJitLinkResult nvJitLinkAddData(nvJitLinkHandle handle, nvJitLinkInputType type,
                                            const void *data, size_t size, const char *name) {
  return with_link(
      __func__, handle, [&](DropinLink &l) { return l.add_data(type, data, size, name); },
      [&](const NvJitLinkApi &real) { return real.add_data(handle, type, data, size, name); });
}

DROPIN_API nvJitLinkResult nvJitLinkAddFile(nvJitLinkHandle handle, nvJitLinkInputType type,
                                            const char *file) {
  return with_link(
      __func__, handle, [&](DropinLink &l) { return l.add_file(type, file); },
      [&](const NvJitLinkApi &real) { return real.add_file(handle, type, file); });
}

DROPIN_API nvJitLinkResult nvJitLinkComplete(nvJitLinkHandle handle) {
  return with_link(
      __func__, handle, [&](DropinLink &l) { return l.complete(); },
      [&](const NvJitLinkApi &real) { return real.complete(handle); });
}

#define DROPIN_GETTERS(Name, which, size_member, data_member, Buffer)                         \
  DROPIN_API nvJitLinkResult nvJitLinkGet##Name##Size(nvJitLinkHandle handle, size_t *size) { \
    return with_link(                                                                         \
        __func__, handle, [&](DropinLink &l) { return l.output_size(which, size); },          \
        [&](const NvJitLinkApi &real) { return real.size_member(handle, size); });            \
  }                                                                                           \
  DROPIN_API nvJitLinkResult nvJitLinkGet##Name(nvJitLinkHandle handle, Buffer *buffer) {     \
    return with_link(                                                                         \
        __func__, handle, [&](DropinLink &l) { return l.output(which, buffer); },             \
        [&](const NvJitLinkApi &real) { return real.data_member(handle, buffer); });          \
  }
DROPIN_GETTERS(LinkedCubin, LinkOutput::cubin, cubin_size, cubin, void)
DROPIN_GETTERS(LinkedPtx, LinkOutput::ptx, ptx_size, ptx, char)
DROPIN_GETTERS(ErrorLog, LinkOutput::error_log, error_log_size, error_log, char)
DROPIN_GETTERS(InfoLog, LinkOutput::info_log, info_log_size, info_log, char)

DROPIN_API nvJitLinkResult nvJitLinkVersion(unsigned int *major, unsigned int *minor) {
  return guarded(__func__, [&] { return progcache::dropin::version(major, minor); });
}

// The versioned names nvJitLink.h's inline wrappers call (this major's suffix). Create's takes
// `const char *const *`, the plain name `const char **`: not an alias.
DROPIN_API nvJitLinkResult __nvJitLinkCreate_13_0(nvJitLinkHandle *handle, uint32_t num_options,
                                                  const char *const *options) {
  return nvJitLinkCreate(handle, num_options, const_cast<const char **>(options));
}
// clang-format off
DROPIN_ALIAS(nvJitLinkDestroy, __nvJitLinkDestroy_13_0)
DROPIN_ALIAS(nvJitLinkAddData, __nvJitLinkAddData_13_0)
DROPIN_ALIAS(nvJitLinkAddFile, __nvJitLinkAddFile_13_0)
DROPIN_ALIAS(nvJitLinkComplete, __nvJitLinkComplete_13_0)
DROPIN_ALIAS(nvJitLinkGetLinkedCubinSize, __nvJitLinkGetLinkedCubinSize_13_0)
DROPIN_ALIAS(nvJitLinkGetLinkedCubin, __nvJitLinkGetLinkedCubin_13_0)
DROPIN_ALIAS(nvJitLinkGetLinkedPtxSize, __nvJitLinkGetLinkedPtxSize_13_0)
DROPIN_ALIAS(nvJitLinkGetLinkedPtx, __nvJitLinkGetLinkedPtx_13_0)
DROPIN_ALIAS(nvJitLinkGetErrorLogSize, __nvJitLinkGetErrorLogSize_13_0)
DROPIN_ALIAS(nvJitLinkGetErrorLog, __nvJitLinkGetErrorLog_13_0)
DROPIN_ALIAS(nvJitLinkGetInfoLogSize, __nvJitLinkGetInfoLogSize_13_0)
DROPIN_ALIAS(nvJitLinkGetInfoLog, __nvJitLinkGetInfoLog_13_0)
// clang-format on

// nvJitLink's private export (no header declares it): forwarded to the real library's.
namespace progcache::dropin {
namespace {
void *real_private(const char *name) noexcept {
  return real_function_or_abort(kNvJitLinkLibrary, "nvJitLink", name);
}
}  // namespace
}  // namespace progcache::dropin
PCACHE_DROPIN_FORWARD(__nvJitLinkAPI, progcache::dropin::real_private);
