// The C ABI shim for progcache_admin.h (the unstable administration API): validate, convert,
// call the core, catch everything (capi/shim.hpp).
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/bundle.hpp"
#include "core/compiled_meta.hpp"
#include "core/include_scan.hpp"
#include "core/key.hpp"
#include "shim.hpp"
#include "util/settings.hpp"
#include "util/uri.hpp"

using progcache::ByteView;
using progcache::Error;
using progcache::Status;
using namespace progcache::shim;

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

// Name and value arrays over a list of pairs, for the *_key_fields accessors. Not movable: the
// arrays point into the strings (a moved short string changes address).
struct FieldArrays {
  Fields fields;
  std::vector<const char *> names, values;

  explicit FieldArrays(Fields f) : fields(std::move(f)) {
    for (const auto &[name, value] : fields) {
      names.push_back(name.c_str());
      values.push_back(value.c_str());
    }
  }
  FieldArrays(const FieldArrays &) = delete;
  FieldArrays &operator=(const FieldArrays &) = delete;
  pcache_status get(size_t *count, const char *const **n, const char *const **v) const {
    if (!count || !n || !v) return fail(PCACHE_ERR_INVALID_ARG, "count, names or values is NULL");
    *count = fields.size();
    *n = names.data();
    *v = values.data();
    return PCACHE_OK;
  }
};

pcache_transfer to_transfer(const progcache::BundleProgress &p) {
  return pcache_transfer{p.entries, p.bytes, p.rejected, p.file_bytes};
}

// The key's inputs as explain shows them: the program's context and the holding observation's
// fields (prepare_compile keeps those out of its context).
std::vector<std::pair<std::string, std::string>> explained_fields(
    const progcache::ProgramDesc &desc, const progcache::PreparedCompile &prepared) {
  progcache::KeyContext context = prepared.context;
  if (prepared.key && prepared.observation)
    context.fields = progcache::observation_fields(*prepared.observation);
  return progcache::key_fields(desc, &context);
}

}  // namespace

struct pcache_entry {
  pcache_entry(progcache::Hit h, std::optional<progcache::CompiledMeta> m)
      : hit(std::move(h)), meta(std::move(m)), key_fields(meta ? meta->key_fields : Fields{}) {}
  progcache::Hit hit;
  std::optional<progcache::CompiledMeta> meta;
  FieldArrays key_fields;
};

struct pcache_explain {
  pcache_explain(const progcache::ProgramDesc &desc, const progcache::PreparedCompile &prepared,
                 progcache::MemoStore *memos)
      : uncacheable(prepared.uncacheable), key_fields(explained_fields(desc, prepared)) {
    if (uncacheable.empty() && prepared.key) key = *prepared.key;
    if (uncacheable.empty() && !prepared.key && progcache::program_lexical_facts(desc).uses_time())
      uncacheable = "the source, an option or an in-memory header uses __DATE__ or __TIME__";
    if (uncacheable.empty() && !prepared.key)
      why_not = prepared.observation
                    ? "NVRTC would not read what it read when it compiled this: " + prepared.why_not
                    : "this program has not been compiled through this cache";
    // What NVRTC was seen to read (the observation that holds, else the newest); a program never
    // compiled here: the include scan's prediction.
    std::vector<std::pair<std::string, bool>> deps;
    if (prepared.observation) {
      deps = progcache::observed_paths(*prepared.observation, prepared.setting);
    } else {
      const progcache::IncludeScan scan = progcache::scan_includes(desc, memos);
      for (const auto &d : scan.dependencies) deps.emplace_back(d.path, d.present);
      if (!why_not.empty() && !scan.uncacheable.empty())
        why_not += "; the prediction of what it reads is incomplete: " + scan.uncacheable;
    }
    for (const auto &[path, found] : deps) {
      paths.push_back(path);
      present.push_back(found ? 1 : 0);
    }
    for (const std::string &p : paths) path_pointers.push_back(p.c_str());
  }
  progcache::Key key{};
  std::string uncacheable;
  std::string why_not;
  FieldArrays key_fields;
  std::vector<std::string> paths;
  std::vector<const char *> path_pointers;
  std::vector<int32_t> present;
};

