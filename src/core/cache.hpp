// Cache: one open store and what every read and write of it goes through: entries encoded and
// verified (checksum, key, MAC with the cache's secret, zstd), damage removed and counted
// (cache.cpp); the handle's counters and the share of them it flushes to the store
// (cache_counters.cpp); memos and the stored cap beside the entries (cache_metadata.cpp); and
// the coordinator that makes compiles of one key single flight across processes.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/backend.hpp"
#include "core/compile_coordinator.hpp"
#include "format/entry.hpp"
#include "util/memo_store.hpp"
#include "util/thread_shards.hpp"

namespace progcache {

class TieredBackend;
class MemoryBackend;

struct CacheOptions {
  // The cap the caller wants (0 = none), or kConfiguredCap: the cap the configuration gives
  // (see Cache::configured_cap). A URI's ?max_size= overrides either.
  static constexpr uint64_t kConfiguredCap = UINT64_MAX;
  uint64_t max_size_bytes = 0;
  bool allow_shared = false;          // trust directories other users own or can write
  bool allow_privileged = false;      // persistent caches in setuid/setgid processes
  std::optional<std::string> secret;  // sign and verify entries (else $PCACHE_SECRET_FILE)
  bool lazy_connect = false;          // remote stores: open without reaching the server (tiers)
  bool must_exist = false;            // a local store that is not there is Error(not_found)
};

// A handle's own counters: the one list (pcache_stats has a field of each name).
// clang-format off
#define PCACHE_HANDLE_COUNTERS(X) \
  X(hits) \
  X(misses) \
  X(puts) \
  X(deletes) \
  X(evictions) \
  X(bytes_read) \
  X(bytes_written) \
  X(corrupt) \
  X(healed) \
  X(tier_errors) \
  X(tier_skips) \
  X(uncacheable)
// clang-format on

struct CacheStats {
#define PCACHE_COUNTER_FIELD(name) uint64_t name = 0;
  PCACHE_HANDLE_COUNTERS(PCACHE_COUNTER_FIELD)
#undef PCACHE_COUNTER_FIELD
  // Kept for the shared counters only (PCACHE_SHARED_COUNTERS: every one of its names is here).
  uint64_t compile_us_saved = 0, tier_timeouts = 0;
};

// A verified hit: the record and where its payload lies inside it.
struct Hit {
  SharedBlob record;
  ByteView payload;
  ByteView meta;
};

class Cache final : public MemoStore {
 public:
  // Opens the backend named by uri ("" = default_uri()).
  [[nodiscard]] static std::unique_ptr<Cache> open(std::string_view uri,
                                                   const CacheOptions &options);
  // Single flight beyond this process for compiles through this cache.
  const CompileCoordinator &coordinator() const { return *coordinator_; }

