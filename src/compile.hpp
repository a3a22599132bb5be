// Compile through the cache: key -> lookup -> (single flight) NVRTC -> store.
#pragma once

#include <memory>
#include <string>

#include "cache.hpp"
#include "compiled_meta.hpp"
#include "error.hpp"
#include "key.hpp"

namespace progcache {

struct CompileResult {
  Status status = Status::ok;  // ok, or compile (log holds NVRTC's reasons)
  Key key{};
  bool from_cache = false;
  SharedBlob storage;  // owns the bytes `code` points into
  ByteView code;
  CompiledMeta meta;
  uint64_t elapsed_us = 0;  // this call, end to end
};

struct CompileOptions {
  uint32_t wait_timeout_ms = 300000;  // how long to wait for another compile of the same key
  bool bypass = false;                // compile always, store nothing (PCACHE_DISABLE=1)
};

// cache may be null (compile without caching). Throws Error for anything but a compile error.
std::shared_ptr<CompileResult> compile_through_cache(Cache *cache, ProgramDesc program,
                                                     const CompileOptions &options);

// The NVRTC version that would compile now, from the library's file identity: the process memo,
// then the cache's memo entry, and only then by loading NVRTC (which updates both memos).
uint32_t nvrtc_version_for(Cache *cache);

// Removes key from cache and compiles again, bypassing lookup (self-healing after the driver
// rejected a cached image).
std::shared_ptr<CompileResult> recompile(Cache *cache, ProgramDesc program,
                                         const CompileOptions &options);

}  // namespace progcache
