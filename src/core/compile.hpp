// Compile through the cache: identity -> recorded observations -> lookup -> (single flight)
// NVRTC, observed -> store the result and what it depended on.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/cache.hpp"
#include "core/compiled_meta.hpp"
#include "core/identity_memo.hpp"
#include "core/key.hpp"
#include "core/observation.hpp"
#include "cuda/nvrtc.hpp"
#include "util/error.hpp"

namespace progcache {

struct CompileResult {
  Status status = Status::ok;  // ok, or compile (log holds NVRTC's reasons)
  Key key{};
  bool from_cache = false;
  std::string not_stored;  // why a compile was not stored ("" if it was, or a hit)
  SharedBlob storage;      // owns the bytes `code` points into
  ByteView code;
  CompiledMeta meta;
  uint64_t elapsed_us = 0;     // this call, end to end
  int32_t nvrtc_result = 0;    // status compile: the library's result code that refused it
  std::string tool = "NVRTC";  // which library compiled (or refused) it, for messages
};

struct CompileOptions {
  uint32_t wait_timeout_ms = 300000;  // how long to wait for another compile of the same program
  bool bypass = false;                // compile always, store nothing (PCACHE_DISABLE=1)
  // What compiles on a miss: null runs the program's library as located (NVRTC, observed;
  // nvJitLink; libNVVM). A front end of a library's API (the drop-ins) passes its own: a real
  // program it keeps, every output collected into `code`. The key is the same either way.
  std::function<NvrtcOutput(const ProgramDesc &)> runner;
};

// A program as a compile would look it up now: its identity (the program, the NVRTC build and
// the environment NVRTC keeps), and the key of the first recorded observation that still
// holds, if one does.
struct PreparedCompile {
  Key identity{};
  FoundIdentity::From identity_from = FoundIdentity::From::digest;  // hashed, or from its memo
  // The program's key context (NVRTC build, environment). For C++ it holds no observation's
  // fields: observation_fields(*observation) gives the holding one's.
  KeyContext context;
  std::optional<Key> key;   // the entry to look for; unset: no observation holds (a miss)
  std::string uncacheable;  // non-empty: compile, but never look up or store (the reason)
  CompileSetting setting;
  std::shared_ptr<const Manifest> manifest;  // the observations filed under identity (C++)
  const Observation *observation = nullptr;  // in manifest: the one that holds, else the newest
  std::string why_not;  // why the newest recorded observation does not hold (explain)
};
// fresh: read the observations from the store, not this process's copy (after waiting for
// another's compile). Throws Error: invalid_arg (refused options), cuda_unavailable (no NVRTC
// to identify).
[[nodiscard]] PreparedCompile prepare_compile(Cache *cache, const ProgramDesc &program,
                                              bool fresh = false);

// cache may be null (compile without caching). Throws Error for anything but a compile error.
[[nodiscard]] std::shared_ptr<CompileResult> compile_through_cache(Cache *cache,
                                                                   ProgramDesc program,
                                                                   const CompileOptions &options);

// Removes the program's current entry from cache and compiles again, bypassing lookup
// (self-healing after the driver rejected a cached image).
[[nodiscard]] std::shared_ptr<CompileResult> recompile(Cache *cache, ProgramDesc program,
                                                       const CompileOptions &options);

}  // namespace progcache
