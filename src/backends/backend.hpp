// The one small storage interface every backend implements. Backends store opaque records
// (see entry.hpp) under opaque keys; they know nothing of what a key means, of compiles, or of
// the C API.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "util/blob.hpp"
#include "util/fork_guard.hpp"

namespace progcache {

// What a backend reports back to the cache that owns it.
struct BackendEvents {
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> corrupt{0};
  std::atomic<uint64_t> tier_errors{0};  // tiered: calls on a tier that failed and were skipped
  std::atomic<uint64_t> tier_skips{0};   // tiered: calls not made to a tier in back-off
};

// A warning for the calling thread's pcache_last_error() that does not fail the call (a database
// reset after corruption, WAL disabled on a network filesystem). The C shim reports it.
void set_thread_warning(std::string message);
std::string take_thread_warning();

struct BackendConfig {
  uint64_t max_size_bytes = 0;  // 0 = unbounded; the cap on the sum of payload sizes
  bool allow_shared = false;    // accept directories/files other users own or can write
  BackendEvents *events = nullptr;
};

// Counters kept with the storage and shared by every process that opens it (`progcache stats`).
struct PersistentCounters {
  int64_t hits = 0, misses = 0, evictions = 0, compile_us_saved = 0;
  PersistentCounters &operator+=(const PersistentCounters &o) {
    hits += o.hits;
    misses += o.misses;
    evictions += o.evictions;
    compile_us_saved += o.compile_us_saved;
    return *this;
  }
};

// One stored entry as listed (no payload read).
struct EntryInfo {
  std::string key;
  uint64_t payload_size = 0;
  int64_t last_use = 0;  // Unix seconds
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The record stored under key, or nullptr on a miss. Damage the backend itself detects (an
  // unreadable file, a reset database) is removed, counted in events->corrupt, and a miss.
  virtual SharedBlob get(ByteView key) = 0;
  // Stores record under key, replacing any old one, then evicts least-recently-used records
  // until the sum of payload sizes fits the cap. payload_size <= cap is checked by the caller.
  virtual void put(ByteView key, Blob &&record, uint64_t payload_size) = 0;
  // true if something was removed.
  virtual bool remove(ByteView key) = 0;
  // Removes a record the cache found damaged or foreign (its checksum, MAC or key failed): the
  // sizes it claims are not believed when the totals are adjusted. true if something was removed.
  virtual bool remove_damaged(ByteView key) { return remove(key); }
  virtual uint64_t count() = 0;
  virtual uint64_t size() = 0;
  virtual void clear() = 0;
  // Largest payload this backend can hold (beyond it put is refused with too_large).
  virtual uint64_t max_payload_size() const { return UINT64_MAX; }
  // A directory where processes sharing this cache can create lock files (single-flight
  // compiles), or "" when the cache is private to this process.
  virtual std::string lock_dir() const { return {}; }
  // Calls fn for every entry, most recently used first where the backend knows the order.
  virtual void list(const std::function<void(const EntryInfo &)> &fn) = 0;
  // Adds to / reads the shared counters. The default keeps them in this process only.
  virtual void add_counters(const PersistentCounters &delta) {
    std::lock_guard lock(counters_mutex_);
    counters_ += delta;
  }
  virtual PersistentCounters counters() {
    std::lock_guard lock(counters_mutex_);
    return counters_;
  }
  // true when records never leave this process's memory, so re-verifying checksums on every
  // read would only cost time.
  virtual bool in_process() const { return false; }
  // For a remote store: how long a tiered cache leaves it alone after a failure (doubling per
  // consecutive failure). 0 = a local store, never skipped.
  virtual uint64_t retry_backoff_ms() const { return 0; }
  // Single flight across machines, for stores that machines share: tries to take the lease on
  // compiling key. Returns a token when taken (hand it to release_lease), "" when another holder
  // has it, nullopt when this store keeps no leases. Throws Error when the store fails.
  virtual std::optional<std::string> try_lease(ByteView) { return std::nullopt; }
  virtual void release_lease(ByteView, const std::string &) {}
  // Metadata side channel: small records (memos, in the entry format) kept beside the entries
  // and never counted, listed, exported, evicted or cleared as entries. nullopt when absent.
  // The default keeps them in this process (memory:). Throws Error when the store fails.
  virtual std::optional<std::string> get_meta(std::string_view name) {
    std::lock_guard lock(counters_mutex_);
    auto it = meta_.find(std::string(name));
    return it == meta_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  virtual void put_meta(std::string_view name, ByteView record) {
    std::lock_guard lock(counters_mutex_);
    if (meta_.size() >= kMaxMetaRecords) meta_.erase(meta_.begin());
    meta_[std::string(name)] = std::string(record.str());
  }
  // How many metadata records a store keeps at most (older ones are dropped first where the
  // store knows the order): memos are hints, and their number must stay bounded.
  static constexpr size_t kMaxMetaRecords = 20000;

 private:
  ForkSafeMutex counters_mutex_{ForkSafeMutex::kInner};
  PersistentCounters counters_;
  std::map<std::string, std::string> meta_;
};

}  // namespace progcache
