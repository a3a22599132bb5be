#include "backends/memory_backend.hpp"

#include <cstdint>
#include <ctime>
#include <vector>

namespace progcache {

MemoryBackend::MemoryBackend(const BackendConfig &config) : config_(config) {}

SharedBlob MemoryBackend::get(ByteView key, Access access) {
  std::lock_guard lock(mutex_);
  const Lru::iterator *it = index_.find(key.str());
  if (!it) return nullptr;
  if (access == Access::use) touch_locked(*it);
  return (*it)->record;
}

void MemoryBackend::touch_locked(Lru::iterator it) {
  if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
  it->last_use = std::time(nullptr);
}

void MemoryBackend::erase_locked(Lru::iterator it) {
  total_ -= it->payload_size;
  index_.erase(it->key, it->hash);
  lru_.erase(it);
}

// A store at its cap evicts its least recently used entry at (nearly) every put, and in a large
// store that entry has long left the CPU's caches: its node, its index slot, its record's
// reference count and heap block, and the node before it (which the unlink writes) were each a
// cache miss. Asked for one put ahead, they arrive while that put does its other work.
void MemoryBackend::prefetch_next_victim_locked() const {
  if (lru_.size() < 2) return;
  const auto victim = std::prev(lru_.end());  // in the cache: the last unlink wrote it
  index_.prefetch(victim->hash);
  __builtin_prefetch(victim->record.get());  // its reference count lies beside it
  // The record's heap block: the allocator's header before it and the next block's after it,
  // which free() reads (addresses only: a prefetch never faults).
  const auto data = reinterpret_cast<uintptr_t>(victim->record_view.data);
  __builtin_prefetch(reinterpret_cast<const void *>(data - 16));
  __builtin_prefetch(reinterpret_cast<const void *>(data + victim->record_view.size));
  __builtin_prefetch(&*std::prev(victim));
}

void MemoryBackend::put(ByteView key, Blob &&record, uint64_t payload_size) {
  auto shared = std::make_shared<const Blob>(std::move(record));
  const ByteView view = shared->view();
  const uint64_t hash = index_.hash_of(key.str());
  Node node{std::string(key.str()), std::move(shared), view, hash,
            payload_size,           std::time(nullptr)};
  std::lock_guard lock(mutex_);
  if (const Lru::iterator *it = index_.find(key.str(), hash)) erase_locked(*it);
  lru_.push_front(std::move(node));
  index_.insert(lru_.begin(), hash);
  total_ += payload_size;
  if (config_.max_size_bytes == 0) return;
  bool evicted = false;
  while (total_ > config_.max_size_bytes && lru_.size() > 1) {
    erase_locked(std::prev(lru_.end()));
    evicted = true;
    if (config_.events) config_.events->evictions.fetch_add(1, std::memory_order_relaxed);
  }
  if (evicted) prefetch_next_victim_locked();
}

bool MemoryBackend::remove(ByteView key) {
  std::lock_guard lock(mutex_);
  const Lru::iterator *it = index_.find(key.str());
  if (!it) return false;
  erase_locked(*it);
  return true;
}

uint64_t MemoryBackend::count() {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

uint64_t MemoryBackend::size() {
  std::lock_guard lock(mutex_);
  return total_;
}

void MemoryBackend::clear() {
  std::lock_guard lock(mutex_);
  index_.clear();
  lru_.clear();
  total_ = 0;
}

}  // namespace progcache

namespace progcache {

void MemoryBackend::list(const std::function<void(const EntryInfo &)> &fn) {
  std::vector<EntryInfo> entries;  // copied so that fn may call back into the cache
  {
    std::lock_guard lock(mutex_);
    for (const Node &n : lru_) entries.push_back({n.key, n.payload_size, n.last_use});
  }
  for (const EntryInfo &e : entries) fn(e);
}

std::optional<std::string> MemoryBackend::get_meta(std::string_view name) {
  std::lock_guard lock(mutex_);
  const auto it = meta_.find(name);
  return it == meta_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

void MemoryBackend::put_meta(std::string_view name, ByteView record) {
  std::lock_guard lock(mutex_);
  if (meta_.size() >= kMaxMetaRecords && !meta_.count(name)) {
    auto victim = meta_.begin();
    while (victim != meta_.end() && is_lasting_meta(victim->first)) ++victim;
    if (victim != meta_.end()) meta_.erase(victim);
  }
  meta_.insert_or_assign(std::string(name), std::string(record.str()));
}

}  // namespace progcache
