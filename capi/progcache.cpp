// The C ABI shim for progcache.h: validate arguments, convert to core types, call the core,
// catch everything, set the thread-local error, return a status (capi/shim.hpp). No logic lives
// here.
#include <cstddef>
#include <cstring>
#include <string>

#include "core/copy_hit.hpp"
#include "core/include_scan.hpp"
#include "core/key.hpp"
#include "core/loader.hpp"
#include "cuda/driver.hpp"
#include "owned_payload.hpp"
#include "shim.hpp"
#include "util/thread_state.hpp"
#include "util/uri.hpp"

using progcache::ByteView;
using progcache::Error;
using progcache::Status;

#define PCACHE_SAME(c, s) static_assert(int32_t(c) == int32_t(Status::s), #c)
PCACHE_SAME(PCACHE_OK, ok);
PCACHE_SAME(PCACHE_NOT_FOUND, not_found);
PCACHE_SAME(PCACHE_ERR_INVALID_ARG, invalid_arg);
PCACHE_SAME(PCACHE_ERR_NO_MEMORY, no_memory);
PCACHE_SAME(PCACHE_ERR_IO, io);
PCACHE_SAME(PCACHE_ERR_CORRUPT, corrupt);
PCACHE_SAME(PCACHE_ERR_UNSUPPORTED, unsupported);
PCACHE_SAME(PCACHE_ERR_BUSY, busy);
PCACHE_SAME(PCACHE_ERR_PERMISSION, permission);
PCACHE_SAME(PCACHE_ERR_TOO_LARGE, too_large);
PCACHE_SAME(PCACHE_ERR_COMPILE, compile);
PCACHE_SAME(PCACHE_ERR_CUDA_UNAVAILABLE, cuda_unavailable);
PCACHE_SAME(PCACHE_ERR_CUDA, cuda);
PCACHE_SAME(PCACHE_ERR_REMOTE, remote);
PCACHE_SAME(PCACHE_ERR_INTERNAL, internal);
static_assert(PCACHE_KEY_SIZE == progcache::kKeySize);
static_assert(PCACHE_MAX_SIZE_CONFIGURED == progcache::CacheOptions::kConfiguredCap);
static_assert(PCACHE_MAX_KEY_SIZE == progcache::kMaxKeySize);
static_assert(sizeof(pcache_options) == 32 && offsetof(pcache_options, max_size_bytes) == 8 &&
              offsetof(pcache_options, secret) == 16 &&
              offsetof(pcache_options, secret_size) == 24);
static_assert(sizeof(pcache_stats) == 104);
static_assert(sizeof(pcache_shared_stats) == 80 &&
                  offsetof(pcache_shared_stats, healed) == progcache::shim::kSharedStatsV1Size,
              "pcache_shared_stats grew: add a version note");

static_assert(sizeof(pcache_program) == 120 &&
                  offsetof(pcache_program, header_sizes) == progcache::shim::kProgramV1Size,
              "pcache_program grew: add a version note");

using namespace progcache::shim;

struct pcache_module {
  void *module = nullptr;
  pcache_compiled compiled;
};

namespace {

// pcache_get on a cache whose records stay in this process: copied while the store holds the
// record (Cache::copy_hit), with no counted reference to it. false on a miss.
bool copy_hit(progcache::Cache &c, ByteView key, void **data, size_t *size) {
  uint8_t *copy = nullptr;
  size_t copied = 0;
  if (!c.copy_hit(key, [&](ByteView payload) {
        copy = copy_payload(payload);
        copied = payload.size;
      }))
    return false;
  if (!copy) throw std::bad_alloc();
  *data = copy;
  *size = copied;
  return true;
}

// pcache_get_into on such a cache: copied into buffer when it holds the payload; *found gets
// the payload's size either way. false on a miss.
bool copy_hit_into(progcache::Cache &c, ByteView key, void *buffer, size_t capacity,
                   size_t *found) {
  return c.copy_hit(key, [&](ByteView payload) {
    *found = payload.size;
    if (payload.size <= capacity && payload.size) std::memcpy(buffer, payload.data, payload.size);
  });
}

}  // namespace

