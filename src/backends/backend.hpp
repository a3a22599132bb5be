// The one small storage interface every backend implements. Backends store opaque records
// (see entry.hpp) under opaque keys; they know nothing of what a key means, of compiles, or of
// the C API.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "util/blob.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/warning.hpp"

namespace progcache {

// What a backend reports back to the cache that owns it.
struct BackendEvents {
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> corrupt{0};
  std::atomic<uint64_t> tier_errors{0};    // tiered: calls on a tier that failed and were skipped
  std::atomic<uint64_t> tier_timeouts{0};  // ...of which the tier did not answer in time
  std::atomic<uint64_t> tier_skips{0};     // tiered: calls not made to a tier in back-off
};

struct BackendConfig {
  uint64_t max_size_bytes = 0;  // 0 = unbounded; the cap on the sum of payload sizes
  bool allow_shared = false;    // accept directories/files other users own or can write
  CreateModes modes;            // what new directories and files are created with
  BackendEvents *events = nullptr;
  bool must_exist = false;  // a local store that is not there is Error(not_found), created never
};

// Counters kept with the storage and shared by every process that opens it (`progcache stats`).
// The counters every process using a store shares: the one list. A store keeps each under its
// name (iterating PersistentCounters::kFields), pcache_shared_stats and the handle's CacheStats
// have a field of each name, and a handle shares how much each of its own grew. Adding one is one
// line here, a field in pcache_shared_stats, and (file-stream) a word in the stats file.
// Since 0.4: damaged records found and removed, compiles not stored (uncacheable programs,
// failed stores), and calls on a tier of a tiered stack that failed (an unreachable or slow
// remote tier, a busy local one; recorded in the stack's other tiers), and of those, the ones
// where a remote tier did not answer within its timeout. Since 0.5: cached images the driver
// rejected, replaced by a fresh compile.
// clang-format off
#define PCACHE_SHARED_COUNTERS(X) \
  X(hits) \
  X(misses) \
  X(evictions) \
  X(compile_us_saved) \
  X(corrupt) \
  X(uncacheable) \
  X(tier_errors) \
  X(tier_timeouts) \
  X(healed)
// clang-format on

struct PersistentCounters {
#define PCACHE_COUNTER_FIELD(name) int64_t name = 0;
  PCACHE_SHARED_COUNTERS(PCACHE_COUNTER_FIELD)
#undef PCACHE_COUNTER_FIELD
  // Every counter with the name stores keep it under.
  struct Field {
    const char *name;
    int64_t PersistentCounters::*value;
  };
  static constexpr Field kFields[] = {
#define PCACHE_COUNTER_ENTRY(name) {#name, &PersistentCounters::name},
      PCACHE_SHARED_COUNTERS(PCACHE_COUNTER_ENTRY)
#undef PCACHE_COUNTER_ENTRY
  };
  bool any() const {
    for (const Field &f : kFields)
      if (this->*f.value) return true;
    return false;
  }
  // Wraps rather than overflows: counts come from files and rows other processes write.
  PersistentCounters &operator+=(const PersistentCounters &o) {
    for (const Field &f : kFields)
      this->*f.value = int64_t(uint64_t(this->*f.value) + uint64_t(o.*f.value));
    return *this;
  }
};

// One stored entry as listed (no payload read).
struct EntryInfo {
  std::string key;
  uint64_t payload_size = 0;
  int64_t last_use = 0;  // Unix seconds
};

// Optional capability: counters kept with the storage and shared by every process opening it.
class SharedCounters {
 public:
  // Adds delta to the stored counters. Throws Error (busy: the caller keeps delta for later).
  virtual void add_counters(const PersistentCounters &delta) = 0;
  [[nodiscard]] virtual PersistentCounters counters() = 0;
  // Sets every stored counter to zero (`progcache stats --zero`); entries are untouched.
  // Throws Error.
  virtual void reset_counters() = 0;

 protected:
  ~SharedCounters() = default;
};

// Optional capability of a store that machines share: leases on keys, for single-flight
// compiles across machines.
class LeaseStore {
 public:
  // Tries to take the lease on key. Returns a token when taken (hand it to release_lease), ""
  // when another holder has it. Throws Error when the store fails.
  [[nodiscard]] virtual std::optional<std::string> try_lease(ByteView key) = 0;
  virtual void release_lease(ByteView key, const std::string &token) = 0;

 protected:
  ~LeaseStore() = default;
};

// How a read counts. A use refreshes the entry's recency (and the cache counts a hit or a
// miss); a peek (administration: ls, verify, export, explain) changes neither, so that reading
// every entry to list or check it never reorders the LRU or inflates the hit rate.
enum class Access { use, peek };

// Storage only: records in, records out, totals, eviction, and a metadata side channel.
class Backend {
 public:
  virtual ~Backend() = default;

