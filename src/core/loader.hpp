// Module loading through the cache: compile (or hit), hand the image to the driver, and heal a
// cached image the driver rejects.
#pragma once

#include <memory>

#include "core/cache.hpp"
#include "core/compile.hpp"

namespace progcache {

struct LoadedModule {
  void *module = nullptr;                 // the driver's CUmodule
  std::shared_ptr<CompileResult> result;  // the image it was loaded from, names included
};

// Throws Error(compile) with NVRTC's log when the program does not compile; the other
// statuses of compile_through_cache.
void throw_if_compile_failed(const CompileResult &result);

// Compiles program through cache (null: no cache) and loads the image into the calling thread's
// CUDA context (device 0's primary context when it has none). A cached image the driver
// rejects (compiled by a toolkit this driver is too old for, or damage the checksum cannot
// see) is removed, compiled afresh and loaded once more; the cache counts it as healed. A fresh
// image the driver rejects is Error(cuda). An LTO-IR target is linked (through the cache) into
// the cubin that is loaded;
// Error(cuda_unavailable) without a usable driver, Error(cuda) naming the driver's error.
[[nodiscard]] LoadedModule load_through_cache(Cache *cache, const ProgramDesc &program);

}  // namespace progcache
