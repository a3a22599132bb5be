// Cache::copy_hit, the copy of a memory hit made while the store holds the record: the bytes
// stored, counted as a get counts them, a use for recency whatever the size, and a large payload
// copied without holding up the store's other threads.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "core/cache.hpp"

using progcache::ByteView;
using progcache::Cache;
using progcache::CacheOptions;

namespace {

ByteView view(const std::string &s) {
  return ByteView(std::string_view(s));
}

std::string copy_of(Cache &cache, const std::string &key, bool *hit) {
  std::string out;
  auto copy = [](void *o, ByteView payload) {
    static_cast<std::string *>(o)->assign(reinterpret_cast<const char *>(payload.data),
                                          payload.size);
  };
  *hit = cache.copy_hit(view(key), copy, &out);
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
  struct Copy {
    Cache *cache;
    std::future<void> put;  // waited for after copy_hit: a put the lock holds up ends after it
    bool put_done = false;
    std::string bytes;
  } c{cache.get(), {}, false, {}};
  auto copy = [](void *context, ByteView payload) {
    auto *to = static_cast<Copy *>(context);
    to->put = std::async(std::launch::async, [to] { to->cache->put(view("other"), view("x")); });
    to->put_done = to->put.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    to->bytes.assign(reinterpret_cast<const char *>(payload.data), payload.size);
  };
  ASSERT_TRUE(cache->copy_hit(view("big"), copy, &c));
  c.put.wait();
  EXPECT_TRUE(c.put_done) << "the store was locked while a 64 KiB payload was copied";
  EXPECT_EQ(c.bytes, big);
}

}  // namespace
