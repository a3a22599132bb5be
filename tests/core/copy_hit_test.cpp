// Cache::copy_hit, the copy of a memory hit made while the store holds the record: the bytes
// stored, counted as a get counts them, a use for recency whatever the size, and a large payload
// copied without holding up the store's other threads.
#include "core/copy_hit.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using progcache::ByteView;
using progcache::Cache;
using progcache::CacheOptions;

namespace {

ByteView view(const std::string &s) {
  return ByteView(std::string_view(s));
}

std::string copy_of(Cache &cache, const std::string &key, bool *hit) {
  std::string out;
  *hit = cache.copy_hit(view(key), [&out](ByteView payload) {
    out.assign(reinterpret_cast<const char *>(payload.data), payload.size);
  });
  return out;
}

TEST(CopyHit, TheStoredBytesCountedAsAGetCountsThem) {
  auto cache = Cache::open("memory:", CacheOptions{});
  ASSERT_TRUE(cache->copies_hits());
  for (const size_t size : {size_t(0), size_t(5), size_t(4096), size_t(64 * 1024)}) {
    SCOPED_TRACE(size);
    std::string value(size, 'v');
    for (size_t i = 0; i < size; ++i) value[i] = char(i * 31 + size);
    cache->put(view("k"), view(value));
    bool hit = false;
    EXPECT_EQ(copy_of(*cache, "k", &hit), value);
    EXPECT_TRUE(hit);
  }
  bool hit = true;
  EXPECT_EQ(copy_of(*cache, "absent", &hit), "");
  EXPECT_FALSE(hit);
  const auto stats = cache->stats();
  EXPECT_EQ(stats.hits, 4u);
  EXPECT_EQ(stats.bytes_read, 5u + 4096u + 64u * 1024u);
  EXPECT_EQ(stats.misses, 1u);
}

TEST(CopyHit, AHitIsAUseWhateverItsSize) {
  for (const size_t size : {size_t(1024), size_t(20 * 1024)}) {  // under the lock, pinned
    SCOPED_TRACE(size);
    CacheOptions options;
    options.max_size_bytes = 3 * size;
    auto cache = Cache::open("memory:", options);
    const std::string value(size, 'x');
    for (const char *key : {"a", "b", "c"}) cache->put(view(key), view(value));
    bool hit = false;
    (void)copy_of(*cache, "a", &hit);  // a is now more recent than b
    ASSERT_TRUE(hit);
    cache->put(view("d"), view(value));
    (void)copy_of(*cache, "b", &hit);
    EXPECT_FALSE(hit) << "the least recently used entry was b";
    (void)copy_of(*cache, "a", &hit);
    EXPECT_TRUE(hit);
  }
}

// The copier starts a put on another thread and waits for it: a copy made under the store's lock
// would keep that put waiting until the copier gave up.
TEST(CopyHit, ALargePayloadIsCopiedWithoutHoldingUpTheStore) {
  auto cache = Cache::open("memory:", CacheOptions{});
  const std::string big(64 * 1024, 'b');
  cache->put(view("big"), view(big));
  std::future<void> put;  // waited for after copy_hit: a put the lock holds up ends after it
  bool put_done = false;
  std::string bytes;
  ASSERT_TRUE(cache->copy_hit(view("big"), [&](ByteView payload) {
    put = std::async(std::launch::async, [&] { cache->put(view("other"), view("x")); });
    put_done = put.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    bytes.assign(reinterpret_cast<const char *>(payload.data), payload.size);
  }));
  put.wait();
  EXPECT_TRUE(put_done) << "the store was locked while a 64 KiB payload was copied";
  EXPECT_EQ(bytes, big);
}

// Hits are counted by the store under its lock (a load and a store, no locked add): threads
// hitting at once, with stats read meanwhile, must lose none of them.
TEST(CopyHit, HitsFromManyThreadsAreAllCounted) {
  auto cache = Cache::open("memory:", CacheOptions{});
  const std::string small(100, 's'), large(20 * 1024, 'l');  // under the lock, pinned
  cache->put(view("small"), view(small));
  cache->put(view("large"), view(large));
  constexpr int kThreads = 4, kHits = 5000;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    uint64_t last = 0;
    while (!done.load()) {
      const uint64_t now = cache->stats().hits;
      EXPECT_GE(now, last) << "a total went backwards";
      last = now;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kHits; ++i) {
        bool hit = false;
        const std::string &expected = (i + t) % 2 ? small : large;
        EXPECT_EQ(copy_of(*cache, (i + t) % 2 ? "small" : "large", &hit), expected);
        EXPECT_TRUE(hit);
      }
    });
  for (auto &t : threads) t.join();
  done = true;
  reader.join();
  const auto stats = cache->stats();
  EXPECT_EQ(stats.hits, uint64_t(kThreads) * kHits);
  EXPECT_EQ(stats.bytes_read, uint64_t(kThreads) * kHits / 2 * (small.size() + large.size()));
}

}  // namespace
