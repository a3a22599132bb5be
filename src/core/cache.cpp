#include "core/cache.hpp"

#include <cstring>
#include <thread>
#include <utility>

#include "backends/filestream_backend.hpp"
#include "backends/memory_backend.hpp"
#include "backends/redis_backend.hpp"
#include "backends/sqlite_backend.hpp"
#include "core/tiered_backend.hpp"
#include "format/entry.hpp"
#include "util/error.hpp"
#include "util/settings.hpp"
#include "util/trust.hpp"
#include "util/uri.hpp"

namespace progcache {
namespace {

// compress=none|zstd and compress_level=N, taken from the URI before the backend sees the rest.
int take_compress_level(Uri &uri, bool default_on) {
  const std::string mode = uri.take("compress", default_on ? "zstd" : "none");
  const std::string level_text = uri.take("compress_level", "3");
  if (mode == "none") return 0;
  if (mode != "zstd") throw Error(Status::invalid_arg, "compress='" + mode + "': use zstd or none");
  const uint64_t level = parse_uint_param("compress_level", level_text);
  if (level < 1 || level > uint64_t(max_compress_level()))
    throw Error(Status::invalid_arg, "compress_level=" + level_text + ": use 1 to " +
                                         std::to_string(max_compress_level()));
  return int(level);
}

std::vector<std::string> split_tiers(const std::string &text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t bar = text.find('|', start);
    out.push_back(text.substr(start, bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

}  // namespace

std::unique_ptr<Cache> Cache::open(std::string_view text, const CacheOptions &options) {
  std::unique_ptr<Cache> cache = open_storage(text, options);
  if (cache->options_.max_size_bytes == CacheOptions::kConfiguredCap) {
    // Known only now that the store is open (it may keep one): applied from the next put on.
    cache->options_.max_size_bytes = cache->configured_cap().bytes;
    cache->backend_->set_max_size_bytes(cache->options_.max_size_bytes);
  }
  cache->coordinator_.emplace(cache->backend_->lock_dir(), cache->backend_->leases(),
                              cache->modes_);
  return cache;
}

std::unique_ptr<Cache> Cache::open_storage(std::string_view uri_text, const CacheOptions &options) {
  std::string text = uri_text.empty() ? default_uri() : std::string(uri_text);
  Uri uri = parse_uri(text);
  std::unique_ptr<Cache> cache(new Cache(text, options));
  // The default cap follows the file: the default location gets it whether it is named by a URI,
  // $PCACHE_URI or nothing, and another file does not (PCACHE_URI=sqlite:X and --cache
  // sqlite:X used to differ).
  cache->is_default_ = is_default_location(uri);
  // ?max_size=SIZE caps this cache whatever the options say: in a tiered stack, each tier its
  // own cap (a small memory tier in front of a large disk one).
  if (uri.params.count("max_size")) {  // present: "max_size=" (empty) is an error, not "none"
    cache->uri_cap_ = parse_size("max_size", uri.take("max_size"));
    cache->options_.max_size_bytes = *cache->uri_cap_;
  }
  BackendConfig config;
  // A cap still to be found from the configuration is applied once the store is open (open()).
  config.max_size_bytes = cache->options_.max_size_bytes == CacheOptions::kConfiguredCap
                              ? 0
                              : cache->options_.max_size_bytes;
  config.events = &cache->events_;
  config.must_exist = options.must_exist;
  config.allow_shared = options.allow_shared || setting_is_true(lookup_setting("allow_shared"));
  config.modes = create_modes(config.allow_shared);
  cache->modes_ = config.modes;
  if (uri.scheme == "tiered") {
    // Each tier is a whole cache with its own checks, signature and compression; this one
    // only routes, so it neither signs nor compresses.
    std::vector<std::unique_ptr<Cache>> tiers;
    CacheOptions tier_options = options;
    tier_options.lazy_connect = true;
    tier_options.must_exist = false;  // a stack's local tiers are created as its writes need
    for (const std::string &part : split_tiers(uri.path)) {
      if (part.empty())
        throw Error(Status::invalid_arg, "tiered: empty tier in '" + redact_uri(text) + "'");
      if (part.compare(0, 7, "tiered:") == 0)
        throw Error(Status::invalid_arg, "tiered: a tier cannot itself be tiered");
      tiers.push_back(Cache::open(part, tier_options));
    }
    auto tiered = std::make_unique<TieredBackend>(std::move(tiers), config);
    cache->tiered_ = tiered.get();
    cache->backend_ = std::move(tiered);
    return cache;
  }
  if (uri.scheme != "memory" && process_is_privileged() && !options.allow_privileged)
    throw Error(Status::permission,
                "this is a setuid/setgid process: persistent caches are off, so that it never "
                "loads binaries from a directory its caller controls (open with "
                "PCACHE_OPEN_ALLOW_PRIVILEGED to override, or use memory:)");
  if (options.secret) warn_if_guessable_secret(options.secret->size(), "the secret given");
  if (auto secret = options.secret ? options.secret : configured_secret(config.allow_shared))
    cache->mac_ = std::make_unique<MacKey>(ByteView(*secret));
  if (uri.scheme == "memory") {
    uri.expect_no_params();
    auto memory = std::make_unique<MemoryBackend>(config);
    cache->memory_ = memory.get();
    cache->backend_ = std::move(memory);
    return cache;
  }
  if (config.allow_shared && !cache->mac_)
    set_thread_warning("shared cache '" + cache->display_uri() +
                       "' has no secret: any user who can write it can plant binaries the GPU "
                       "would run (set PCACHE_SECRET_FILE)");
  // Bandwidth is what a remote store costs, so its entries are compressed unless told not to.
  cache->compress_level_ = take_compress_level(uri, uri.scheme == "redis");
  if (uri.scheme == "sqlite")
    cache->backend_ = std::make_unique<SqliteBackend>(uri, config);
  else if (uri.scheme == "redis")
    cache->backend_ = std::make_unique<RedisBackend>(uri, config, options.lazy_connect);
  else
    cache->backend_ = std::make_unique<FileStreamBackend>(uri, config);
  return cache;
}

std::string Cache::display_uri() const {
  return redact_uri(uri_);
}

std::vector<Cache *> Cache::tiers() const {
  return tiered_ ? tiered_->tiers() : std::vector<Cache *>{};
}

void Cache::refuse_key(ByteView key) {
  if (key.size == 0) throw Error(Status::invalid_arg, "key is empty (keys are 1 to 65536 bytes)");
  throw Error(Status::invalid_arg,
              "key is " + std::to_string(key.size) + " bytes (keys are 1 to 65536 bytes)");
}

std::optional<Hit> Cache::get(ByteView key, Access access) {
  return read(key, access, access == Access::use, access == Access::use);
}

std::optional<Hit> Cache::get_counting_hits(ByteView key) {
  return read(key, Access::use, true, false);
}

std::optional<Hit> Cache::peek(ByteView key, std::string *damage) {
  return read(key, Access::peek, false, false, damage);
}

std::optional<Hit> Cache::read(ByteView key, Access access, bool count_hits, bool count_misses,
                               std::string *damage) {
  check_key(key);
  SharedBlob record = backend_->get(key, access);
  if (!record && !count_misses) return std::nullopt;
  if (!record) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    count_op();
    return std::nullopt;
  }
  std::string why;
  const bool from_storage = !backend_->in_process();
  // The MAC is checked on every read: a store's vouch is against damage, not forgery.
  const bool verify_checksum = from_storage && !record->vouched();
  auto parts =
      decode_entry(record->view(), key, verify_checksum, &why, from_storage ? mac_.get() : nullptr);
  if (parts && verify_checksum && record->record_token()) backend_->note_intact(*record);
  if (parts && parts->compressed) {
    if (auto plain = inflate_entry(*parts, &why)) {
      record = std::make_shared<const Blob>(std::move(*plain));
      parts = parse_entry(record->view(), &why);
    } else {
      parts.reset();
    }
  }
  if (!parts) {
    // Damaged or foreign bytes: never returned. Remove them so the next put heals the entry.
    try {
      (void)backend_->remove_damaged(key);
    } catch (const Error &) {  // still a miss; the next put replaces it
    }
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    if (count_misses) {  // a peek, or a compile's lookup, counts no miss here
      misses_.fetch_add(1, std::memory_order_relaxed);
    }
    set_thread_warning("removed a damaged cache entry: " + why);
    if (damage) *damage = why.empty() ? "damaged" : why;
    return std::nullopt;
  }
  if (!count_hits) return Hit{std::move(record), parts->payload, parts->meta};
  count_hit(parts->payload.size);
  count_op();
  return Hit{std::move(record), parts->payload, parts->meta};
}

void Cache::check_payload_size(uint64_t size) const {
  if (options_.max_size_bytes && size > options_.max_size_bytes)
    throw Error(Status::too_large, "value of " + std::to_string(size) +
                                       " bytes exceeds max_size_bytes (" +
                                       std::to_string(options_.max_size_bytes) + ")");
  if (size > backend_->max_payload_size())
    throw Error(Status::too_large, "value of " + std::to_string(size) +
                                       " bytes exceeds this backend's limit of " +
                                       std::to_string(backend_->max_payload_size()));
}

void Cache::put(ByteView key, ByteView payload, ByteView meta) {
  check_key(key);
  check_payload_size(payload.size);
  backend_->put(key, encode_entry(key, meta, payload, mac_.get(), compress_level_), payload.size);
  puts_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(payload.size, std::memory_order_relaxed);
}

void Cache::put_verified(ByteView key, const Hit &hit) {
  std::string why;
  const auto parts = parse_entry(hit.record->view(), &why);
  const bool same_encoding = parts && !parts->compressed && compress_level_ == 0 &&
                             parts->signed_with_mac == (mac_ != nullptr);
  if (!same_encoding) return put(key, hit.payload, hit.meta);
  check_key(key);
  check_payload_size(hit.payload.size);
  // No checksum, MAC or compression to compute again: the bytes are the ones verified.
  backend_->put(key, Blob::copy_of(hit.record->view()), hit.payload.size);
  puts_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(hit.payload.size, std::memory_order_relaxed);
}

bool Cache::remove(ByteView key) {
  check_key(key);
  const bool removed = backend_->remove(key);
  if (removed) deletes_.fetch_add(1, std::memory_order_relaxed);
  return removed;
}

Cache::~Cache() {
  // A writer holding the store's lock makes a flush answer busy and keep its deltas; a closing
  // handle retries for a moment (processes that compile together close together) rather than
  // lose them, but never waits long: the statistics are advisory.
  // Only a busy store is waited for: counters that grow because of the flush itself (a tier
  // that failed it records tier_errors) are not chased (that loop made a close to a silent
  // remote take 40 timeouts).
  for (int attempt = 0; attempt < 40; ++attempt) {
    try {
      if (!flush_counters()) return;
    } catch (...) {  // never fail a close over them
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace progcache
