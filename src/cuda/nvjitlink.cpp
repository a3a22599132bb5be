#include "cuda/nvjitlink.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "util/error.hpp"
#include "util/fork_guard.hpp"

namespace progcache {
namespace {

// nvJitLink's types, as nvJitLink.h declares them (its header is used for the values only: its
// inline wrappers call versioned symbols, and this file resolves the plain exported names).
using Handle = void *;
using Result = int;
constexpr Result kSuccess = 0;
constexpr const char *kResultNames[] = {
    "NVJITLINK_SUCCESS",
    "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
    "NVJITLINK_ERROR_MISSING_ARCH",
    "NVJITLINK_ERROR_INVALID_INPUT",
    "NVJITLINK_ERROR_PTX_COMPILE",
    "NVJITLINK_ERROR_NVVM_COMPILE",
    "NVJITLINK_ERROR_INTERNAL",
    "NVJITLINK_ERROR_THREADPOOL",
    "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
    "NVJITLINK_ERROR_FINALIZE",
    "NVJITLINK_ERROR_NULL_INPUT",
    "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
    "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
    "NVJITLINK_ERROR_ARCH_MISMATCH",
    "NVJITLINK_ERROR_OUTDATED_LIBRARY",
    "NVJITLINK_ERROR_MISSING_FATBIN",
    "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
    "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
    "NVJITLINK_ERROR_LTO_NOT_ENABLED",
};

std::string result_name(Result r) {
  return r >= 0 && size_t(r) < std::size(kResultNames) ? kResultNames[r]
                                                       : "nvJitLinkResult " + std::to_string(r);
}

// nvJitLinkInputType of each LinkInputKind.
int input_type(LinkInputKind kind) {
  switch (kind) {
    case LinkInputKind::cubin:
      return 1;
    case LinkInputKind::ptx:
      return 2;
    case LinkInputKind::ltoir:
      return 3;
    case LinkInputKind::fatbin:
      return 4;
    case LinkInputKind::object:
      return 5;
    case LinkInputKind::library:
      return 6;
  }
  return 10;  // NVJITLINK_INPUT_ANY
}

ForkSafeMutex g_loaded_mutex;
std::map<std::string, std::unique_ptr<NvJitLink>> g_loaded;  // lives as long as the process

}  // namespace

struct NvJitLink::Api {
  Result (*create)(Handle *, uint32_t, const char **);
  Result (*destroy)(Handle *);
  Result (*add_data)(Handle, int, const void *, size_t, const char *);
  Result (*complete)(Handle);
  Result (*cubin_size)(Handle, size_t *);
  Result (*cubin)(Handle, void *);
  Result (*ptx_size)(Handle, size_t *);
  Result (*ptx)(Handle, char *);
  Result (*error_log_size)(Handle, size_t *);
  Result (*error_log)(Handle, char *);
  Result (*info_log_size)(Handle, size_t *);
  Result (*info_log)(Handle, char *);
  Result (*version)(unsigned *, unsigned *);
};

NvJitLink::NvJitLink(const LibraryLocation &where) {
  void *h = open_library(kNvJitLinkLibrary, where);
  auto api = std::make_unique<Api>();
  auto resolve = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        library_function(kNvJitLinkLibrary, h, where, name));
  };
  resolve(api->create, "nvJitLinkCreate");
  resolve(api->destroy, "nvJitLinkDestroy");
  resolve(api->add_data, "nvJitLinkAddData");
  resolve(api->complete, "nvJitLinkComplete");
  resolve(api->cubin_size, "nvJitLinkGetLinkedCubinSize");
  resolve(api->cubin, "nvJitLinkGetLinkedCubin");
  resolve(api->ptx_size, "nvJitLinkGetLinkedPtxSize");
  resolve(api->ptx, "nvJitLinkGetLinkedPtx");
  resolve(api->error_log_size, "nvJitLinkGetErrorLogSize");
  resolve(api->error_log, "nvJitLinkGetErrorLog");
  resolve(api->info_log_size, "nvJitLinkGetInfoLogSize");
  resolve(api->info_log, "nvJitLinkGetInfoLog");
  resolve(api->version, "nvJitLinkVersion");
  unsigned major = 0, minor = 0;
  if (api->version(&major, &minor) != kSuccess)
    throw Error(Status::cuda_unavailable, "nvJitLink '" + where.path + "' gives no version");
  version_ = major * 1000 + minor * 10;
  api_ = std::move(api);
}

NvJitLink::~NvJitLink() = default;

NvJitLink &NvJitLink::load(const LibraryLocation &where) {
  std::lock_guard lock(g_loaded_mutex);
  auto &slot = g_loaded[where.path];
  if (!slot) slot.reset(new NvJitLink(where));
  return *slot;
}

NvrtcOutput NvJitLink::link(const std::vector<LinkInput> &inputs,
                            const std::vector<std::string_view> &options, Target target) const {
  NvrtcOutput out;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> owned(options.begin(), options.end());
  bool has_ptx = false;
  for (const std::string &o : owned) has_ptx |= o == "-ptx";
  if (target == Target::ptx && !has_ptx) owned.emplace_back("-ptx");
  std::vector<const char *> argv;
  for (const std::string &o : owned) argv.push_back(o.c_str());
  Handle h = nullptr;
  Result r = api_->create(&h, uint32_t(argv.size()), argv.data());
  auto read_log = [&](Result (*size_fn)(Handle, size_t *), Result (*log_fn)(Handle, char *)) {
    size_t n = 0;
    if (!h || size_fn(h, &n) != kSuccess || n == 0) return std::string();
    std::string text(n, '\0');
    if (log_fn(h, text.data()) != kSuccess) return std::string();
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
  };
  const char *failed_call = r != kSuccess ? "nvJitLinkCreate" : nullptr;
  // nvJitLink keeps the names it is given (its messages name the input), until it is destroyed:
  // they live as long as the link, not the call that adds them.
  std::vector<std::string> names(inputs.size());
  for (size_t i = 0; i < inputs.size() && !failed_call; ++i) {
    names[i] = std::string(inputs[i].name);
    r = api_->add_data(h, input_type(inputs[i].kind), inputs[i].data.data, inputs[i].data.size,
                       names[i].c_str());
    if (r != kSuccess) failed_call = "nvJitLinkAddData";
  }
  if (!failed_call) {
    r = api_->complete(h);
    if (r != kSuccess) failed_call = "nvJitLinkComplete";
  }
  if (!failed_call) {
    size_t n = 0;
    const bool ptx = target == Target::ptx;
    r = ptx ? api_->ptx_size(h, &n) : api_->cubin_size(h, &n);
    if (r == kSuccess) {
      out.code.assign(n, '\0');
      r = ptx ? api_->ptx(h, out.code.data()) : api_->cubin(h, out.code.data());
    }
    if (r != kSuccess) failed_call = ptx ? "nvJitLinkGetLinkedPtx" : "nvJitLinkGetLinkedCubin";
  }
  out.log = read_log(api_->error_log_size, api_->error_log);
  const std::string info = read_log(api_->info_log_size, api_->info_log);
  if (!info.empty()) out.log += (out.log.empty() || out.log.back() == '\n' ? "" : "\n") + info;
  if (h) api_->destroy(&h);
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (failed_call) {
    out.ok = false;
    out.code.clear();
    out.nvrtc_result = r;
    out.log += (out.log.empty() || out.log.back() == '\n' ? "" : "\n") + std::string(failed_call) +
               ": " + result_name(r) + "\n";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace progcache
