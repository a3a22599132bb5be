// The real nvJitLink behind the drop-in: found as pcache_link finds it (never the drop-in itself,
// only the major the drop-in was built for), loaded on first need. A hit never needs it.
#pragma once

#include <nvJitLink.h>

#include <string>

namespace progcache::dropin {

// The real library's functions (the unversioned names every 13.x exports), loaded on first call
// (thread-safe; a failure is tried again on the next). Throws Error(cuda_unavailable) when there
// is no real nvJitLink, or it lacks one of them.
struct NvJitLinkApi {
  nvJitLinkResult (*create)(nvJitLinkHandle *, uint32_t, const char **);
  nvJitLinkResult (*destroy)(nvJitLinkHandle *);
  nvJitLinkResult (*add_data)(nvJitLinkHandle, nvJitLinkInputType, const void *, size_t,
                              const char *);
  nvJitLinkResult (*add_file)(nvJitLinkHandle, nvJitLinkInputType, const char *);
  nvJitLinkResult (*complete)(nvJitLinkHandle);
  nvJitLinkResult (*cubin_size)(nvJitLinkHandle, size_t *);
  nvJitLinkResult (*cubin)(nvJitLinkHandle, void *);
  nvJitLinkResult (*ptx_size)(nvJitLinkHandle, size_t *);
  nvJitLinkResult (*ptx)(nvJitLinkHandle, char *);
  nvJitLinkResult (*error_log_size)(nvJitLinkHandle, size_t *);
  nvJitLinkResult (*error_log)(nvJitLinkHandle, char *);
  nvJitLinkResult (*info_log_size)(nvJitLinkHandle, size_t *);
  nvJitLinkResult (*info_log)(nvJitLinkHandle, char *);
  nvJitLinkResult (*version)(unsigned int *, unsigned int *);
};
const NvJitLinkApi &real_nvjitlink();

// The real library's exact build ("nvJitLink <build-id>"), read from its file.
std::string real_nvjitlink_build();

// Sets up the search for the real library: this drop-in's major, never this file. Runs when the
// drop-in is loaded.
void restrict_search_to_real_nvjitlink();

}  // namespace progcache::dropin
