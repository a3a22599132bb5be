// NVRTC, opened with dlopen at run time (never linked), found without loading it
// (cuda/jit_library.hpp) so that a cache hit can be keyed by the library's file identity alone.
#pragma once

#include <nvrtc.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/jit_library.hpp"
#include "cuda/program.hpp"
#include "util/memo_store.hpp"

namespace progcache {

using NvrtcLocation = LibraryLocation;

// locate_library(kNvrtcLibrary, memos): $PCACHE_NVRTC_LIBRARY if set, else the libnvrtc.so.<major>
// with the highest major found in the search directories (cuda/jit_library.hpp).
inline NvrtcLocation locate_nvrtc(MemoStore *memos = nullptr) {
  return locate_library(kNvrtcLibrary, memos);
}
inline void forget_nvrtc_locations() {
  forget_library_locations();
}
// restrict_library_search for NVRTC (its front end, the drop-in libnvrtc).
inline void restrict_nvrtc_search(int major, const std::string &self) {
  restrict_library_search(kNvrtcLibrary, major, self);
}

struct NvrtcOutput {
  bool ok = false;
  std::string code;  // cubin, PTX (with its NUL) or LTO-IR
  std::string log;
  std::vector<std::pair<std::string, std::string>> lowered_names;  // name expression -> symbol
  uint64_t compile_us = 0;
  int32_t nvrtc_result = 0;  // the nvrtcResult that refused the program (0 when ok)
  uint32_t library_version =
      0;  // a front end's runner: its library's, as CUDA_VERSION (0: unknown)
};

// NVRTC's private "create program with extensions" (exported, undocumented).
using NvrtcCreateProgramEx = nvrtcResult (*)(nvrtcProgram *, const char *, const char *, int,
                                             const char *const *, const char *const *, int, void *,
                                             void **);

// NVRTC's functions as loaded. Those from num_supported_archs on are null where the library
// lacks them; the rest are always there (Nvrtc::load refuses a library without one).
struct NvrtcApi {
  void *handle = nullptr;
  decltype(&::nvrtcVersion) version;
  decltype(&::nvrtcGetErrorString) error_string;
  decltype(&::nvrtcCreateProgram) create;
  decltype(&::nvrtcDestroyProgram) destroy;
  decltype(&::nvrtcCompileProgram) compile;
  decltype(&::nvrtcGetProgramLogSize) log_size;
  decltype(&::nvrtcGetProgramLog) log;
  decltype(&::nvrtcGetPTXSize) ptx_size;
  decltype(&::nvrtcGetPTX) ptx;
  decltype(&::nvrtcGetCUBINSize) cubin_size;
  decltype(&::nvrtcGetCUBIN) cubin;
  decltype(&::nvrtcGetLTOIRSize) ltoir_size;
  decltype(&::nvrtcGetLTOIR) ltoir;
  decltype(&::nvrtcAddNameExpression) add_name_expression;
  decltype(&::nvrtcGetLoweredName) lowered_name;
  decltype(&::nvrtcGetNumSupportedArchs) num_supported_archs;
  decltype(&::nvrtcGetSupportedArchs) supported_archs;
  decltype(&::nvrtcGetOptiXIRSize) optixir_size;
  decltype(&::nvrtcGetOptiXIR) optixir;
  decltype(&::nvrtcGetPCHHeapSize) get_pch_heap_size;
  decltype(&::nvrtcSetPCHHeapSize) set_pch_heap_size;
  decltype(&::nvrtcGetPCHCreateStatus) pch_create_status;
  decltype(&::nvrtcGetPCHHeapSizeRequired) pch_heap_size_required;
  decltype(&::nvrtcSetFlowCallback) set_flow_callback;
  NvrtcCreateProgramEx create_ex;
};

class Nvrtc {
 public:
  ~Nvrtc();
  // Loads (once per path per process, thread-safely) and resolves every function needed.
  // Throws Error(cuda_unavailable) naming the path and dlerror() if it cannot.
  static Nvrtc &load(const NvrtcLocation &where);
  // The NVRTC this process loaded from path, or null if it has not loaded it.
  static const Nvrtc *find_loaded(const std::string &path);
  // major * 1000 + minor * 10, as CUDA_VERSION (13.0 -> 13000).
  uint32_t version() const { return version_; }
  // Every function, for a caller that forwards NVRTC's whole API (a front end).
  const NvrtcApi &api() const;
  const std::string &path() const { return path_; }
  // Compiles with the program's own options (LTO-IR targets get -dlto if absent). A program
  // NVRTC refuses, in nvrtcCompileProgram or any other call (an invalid option, a name
  // expression it cannot lower), is ok = false with NVRTC's log and the refusing call in log.
  // Throws Error(no_memory) when NVRTC runs out of memory.
  [[nodiscard]] NvrtcOutput compile(const ProgramDesc &program) const;

 private:
  Nvrtc();
  struct ApiFailure {
    std::string what;
  };
  void compile_into(const ProgramDesc &program, NvrtcOutput &out) const;
  std::unique_ptr<const NvrtcApi>
      api_;  // the library itself stays loaded: NVRTC keeps global state
  uint32_t version_ = 0;
  std::string path_;
};

}  // namespace progcache
