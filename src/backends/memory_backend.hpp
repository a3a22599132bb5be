// memory: an in-process LRU: open-addressing index + recency list, one mutex, O(1) per operation.
#pragma once

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.hpp"
#include "util/open_index.hpp"

namespace progcache {

class MemoryBackend final : public Backend {
 public:
  explicit MemoryBackend(const BackendConfig &config);
  SharedBlob get(ByteView key, Access access) override;
  // A use of key's record (recency as get), counted in use_counts(): use(record, payload_size)
  // runs while the store holds the record, copies what it needs before it returns (the record
  // may be replaced or evicted as soon as it does), must not throw and must not call into this
  // store. false on a miss (use not called). A payload of up to kMaxUsedUnderLock bytes is used
  // under the store's lock, with no counted reference (whose two atomic read-modify-writes cost
  // a 4 KiB hit as much as its copy); a larger one is pinned and used after the lock is
  // released, so that copying it never holds up the store's other threads. Inline, so that a
  // caller's use is inlined into it: a 4 KiB hit's copy is ~30 ns, and each call through a
  // pointer around it a noticeable part of the rest.
  template <typename Use>
  bool use_in_place(ByteView key, Use &&use) {
    SharedBlob pinned;
    uint64_t payload_size = 0;
    const uint64_t hash = index_.hash_of(key.str());
    {
      std::lock_guard lock(mutex_);
      const Lru::iterator *it = index_.find(key.str(), hash);
      if (!it) return false;
      touch_locked(*it);
      payload_size = (*it)->payload_size;
      count_use_locked(payload_size);
      if (payload_size <= kMaxUsedUnderLock) {
        use((*it)->record_view, payload_size);
        return true;
      }
      pinned = (*it)->record;
    }
    use(pinned->view(), payload_size);
    return true;
  }
  // The uses use_in_place made and the payload bytes they reached, each total as one relaxed
  // load: a caller that counts hits adds these to its own (a hit counted here costs no atomic
  // read-modify-write and no thread-local lookup, since the store's lock is held anyway).
  struct UseCounts {
    uint64_t uses = 0, payload_bytes = 0;
  };
  UseCounts use_counts() const {
    return {uses_.load(std::memory_order_relaxed), used_bytes_.load(std::memory_order_relaxed)};
  }
  static constexpr uint64_t kMaxUsedUnderLock = 16 * 1024;
  void put(ByteView key, Blob &&record, uint64_t payload_size) override;
  bool remove(ByteView key) override;
  uint64_t count() override;
  uint64_t size() override;
  void clear() override;
  bool in_process() const override { return true; }
  void set_max_size_bytes(uint64_t cap) override { config_.max_size_bytes = cap; }
  void list(const std::function<void(const EntryInfo &)> &fn) override;
  std::optional<std::string> get_meta(std::string_view name) override;
  void put_meta(std::string_view name, ByteView record) override;

 private:
  struct Node {
    std::string key;
    SharedBlob record;     // shared so that a pinned view outlives replacement or eviction
    ByteView record_view;  // record->view() without loading the Blob: a hit's copy, a prefetch
    uint64_t hash;         // the index's hash of key
    uint64_t payload_size;
    int64_t last_use;
  };
  using Lru = std::list<Node>;  // front = most recently used
  struct KeyOf {
    std::string_view operator()(Lru::iterator it) const { return it->key; }
  };

  void erase_locked(Lru::iterator it);
  void touch_locked(Lru::iterator it);  // a use: most recently used, now
  void prefetch_next_victim_locked() const;
  // Only writers hold mutex_, so a load and a store add (readers load without the lock).
  void count_use_locked(uint64_t payload_size) {
    uses_.store(uses_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    used_bytes_.store(used_bytes_.load(std::memory_order_relaxed) + payload_size,
                      std::memory_order_relaxed);
  }

  BackendConfig config_;  // max_size_bytes may change while opening (set_max_size_bytes)
  ForkSafeMutex mutex_{ForkSafeMutex::kMiddle};
  Lru lru_;
  OpenIndex<Lru::iterator, KeyOf> index_;
  uint64_t total_ = 0;
  std::atomic<uint64_t> uses_{0}, used_bytes_{0};         // written under mutex_
  std::map<std::string, std::string, std::less<>> meta_;  // under mutex_
};

}  // namespace progcache
