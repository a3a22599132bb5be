#include "core/compile.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/compile_coordinator.hpp"
#include "core/jit_tools.hpp"
#include "core/run_report.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/nvrtc_identity.hpp"
#include "cuda/nvrtc_observer.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/settings.hpp"
#include "util/trust.hpp"
#include "util/warning.hpp"

namespace progcache {
namespace {

uint64_t us_since(std::chrono::steady_clock::time_point t0) {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

// One in-process compile per program at a time; the others wait for it and then look again
// (the leader's result is theirs only if its observation holds for them too).
struct Flight {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
};
// Keyed by (cache, identity): a compile for one handle is no result for another.
using FlightKey = std::pair<const Cache *, Key>;
ForkSafeMutex g_flights_mutex{ForkSafeMutex::kOuter};
std::map<FlightKey, std::shared_ptr<Flight>> g_flights;

// A failure NVRTC answers the same whenever it is asked, so stored like a success: the
// program's own errors and options NVRTC refuses. Others (out of memory, internal errors) are
// not stored. 0: NVRTC succeeded but produced no output (a compile error to progcache).
bool storable_failure(int32_t nvrtc_result) {
  return nvrtc_result == 0 || nvrtc_result == NVRTC_ERROR_COMPILATION ||
         nvrtc_result == NVRTC_ERROR_INVALID_OPTION ||
         nvrtc_result == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}
// CompiledMeta::failure of a refusal whose nvrtcResult is 0 (no output).
constexpr int32_t kNoOutput = -1;

std::shared_ptr<CompileResult> from_hit(Hit &&hit, const Key &key) {
  auto r = std::make_shared<CompileResult>();
  r->key = key;
  r->from_cache = true;
  r->code = hit.payload;
  if (auto meta = decode_meta(hit.meta, KeyFields::checked_only)) r->meta = std::move(*meta);
  if (r->meta.failure != 0) {
    r->status = Status::compile;
    r->nvrtc_result = r->meta.failure == kNoOutput ? 0 : r->meta.failure;
  }
  r->storage = std::move(hit.record);
  return r;
}

// A lookup for a compile: a hit counts, with the NVRTC time it saved; a miss is counted once,
// when the call ends having compiled (a waiter's first miss may still end as a hit).
std::shared_ptr<CompileResult> lookup_and_credit(Cache *cache, const Key &key) {
  auto hit = cache->get_counting_hits(ByteView(key.data(), key.size()));
  if (!hit) return nullptr;
  auto r = from_hit(std::move(*hit), key);
  cache->note_compile_hit(r->meta.compile_us);
  return r;
}

// Looking again after waiting for another's compile (a thread, a process, a machine): the
// observations are read afresh from the store, and an entry found is a hit that saved a compile.
std::shared_ptr<CompileResult> look_again(Cache *cache, const ProgramDesc &program,
                                          PreparedCompile *prepared) {
  *prepared = prepare_compile(cache, program, true);
  if (!prepared->uncacheable.empty() || !prepared->key) return nullptr;
  return lookup_and_credit(cache, *prepared->key);
}

NvrtcOutput run_observed(const NvrtcLocation &loc, const ProgramDesc &program,
                         const CompileOptions &options, NvrtcObservation *recording) {
  Nvrtc &nvrtc = Nvrtc::load(loc);
  ObservationScope scope(recording, nvrtc.path());
  return options.runner ? options.runner(program) : nvrtc.compile(program);
}

// Gives r (a success or a storable failure) the key of what the compile was seen to depend on,
// the key a cache stores it under whether or not one does; memos may be null. Returns that
// observation, or why there is none (r keeps the key of the program and the NVRTC build).
Interpretation key_as_observed(MemoStore *memos, const ProgramDesc &program,
                               const NvrtcObservation &recording, const NvrtcOutput &out,
                               KeyContext *context, CompileResult *r) {
  if (!out.ok && !storable_failure(out.nvrtc_result))
    return {std::nullopt, "NVRTC failed with nvrtcResult " + std::to_string(out.nvrtc_result)};
  Interpretation seen = interpret(recording, program, current_setting(program), memos,
                                  ByteView(out.code), out.log, out.ok);
  if (!seen.observation) return seen;
  context->fields = observation_fields(*seen.observation);
  r->key = derive_key(program, context);
  r->meta.key_fields = key_fields(program, context);
  return seen;
}

// Files identity, which this process hashed, as the memo a later process without libcrypto finds
// it by: not in a cache no other process reads (memory:), nor in a signed one, whose processes
// load libcrypto for its MACs anyway.
void leave_identity_memo(Cache *cache, const ProgramDesc &program, const KeyContext &context,
                         const Key &identity) {
  if (!cache->mac() && cache->memos_outlive_process())
    remember_identity(cache, program, context, identity);
}

// Stores r under the key of what the compile was seen to depend on, with the observation filed
// under identity (identity_hashed: by this process, which then leaves its memo); returns why it
// was not stored ("" when it was).
std::string store(Cache *cache, const ProgramDesc &program, const NvrtcObservation &recording,
                  const NvrtcOutput &out, const Key &identity, bool identity_hashed,
                  KeyContext *context, CompileResult *r) {
  const Interpretation seen = key_as_observed(cache, program, recording, out, context, r);
  if (!seen.observation) return seen.not_stored;
  r->meta.identity.assign(reinterpret_cast<const char *>(identity.data()), identity.size());
  try {
    cache->put(ByteView(r->key.data(), r->key.size()), r->code, encode_meta(r->meta));
  } catch (const Error &e) {
    // The compile is done: a cache that cannot store it must not fail the caller.
    return std::string("could not store the result: ") + e.what();
  }
  add_observation(cache, identity, *seen.observation, r->key);
  if (identity_hashed) leave_identity_memo(cache, program, *context, identity);
  return "";
}

// A compile's result before it is stored: the key of what ran (context), its output and log.
std::shared_ptr<CompileResult> make_result(const ProgramDesc &program, NvrtcOutput &out,
                                           uint32_t version, const KeyContext &context) {
  auto r = std::make_shared<CompileResult>();
  r->key = derive_key(program, &context);
  r->meta.target = int32_t(program.target);
  r->meta.nvrtc_version = version;
  r->meta.compile_us = out.compile_us;
  r->meta.program_name = std::string(program.name);
  r->meta.log = out.log;
  r->meta.lowered_names = std::move(out.lowered_names);
  r->meta.key_fields = key_fields(program, &context);
  if (!out.ok) {
    r->status = Status::compile;
    r->nvrtc_result = out.nvrtc_result;
    r->meta.failure = out.nvrtc_result != 0 ? out.nvrtc_result : kNoOutput;
  }
  if (out.ok || !out.code.empty()) {
    auto blob = std::make_shared<Blob>(Blob::copy_of(out.code));
    r->code = blob->view();
    r->storage = std::move(blob);
  }
  return r;
}

// Stores r through store_fn unless the call keeps nothing; a success that is not stored is
// counted and said.
std::shared_ptr<CompileResult> keep_result(
    Cache *cache, const PreparedCompile &prepared, bool keep, bool ok,
    const std::function<std::string(CompileResult &)> &store_fn, std::shared_ptr<CompileResult> r) {
  if (!keep || !cache) {
    r->not_stored = "compiled without a cache (PCACHE_DISABLE or no handle)";
    return r;
  }
  r->not_stored = !prepared.uncacheable.empty() ? prepared.uncacheable : store_fn(*r);
  if (!r->not_stored.empty() && ok) {
    cache->note_uncacheable();
    set_thread_warning("compiled, but not cached: " + r->not_stored);
  }
  return r;
}

// PTX, NVVM IR and links (core/jit_tools.hpp): nothing to observe, so the key is known before
// the run and the entry is stored under it. A refusal is not stored: nvJitLink and libNVVM say
// why in a log that a hit could not reproduce for other inputs of the same names.
std::shared_ptr<CompileResult> run_jit_and_store(Cache *cache, const ProgramDesc &program,
                                                 const PreparedCompile &prepared, bool keep,
                                                 const CompileOptions &options) {
  JitRun run = run_jit(program, cache, options.runner);
  auto r = make_result(program, run.out, run.version, run.context);
  r->tool = jit_library_name(program);
  auto store_fn = [&](CompileResult &result) -> std::string {
    if (!run.out.ok) return "the library refused it";
    try {
      cache->put(ByteView(result.key.data(), result.key.size()), result.code,
                 encode_meta(result.meta));
    } catch (const Error &e) {
      return std::string("could not store the result: ") + e.what();
    }
    return "";
  };
  return keep_result(cache, prepared, keep, run.out.ok, store_fn, std::move(r));
}

std::shared_ptr<CompileResult> compile_and_store(Cache *cache, const ProgramDesc &program,
                                                 const PreparedCompile &prepared, bool keep,
                                                 const CompileOptions &options) {
  if (program.code_type != CodeType::cxx)
    return run_jit_and_store(cache, program, prepared, keep, options);
  const NvrtcLocation loc = locate_nvrtc(cache);
  NvrtcObservation recording;
  NvrtcOutput out = run_observed(loc, program, options, &recording);
  const Nvrtc &nvrtc = Nvrtc::load(loc);
  KeyContext context = prepared.context;
  context.fields.clear();
  Key identity = prepared.identity;
  bool identity_hashed = prepared.identity_from != FoundIdentity::From::memo;
  // The key names the NVRTC images that compiled, which this process has now loaded: a library
  // replaced on disk since the key was derived must not lend its identity to this result.
  const NvrtcIdentity loaded = current_nvrtc_identity(loc, cache);
  if (loaded.key_text() != context.nvrtc_build) {
    context.nvrtc_build = loaded.key_text();
    identity = identity_key(program, context);
    identity_hashed = true;
  }
  auto r = make_result(program, out, nvrtc.version(), context);
  // Nothing is stored: the result still carries the key a cache would have stored it under.
  if ((!keep || !cache) && prepared.uncacheable.empty())
    (void)key_as_observed(nullptr, program, recording, out, &context, r.get());
  auto store_fn = [&](CompileResult &result) {
    return store(cache, program, recording, out, identity, identity_hashed, &context, &result);
  };
  return keep_result(cache, prepared, keep, out.ok, store_fn, std::move(r));
}

// Single flight across machines sharing a store with leases (Redis): one machine compiles, the
// others wait for its entry to appear, polling with a growing interval. A holder that dies lets
// its lease expire; a store that fails or keeps no leases, or a wait past the deadline, means
// compiling here.
std::shared_ptr<CompileResult> compile_once_across_machines(Cache *cache,
                                                            const ProgramDesc &program,
                                                            PreparedCompile *prepared,
                                                            const CompileOptions &options) {
  const Key identity = prepared->identity;
  const ByteView k(identity.data(), identity.size());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.wait_timeout_ms);
  auto delay = std::chrono::milliseconds(10);
  const CompileCoordinator &coordinator = cache->coordinator();
  for (;;) {
    std::string token;
    const auto answer = coordinator.try_lease(k, &token);
    if (answer == CompileCoordinator::LeaseAnswer::unavailable)
      return compile_and_store(cache, program, *prepared, true, options);
    if (answer == CompileCoordinator::LeaseAnswer::taken) {
      const auto lease = coordinator.hold(k, std::move(token));
      // The previous holder may have stored it between our last look and our lease.
      if (auto r = look_again(cache, program, prepared)) return r;
      return compile_and_store(cache, program, *prepared, true, options);
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return compile_and_store(cache, program, *prepared, true, options);
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(250));
    if (auto r = look_again(cache, program, prepared)) return r;
  }
}

// The leader of this process's flight: across processes (a striped lock) and machines (a
// lease), then compiles unless another's compile answers.
std::shared_ptr<CompileResult> lead(Cache *cache, const ProgramDesc &program,
                                    PreparedCompile *prepared, const CompileOptions &options) {
  const auto cross_process =
      cache->coordinator().lock_processes(prepared->identity, options.wait_timeout_ms);
  if (auto r = look_again(cache, program, prepared)) return r;
  if (!prepared->uncacheable.empty())
    return compile_and_store(cache, program, *prepared, true, options);
  return compile_once_across_machines(cache, program, prepared, options);
}

}  // namespace

PreparedCompile prepare_compile(Cache *cache, const ProgramDesc &program, bool fresh) {
  PreparedCompile prepared;
  if (program.code_type != CodeType::cxx) {
    check_program(program);
    prepared.context = jit_key_context(program, cache);
    prepared.identity = identity_key(program, prepared.context);
    prepared.key = derive_key(program, &prepared.context);
    return prepared;
  }
  const ParsedOptions &options = program_options(program);  // refuse early
  prepared.uncacheable = options.uncacheable;
  prepared.context.nvrtc_build = current_nvrtc_identity(locate_nvrtc(cache), cache).key_text();
  prepared.context.name_in_identity = false;
  prepared.context.environment = nvrtc_environment_fields();
  const FoundIdentity found = find_identity(cache, program, prepared.context);
  prepared.identity = found.identity;
  prepared.identity_from = found.from;
  prepared.setting = current_setting(program);
  prepared.manifest = load_manifest(cache, prepared.identity, fresh);
  const std::vector<Observation> &observations = prepared.manifest->observations;
  for (size_t i = 0; i < observations.size(); ++i) {
    std::string why;
    if (holds(observations[i], prepared.setting, cache,
              prepared.why_not.empty() ? &why : nullptr)) {
      // Filed with its key, or derived once per process: its fields and their hashing were most
      // of a warm hit's work.
      prepared.key = prepared.manifest->key_of(i);
      if (!prepared.key) {
        KeyContext context = prepared.context;
        context.fields = observation_fields(observations[i], false);
        prepared.key = derive_key(program, &context);
        prepared.manifest->derived_keys.remember(i, *prepared.key);
      }
      prepared.observation = &observations[i];
      prepared.why_not.clear();
      return prepared;
    }
    if (prepared.why_not.empty()) prepared.why_not = why;
  }
  if (!observations.empty()) prepared.observation = &observations.front();
  return prepared;
}

namespace {

// Where a NUL that is not one of the trailing ones stands in text, or npos.
size_t nul_inside(std::string_view text) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return nul;
  return text.find_first_not_of('\0', nul) == std::string_view::npos ? std::string_view::npos : nul;
}

// NVRTC takes the source and in-memory headers as C strings: from a NUL on it would compile
// nothing, without a word. Trailing NULs (a size that counted the terminator) end the string.
void check_c_strings(const ProgramDesc &program) {
  if (program.code_type != CodeType::cxx) return;  // NVVM IR may be bitcode; PTX and links: sizes
  auto check = [](std::string_view text, const std::string &what) {
    if (const size_t at = nul_inside(text); at != std::string_view::npos)
      throw Error(Status::invalid_arg,
                  what + " holds a NUL at byte " + std::to_string(at) + " of " +
                      std::to_string(text.size()) +
                      ": NVRTC reads it as a C string and would compile only the bytes before it");
  };
  check(program.source.str(), "the source");
  for (const auto &[name, text] : program.headers)
    check(text, "in-memory header '" + std::string(name) + "'");
}

}  // namespace