extern "C" {

pcache_status pcache_program_init(pcache_program *program, uint32_t struct_size) {
  return guarded(__func__, [&] {
    init_struct(program, struct_size, kProgramV1Size, "pcache_program");
    return PCACHE_OK;
  });
}

pcache_status pcache_stats_init(pcache_stats *stats, uint32_t struct_size) {
  return guarded(__func__, [&] {
    init_struct(stats, struct_size, kStatsV1Size, "pcache_stats");
    return PCACHE_OK;
  });
}

pcache_status pcache_options_init(pcache_options *options, uint32_t struct_size) {
  return guarded(__func__, [&] {
    init_struct(options, struct_size, kOptionsV1Size, "pcache_options");
    (void)progcache::default_max_size();  // a $PCACHE_MAX_SIZE that is not a size is refused now
    options->max_size_bytes = PCACHE_MAX_SIZE_CONFIGURED;
    return PCACHE_OK;
  });
}

pcache_status pcache_open(const char *uri, const pcache_options *options, pcache **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    if (!out) throw invalid("out is NULL");
    progcache::CacheOptions core;
    if (!options) core.max_size_bytes = progcache::CacheOptions::kConfiguredCap;
    if (options) {
      if (options->struct_size < kOptionsV1Size)
        throw invalid("options->struct_size " + std::to_string(options->struct_size) +
                      " is too small (fill options with pcache_options_init)");
      pcache_options known{};
      std::memcpy(&known, options, std::min<size_t>(options->struct_size, sizeof known));
      constexpr uint32_t kKnownFlags =
          PCACHE_OPEN_ALLOW_SHARED | PCACHE_OPEN_ALLOW_PRIVILEGED | PCACHE_OPEN_EXISTING;
      if (known.flags & ~kKnownFlags)
        throw invalid("options->flags has unknown bits " +
                      std::to_string(known.flags & ~kKnownFlags));
      core.max_size_bytes = known.max_size_bytes;
      core.allow_shared = known.flags & PCACHE_OPEN_ALLOW_SHARED;
      core.allow_privileged = known.flags & PCACHE_OPEN_ALLOW_PRIVILEGED;
      core.must_exist = known.flags & PCACHE_OPEN_EXISTING;
      if (known.secret_size && !known.secret)
        throw invalid("options->secret is NULL with a non-zero secret_size");
      if (known.secret && !known.secret_size)
        throw invalid(
            "options->secret is set with secret_size 0: an empty secret would sign "
            "with a publicly known key");
      if (known.secret)
        core.secret = std::string(static_cast<const char *>(known.secret), known.secret_size);
    }
    auto opened = progcache::Cache::open(uri ? uri : "", core);
    pcache *handle = take_slot();
    handle->cache = std::move(opened);
    handle->state.store(kSlotOpen, std::memory_order_release);
    *out = handle;
    return PCACHE_OK;
  });
}

pcache_status pcache_close(pcache *cache) {
  return guarded(__func__, [&] {
    if (!cache) return PCACHE_OK;
    if (cache->state.load(std::memory_order_acquire) == kSlotOpen && cache->tier)
      throw invalid("this is a tier handle: it closes with the cache it came from");
    uint32_t open = kSlotOpen;
    if (!cache->state.compare_exchange_strong(open, kSlotClosed, std::memory_order_acq_rel))
      throw invalid("cache handle is already closed or invalid");
    return_slot(cache);
    return PCACHE_OK;
  });
}

pcache_status pcache_get(pcache *cache, const void *key, size_t key_size, void **data,
                         size_t *size) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    const ByteView k = need_key(key, key_size);
    if (!data || !size) throw invalid("data or size out-pointer is NULL");
    *data = nullptr;
    *size = 0;
    if (c.copies_hits()) return copy_hit(c, k, data, size) ? PCACHE_OK : PCACHE_NOT_FOUND;
    auto hit = c.get(k);
    if (!hit) return PCACHE_NOT_FOUND;
    size_t n = 0;
    *data = progcache::shim::hand_over_payload(std::move(*hit), c.records_shared(), &n);
    *size = n;
    return PCACHE_OK;
  });
}

