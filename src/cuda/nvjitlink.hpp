// nvJitLink, opened with dlopen at run time (never linked): links cubin, PTX, LTO-IR, fatbins and
// host objects into one cubin (or PTX from LTO-IR). Found like NVRTC (cuda/jit_library.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/jit_library.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/program.hpp"

namespace progcache {

class NvJitLink {
 public:
  // Loads (once per path per process, thread-safely) and resolves every function it uses.
  // Throws Error(cuda_unavailable) naming the path and what is wrong.
  static NvJitLink &load(const LibraryLocation &where);
  ~NvJitLink();
  // major * 1000 + minor * 10, as CUDA_VERSION (13.0 -> 13000).
  uint32_t version() const { return version_; }
  // Links inputs, in order, with options as given (a PTX target adds -ptx when absent). A link
  // nvJitLink refuses is ok = false, with its error and info logs in log and its nvJitLinkResult
  // in nvrtc_result. Throws Error(no_memory) when it runs out of memory.
  [[nodiscard]] NvrtcOutput link(const std::vector<LinkInput> &inputs,
                                 const std::vector<std::string_view> &options, Target target) const;

 private:
  struct Api;
  explicit NvJitLink(const LibraryLocation &where);
  std::unique_ptr<const Api> api_;  // the library itself stays loaded for the process
  uint32_t version_ = 0;
};

}  // namespace progcache
