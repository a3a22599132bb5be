// The real NVRTC behind the drop-in: found as pcache_compile finds it (never the drop-in itself,
// only the major the drop-in was built for), loaded on first need. A hit never needs it.
#pragma once

#include "cuda/nvrtc.hpp"

namespace progcache::dropin {

[[noreturn]] void throw_missing(const char *name);

// fn, or Error(unsupported) naming the function the real library lacks.
template <class Fn>
Fn require(Fn fn, const char *name) {
  if (!fn) throw_missing(name);
  return fn;
}

// The real library's functions, loaded on first call (thread-safe). Throws
// Error(cuda_unavailable) when there is none. The optional ones (NvrtcApi) are null where it
// lacks them: callers go through require().
const NvrtcApi &real_nvrtc();

// Sets up the search for the real library: this drop-in's major, never this file. Runs when the
// drop-in is loaded.
void restrict_search_to_real_nvrtc();

}  // namespace progcache::dropin