pcache_status pcache_get_into(pcache *cache, const void *key, size_t key_size, void *buffer,
                              size_t capacity, size_t *size) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    const ByteView k = need_key(key, key_size);
    if (!size) throw invalid("size out-pointer is NULL");
    if (!buffer && capacity) throw invalid("buffer is NULL with a non-zero capacity");
    *size = 0;
    size_t found = 0;
    if (c.copies_hits()) {
      if (!copy_hit_into(c, k, buffer, capacity, &found)) return PCACHE_NOT_FOUND;
    } else {
      auto hit = c.get(k);
      if (!hit) return PCACHE_NOT_FOUND;
      found = hit->payload.size;
      if (found <= capacity && found) std::memcpy(buffer, hit->payload.data, found);
    }
    *size = found;
    if (found > capacity)
      throw Error(Status::too_large, "value is " + std::to_string(found) + " bytes, buffer holds " +
                                         std::to_string(capacity));
    return PCACHE_OK;
  });
}

void pcache_free(void *data) {
  progcache::shim::release_payload(data);
}

pcache_status pcache_get_view(pcache *cache, const void *key, size_t key_size, pcache_view *view) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    const ByteView k = need_key(key, key_size);
    if (!view) throw invalid("view is NULL");
    *view = pcache_view{};
    auto hit = c.get(k);
    if (!hit) return PCACHE_NOT_FOUND;
    auto *token = new progcache::SharedBlob(std::move(hit->record));
    view->data = hit->payload.data;
    view->size = hit->payload.size;
    view->token = token;
    return PCACHE_OK;
  });
}

void pcache_view_release(pcache_view *view) {
  if (!view) return;
  delete static_cast<progcache::SharedBlob *>(view->token);
  *view = pcache_view{};
}

pcache_status pcache_put(pcache *cache, const void *key, size_t key_size, const void *data,
                         size_t size) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    const ByteView k = need_key(key, key_size);
    if (!data && size) throw invalid("data is NULL with a non-zero size");
    c.put(k, ByteView(data, size));
    return PCACHE_OK;
  });
}

pcache_status pcache_delete(pcache *cache, const void *key, size_t key_size) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    return c.remove(need_key(key, key_size)) ? PCACHE_OK : PCACHE_NOT_FOUND;
  });
}

pcache_status pcache_count(pcache *cache, uint64_t *entries) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    if (!entries) throw invalid("entries out-pointer is NULL");
    *entries = c.count();
    return PCACHE_OK;
  });
}

pcache_status pcache_size(pcache *cache, uint64_t *bytes) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    if (!bytes) throw invalid("bytes out-pointer is NULL");
    *bytes = c.size();
    return PCACHE_OK;
  });
}

pcache_status pcache_clear(pcache *cache) {
  return guarded(__func__, [&] {
    need_cache(cache).clear();
    return PCACHE_OK;
  });
}

namespace {

void copy_stats(const progcache::CacheStats &s, pcache_stats *stats) {
  need_output_struct(stats, kStatsV1Size, "pcache_stats");
  pcache_stats out{};
#define PCACHE_COUNTER_COPY(name) out.name = s.name;
  PCACHE_HANDLE_COUNTERS(PCACHE_COUNTER_COPY)
#undef PCACHE_COUNTER_COPY
  copy_known_prefix(stats, out);
}

}  // namespace

pcache_status pcache_get_stats(pcache *cache, pcache_stats *stats) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    if (!stats) throw invalid("stats is NULL");
    copy_stats(c.stats(), stats);
    return PCACHE_OK;
  });
}

pcache_status pcache_get_shared_stats(pcache *cache, pcache_shared_stats *stats) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_counters(cache);
    need_output_struct(stats, kSharedStatsV1Size, "pcache_shared_stats");
    const progcache::PersistentCounters pc = c.persistent_counters();
    pcache_shared_stats out{};
#define PCACHE_COUNTER_COPY(name) out.name = uint64_t(pc.name);
    PCACHE_SHARED_COUNTERS(PCACHE_COUNTER_COPY)
#undef PCACHE_COUNTER_COPY
    copy_known_prefix(stats, out);
    return PCACHE_OK;
  });
}

pcache_status pcache_get_tier_stats(pcache *cache, uint32_t tier, pcache_stats *stats) {
  return guarded(__func__, [&] {
    auto &c = need_cache(cache);
    if (!stats) throw invalid("stats is NULL");
    const auto tiers = c.tier_stats();
    if (tier >= tiers.size()) return PCACHE_NOT_FOUND;
    copy_stats(tiers[tier].second, stats);
    return PCACHE_OK;
  });
}

