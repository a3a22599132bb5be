#include "util/thread_shards.hpp"

#include "util/thread_state.hpp"

namespace progcache {
namespace {

static_assert(kThreadShards == 64, "the indices held are one 64-bit word");
std::atomic<uint64_t> g_held{0};  // bit i: index i is some live thread's

// A thread's index, taken on its first count and given back at its exit. The release and
// acquire order the last owner's counts before the next owner's.
struct ShardLease {
  size_t index = kThreadShards;
  ShardLease() noexcept {
    uint64_t held = g_held.load(std::memory_order_relaxed);
    while (~held != 0) {
      const int free_bit = __builtin_ctzll(~held);
      if (g_held.compare_exchange_weak(held, held | (uint64_t(1) << free_bit),
                                       std::memory_order_acquire, std::memory_order_relaxed)) {
        index = size_t(free_bit);
        return;
      }
    }
  }
  ~ShardLease() {
    if (index < kThreadShards) g_held.fetch_and(~(uint64_t(1) << index), std::memory_order_release);
  }
  ShardLease(const ShardLease &) = delete;
  ShardLease &operator=(const ShardLease &) = delete;
};

}  // namespace

size_t thread_shard() noexcept {
  return ThreadState<ShardLease>::get().index;
}

}  // namespace progcache
