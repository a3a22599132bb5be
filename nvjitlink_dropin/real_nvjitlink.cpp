#include "real_nvjitlink.hpp"

#include "cuda/jit_library.hpp"
#include "dropin_common/support.hpp"
#include "util/error.hpp"

namespace progcache::dropin {
namespace {

constexpr const char *kLibrary = "nvJitLink";

template <class Fn>
void resolve(Fn *fn, const char *name) {
  void *f = real_function(kNvJitLinkLibrary, kLibrary, name);
  if (!f) throw Error(Status::cuda_unavailable, std::string("the real nvJitLink has no ") + name);
  *fn = reinterpret_cast<Fn>(f);
}

NvJitLinkApi load() {
  NvJitLinkApi api{};
  resolve(&api.create, "nvJitLinkCreate");
  resolve(&api.destroy, "nvJitLinkDestroy");
  resolve(&api.add_data, "nvJitLinkAddData");
  resolve(&api.add_file, "nvJitLinkAddFile");
  resolve(&api.complete, "nvJitLinkComplete");
  resolve(&api.cubin_size, "nvJitLinkGetLinkedCubinSize");
  resolve(&api.cubin, "nvJitLinkGetLinkedCubin");
  resolve(&api.ptx_size, "nvJitLinkGetLinkedPtxSize");
  resolve(&api.ptx, "nvJitLinkGetLinkedPtx");
  resolve(&api.error_log_size, "nvJitLinkGetErrorLogSize");
  resolve(&api.error_log, "nvJitLinkGetErrorLog");
  resolve(&api.info_log_size, "nvJitLinkGetInfoLogSize");
  resolve(&api.info_log, "nvJitLinkGetInfoLog");
  resolve(&api.version, "nvJitLinkVersion");
  return api;
}

}  // namespace

const NvJitLinkApi &real_nvjitlink() {
  static const NvJitLinkApi api = load();  // a throw leaves it for the next call to try again
  return api;
}

std::string real_nvjitlink_build() {
  return real_build(kNvJitLinkLibrary, kLibrary);
}

void restrict_search_to_real_nvjitlink() {
  restrict_library_search(kNvJitLinkLibrary, PCACHE_NVJITLINK_MAJOR,
                          own_path(reinterpret_cast<void *>(&restrict_search_to_real_nvjitlink)));
}

}  // namespace progcache::dropin