const char *pcache_status_string(pcache_status status) {
  switch (status) {
    case PCACHE_OK:
      return "ok";
    case PCACHE_NOT_FOUND:
      return "not found";
    case PCACHE_ERR_INVALID_ARG:
      return "invalid argument";
    case PCACHE_ERR_NO_MEMORY:
      return "out of memory";
    case PCACHE_ERR_IO:
      return "I/O error";
    case PCACHE_ERR_CORRUPT:
      return "corrupt data";
    case PCACHE_ERR_UNSUPPORTED:
      return "unsupported";
    case PCACHE_ERR_BUSY:
      return "busy";
    case PCACHE_ERR_PERMISSION:
      return "permission denied";
    case PCACHE_ERR_TOO_LARGE:
      return "too large";
    case PCACHE_ERR_COMPILE:
      return "compile error";
    case PCACHE_ERR_CUDA_UNAVAILABLE:
      return "CUDA unavailable";
    case PCACHE_ERR_CUDA:
      return "CUDA error";
    case PCACHE_ERR_REMOTE:
      return "remote cache error";
    case PCACHE_ERR_INTERNAL:
      return "internal error";
    default:
      return "unknown status";
  }
}

const char *pcache_last_error(void) {
  return progcache::thread_messages().last_error.c_str();
}

static_assert(PCACHE_CAUSE_CONNECTION == int(progcache::Cause::connection));

pcache_status pcache_last_error_info(pcache_error_info *info) {
  // Not guarded: it reports the last call, and must not become it.
  constexpr uint32_t kErrorInfoV1Size = 20;
  if (!info || info->struct_size < kErrorInfoV1Size) return PCACHE_ERR_INVALID_ARG;
  const progcache::ThreadMessages &messages = progcache::thread_messages();
  pcache_error_info out{};
  out.status = messages.last_status;
  out.cause = int32_t(messages.last_detail.cause);
  out.os_errno = messages.last_detail.os_errno;
  out.sqlite_code = messages.last_detail.sqlite_code;
  progcache::shim::copy_known_prefix(info, out);
  return PCACHE_OK;
}

uint32_t pcache_version(void) {
  return PCACHE_VERSION_NUMBER;
}

const char *pcache_version_string(void) {
  return PCACHE_VERSION_STRING;
}

namespace {

struct MakeKeyThread {
  // The description the full path reads a program into, refilled by each call (two allocations
  // fewer a key), and the last program keyed, whose fields a caller often passes again.
  progcache::ProgramDesc reused;
  progcache::shim::LastKeyedProgram last;
};

}  // namespace

pcache_status pcache_make_key(const pcache_program *program, uint8_t *key_out) {
  return guarded(__func__, [&] {
    if (!key_out) throw invalid("key_out is NULL");
    MakeKeyThread &thread = progcache::ThreadState<MakeKeyThread>::get();
    const progcache::ProgramDesc *kept = program ? thread.last.match(*program) : nullptr;
    const progcache::ProgramDesc &desc = kept ? *kept : thread.reused;
    std::string_view prefix = thread.last.prefix();
    if (!kept) {
      read_program(program, &thread.reused);
      if (desc.code_type == progcache::CodeType::cxx) {  // refuse early
        const progcache::ParsedOptions &options = progcache::program_options(desc);
        if (!options.uncacheable.empty())
          throw invalid("this program cannot be keyed: " + options.uncacheable);
      }
      prefix = progcache::program_prefix(desc);
      thread.last.keep(*program, desc, prefix);
    }
    if (desc.code_type != progcache::CodeType::cxx) {  // every input is in the program
      const progcache::ContentDigest digest = progcache::program_digest_after(prefix, desc.source);
      std::memcpy(key_out, digest.data(), digest.size());
      return PCACHE_OK;
    }
    const progcache::DigestedScan found = progcache::digest_and_scan_includes(prefix, desc);
    if (!found.scan.uncacheable.empty())
      throw invalid("this program cannot be keyed: " + found.scan.uncacheable);
    const progcache::Key key =
        progcache::standalone_key(found.digest, progcache::scan_fields(found.scan));
    std::memcpy(key_out, key.data(), key.size());
    return PCACHE_OK;
  });
}

}  // extern "C"