  // Verified lookup; nullopt on a miss. Damaged records are removed and counted (as corrupt; as
  // a miss too on a use). A peek (administration) counts no hit or miss and refreshes no
  // recency.
  [[nodiscard]] std::optional<Hit> get(ByteView key, Access access = Access::use);
  // An administrative read: a peek (no recency, no hit or miss) that also says why a stored
  // record was refused (*damage non-empty: it was damaged, removed and counted as corrupt).
  [[nodiscard]] std::optional<Hit> peek(ByteView key, std::string *damage);
  // A compile's lookup: a use (recency, tier copies) that counts a hit but no miss: a call that
  // missed counts its miss once it has compiled (note_compile_miss), since waiting for another's
  // compile may still answer it from the cache.
  [[nodiscard]] std::optional<Hit> get_counting_hits(ByteView key);
  void note_compile_miss() {
    misses_.fetch_add(1, std::memory_order_relaxed);
    count_op();
  }
  // Whether records this cache returns may be shared with other threads (a memory store, or a
  // memory tier): such a record's block is never handed over to a caller, only copied.
  bool records_shared() const { return backend_->in_process(); }
  // Whether another process can read this cache's memos (Backend::memos_outlive_process).
  bool memos_outlive_process() const { return backend_->memos_outlive_process(); }
  // A use of key's payload, counted as get() counts it, handed to copy(payload) while the store
  // holds it, for a cache whose records stay in this process's memory (copies_hits()): no entry
  // parse (the records are the ones this process built), and for a small payload no counted
  // reference either (MemoryBackend::use_in_place, whose rules copy follows: it copies what it
  // needs, must not throw and must not call into this cache). false on a miss. Anywhere else,
  // use get(). Defined in core/copy_hit.hpp, so that a caller's copy is inlined into the
  // store's lookup (a 4 KiB hit's copy is ~30 ns, and each call through a pointer around it a
  // noticeable part of the rest).
  template <typename Copy>
  bool copy_hit(ByteView key, Copy &&copy);
  bool copies_hits() const { return memory_ != nullptr; }
  void put(ByteView key, ByteView payload) { put(key, payload, {}); }
  void put(ByteView key, ByteView payload, ByteView meta);
  // Stores a hit another cache verified (a tier copy): the record as it is when this cache would
  // have encoded it the same way (uncompressed, signed exactly when this cache signs: tiers
  // share one secret), else re-encoded from the payload. Same checks and statuses as put.
  void put_verified(ByteView key, const Hit &hit);
  [[nodiscard]] bool remove(ByteView key);
  [[nodiscard]] uint64_t count() { return backend_->count(); }
  [[nodiscard]] uint64_t size() { return backend_->size(); }
  void clear() { backend_->clear(); }
  [[nodiscard]] CacheStats stats() const;
  // Per tier for a tiered cache (URI order); one element (this cache) otherwise.
  std::vector<std::pair<std::string, CacheStats>> tier_stats() const;
  // The tiers of a tiered cache, fastest first; empty for any other cache.
  std::vector<Cache *> tiers() const;
  // A compile served from the cache saved this much NVRTC time.
  void note_compile_hit(uint64_t compile_us) {
    saved_us_.fetch_add(compile_us, std::memory_order_relaxed);
  }
  // A compile answered by another thread's compile of the same key (no lookup of its own): a
  // shared hit that saved compile_us.
  void note_shared_compile(uint64_t compile_us) {
    count_hit(0);
    note_compile_hit(compile_us);
  }
  // The counters shared by every process using this storage (flushes this handle's first).
  [[nodiscard]] PersistentCounters persistent_counters();
  // Writes this handle's not-yet-shared counter deltas to the storage. true when the store was
  // busy and the deltas were kept for a later flush. Throws Error when the store fails.
  bool flush_counters();
  // Zeroes the shared counters (and drops this handle's unshared deltas); entries, and this
  // handle's own statistics, are untouched.
  void zero_counters();
  // Calls fn for every entry (see Backend::list).
  void list(const std::function<void(const EntryInfo &)> &fn) { backend_->list(fn); }
  ~Cache() override;
  // Memos in the backend's metadata side channel, in the entry format (checksummed, and signed
  // with the cache's secret when it has one, so a writer without the secret cannot plant one).
  std::optional<std::string> load_memo(std::string_view name) override;
  void save_memo(std::string_view name, std::string_view value) override;
  // load_memo, and whether a record was there at all (*present is true for a record that fails
  // verification: damaged, forged, or signed with another secret).
  std::optional<std::string> read_memo(std::string_view name, bool *present);
  // A cached image the driver rejected was replaced by a fresh compile.
  void note_healed() { healed_.fetch_add(1, std::memory_order_relaxed); }
  // A successful compile was not stored (docs/keys.md: uncacheable programs).
  void note_uncacheable() { uncacheable_.fetch_add(1, std::memory_order_relaxed); }
  const std::string &uri() const { return uri_; }
  // The URI with any password replaced by "***", for messages and listings.
  std::string display_uri() const;
  // The key entries are signed and checked with, or null without a secret.
  const MacKey *mac() const { return mac_.get(); }
  // The zstd level entries are stored with (0 = uncompressed).
  int compress_level() const { return compress_level_; }
  uint64_t max_size_bytes() const { return options_.max_size_bytes; }
  // The cap the configuration gives this cache (what a handle opened with kConfiguredCap
  // applies), whatever cap this handle was opened with, and where it comes from: "URI
  // (?max_size=)", "environment (PCACHE_MAX_SIZE)", "the cache (progcache config)", a config file's
  // path, "the default for the default cache", or "" for none.
  struct ConfiguredCap {
    uint64_t bytes = 0;
    std::string source;
  };
  [[nodiscard]] ConfiguredCap configured_cap();
  // Stores a cap in the cache's metadata (nullopt removes it): every process that opens it
  // without a cap of its own, a URI's or $PCACHE_MAX_SIZE applies it. Throws Error when the
  // storage cannot be written.
  void store_cap(std::optional<uint64_t> bytes);
  // The cap the default cache gets when nothing else sets one (ccache's is 5 GB).
  static constexpr uint64_t kDefaultCap = 5ull << 30;
  // The largest payload the storage takes (beyond it put is refused with too_large).
  uint64_t max_payload_size() const { return backend_->max_payload_size(); }
  // The storage, for the tiered composite (core only; callers use the methods above).
  Backend &backend() { return *backend_; }

