#include "util/system_library.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "util/error.hpp"
#include "util/test_hooks.hpp"

namespace progcache {

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
    handle_ = ::dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
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