extern "C" {

pcache_status pcache_compile(pcache *cache, const pcache_program *program, pcache_compiled **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    if (!out) throw invalid("out is NULL");
    progcache::ProgramDesc desc = to_desc(program);
    auto result = progcache::compile_through_cache(cache ? &need_cache(cache) : nullptr, desc, {});
    *out = new pcache_compiled{result};
    progcache::throw_if_compile_failed(*result);
    return PCACHE_OK;
  });
}

pcache_status pcache_link_job_init(pcache_link_job *job, uint32_t struct_size) {
  return guarded(__func__, [&] {
    init_struct(job, struct_size, kLinkJobV1Size, "pcache_link_job");
    return PCACHE_OK;
  });
}

static_assert(sizeof(pcache_link_job) == progcache::shim::kLinkJobV1Size &&
              sizeof(pcache_link_input) == progcache::shim::kLinkInputV1Size);

pcache_status pcache_link(pcache *cache, const pcache_link_job *job, pcache_compiled **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    if (!out) throw invalid("out is NULL");
    progcache::ProgramDesc desc = progcache::shim::link_desc(job);
    auto result = progcache::compile_through_cache(cache ? &need_cache(cache) : nullptr, desc, {});
    *out = new pcache_compiled{result};
    progcache::throw_if_compile_failed(*result);
    return PCACHE_OK;
  });
}

const void *pcache_compiled_data(const pcache_compiled *result, size_t *size) {
  if (size) *size = result ? result->result->code.size : 0;
  return result ? static_cast<const void *>(result->result->code.data) : nullptr;
}

int32_t pcache_compiled_from_cache(const pcache_compiled *result) {
  return result && result->result->from_cache ? 1 : 0;
}

const char *pcache_compiled_log(const pcache_compiled *result) {
  return result ? result->result->meta.log.c_str() : "";
}

const char *pcache_compiled_lowered_name(const pcache_compiled *result,
                                         const char *name_expression) {
  if (!result || !name_expression) return nullptr;
  for (const auto &[expr, symbol] : result->result->meta.lowered_names)
    if (expr == name_expression) return symbol.c_str();
  return nullptr;
}

const uint8_t *pcache_compiled_key(const pcache_compiled *result) {
  return result ? result->result->key.data() : nullptr;
}

uint32_t pcache_compiled_nvrtc_version(const pcache_compiled *result) {
  return result ? result->result->meta.nvrtc_version : 0;
}

uint64_t pcache_compiled_compile_us(const pcache_compiled *result) {
  return result ? result->result->meta.compile_us : 0;
}

uint64_t pcache_compiled_elapsed_us(const pcache_compiled *result) {
  return result ? result->result->elapsed_us : 0;
}

void pcache_compiled_free(pcache_compiled *result) {
  delete result;
}

pcache_status pcache_load_module(pcache *cache, const pcache_program *program,
                                 pcache_module **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    if (!out) throw invalid("out is NULL");
    progcache::LoadedModule loaded =
        progcache::load_through_cache(cache ? &need_cache(cache) : nullptr, to_desc(program));
    auto m = std::make_unique<pcache_module>();
    m->module = loaded.module;
    m->compiled.result = std::move(loaded.result);
    *out = m.release();
    return PCACHE_OK;
  });
}

void *pcache_module_handle(const pcache_module *module) {
  return module ? module->module : nullptr;
}

const pcache_compiled *pcache_module_compiled(const pcache_module *module) {
  return module ? &module->compiled : nullptr;
}

pcache_status pcache_module_get_function(pcache_module *module, const char *name, void **function) {
  return guarded(__func__, [&] {
    if (!module || !name || !function) throw invalid("module, name or function is NULL");
    *function = nullptr;
    const char *symbol = pcache_compiled_lowered_name(&module->compiled, name);
    if (!progcache::Driver::get().get_function(module->module, symbol ? symbol : name, function))
      throw Error(Status::not_found, std::string("no kernel '") + name + "' in the module");
    return PCACHE_OK;
  });
}

pcache_status pcache_module_unload(pcache_module *module) {
  return guarded(__func__, [&] {
    if (!module) return PCACHE_OK;
    std::unique_ptr<pcache_module> owned(module);
    progcache::Driver::get().unload(owned->module);
    return PCACHE_OK;
  });
}

}  // extern "C"
