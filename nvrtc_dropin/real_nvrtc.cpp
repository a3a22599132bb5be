#include "real_nvrtc.hpp"

#include <string>

#include "program.hpp"
#include "util/error.hpp"

namespace progcache::dropin {

void throw_missing(const char *name) {
  throw Error(Status::unsupported, std::string("the real NVRTC has no ") + name);
}

const NvrtcApi &real_nvrtc() {
  // Nvrtc::load keeps one per path for the process; a throw is tried again on the next call.
  return Nvrtc::load(locate_nvrtc(dropin_cache())).api();
}

void restrict_search_to_real_nvrtc() {
  restrict_nvrtc_search(PCACHE_NVRTC_MAJOR,
                        own_path(reinterpret_cast<void *>(&restrict_search_to_real_nvrtc)));
}

}  // namespace progcache::dropin
