// The real NVRTC behind the drop-in: found as pcache_compile finds it (never the drop-in itself,
// only the major the drop-in was built for), loaded on first need. A hit never needs it.
#pragma once

#include <nvrtc.h>

namespace progcache::dropin {

// NVRTC's private "create program with extensions" entry point (exported, undocumented): the
// drop-in forwards it and does not cache the programs it creates.
using CreateProgramEx = nvrtcResult (*)(nvrtcProgram *, const char *, const char *, int,
                                        const char *const *, const char *const *, int, void *,
                                        void **);

struct RealNvrtc {
  decltype(&::nvrtcVersion) version;
  decltype(&::nvrtcGetNumSupportedArchs) num_supported_archs;
  decltype(&::nvrtcGetSupportedArchs) supported_archs;
  decltype(&::nvrtcCreateProgram) create;
  decltype(&::nvrtcDestroyProgram) destroy;
  decltype(&::nvrtcCompileProgram) compile;
  decltype(&::nvrtcGetPTXSize) ptx_size;
  decltype(&::nvrtcGetPTX) ptx;
  decltype(&::nvrtcGetCUBINSize) cubin_size;
  decltype(&::nvrtcGetCUBIN) cubin;
  decltype(&::nvrtcGetLTOIRSize) ltoir_size;
  decltype(&::nvrtcGetLTOIR) ltoir;
  decltype(&::nvrtcGetOptiXIRSize) optixir_size;
  decltype(&::nvrtcGetOptiXIR) optixir;
  decltype(&::nvrtcGetProgramLogSize) log_size;
  decltype(&::nvrtcGetProgramLog) log;
  decltype(&::nvrtcAddNameExpression) add_name_expression;
  decltype(&::nvrtcGetLoweredName) lowered_name;
  // These five and create_ex are null where the real library lacks them (before NVRTC 12.4).
  decltype(&::nvrtcGetPCHHeapSize) get_pch_heap_size;
  decltype(&::nvrtcSetPCHHeapSize) set_pch_heap_size;
  decltype(&::nvrtcGetPCHCreateStatus) pch_create_status;
  decltype(&::nvrtcGetPCHHeapSizeRequired) pch_heap_size_required;
  decltype(&::nvrtcSetFlowCallback) set_flow_callback;
  CreateProgramEx create_ex;  // null when the real library lacks it
};

[[noreturn]] void throw_missing(const char *name);

// fn, or Error(unsupported) naming the function the real library lacks.
template <class Fn>
Fn require(Fn fn, const char *name) {
  if (!fn) throw_missing(name);
  return fn;
}

// Loads the real library on first call (thread-safe). Throws Error(cuda_unavailable) when there
// is none, or it lacks a function the drop-in exports.
const RealNvrtc &real_nvrtc();

// Sets up the search for the real library: this drop-in's major, never this file. Runs when the
// drop-in is loaded.
void restrict_search_to_real_nvrtc();

}  // namespace progcache::dropin
