#include "cuda/nvvm.hpp"

#include <sys/stat.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/paths.hpp"
#include "util/trust.hpp"

namespace progcache {
namespace {

// libNVVM's types, as nvvm.h declares them.
using Program = void *;
using Result = int;
constexpr Result kSuccess = 0, kOutOfMemory = 1;

ForkSafeMutex g_loaded_mutex;
std::map<std::string, std::unique_ptr<Nvvm>> g_loaded;  // lives as long as the process

}  // namespace

struct Nvvm::Api {
  Result (*version)(int *, int *);
  const char *(*error_string)(Result);
  Result (*create)(Program *);
  Result (*destroy)(Program *);
  Result (*add_module)(Program, const char *, size_t, const char *);
  Result (*lazy_add_module)(Program, const char *, size_t, const char *);
  Result (*compile)(Program, int, const char **);
  Result (*result_size)(Program, size_t *);
  Result (*result)(Program, char *);
  Result (*log_size)(Program, size_t *);
  Result (*log)(Program, char *);
};

Nvvm::Nvvm(const LibraryLocation &where) {
  void *h = open_library(kNvvmLibrary, where);
  auto api = std::make_unique<Api>();
  auto resolve = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        library_function(kNvvmLibrary, h, where, name));
  };
  resolve(api->version, "nvvmVersion");
  resolve(api->error_string, "nvvmGetErrorString");
  resolve(api->create, "nvvmCreateProgram");
  resolve(api->destroy, "nvvmDestroyProgram");
  resolve(api->add_module, "nvvmAddModuleToProgram");
  resolve(api->lazy_add_module, "nvvmLazyAddModuleToProgram");
  resolve(api->compile, "nvvmCompileProgram");
  resolve(api->result_size, "nvvmGetCompiledResultSize");
  resolve(api->result, "nvvmGetCompiledResult");
  resolve(api->log_size, "nvvmGetProgramLogSize");
  resolve(api->log, "nvvmGetProgramLog");
  int major = 0, minor = 0;
  if (api->version(&major, &minor) != kSuccess)
    throw Error(Status::cuda_unavailable, "libNVVM '" + where.path + "' gives no version");
  version_ = uint32_t(major) * 1000 + uint32_t(minor) * 10;
  api_ = std::move(api);
}

Nvvm::~Nvvm() = default;

Nvvm &Nvvm::load(const LibraryLocation &where) {
  std::lock_guard lock(g_loaded_mutex);
  auto &slot = g_loaded[where.path];
  if (!slot) slot.reset(new Nvvm(where));
  return *slot;
}

NvrtcOutput Nvvm::compile(const std::vector<NvvmModule> &modules,
                          const std::vector<NvvmModule> &lazy_modules,
                          const std::vector<std::string_view> &options) const {
  NvrtcOutput out;
  const auto t0 = std::chrono::steady_clock::now();
  Program p = nullptr;
  Result r = api_->create(&p);
  const char *failed_call = r != kSuccess ? "nvvmCreateProgram" : nullptr;
  // libNVVM may keep the module names for its messages until the program is destroyed.
  std::vector<std::string> names;
  names.reserve(modules.size() + lazy_modules.size());
  auto add = [&](const std::vector<NvvmModule> &list, bool lazy) {
    for (size_t i = 0; i < list.size() && !failed_call; ++i) {
      const std::string &name = names.emplace_back(list[i].name);
      r = (lazy ? api_->lazy_add_module : api_->add_module)(p, list[i].bytes.data(),
                                                            list[i].bytes.size(), name.c_str());
      if (r != kSuccess)
        failed_call = lazy ? "nvvmLazyAddModuleToProgram" : "nvvmAddModuleToProgram";
    }
  };
  add(modules, false);
  add(lazy_modules, true);
  if (!failed_call) {
    std::vector<std::string> owned(options.begin(), options.end());
    std::vector<const char *> argv;
    for (const std::string &o : owned) argv.push_back(o.c_str());
    r = api_->compile(p, int(argv.size()), argv.data());
    if (r != kSuccess) failed_call = "nvvmCompileProgram";
  }
  if (!failed_call) {
    size_t n = 0;
    r = api_->result_size(p, &n);
    if (r == kSuccess) {
      out.code.assign(n, '\0');
      r = api_->result(p, out.code.data());
    }
    if (r != kSuccess) failed_call = "nvvmGetCompiledResult";
  }
  size_t n = 0;
  if (p && api_->log_size(p, &n) == kSuccess && n > 0) {
    out.log.assign(n, '\0');
    if (api_->log(p, out.log.data()) != kSuccess) out.log.clear();
    while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  }
  if (p) api_->destroy(&p);
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (failed_call) {
    if (r == kOutOfMemory)
      throw Error(Status::no_memory, std::string(failed_call) + ": out of memory");
    out.ok = false;
    out.code.clear();
    out.nvrtc_result = r;
    out.log += (out.log.empty() || out.log.back() == '\n' ? "" : "\n") + std::string(failed_call) +
               ": " + api_->error_string(r) + "\n";
    return out;
  }
  out.ok = true;
  return out;
}

std::string find_libdevice(const LibraryLocation &nvvm) {
  if (const char *explicit_path = trusted_env("PCACHE_LIBDEVICE"); explicit_path && *explicit_path)
    return explicit_path;
  const std::string lib_dir = parent_dir(nvvm.path);
  // NVIDIA's layout: <toolkit>/nvvm/lib64/libnvvm.so; Debian's and this machine's toolkit:
  // <toolkit>/lib64/libnvvm.so beside <toolkit>/nvvm.
  for (const std::string &dir :
       {join_path(lib_dir, "../libdevice"), join_path(lib_dir, "../nvvm/libdevice")}) {
    const std::string path = join_path(dir, "libdevice.10.bc");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return "";
}

}  // namespace progcache