  // The record stored under key, or nullptr on a miss. Damage the backend itself detects (an
  // unreadable file, a reset database) is removed, counted in events->corrupt, and a miss. A
  // use refreshes recency; a peek does not (Redis, which keeps its own LRU, cannot tell them).
  [[nodiscard]] virtual SharedBlob get(ByteView key, Access access) = 0;
  // Stores record under key, replacing any old one, then evicts least-recently-used records
  // until the sum of payload sizes fits the cap. payload_size <= cap is checked by the caller.
  virtual void put(ByteView key, Blob &&record, uint64_t payload_size) = 0;
  // true if something was removed.
  [[nodiscard]] virtual bool remove(ByteView key) = 0;
  // Removes a record the cache found damaged or foreign (its checksum, MAC or key failed): the
  // sizes it claims are not believed when the totals are adjusted. true if something was removed.
  [[nodiscard]] virtual bool remove_damaged(ByteView key) { return remove(key); }
  [[nodiscard]] virtual uint64_t count() = 0;
  [[nodiscard]] virtual uint64_t size() = 0;
  virtual void clear() = 0;
  // Calls fn for every entry, most recently used first where the backend knows the order.
  virtual void list(const std::function<void(const EntryInfo &)> &fn) = 0;
  // Largest payload this backend can hold (beyond it put is refused with too_large).
  virtual uint64_t max_payload_size() const { return UINT64_MAX; }
  // Sets the cap on stored payload bytes, enforced from the next put on (a cap read from the
  // store's own metadata is known only once it is open). Called while the store is being
  // opened, before any other thread sees it. Stores without a cap of their own (Redis evicts by
  // its maxmemory policy; the tiered composite's tiers cap themselves) ignore it.
  virtual void set_max_size_bytes(uint64_t) {}
  // Metadata side channel: small records (memos, in the entry format) kept beside the entries
  // and never counted, listed, exported, evicted or cleared as entries. nullopt when absent.
  // A store keeps at most about kMaxMetaRecords (older ones are dropped first where it knows the
  // order): memos are hints, and their number must stay bounded. A lasting record (a setting a
  // person made: is_lasting_meta) is never dropped to make room, and a store that resets itself
  // after damage keeps it where it can still be read. Throws Error when the store fails.
  [[nodiscard]] virtual std::optional<std::string> get_meta(std::string_view name) = 0;
  virtual void put_meta(std::string_view name, ByteView record) = 0;
  static constexpr size_t kMaxMetaRecords = 20000;
  static constexpr std::string_view kLastingMetaPrefix = "config/";
  static constexpr bool is_lasting_meta(std::string_view name) {
    return name.substr(0, kLastingMetaPrefix.size()) == kLastingMetaPrefix;
  }

  // Where the store lives, for whoever shares it: a directory beside it where the processes
  // opening the same store can create lock files, or "" for a store private to this process.
  virtual std::string lock_dir() const { return {}; }
  // Told that a record get returned with a token (Blob::record_token) was verified intact: a
  // later get of the same unchanged record may return it vouched for (Blob::vouched).
  virtual void note_intact(const Blob &record) { (void)record; }
  // true when records never leave this process's memory, so re-verifying checksums on every
  // read would only cost time.
  virtual bool in_process() const { return false; }
  // Whether a memo put here can be read by another process (a memory store's cannot): memos
  // whose only use is to spare a later process work are not kept where none can read them.
  virtual bool memos_outlive_process() const { return !in_process(); }
  // For a remote store: how long a tiered cache leaves it alone after a failure (doubling per
  // consecutive failure). 0 = a local store, never skipped.
  virtual uint64_t retry_backoff_ms() const { return 0; }
  // For a remote store: how long it waits for an answer before giving up (0: a local store).
  // A tiered cache leaves a store that timed out alone for ten of these, whatever its back-off,
  // so a server that accepts connections and never answers costs at most one timeout now and
  // then, not one per call.
  virtual uint64_t timeout_ms() const { return 0; }

  // Checks the store's own structures (what reading every entry cannot see: a SQLite index that
  // makes lookups miss, totals that drifted from what is stored) and, with repair, mends them:
  // rebuilt where that keeps the entries, else reset. Returns what was found and done, "" when
  // all is well. Throws Error when the store cannot be read.
  virtual std::string check_storage(bool repair) {
    (void)repair;
    return "";
  }

  // Capabilities beside storage, or null when the store does not offer them.
  virtual SharedCounters *shared_counters() { return nullptr; }
  virtual LeaseStore *leases() { return nullptr; }
};

}  // namespace progcache