std::shared_ptr<CompileResult> compile_through_cache(Cache *cache, ProgramDesc program,
                                                     const CompileOptions &options) {
  const auto t0 = std::chrono::steady_clock::now();
  check_c_strings(program);
  const char *disable = trusted_env("PCACHE_DISABLE");
  const bool bypass = options.bypass || (disable && !flag_is_off(disable));
  if (bypass) cache = nullptr;
  PreparedCompile prepared = prepare_compile(cache, program);
  auto finish = [&](std::shared_ptr<CompileResult> r) {
    r->elapsed_us = us_since(t0);
    // Told to `progcache run` as the cache counts it (keep_result, finish_after_miss): a compile
    // that succeeded and was not stored is uncached, and so is any compile without a cache; a
    // failure its library gives every time is a miss, stored like a success.
    if (r->from_cache)
      tell_run(RunOutcome::hit);
    else if (!r->not_stored.empty() && (r->status == Status::ok || !cache))
      tell_run(RunOutcome::uncached, r->not_stored);
    else
      tell_run(RunOutcome::miss);
    return r;
  };
  if (!cache || !prepared.uncacheable.empty())
    return finish(compile_and_store(cache, program, prepared, cache != nullptr, options));
  if (prepared.key)
    if (auto r = lookup_and_credit(cache, *prepared.key)) {
      if (prepared.identity_from == FoundIdentity::From::memo_missing)
        leave_identity_memo(cache, program, prepared.context, prepared.identity);
      return finish(std::move(r));
    }
  // Missed. Each call counts once: a hit if another's compile answers it (counted where that
  // happens), else a miss when it ends, having compiled (or failed) itself.
  auto finish_after_miss = [&](std::shared_ptr<CompileResult> r) {
    if (!r->from_cache) cache->note_compile_miss();
    return finish(std::move(r));
  };

  // Single flight within the process.
  const FlightKey flight_key{cache, prepared.identity};
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
    {
      std::unique_lock lock(flight->mutex);
      flight->done_cv.wait_for(lock, std::chrono::milliseconds(options.wait_timeout_ms),
                               [&] { return flight->done; });
    }
    if (auto r = look_again(cache, program, &prepared)) return finish(std::move(r));
    return finish_after_miss(compile_and_store(cache, program, prepared, true, options));
  }
  auto land = [&] {
    {
      std::lock_guard lock(g_flights_mutex);
      g_flights.erase(flight_key);
    }
    {
      std::lock_guard lock(flight->mutex);
      flight->done = true;
    }
    flight->done_cv.notify_all();
  };
  std::shared_ptr<CompileResult> result;
  try {
    result = lead(cache, program, &prepared, options);
  } catch (...) {
    land();
    throw;
  }
  land();
  return finish_after_miss(std::move(result));
}

std::shared_ptr<CompileResult> recompile(Cache *cache, ProgramDesc program,
                                         const CompileOptions &options) {
  const auto t0 = std::chrono::steady_clock::now();
  const PreparedCompile prepared = prepare_compile(cache, program);
  if (cache && prepared.key)
    (void)cache->remove(ByteView(prepared.key->data(), prepared.key->size()));
  auto r = compile_and_store(cache, program, prepared, cache != nullptr, options);
  r->elapsed_us = us_since(t0);
  return r;
}

}  // namespace progcache
