// Per-thread counter lines (util/thread_shards.hpp): every live thread holds an index no other
// live thread holds, an exited thread's index is taken again with its sums kept, and threads
// beyond the indices still count every add. A line shared by two live threads would lose adds
// (each writes back what it read): two cores seldom show that in a count, so the first test
// checks the indices themselves.
#include "util/thread_shards.hpp"

#include <gtest/gtest.h>

#include <barrier>
#include <set>
#include <thread>
#include <vector>

using progcache::kThreadShards;
using progcache::ShardedCounters;
using progcache::thread_shard;

namespace {

TEST(ThreadShards, LiveThreadsHoldDistinctIndices) {
  constexpr size_t kThreads = 16;
  std::vector<size_t> index(kThreads);
  std::barrier all_hold(kThreads);  // no thread exits (giving its index back) before all took one
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      index[t] = thread_shard();
      all_hold.arrive_and_wait();
      EXPECT_EQ(thread_shard(), index[t]) << "an index is the thread's for its whole life";
    });
  for (auto &t : threads) t.join();
  const std::set<size_t> distinct(index.begin(), index.end());
  EXPECT_EQ(distinct.size(), kThreads);
  for (size_t i : index) EXPECT_LT(i, kThreadShards);
}

TEST(ThreadShards, AnExitedThreadsIndexIsTakenAgainWithItsSums) {
  ShardedCounters<2> counters;
  size_t first = kThreadShards, second = kThreadShards;
  std::thread([&] {
    first = thread_shard();
    for (int i = 0; i < 1000; ++i) counters.add({1, 7});
  }).join();
  std::thread([&] {
    second = thread_shard();
    for (int i = 0; i < 500; ++i) counters.add({1, 3});
  }).join();
  EXPECT_EQ(second, first) << "the lowest free index: the one the first thread gave back";
  EXPECT_EQ(counters.total(0), 1500u);
  EXPECT_EQ(counters.total(1), 7000u + 1500u);
}

TEST(ThreadShards, MoreLiveThreadsThanIndicesStillCountEveryAdd) {
  constexpr size_t kThreads = kThreadShards + 16;
  constexpr uint64_t kAdds = 2000;
  ShardedCounters<2> counters;
  std::atomic<size_t> without_index{0};
  std::barrier all_live(kThreads);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      counters.add({0, 0});  // takes an index, or finds none left
      if (thread_shard() == kThreadShards) ++without_index;
      all_live.arrive_and_wait();
      for (uint64_t i = 0; i < kAdds; ++i) counters.add({1, t});
    });
  for (auto &t : threads) t.join();
  EXPECT_GE(without_index.load(), kThreads - kThreadShards);
  EXPECT_EQ(counters.total(0), kThreads * kAdds);
  EXPECT_EQ(counters.total(1), kAdds * (kThreads * (kThreads - 1) / 2));
}

}  // namespace
