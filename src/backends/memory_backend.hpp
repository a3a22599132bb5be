// memory: an in-process LRU: open-addressing index + recency list, one mutex, O(1) per operation.
#pragma once

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
  // What use_in_place hands a record to, with its payload size: it copies what it needs before
  // it returns (the record may be replaced or evicted as soon as it does), and must not call
  // into this store.
  using RecordUser = void (*)(void *context, ByteView record, uint64_t payload_size);
  // A use of key's record (recency as get): use(context, record, payload_size) runs while the
  // store holds the record. false on a miss (use not called). A payload of up to
  // kMaxUsedUnderLock bytes is used under the store's lock, with no counted reference (whose two
  // atomic read-modify-writes cost a 4 KiB hit as much as its copy); a larger one is pinned and
  // used after the lock is released, so that copying it never holds up the store's other
  // threads.
  bool use_in_place(ByteView key, RecordUser use, void *context);
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
    SharedBlob record;  // shared so that a pinned view outlives replacement or eviction
    uint64_t payload_size;
    int64_t last_use;
  };
  using Lru = std::list<Node>;  // front = most recently used
  struct KeyOf {
    std::string_view operator()(Lru::iterator it) const { return it->key; }
  };

  void erase_locked(Lru::iterator it);
  void touch_locked(Lru::iterator it);  // a use: most recently used, now

  BackendConfig config_;  // max_size_bytes may change while opening (set_max_size_bytes)
  ForkSafeMutex mutex_{ForkSafeMutex::kMiddle};
  Lru lru_;
  OpenIndex<Lru::iterator, KeyOf> index_;
  uint64_t total_ = 0;
  std::map<std::string, std::string, std::less<>> meta_;  // under mutex_
};

}  // namespace progcache
