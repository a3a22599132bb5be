#include "core/compile.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/compile_coordinator.hpp"
#include "core/include_scan.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/nvrtc_identity.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/trust.hpp"

namespace progcache {
namespace {

uint64_t us_since(std::chrono::steady_clock::time_point t0) {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

// One in-process compile per key at a time; followers wait for the leader's result.
struct Flight {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::shared_ptr<CompileResult> result;
};
// Keyed by (cache, key): a compile for one handle is no result for another.
using FlightKey = std::pair<const Cache *, Key>;
ForkSafeMutex g_flights_mutex{ForkSafeMutex::kOuter};
std::map<FlightKey, std::shared_ptr<Flight>> g_flights;

std::shared_ptr<CompileResult> from_hit(Hit &&hit, const Key &key) {
  auto r = std::make_shared<CompileResult>();
  r->key = key;
  r->from_cache = true;
  r->code = hit.payload;
  if (auto meta = decode_meta(hit.meta)) r->meta = std::move(*meta);
  r->storage = std::move(hit.record);
  return r;
}

std::shared_ptr<CompileResult> lookup(Cache *cache, const Key &key) {
  if (!cache) return nullptr;
  auto hit = cache->get_counting_hits(ByteView(key.data(), key.size()));
  return hit ? from_hit(std::move(*hit), key) : nullptr;
}

// A lookup for a compile: a hit counts, with the NVRTC time it saved; a miss is counted once,
// when the call ends having compiled (a waiter's first miss may still end as a hit).
std::shared_ptr<CompileResult> lookup_and_credit(Cache *cache, const Key &key) {
  auto r = lookup(cache, key);
  if (r) cache->note_compile_hit(r->meta.compile_us);
  return r;
}

// Looking again after waiting for another's compile (a lock, a lease, a timeout): finding the
// entry is a hit that saved a compile.
std::shared_ptr<CompileResult> look_again(Cache *cache, const Key &key) {
  return lookup_and_credit(cache, key);
}

std::shared_ptr<CompileResult> compile_and_store(Cache *cache, const ProgramDesc &program,
                                                 const PreparedCompile &prepared, bool store,
                                                 const CompileOptions &options) {
  const NvrtcLocation loc = locate_nvrtc(cache);
  Nvrtc &nvrtc = Nvrtc::load(loc);
  NvrtcOutput out = options.runner ? options.runner(program) : nvrtc.compile(program);
  auto r = std::make_shared<CompileResult>();
  r->key = prepared.key;
  CompileContext context = prepared.context;
  // The key names the NVRTC images that compiled, which this process has now loaded: a library
  // replaced on disk since the key was derived must not lend its identity to this result.
  const NvrtcIdentity loaded = current_nvrtc_identity(loc, cache);
  if (loaded.key_text() != context.nvrtc_build) {
    context.nvrtc_build = loaded.key_text();
    r->key = derive_key(program, &context);
  }
  r->meta.target = int32_t(program.target);
  r->meta.nvrtc_version = nvrtc.version();
  r->meta.compile_us = out.compile_us;
  r->meta.program_name = std::string(program.name);
  r->meta.log = std::move(out.log);
  r->meta.lowered_names = std::move(out.lowered_names);
  r->meta.key_fields = key_fields(program, &context);
  if (!out.ok) {
    r->status = Status::compile;
    r->nvrtc_result = out.nvrtc_result;
    return r;
  }
  auto blob = std::make_shared<Blob>(Blob::copy_of(out.code));
  r->code = blob->view();
  r->storage = std::move(blob);
  if (!store || !cache) {
    r->not_stored = "compiled without a cache (PCACHE_DISABLE or no handle)";
    return r;
  }
  if (!prepared.uncacheable.empty()) {
    r->not_stored = prepared.uncacheable;
  } else if (!dependencies_unchanged(IncludeScan{context.dependencies, {}, false})) {
    r->not_stored = "a header changed while NVRTC compiled";
  } else {
    try {
      cache->put(ByteView(r->key.data(), r->key.size()), r->code, encode_meta(r->meta));
    } catch (const Error &e) {
      // The compile succeeded: a cache that cannot store it must not fail the caller.
      r->not_stored = std::string("could not store the result: ") + e.what();
    }
  }
  if (!r->not_stored.empty()) {
    cache->note_uncacheable();
    set_thread_warning("compiled, but not cached: " + r->not_stored);
  }
  return r;
}

// Single flight across machines sharing a store with leases (Redis): one machine compiles, the
// others wait for its entry to appear, polling with a growing interval. A holder that dies lets
// its lease expire; a store that fails or keeps no leases, or a wait past the deadline, means
// compiling here.
std::shared_ptr<CompileResult> compile_once_across_machines(Cache *cache,
                                                            const ProgramDesc &program,
                                                            const PreparedCompile &prepared,
                                                            const CompileOptions &options) {
  const Key &key = prepared.key;
  const ByteView k(key.data(), key.size());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.wait_timeout_ms);
  auto delay = std::chrono::milliseconds(10);
  const CompileCoordinator &coordinator = cache->coordinator();
  for (;;) {
    std::string token;
    const auto answer = coordinator.try_lease(k, &token);
    if (answer == CompileCoordinator::LeaseAnswer::unavailable)
      return compile_and_store(cache, program, prepared, true, options);
    if (answer == CompileCoordinator::LeaseAnswer::taken) {
      const auto lease = coordinator.hold(k, std::move(token));
      // The previous holder may have stored it between our last look and our lease.
      if (auto r = look_again(cache, key)) return r;
      return compile_and_store(cache, program, prepared, true, options);
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return compile_and_store(cache, program, prepared, true, options);
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(250));
    if (auto r = look_again(cache, key)) return r;
  }
}

}  // namespace

PreparedCompile prepare_compile(Cache *cache, const ProgramDesc &program) {
  (void)program_options(program);  // refuse early
  PreparedCompile prepared;
  prepared.context.nvrtc_build = current_nvrtc_identity(locate_nvrtc(cache), cache).key_text();
  char cwd[PATH_MAX];
  prepared.context.working_dir = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  IncludeScan scan = scan_includes(program, cache);
  prepared.context.dependencies = std::move(scan.dependencies);
  prepared.uncacheable = std::move(scan.uncacheable);
  prepared.key = derive_key(program, &prepared.context);
  return prepared;
}

std::shared_ptr<CompileResult> compile_through_cache(Cache *cache, ProgramDesc program,
                                                     const CompileOptions &options) {
  const auto t0 = std::chrono::steady_clock::now();
  const char *disable = trusted_env("PCACHE_DISABLE");
  const bool bypass = options.bypass || (disable && *disable && std::string(disable) != "0");
  if (bypass) cache = nullptr;
  const PreparedCompile prepared = prepare_compile(cache, program);
  const Key &key = prepared.key;
  auto finish = [&](std::shared_ptr<CompileResult> r) {
    r->elapsed_us = us_since(t0);
    return r;
  };
  if (!cache || !prepared.uncacheable.empty())
    return finish(compile_and_store(cache, program, prepared, cache != nullptr, options));
  if (auto r = lookup_and_credit(cache, key)) return finish(std::move(r));
  // Missed. Each call counts once: a hit if another's compile answers it (counted where that
  // happens), else a miss when it ends, having compiled (or failed) itself.
  auto finish_after_miss = [&](std::shared_ptr<CompileResult> r) {
    if (!r->from_cache) cache->note_compile_miss();
    return finish(std::move(r));
  };

  // Single flight within the process.
  const FlightKey flight_key{cache, key};
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard lock(g_flights_mutex);
    auto &slot = g_flights[flight_key];
    if (!slot) {
      slot = std::make_shared<Flight>();
      leader = true;
    }
    flight = slot;
  }
  if (!leader) {
    std::unique_lock lock(flight->mutex);
    if (flight->done_cv.wait_for(lock, std::chrono::milliseconds(options.wait_timeout_ms),
                                 [&] { return flight->done; }) &&
        flight->result) {
      auto r = std::make_shared<CompileResult>(*flight->result);
      r->from_cache = r->status == Status::ok;
      // Another thread's compile answered this call: a hit that saved a compile.
      if (r->from_cache) cache->note_shared_compile(r->meta.compile_us);
      return finish_after_miss(std::move(r));
    }
    lock.unlock();
    if (auto r = look_again(cache, key)) return finish(std::move(r));
    return finish_after_miss(
        compile_and_store(cache, program, prepared, true, options));  // waited too long
  }
  std::shared_ptr<CompileResult> result;
  try {
    // Single flight across processes: whoever holds the stripe lock compiles; the others find
    // its result when they get the lock.
    const auto cross_process = cache->coordinator().lock_processes(key, options.wait_timeout_ms);
    result = look_again(cache, key);
    if (!result) result = compile_once_across_machines(cache, program, prepared, options);
  } catch (...) {
    std::lock_guard lock(g_flights_mutex);
    g_flights.erase(flight_key);
    std::lock_guard flock(flight->mutex);
    flight->done = true;
    flight->done_cv.notify_all();
    throw;
  }
  {
    std::lock_guard lock(g_flights_mutex);
    g_flights.erase(flight_key);
  }
  {
    std::lock_guard lock(flight->mutex);
    flight->result = result;
    flight->done = true;
  }
  flight->done_cv.notify_all();
  // The published result is shared with the waiters and never written again: the leader times
  // its own copy.
  return finish_after_miss(std::make_shared<CompileResult>(*result));
}

std::shared_ptr<CompileResult> recompile(Cache *cache, ProgramDesc program,
                                         const CompileOptions &options) {
  const auto t0 = std::chrono::steady_clock::now();
  const PreparedCompile prepared = prepare_compile(cache, program);
  if (cache) (void)cache->remove(ByteView(prepared.key.data(), prepared.key.size()));
  auto r = compile_and_store(cache, program, prepared, cache != nullptr, options);
  r->elapsed_us = us_since(t0);
  return r;
}

}  // namespace progcache
