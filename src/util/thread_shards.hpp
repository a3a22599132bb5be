// Counters that a hit adds to without an atomic read-modify-write.
//
// A locked add costs a memory hit about as much as its lookup (two of them were a sixth of a
// 4 KiB pcache_get on a memory cache). Each live thread leases a small index of its own
// (thread_shard()), and a ShardedCounters keeps one cache line of counters per index: only the
// thread holding an index writes its line, with a plain load and store, and a reader sums the
// lines. An index goes back when its thread exits (util/thread_state.hpp), and a thread that
// takes it later continues its sums, so no count is ever lost. Threads beyond kThreadShards live
// at once add to one shared line with atomic adds. In a fork's child the indices of the threads
// that did not survive stay taken (none is ever shared): its new threads may count through the
// shared line.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace progcache {

inline constexpr size_t kThreadShards = 64;

// The calling thread's index, under kThreadShards and held by no other live thread; or
// kThreadShards when every index is held. Lock-free after the thread's first call.
size_t thread_shard() noexcept;

// N counters that only grow, added to by any thread and read as totals.
template <size_t N>
class ShardedCounters {
 public:
  // Adds delta[i] to counter i.
  void add(const std::array<uint64_t, N> &delta) noexcept {
    const size_t shard = thread_shard();
    Line &line = lines_[shard];
    if (shard < kThreadShards) {  // this thread's own line: nobody else writes it
      for (size_t i = 0; i < N; ++i)
        line.v[i].store(line.v[i].load(std::memory_order_relaxed) + delta[i],
                        std::memory_order_relaxed);
    } else {
      for (size_t i = 0; i < N; ++i) line.v[i].fetch_add(delta[i], std::memory_order_relaxed);
    }
  }
  // Counter i's total. Adds that run at the same time may or may not be in it.
  uint64_t total(size_t i) const noexcept {
    uint64_t sum = 0;
    for (const Line &line : lines_) sum += line.v[i].load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) Line {
    std::array<std::atomic<uint64_t>, N> v{};
  };
  std::array<Line, kThreadShards + 1> lines_{};  // the last: threads without an index
};

}  // namespace progcache
