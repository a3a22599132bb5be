// An index from string keys to small values that know their own key, by open addressing: a
// power-of-two table of {hash, value} probed linearly, kept under half full, and erased by
// shifting the probe run back (no tombstones, so lookups never slow down with churn).
// std::unordered_map spent a memory hit's largest share on a division by a prime bucket count
// and a node walk; here a lookup is one hash, a mask and, almost always, one key comparison.
// Not thread-safe: the owner locks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace progcache {

// Value: copyable and cheap (an iterator or a pointer). KeyOf: std::string_view(const Value &).
// Hash: uint64_t(std::string_view); replaceable so that tests can make every key collide.
template <typename Value, typename KeyOf, typename Hash = std::hash<std::string_view>>
class OpenIndex {
 public:
  explicit OpenIndex(KeyOf key_of = KeyOf(), Hash hash = Hash())
      : key_of_(std::move(key_of)), hash_(std::move(hash)) {}

  size_t size() const { return size_; }

  // The value stored under key, or nullptr. The pointer lasts until the next insert or erase.
  Value *find(std::string_view key) { return find(key, hash_of(key)); }
  // The same with key's hash_of(key), computed beforehand (before the owner's lock, so that its
  // latency overlaps the lock's).
  Value *find(std::string_view key, uint64_t hash) {
    const size_t i = slot_of(key, hash);
    return i == kNone ? nullptr : &slots_[i].value;
  }
  // What find hashes key to; depends on nothing but key (thread-safe when Hash is).
  uint64_t hash_of(std::string_view key) const {
    const uint64_t h = hash_(key);
    return h == kEmpty ? 1 : h;
  }

  // Adds value, whose key must not be in the index already.
  void insert(Value value) {
    const uint64_t hash = hash_of(key_of_(value));
    insert(std::move(value), hash);
  }
  // The same with its key's hash_of.
  void insert(Value value, uint64_t hash) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(hash, std::move(value));
    ++size_;
  }

  // Removes key's value; false if it was not there.
  bool erase(std::string_view key) { return erase(key, hash_of(key)); }
  // The same with key's hash_of.
  bool erase(std::string_view key, uint64_t hash) {
    const size_t i = slot_of(key, hash);
    if (i == kNone) return false;
    erase_slot(i);
    --size_;
    return true;
  }

  // Asks the CPU to bring the slot where a lookup of a key of this hash_of starts into its
  // cache, for a lookup or erase soon after (a hint: nothing changes).
  void prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask()]);
  }

  void clear() {
    slots_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    Value value{};
    uint64_t hash = kEmpty;
  };
  static constexpr uint64_t kEmpty = 0;
  static constexpr size_t kNone = ~size_t(0);

  size_t mask() const { return slots_.size() - 1; }

  size_t slot_of(std::string_view key, uint64_t h) const {
    if (size_ == 0) return kNone;
    for (size_t i = h & mask();; i = (i + 1) & mask()) {
      const Slot &s = slots_[i];
      if (s.hash == kEmpty) return kNone;
      if (s.hash == h && key_of_(s.value) == key) return i;
    }
  }

  void place(uint64_t h, Value value) {
    size_t i = h & mask();
    while (slots_[i].hash != kEmpty) i = (i + 1) & mask();
    slots_[i] = Slot{std::move(value), h};
  }

  void grow() {
    std::vector<Slot> old(std::max<size_t>(16, 2 * slots_.size()));
    old.swap(slots_);
    for (Slot &s : old)
      if (s.hash != kEmpty) place(s.hash, std::move(s.value));
  }

  // Empties slot i, then moves back each later slot of the run whose home is at or before the
  // hole (cyclically), so that every remaining key is still reached from its home.
  void erase_slot(size_t i) {
    for (size_t j = i;;) {
      slots_[i] = Slot{};
      for (;;) {
        j = (j + 1) & mask();
        if (slots_[j].hash == kEmpty) return;
        const size_t home = slots_[j].hash & mask();
        const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) break;
      }
      slots_[i] = std::move(slots_[j]);
      i = j;
    }
  }

  KeyOf key_of_;
  Hash hash_;
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace progcache