extern "C" {

pcache_status pcache_admin_info_get(pcache *cache, pcache_admin_info *info) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    need_output_struct(info, uint32_t(sizeof(pcache_admin_info)), "pcache_admin_info");
    const progcache::Cache::ConfiguredCap cap = c.configured_cap();
    std::lock_guard lock(cache->lazy_mutex);
    if (cache->display_uri.empty()) {
      cache->display_uri = c.display_uri();
      cache->scheme = progcache::parse_uri(c.uri()).scheme;
    }
    cache->max_size_source = cap.source;
    pcache_admin_info out{};
    out.tier_count = uint32_t(c.tiers().size());
    out.uri = cache->display_uri.c_str();
    out.scheme = cache->scheme.c_str();
    out.max_size_bytes = c.max_size_bytes();
    out.max_payload_size = c.max_payload_size();
    out.configured_max_size = cap.bytes;
    out.max_size_source = cache->max_size_source.c_str();
    copy_known_prefix(info, out);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_tier(pcache *cache, uint32_t tier, pcache **tier_out) {
  if (tier_out) *tier_out = nullptr;
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!tier_out) throw invalid("tier_out is NULL");
    const std::vector<progcache::Cache *> tiers = c.tiers();
    if (tier >= tiers.size()) return PCACHE_NOT_FOUND;
    std::lock_guard lock(cache->lazy_mutex);
    cache->tier_handles.resize(tiers.size());
    pcache *&handle = cache->tier_handles[tier];
    if (!handle) {
      handle = take_slot();
      handle->tier = tiers[tier];
      handle->state.store(kSlotOpen, std::memory_order_release);
    }
    *tier_out = handle;
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_absolute_uri(const char *uri, char *out, size_t *size) {
  return guarded(__func__, [&] {
    if (!uri || !size) throw invalid("uri or size is NULL");
    const std::string text = progcache::absolute_uri(uri);
    const size_t room = *size;
    *size = text.size() + 1;
    if (!out || room < text.size() + 1)
      throw invalid("out holds " + std::to_string(room) + " bytes; " + std::to_string(*size) +
                    " are needed");
    std::memcpy(out, text.c_str(), text.size() + 1);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_check_storage(pcache *cache, int32_t repair, int32_t *damaged) {
  return guarded(__func__, [&] {
    if (!damaged) throw invalid("damaged is NULL");
    *damaged = 0;
    const std::string report = need_cache(cache).backend().check_storage(repair != 0);
    if (!report.empty()) {
      *damaged = 1;
      progcache::set_thread_warning(report);
    }
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_zero_shared_stats(pcache *cache) {
  return guarded(__func__, [&] {
    need_counters(cache).zero_counters();
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_config_list(pcache *cache, pcache_setting_fn fn, void *context) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!fn) throw invalid("fn is NULL");
    for (const progcache::SettingSpec &spec : progcache::setting_specs()) {
      if (spec.key == std::string_view("max_size")) {
        const progcache::Cache::ConfiguredCap cap = c.configured_cap();
        fn(spec.key, cap.source.empty() ? "" : std::to_string(cap.bytes).c_str(),
           cap.source.c_str(), context);
        continue;
      }
      const progcache::Setting s = progcache::lookup_setting(spec.key);
      fn(spec.key, s.value.c_str(), s.source.c_str(), context);
    }
    std::string files;
    for (const std::string &f : progcache::config_file_paths())
      files += (files.empty() ? "" : ":") + f;
    fn("config_files", files.c_str(), "", context);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_config_set(pcache *cache, const char *name, const char *value) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!name) throw invalid("name is NULL");
    if (std::string_view(name) != "max_size")
      throw Error(Status::unsupported, std::string("only max_size is stored in the cache; set ") +
                                           name + " in a config file or the environment");
    if (!c.tiers().empty())
      throw Error(Status::unsupported, "a tiered cache has no cap of its own: set each tier's");
    if (!value || !*value)
      c.store_cap(std::nullopt);
    else
      c.store_cap(progcache::parse_size("max_size", value));
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_list(pcache *cache, pcache_list_fn fn, void *context) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!fn) throw invalid("fn is NULL");
    bool stopped = false;  // the storage walks on; the caller hears no more
    c.list([&](const progcache::EntryInfo &e) {
      if (stopped) return;
      const pcache_entry_info info{e.key.data(), e.key.size(), e.payload_size, e.last_use};
      stopped = fn(&info, context) != 0;
    });
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_peek(pcache *cache, const void *key, size_t key_size,
                                pcache_entry **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    const ByteView k = need_key(key, key_size);
    if (!out) throw invalid("out is NULL");
    std::string damage;
    std::optional<progcache::Hit> hit = c.peek(k, &damage);
    if (!hit && !damage.empty())
      throw Error(Status::corrupt, "removed a damaged cache entry: " + damage);
    if (!hit) return PCACHE_NOT_FOUND;
    std::optional<progcache::CompiledMeta> meta = progcache::decode_meta(hit->meta);
    *out = new pcache_entry(std::move(*hit), std::move(meta));
    return PCACHE_OK;
  });
}

const void *pcache_entry_payload(const pcache_entry *entry, size_t *size) {
  if (size) *size = entry ? entry->hit.payload.size : 0;
  return entry ? static_cast<const void *>(entry->hit.payload.data) : nullptr;
}

int32_t pcache_entry_is_compiled(const pcache_entry *entry) {
  return entry && entry->meta ? 1 : 0;
}

int32_t pcache_entry_target(const pcache_entry *entry) {
  return entry && entry->meta ? entry->meta->target : -1;
}

uint32_t pcache_entry_nvrtc_version(const pcache_entry *entry) {
  return entry && entry->meta ? entry->meta->nvrtc_version : 0;
}

uint64_t pcache_entry_compile_us(const pcache_entry *entry) {
  return entry && entry->meta ? entry->meta->compile_us : 0;
}

const char *pcache_entry_program_name(const pcache_entry *entry) {
  return entry && entry->meta ? entry->meta->program_name.c_str() : "";
}

pcache_status pcache_entry_key_fields(const pcache_entry *entry, size_t *count,
                                      const char *const **names, const char *const **values) {
  if (!entry) return fail(PCACHE_ERR_INVALID_ARG, "pcache_entry_key_fields: entry is NULL");
  return entry->key_fields.get(count, names, values);
}

void pcache_entry_free(pcache_entry *entry) {
  delete entry;
}

pcache_status pcache_admin_explain(pcache *cache, const pcache_program *program,
                                   pcache_explain **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    if (!out) throw invalid("out is NULL");
    progcache::Cache *c = cache ? &need_cache(cache) : nullptr;
    const progcache::ProgramDesc desc = to_desc(program);
    const progcache::PreparedCompile prepared = progcache::prepare_compile(c, desc, true);
    *out = new pcache_explain(desc, prepared, c);
    return PCACHE_OK;
  });
}

const uint8_t *pcache_explain_key(const pcache_explain *explain) {
  return explain ? explain->key.data() : nullptr;
}

const char *pcache_explain_uncacheable(const pcache_explain *explain) {
  return explain ? explain->uncacheable.c_str() : "";
}

const char *pcache_explain_why_not(const pcache_explain *explain) {
  return explain ? explain->why_not.c_str() : "";
}

pcache_status pcache_explain_key_fields(const pcache_explain *explain, size_t *count,
                                        const char *const **names, const char *const **values) {
  if (!explain) return fail(PCACHE_ERR_INVALID_ARG, "pcache_explain_key_fields: explain is NULL");
  return explain->key_fields.get(count, names, values);
}

pcache_status pcache_explain_dependencies(const pcache_explain *explain, size_t *count,
                                          const char *const **paths, const int32_t **present) {
  if (!explain || !count || !paths || !present)
    return fail(PCACHE_ERR_INVALID_ARG,
                "pcache_explain_dependencies: explain, count, paths or present is NULL");
  *count = explain->paths.size();
  *paths = explain->path_pointers.data();
  *present = explain->present.data();
  return PCACHE_OK;
}

void pcache_explain_free(pcache_explain *explain) {
  delete explain;
}

pcache_status pcache_admin_options_name_arch(const char *const *options, size_t num_options,
                                             int32_t *names_arch) {
  return guarded(__func__, [&] {
    if (!names_arch) throw invalid("names_arch is NULL");
    *names_arch = 0;
    const auto given = string_list(options, num_options, "options");
    for (const std::string &o : progcache::canonical_options(given))
      if (o.rfind("--gpu-architecture", 0) == 0) *names_arch = 1;
    return PCACHE_OK;
  });
}

const char *pcache_admin_compiled_not_stored(const pcache_compiled *result) {
  return result ? result->result->not_stored.c_str() : "";
}

pcache_status pcache_admin_export(pcache *cache, const char *path, pcache_progress_fn progress,
                                  void *context, pcache_transfer *result) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!path) throw invalid("path is NULL");
    const progcache::BundleProgress done =
        progcache::export_bundle(c, path, [&](const progcache::BundleProgress &p) {
          if (!progress) return;
          const pcache_transfer so_far = to_transfer(p);
          progress(&so_far, context);
        });
    if (result) *result = to_transfer(done);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_import(pcache *cache, const char *path, pcache_progress_fn progress,
                                  pcache_reject_fn reject, void *context, pcache_transfer *result) {
  return guarded(__func__, [&] {
    progcache::Cache &c = need_cache(cache);
    if (!path) throw invalid("path is NULL");
    const progcache::BundleProgress done = progcache::import_bundle(
        c, path,
        [&](const progcache::BundleProgress &p) {
          if (!progress) return;
          const pcache_transfer so_far = to_transfer(p);
          progress(&so_far, context);
        },
        [&](const std::string &why) {
          if (reject) reject(why.c_str(), context);
        });
    if (result) *result = to_transfer(done);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_parse_size(const char *text, uint64_t *bytes) {
  return guarded(__func__, [&] {
    if (!text || !bytes) throw invalid("text or bytes is NULL");
    *bytes = progcache::parse_size("size", text);
    return PCACHE_OK;
  });
}

pcache_status pcache_admin_parse_duration(const char *text, uint64_t *seconds) {
  return guarded(__func__, [&] {
    if (!text || !seconds) throw invalid("text or seconds is NULL");
    const int64_t s = progcache::parse_duration_seconds("duration", text);
    if (s < 0) throw invalid(std::string("duration '") + text + "' is negative");
    *seconds = uint64_t(s);
    return PCACHE_OK;
  });
}

}  // extern "C"
