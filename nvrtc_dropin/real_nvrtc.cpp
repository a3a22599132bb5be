#include "real_nvrtc.hpp"

#include <dlfcn.h>

#include <string>

#include "cuda/nvrtc.hpp"
#include "program.hpp"
#include "util/error.hpp"

namespace progcache::dropin {
namespace {

RealNvrtc load_real() {
  Nvrtc &nvrtc = Nvrtc::load(locate_nvrtc(dropin_cache()));
  void *h = nvrtc.handle();
  RealNvrtc r{};
  auto resolve = [&](auto &fn, const char *name, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
    if (!fn && required)
      throw Error(Status::cuda_unavailable, "the real NVRTC '" + nvrtc.path() + "' lacks " + name);
  };
  resolve(r.version, "nvrtcVersion");
  resolve(r.num_supported_archs, "nvrtcGetNumSupportedArchs");
  resolve(r.supported_archs, "nvrtcGetSupportedArchs");
  resolve(r.create, "nvrtcCreateProgram");
  resolve(r.destroy, "nvrtcDestroyProgram");
  resolve(r.compile, "nvrtcCompileProgram");
  resolve(r.ptx_size, "nvrtcGetPTXSize");
  resolve(r.ptx, "nvrtcGetPTX");
  resolve(r.cubin_size, "nvrtcGetCUBINSize");
  resolve(r.cubin, "nvrtcGetCUBIN");
  resolve(r.ltoir_size, "nvrtcGetLTOIRSize");
  resolve(r.ltoir, "nvrtcGetLTOIR");
  resolve(r.optixir_size, "nvrtcGetOptiXIRSize");
  resolve(r.optixir, "nvrtcGetOptiXIR");
  resolve(r.log_size, "nvrtcGetProgramLogSize");
  resolve(r.log, "nvrtcGetProgramLog");
  resolve(r.add_name_expression, "nvrtcAddNameExpression");
  resolve(r.lowered_name, "nvrtcGetLoweredName");
  // Newer than NVRTC 12.0: absent from an older 12, where calling them is an internal error.
  resolve(r.get_pch_heap_size, "nvrtcGetPCHHeapSize", false);
  resolve(r.set_pch_heap_size, "nvrtcSetPCHHeapSize", false);
  resolve(r.pch_create_status, "nvrtcGetPCHCreateStatus", false);
  resolve(r.pch_heap_size_required, "nvrtcGetPCHHeapSizeRequired", false);
  resolve(r.set_flow_callback, "nvrtcSetFlowCallback", false);
  resolve(r.create_ex, "__nvrtcCPEx", false);
  return r;
}

}  // namespace

void throw_missing(const char *name) {
  throw Error(Status::unsupported, std::string("the real NVRTC has no ") + name);
}

const RealNvrtc &real_nvrtc() {
  static const RealNvrtc real = load_real();  // a throw leaves it to be tried again
  return real;
}

void restrict_search_to_real_nvrtc() {
  Dl_info info{};
  std::string self;
  if (::dladdr(reinterpret_cast<void *>(&restrict_search_to_real_nvrtc), &info) && info.dli_fname)
    self = info.dli_fname;
  restrict_nvrtc_search(PCACHE_NVRTC_MAJOR, self);
}

}  // namespace progcache::dropin
