// A library of the system (a dependency of the package all the same) that progcache opens only
// when a feature needs it: zstd for compressed entries, hiredis for Redis, xxHash for the first
// large entry. Each one a process maps costs it 0.03-0.08 ms at start-up whether it is used or
// not, and each one it links slows every later dlopen (docs/performance.md).
#pragma once

#include <mutex>

#include "util/fork_guard.hpp"

namespace progcache {

class SystemLibrary {
 public:
  // soname: the exact name the build compiled against (its headers' ABI). Constant-initialised
  // and trivially destructible, so that a static one needs no guard (util/fork_guard.hpp).
  explicit constexpr SystemLibrary(const char *soname) : soname_(soname) {}
  SystemLibrary(const SystemLibrary &) = delete;
  SystemLibrary &operator=(const SystemLibrary &) = delete;

  // The address of name in the library, which is loaded on first use and kept for the process.
  // Throws Error(Status::unsupported) naming the library and what dlopen or dlsym said.
  // Thread-safe.
  void *symbol(const char *name);
  template <typename Fn>
  Fn function(const char *name) {
    return reinterpret_cast<Fn>(symbol(name));
  }
  // The same for a function the library may lack (a later addition): nullptr where it has none.
  // Throws only when the library cannot be loaded.
  void *optional_symbol(const char *name);
  template <typename Fn>
  Fn optional_function(const char *name) {
    return reinterpret_cast<Fn>(optional_symbol(name));
  }

 private:
  const char *soname_;
  std::once_flag once_;
  void *handle_ = nullptr;
  char failure_[512] = {};
};

// Declares struct Name, a member per function that list (an X-macro) names, each named and typed
// as that function, and const Name &getter(), which opens soname on first use and resolves them
// all (throwing as SystemLibrary::symbol does) as a ForkSafeOnce: a fork() in another thread waits
// for a load under way. Use it inside an anonymous namespace; a library
// that several files call declares the struct in a header (PCACHE_SYSTEM_LIBRARY_STRUCT) and
// defines the getter in one of them (PCACHE_SYSTEM_LIBRARY_GETTER).
#define PCACHE_SYSTEM_LIBRARY_API(Name, getter, soname, list) \
  PCACHE_SYSTEM_LIBRARY_STRUCT(Name, list)                    \
  PCACHE_SYSTEM_LIBRARY_GETTER(Name, getter, soname, list)
#define PCACHE_SYSTEM_LIBRARY_STRUCT(Name, list) \
  struct Name {                                  \
    list(PCACHE_SYSTEM_LIBRARY_MEMBER)           \
  };
#define PCACHE_SYSTEM_LIBRARY_GETTER(Name, getter, soname, list) \
  const Name &getter() {                                         \
    static constinit ::progcache::SystemLibrary library(soname); \
    static constinit Name api{};                                 \
    static constinit ::progcache::ForkSafeOnce resolved;         \
    resolved.run([] { list(PCACHE_SYSTEM_LIBRARY_RESOLVE) });    \
    return api;                                                  \
  }
#define PCACHE_SYSTEM_LIBRARY_MEMBER(fn) decltype(&::fn) fn;
#define PCACHE_SYSTEM_LIBRARY_RESOLVE(fn) api.fn = library.function<decltype(&::fn)>(#fn);

}  // namespace progcache
