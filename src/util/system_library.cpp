#include "util/system_library.hpp"

#include <dlfcn.h>

#include "util/error.hpp"
#include "util/test_hooks.hpp"

namespace progcache {

void *SystemLibrary::symbol(const char *name) {
  std::call_once(once_, [this] {
    if (test_hooks::refuse_library(soname_)) {
      failure_ = std::string("cannot load ") + soname_ + ": refused by the test hooks";
      return;
    }
    handle_ = ::dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char *why = ::dlerror();
      failure_ = std::string("cannot load ") + soname_ + ": " + (why ? why : "unknown error");
    }
  });
  if (!handle_) throw Error(Status::unsupported, failure_);
  void *fn = ::dlsym(handle_, name);
  if (!fn) throw Error(Status::unsupported, std::string(soname_) + " lacks " + name);
  return fn;
}

}  // namespace progcache