 private:
  Cache(std::string uri, const CacheOptions &options) : uri_(std::move(uri)), options_(options) {}
  // open() without the coordinator (which needs the finished backend).
  static std::unique_ptr<Cache> open_storage(std::string_view uri, const CacheOptions &options);
  void check_key(ByteView key) const {
    if (key.size == 0 || key.size > kMaxEntryKeySize) refuse_key(key);
  }
  [[noreturn]] static void refuse_key(ByteView key);
  std::optional<Hit> read(ByteView key, Access access, bool count_hits, bool count_misses,
                          std::string *damage = nullptr);
  void check_payload_size(uint64_t size) const;

  std::string uri_;
  bool is_default_ = false;          // the default cache's location (is_default_location)
  CreateModes modes_;                // what the store creates files with (shared: group bits)
  std::optional<uint64_t> uri_cap_;  // ?max_size=
  CacheOptions options_;
  BackendEvents events_;
  std::unique_ptr<Backend> backend_;
  TieredBackend *tiered_ = nullptr;  // backend_, when it is the tiered composite
  MemoryBackend *memory_ = nullptr;  // backend_, when it is a memory store
  std::optional<CompileCoordinator> coordinator_;
  // The shared counters of a store that keeps none (memory:) stay in this handle.
  ForkSafeMutex local_counters_mutex_{ForkSafeMutex::kInner};
  PersistentCounters local_counters_;
  std::unique_ptr<MacKey> mac_;
  int compress_level_ = 0;
  void count_op();
  std::atomic<uint64_t> ops_since_flush_{0};
  // The handle's totals of the shared counters (they only grow): shared by how much each grew
  // since the last flush, which flushed_ remembers, in PersistentCounters::kFields order.
  PersistentCounters handle_totals() const;
  std::array<std::atomic<int64_t>, std::size(PersistentCounters::kFields)> flushed_{};
  std::atomic<uint64_t> misses_{0}, puts_{0}, deletes_{0}, bytes_written_{0}, corrupt_{0},
      healed_{0}, uncacheable_{0}, saved_us_{0};
  // Hits and the bytes they returned, per thread: a hit adds to them with no locked add.
  ShardedCounters<2> reads_;
  void count_hit(uint64_t bytes) { reads_.add({1, bytes}); }
};

inline constexpr size_t kMaxKeySize = kMaxEntryKeySize;

}  // namespace progcache
