#include "util/system_library.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "util/error.hpp"
#include "util/test_hooks.hpp"

namespace progcache {
namespace {

// The sanitizer runtimes (ASan, TSan, LSan, UBSan, MSan) all export this; each ends the process
// on a dlopen with RTLD_DEEPBIND.
bool sanitizer_runtime_loaded() {
  return ::dlsym(RTLD_DEFAULT, "__sanitizer_set_report_path") != nullptr;
}

bool libraries_preloaded() {
  const char *preload = std::getenv("LD_PRELOAD");
  return (preload && preload_interposes(preload)) || ::access("/etc/ld.so.preload", F_OK) == 0;
}

}  // namespace

bool preload_interposes(std::string_view list) {
  constexpr std::string_view kRunHelper = "libprogcache-run.so";
  // The loader splits LD_PRELOAD at spaces and colons.
  std::vector<std::string_view> entries;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find_first_of(" :", at), list.size());
    if (end > at) entries.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  auto split = [](std::string_view path) {
    const size_t slash = path.rfind('/');
    return slash == std::string_view::npos
               ? std::pair(std::string_view(), path)
               : std::pair(path.substr(0, slash), path.substr(slash + 1));
  };
  std::vector<std::string_view> helper_dirs;
  for (std::string_view e : entries)
    if (const auto [dir, file] = split(e); file == kRunHelper) helper_dirs.push_back(dir);
  for (std::string_view e : entries) {
    const auto [dir, file] = split(e);
    const bool ours = file == kRunHelper ||
                      (!dir.empty() &&
                       std::find(helper_dirs.begin(), helper_dirs.end(), dir) != helper_dirs.end());
    if (!ours) return true;
  }
  return false;
}

int system_library_open_flags(Binding binding, bool sanitizer_runtime, bool preloaded) {
  const bool deep = binding == Binding::own_first && !sanitizer_runtime && !preloaded;
  return RTLD_NOW | RTLD_LOCAL | (deep ? RTLD_DEEPBIND : 0);
}

bool library_mapped(const char *soname) {
  auto named = [](dl_phdr_info *info, size_t, void *wanted) -> int {
    const char *path = info->dlpi_name ? info->dlpi_name : "";
    const char *slash = std::strrchr(path, '/');
    return std::strcmp(slash ? slash + 1 : path, static_cast<const char *>(wanted)) == 0;
  };
  return ::dl_iterate_phdr(named, const_cast<char *>(soname)) != 0;
}

void *SystemLibrary::symbol(const char *name) {
  void *fn = optional_symbol(name);
  if (!fn) throw Error(Status::unsupported, std::string(soname_) + " lacks " + name);
  return fn;
}

void *SystemLibrary::optional_symbol(const char *name) {
  std::call_once(once_, [this] {
    if (test_hooks::refuse_library(soname_)) {
      std::snprintf(failure_, sizeof failure_, "cannot load %s: refused by the test hooks",
                    soname_);
      return;
    }
    if (const int ms = test_hooks::library_load_delay_ms()) ::usleep(useconds_t(ms) * 1000);
    // The process is asked (a walk of every loaded object, a system call) only where it matters.
    const bool own_first = binding_ == Binding::own_first;
    handle_ = ::dlopen(soname_,
                       system_library_open_flags(binding_, own_first && sanitizer_runtime_loaded(),
                                                 own_first && libraries_preloaded()));
    if (!handle_) {
      const char *why = ::dlerror();
      std::snprintf(failure_, sizeof failure_, "cannot load %s: %s", soname_,
                    why ? why : "unknown error");
    }
  });
  if (!handle_) throw Error(Status::unsupported, failure_);
  return ::dlsym(handle_, name);
}

}  // namespace progcache
