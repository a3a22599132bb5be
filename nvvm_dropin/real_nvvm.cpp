#include "real_nvvm.hpp"

#include "cuda/jit_library.hpp"
#include "dropin_common/support.hpp"
#include "util/error.hpp"

namespace progcache::dropin {
namespace {

constexpr const char *kLibrary = "libNVVM";

template <class Fn>
void resolve(Fn *fn, const char *name) {
  void *f = real_function(kNvvmLibrary, kLibrary, name);
  if (!f) throw Error(Status::cuda_unavailable, std::string("the real libNVVM has no ") + name);
  *fn = reinterpret_cast<Fn>(f);
}

NvvmApi load() {
  NvvmApi api{};
  resolve(&api.version, "nvvmVersion");
  resolve(&api.ir_version, "nvvmIRVersion");
  resolve(&api.create, "nvvmCreateProgram");
  resolve(&api.destroy, "nvvmDestroyProgram");
  resolve(&api.add_module, "nvvmAddModuleToProgram");
  resolve(&api.lazy_add_module, "nvvmLazyAddModuleToProgram");
  resolve(&api.verify, "nvvmVerifyProgram");
  resolve(&api.compile, "nvvmCompileProgram");
  resolve(&api.result_size, "nvvmGetCompiledResultSize");
  resolve(&api.result, "nvvmGetCompiledResult");
  resolve(&api.log_size, "nvvmGetProgramLogSize");
  resolve(&api.log, "nvvmGetProgramLog");
  resolve(&api.error_string, "nvvmGetErrorString");
  return api;
}

}  // namespace

const NvvmApi &real_nvvm() {
  static const NvvmApi api = load();  // a throw leaves it for the next call to try again
  return api;
}

std::string real_nvvm_build() {
  return real_build(kNvvmLibrary, kLibrary);
}

void restrict_search_to_real_nvvm() {
  restrict_library_search(kNvvmLibrary, PCACHE_NVVM_MAJOR,
                          own_path(reinterpret_cast<void *>(&restrict_search_to_real_nvvm)));
}

}  // namespace progcache::dropin
