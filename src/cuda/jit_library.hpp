// The toolkit's JIT libraries (NVRTC, nvJitLink, libNVVM), opened with dlopen at run time (never
// linked) and found without loading them, so that a cache hit is keyed by the library's file
// alone and loads none of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/memo_store.hpp"

namespace progcache {

// How one library is found: $env if set, else the file named prefix<major> with the highest
// major in the search directories ($CUDA_HOME/lib64, $CUDA_PATH/lib64, $LD_LIBRARY_PATH,
// /usr/local/cuda/lib64, the system library directories), each also with subdir beside it
// (libNVVM lives in nvvm/lib64 in NVIDIA's layout).
struct LibrarySpec {
  std::string_view what;    // "NVRTC", for messages
  std::string_view env;     // "PCACHE_NVRTC_LIBRARY"
  std::string_view prefix;  // "libnvrtc.so."
  std::string_view memo;    // the location memo's name prefix: "nvrtc-location/"
  std::string_view subdir;  // also searched beside each directory: "../nvvm/lib64", or ""
};
extern const LibrarySpec kNvrtcLibrary, kNvJitLinkLibrary, kNvvmLibrary;

// Which file would be used, found by looking at files only (no dlopen).
struct LibraryLocation {
  std::string path;      // resolved (realpath) file
  std::string found_as;  // the name it was found by (dir/libnvrtc.so.N); "" when given
  std::string identity;  // "path|size|mtime_ns|dev:ino": changes when the file changes
  std::vector<std::string> tried;
};

// Where spec's library is. Throws Error(cuda_unavailable) listing the paths tried. Listing the
// directories (thousands of names in the system ones) is done once per process, and with memos
// once while none of them changes: the result is remembered with each directory's inode and
// mtime, so a later process only stats them (docs/keys.md). A file that carries progcache's
// front-end ELF note is never the library, whatever finds it.
LibraryLocation locate_library(const LibrarySpec &spec, MemoStore *memos = nullptr);
// Tests: forgets what this process found, so the next search looks as a new process would.
void forget_library_locations();

// Narrows locate_library(spec) for the rest of the process (a front end of the library's API,
// which sits in front of the real library under its name): only prefix<major>, and never the
// file `self` (its own, compared by device and inode). Call before the first search for spec.
void restrict_library_search(const LibrarySpec &spec, int major, const std::string &self);

// The library's exact build, as the text a key holds: "<what> <gnu build-id hex>", from the
// image this process has mapped where it has loaded it (a file replaced on disk since is still
// the old image), otherwise from the file. Throws Error(cuda_unavailable) if the file is not a
// readable ELF library.
std::string library_build(const LibrarySpec &spec, const LibraryLocation &loc);
// library_build(spec, locate_library(spec, memos)), at the cost of one stat while $spec.env, the
// file located last (its device, inode, size, mtime and ctime) and the libraries this process has
// loaded are unchanged: a drop-in asks on every call (numba-cuda asks libNVVM's version five
// times a compile). A file changed less than the file system's timestamp granularity before the
// call is located again on the next. Thread-safe; throws as those two do.
std::string current_library_build(const LibrarySpec &spec, MemoStore *memos = nullptr);
// Called by whoever dlopens a located library, so that library_build reads its mapped image.
void note_library_loaded(const std::string &path);

// dlopens a located library (RTLD_LOCAL; it stays loaded for the process: these libraries keep
// global state) and notes it loaded. Throws Error(cuda_unavailable) with dlerror()'s words.
void *open_library(const LibrarySpec &spec, const LibraryLocation &loc);
// The function name in a library open_library returned. Throws Error(cuda_unavailable) naming
// the library and the function when it lacks it.
void *library_function(const LibrarySpec &spec, void *handle, const LibraryLocation &loc,
                       const char *name);

}  // namespace progcache
