// libNVVM, opened with dlopen at run time (never linked): NVVM IR (text or bitcode) to PTX, or to
// LTO-IR with -gen-lto. Found like NVRTC (cuda/jit_library.hpp), also in nvvm/lib64.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda/jit_library.hpp"
#include "cuda/nvrtc.hpp"

namespace progcache {

// A module of a libNVVM program: its name and bytes (IR text or bitcode).
struct NvvmModule {
  std::string_view name;
  std::string_view bytes;
};

class Nvvm {
 public:
  // Loads (once per path per process, thread-safely) and resolves every function it uses.
  // Throws Error(cuda_unavailable) naming the path and what is wrong.
  static Nvvm &load(const LibraryLocation &where);
  ~Nvvm();
  // major * 1000 + minor * 10 of the library (libNVVM 2.0 -> 2000).
  uint32_t version() const { return version_; }
  // Adds modules, then lazy_modules (only what the others use is linked in: libdevice), and
  // compiles with options as given. A program libNVVM refuses is ok = false with its log and
  // the refusing call in log, its nvvmResult in nvrtc_result. Throws Error(no_memory) when it
  // runs out of memory.
  [[nodiscard]] NvrtcOutput compile(const std::vector<NvvmModule> &modules,
                                    const std::vector<NvvmModule> &lazy_modules,
                                    const std::vector<std::string_view> &options) const;

 private:
  struct Api;
  explicit Nvvm(const LibraryLocation &where);
  std::unique_ptr<const Api> api_;  // the library itself stays loaded for the process
  uint32_t version_ = 0;
};

// libdevice (the math library NVVM programs link lazily), for the libNVVM at loc:
// $PCACHE_LIBDEVICE, else libdevice.10.bc in the toolkit's nvvm/libdevice beside libNVVM's
// directory. "" if none.
std::string find_libdevice(const LibraryLocation &nvvm);

}  // namespace progcache
