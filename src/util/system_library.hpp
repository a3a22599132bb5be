// A library of the system (a dependency of the package all the same) that progcache opens only
// when a feature needs it: zstd for compressed entries, hiredis for Redis, xxHash for the first
// large entry. Each one a process maps costs it 0.03-0.08 ms at start-up whether it is used or
// not, and each one it links slows every later dlopen (docs/performance.md).
#pragma once

#include <mutex>
#include <string_view>

#include "util/fork_guard.hpp"

namespace progcache {

// How an opened library's references to symbols it defines itself are resolved.
enum class Binding {
  // Through the process's global scope first, as a linked library's are.
  process_scope,
  // Inside the library first (RTLD_DEEPBIND), where the process allows it. Only for a library
  // none of whose allocations progcache or its caller ever frees (libcrypto, SQLite): the
  // library's calls into libc bind to libc too, so its malloc is libc's even where the host
  // linked another allocator. hiredis stays process_scope: a reply's buffer becomes a Blob,
  // freed with progcache's free.
  own_first,
};

// The dlopen flags of a system library: RTLD_NOW | RTLD_LOCAL, and RTLD_DEEPBIND for
// Binding::own_first unless a sanitizer runtime is loaded (they end the process on it) or
// libraries are preloaded. Without the flag a library's references to its own exported symbols
// bind through the process's global scope, so that (1) a host that exports symbols of the same
// names (an executable or an RTLD_GLOBAL module with its own OpenSSL or SQLite linked in, of
// another version) captures the calls our copy makes into itself, mixing two versions'
// internals (test own_symbols_stay_inside); and (2) each of libcrypto's and SQLite's thousands of
// such references is first looked up in every object of that scope (the executable,
// libprogcache, libc...): 1.35M of the 4.77M instructions that opening both took after
// libprogcache was loaded (bench/analysis.md). The flag also makes their references to libc
// bind to libc before any interposer, which is why it is left off wherever LD_PRELOAD or
// /etc/ld.so.preload preloads one (an allocator, libeatmydata, libfaketime must still see
// SQLite's calls).
int system_library_open_flags(Binding binding, bool sanitizer_runtime, bool preloaded);

// Whether an LD_PRELOAD list (entries split at spaces and colons) names a library that may
// interpose libc: anything but `progcache run`'s own, its helper libprogcache-run.so and the
// drop-ins beside it (named by the helper's directory), which interpose only dlopen and the JIT
// libraries' functions. Without this, every process a `progcache run` started opened libcrypto
// and SQLite without RTLD_DEEPBIND, their thousands of relocations looked up through every
// loaded object (bench/analysis.md). Pure string work; thread-safe.
bool preload_interposes(std::string_view list);

// Whether an object whose file is named soname (its last path component) is mapped in this
// process, in any namespace, found by a walk of the loader's list in memory. Not
// dlopen(RTLD_NOLOAD): for a library that is not loaded, that searches the disk for it (the
// loader's cache, an open and a read of the file) before it says no, ~20 us here, which a warm
// drop-in process paid at each compile it asked. A library loaded under another file name (a
// development symlink) is not seen. Loads nothing; no system call. Thread-safe.
bool library_mapped(const char *soname);

class SystemLibrary {
 public:
  // soname: the exact name the build compiled against (its headers' ABI). Constant-initialised
  // and trivially destructible, so that a static one needs no guard (util/fork_guard.hpp).
  explicit constexpr SystemLibrary(const char *soname, Binding binding = Binding::process_scope)
      : soname_(soname), binding_(binding) {}
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
  Binding binding_;
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
#define PCACHE_SYSTEM_LIBRARY_API(Name, getter, soname, binding, list) \
  PCACHE_SYSTEM_LIBRARY_STRUCT(Name, list)                             \
  PCACHE_SYSTEM_LIBRARY_GETTER(Name, getter, soname, binding, list)
#define PCACHE_SYSTEM_LIBRARY_STRUCT(Name, list) \
  struct Name {                                  \
    list(PCACHE_SYSTEM_LIBRARY_MEMBER)           \
  };
#define PCACHE_SYSTEM_LIBRARY_GETTER(Name, getter, soname, binding, list) \
  const Name &getter() {                                                  \
    static constinit ::progcache::SystemLibrary library(soname, binding); \
    static constinit Name api{};                                          \
    static constinit ::progcache::ForkSafeOnce resolved;                  \
    resolved.run([] { list(PCACHE_SYSTEM_LIBRARY_RESOLVE) });             \
    return api;                                                           \
  }
#define PCACHE_SYSTEM_LIBRARY_MEMBER(fn) decltype(&::fn) fn;
#define PCACHE_SYSTEM_LIBRARY_RESOLVE(fn) api.fn = library.function<decltype(&::fn)>(#fn);

}  // namespace progcache
