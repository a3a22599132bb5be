// The backend contract, written once against the C API and run on every backend.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "backends.hpp"

using testutil::check_value;
using testutil::Handle;
using testutil::make_value;
using testutil::TempDir;

class Contract : public ::testing::TestWithParam<BackendCase> {
 protected:
  std::string uri() const { return GetParam().uri(dir_); }
  TempDir dir_;
};

TEST_P(Contract, PutThenGetReturnsTheSameBytes) {
  Handle c(uri());
  const std::string v = make_value(1, 1, 5000);
  ASSERT_EQ(c.put("k", v), PCACHE_OK) << pcache_last_error();
  std::string got;
  ASSERT_EQ(c.get("k", &got), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(got, v);
}

TEST_P(Contract, MissIsNotFoundWithNullData) {
  Handle c(uri());
  void *data = reinterpret_cast<void *>(1);
  size_t size = 7;
  EXPECT_EQ(pcache_get(c, "nope", 4, &data, &size), PCACHE_NOT_FOUND);
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(size, 0u);
  EXPECT_STREQ(pcache_last_error(), "");
}

TEST_P(Contract, PutReplacesTheOldValue) {
  Handle c(uri());
  ASSERT_EQ(c.put("k", "first value"), PCACHE_OK);
  ASSERT_EQ(c.put("k", "second"), PCACHE_OK);
  std::string got;
  ASSERT_EQ(c.get("k", &got), PCACHE_OK);
  EXPECT_EQ(got, "second");
  EXPECT_EQ(c.count(), 1u);
  EXPECT_EQ(c.size(), 6u);
}

TEST_P(Contract, EmptyValueIsStoredAndReturnedNonNull) {
  Handle c(uri());
  ASSERT_EQ(pcache_put(c, "e", 1, nullptr, 0), PCACHE_OK) << pcache_last_error();
  void *data = nullptr;
  size_t size = 99;
  ASSERT_EQ(pcache_get(c, "e", 1, &data, &size), PCACHE_OK);
  EXPECT_NE(data, nullptr);
  EXPECT_EQ(size, 0u);
  pcache_free(data);
}

TEST_P(Contract, BinaryKeysWithNulBytesAreDistinct) {
  Handle c(uri());
  const std::string k1("a\0b", 3), k2("a\0c", 3), k3("a", 1);
  ASSERT_EQ(c.put(k1, "one"), PCACHE_OK);
  ASSERT_EQ(c.put(k2, "two"), PCACHE_OK);
  ASSERT_EQ(c.put(k3, "three"), PCACHE_OK);
  std::string got;
  ASSERT_EQ(c.get(k1, &got), PCACHE_OK);
  EXPECT_EQ(got, "one");
  ASSERT_EQ(c.get(k2, &got), PCACHE_OK);
  EXPECT_EQ(got, "two");
  ASSERT_EQ(c.get(k3, &got), PCACHE_OK);
  EXPECT_EQ(got, "three");
}

TEST_P(Contract, KeySizeLimits) {
  Handle c(uri());
  EXPECT_EQ(pcache_put(c, "x", 0, "v", 1), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "empty"), nullptr) << pcache_last_error();
  const std::string big(PCACHE_MAX_KEY_SIZE, '\xab');
  ASSERT_EQ(c.put(big, "v"), PCACHE_OK) << pcache_last_error();
  std::string got;
  EXPECT_EQ(c.get(big, &got), PCACHE_OK);
  EXPECT_EQ(got, "v");
  const std::string too_big(PCACHE_MAX_KEY_SIZE + 1, 'k');
  EXPECT_EQ(c.put(too_big, "v"), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(c.get(too_big, &got), PCACHE_ERR_INVALID_ARG);
}

TEST_P(Contract, OneMebibyteValue) {
  Handle c(uri());
  const std::string v = make_value(7, 7, 1 << 20);
  ASSERT_EQ(c.put("big", v), PCACHE_OK);
  std::string got;
  ASSERT_EQ(c.get("big", &got), PCACHE_OK);
  EXPECT_TRUE(got == v);
}

TEST_P(Contract, DeleteReportsWhetherSomethingWasRemoved) {
  Handle c(uri());
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  EXPECT_EQ(pcache_delete(c, "k", 1), PCACHE_OK);
  EXPECT_EQ(pcache_delete(c, "k", 1), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.get("k", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.count(), 0u);
  EXPECT_EQ(c.size(), 0u);
}

TEST_P(Contract, CountSizeAndClear) {
  Handle c(uri());
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), std::string(i, 'x')), PCACHE_OK);
  EXPECT_EQ(c.count(), 20u);
  EXPECT_EQ(c.size(), 190u);
  ASSERT_EQ(pcache_clear(c), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(c.count(), 0u);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.get("k3", nullptr), PCACHE_NOT_FOUND);
  ASSERT_EQ(c.put("after", "clear"), PCACHE_OK);
  EXPECT_EQ(c.count(), 1u);
}

TEST_P(Contract, NullArgumentsAreInvalidNotCrashes) {
  Handle c(uri());
  void *data;
  size_t size;
  uint64_t n;
  EXPECT_EQ(pcache_get(nullptr, "k", 1, &data, &size), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::string(pcache_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(pcache_get(c, nullptr, 1, &data, &size), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_get(c, "k", 1, nullptr, &size), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_get(c, "k", 1, &data, nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_put(c, "k", 1, nullptr, 3), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_put(nullptr, "k", 1, "v", 1), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_delete(nullptr, "k", 1), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_count(c, nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_size(nullptr, &n), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_clear(nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_get_view(c, "k", 1, nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_get_stats(c, nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(c.count(), 0u);
}

TEST_P(Contract, GetIntoCallerBuffer) {
  Handle c(uri());
  ASSERT_EQ(c.put("k", "0123456789"), PCACHE_OK);
  char buf[16];
  size_t size = 0;
  EXPECT_EQ(pcache_get_into(c, "k", 1, buf, 4, &size), PCACHE_ERR_TOO_LARGE);
  EXPECT_EQ(size, 10u);
  ASSERT_EQ(pcache_get_into(c, "k", 1, buf, sizeof buf, &size), PCACHE_OK);
  EXPECT_EQ(std::string(buf, size), "0123456789");
  EXPECT_EQ(pcache_get_into(c, "zz", 2, buf, sizeof buf, &size), PCACHE_NOT_FOUND);
  EXPECT_EQ(size, 0u);
}

TEST_P(Contract, ViewStaysValidAfterReplaceAndDelete) {
  Handle c(uri());
  const std::string v = make_value(3, 3, 70000);
  ASSERT_EQ(c.put("k", v), PCACHE_OK);
  pcache_view view;
  ASSERT_EQ(pcache_get_view(c, "k", 1, &view), PCACHE_OK);
  ASSERT_EQ(c.put("k", "replacement"), PCACHE_OK);
  ASSERT_EQ(pcache_delete(c, "k", 1), PCACHE_OK);
  EXPECT_EQ(std::string(static_cast<const char *>(view.data), view.size), v);
  pcache_view_release(&view);
  EXPECT_EQ(view.data, nullptr);
  pcache_view_release(&view);  // a released (zeroed) view is a no-op
  EXPECT_EQ(pcache_get_view(c, "k", 1, &view), PCACHE_NOT_FOUND);
  EXPECT_EQ(view.token, nullptr);
}

TEST_P(Contract, StatsCountEveryOperation) {
  Handle c(uri());
  ASSERT_EQ(c.put("a", "12345"), PCACHE_OK);
  ASSERT_EQ(c.get("a", nullptr), PCACHE_OK);
  ASSERT_EQ(c.get("b", nullptr), PCACHE_NOT_FOUND);
  ASSERT_EQ(pcache_delete(c, "a", 1), PCACHE_OK);
  const pcache_stats s = c.stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.deletes, 1u);
  EXPECT_EQ(s.bytes_written, 5u);
  EXPECT_EQ(s.bytes_read, 5u);
  EXPECT_EQ(s.corrupt, 0u);
  pcache_stats small{};
  small.struct_size = 8;
  EXPECT_EQ(pcache_get_stats(c, &small), PCACHE_ERR_INVALID_ARG);
}

// Hits are counted per thread (util/thread_shards.hpp): the handle's totals still hold every
// hit and every byte, from pcache_get and pcache_get_into alike.
TEST_P(Contract, StatsCountEveryHitFromManyThreads) {
  Handle c(uri());
  ASSERT_EQ(c.put("a", "12345"), PCACHE_OK);
  constexpr int kThreads = 6, kGets = 150;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      char buf[8];
      for (int i = 0; i < kGets; ++i) {
        std::string v;
        size_t size = 0;
        if (c.get("a", &v) != PCACHE_OK || v != "12345") ++bad;
        if (pcache_get_into(c, "a", 1, buf, sizeof buf, &size) != PCACHE_OK || size != 5) ++bad;
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(bad.load(), 0) << pcache_last_error();
  const pcache_stats s = c.stats();
  EXPECT_EQ(s.hits, uint64_t(2 * kThreads * kGets));
  EXPECT_EQ(s.bytes_read, uint64_t(5 * 2 * kThreads * kGets));
  EXPECT_EQ(s.misses, 0u);
}

TEST_P(Contract, LeastRecentlyUsedIsEvictedFirst) {
  if (!GetParam().own_cap) GTEST_SKIP() << "evicts by its own policy (docs/backends.md)";
  Handle c(uri(), 3000);
  const std::string v(1000, 'v');
  ASSERT_EQ(c.put("a", v), PCACHE_OK);
  ASSERT_EQ(c.put("b", v), PCACHE_OK);
  ASSERT_EQ(c.put("c", v), PCACHE_OK);
  ASSERT_EQ(c.get("a", nullptr), PCACHE_OK);  // a is now more recent than b and c
  ASSERT_EQ(c.put("d", v), PCACHE_OK);
  EXPECT_EQ(c.get("b", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.get("a", nullptr), PCACHE_OK);
  EXPECT_EQ(c.get("c", nullptr), PCACHE_OK);
  EXPECT_EQ(c.get("d", nullptr), PCACHE_OK);
  EXPECT_EQ(c.size(), 3000u);
  EXPECT_EQ(c.stats().evictions, 1u);
  // A bigger put evicts as many as needed, oldest first (a was touched after c above).
  ASSERT_EQ(c.put("e", std::string(2500, 'e')), PCACHE_OK);
  EXPECT_EQ(c.get("c", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.get("a", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.get("e", nullptr), PCACHE_OK);
  EXPECT_LE(c.size(), 3000u);
}

TEST_P(Contract, ValueLargerThanTheCapIsRefusedAndEvictsNothing) {
  Handle c(uri(), 1000);
  ASSERT_EQ(c.put("a", std::string(600, 'a')), PCACHE_OK);
  EXPECT_EQ(c.put("huge", std::string(1001, 'h')), PCACHE_ERR_TOO_LARGE);
  EXPECT_NE(std::strstr(pcache_last_error(), "max_size_bytes"), nullptr);
  EXPECT_EQ(c.get("a", nullptr), PCACHE_OK);
  EXPECT_EQ(c.get("huge", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.stats().evictions, 0u);
}

TEST_P(Contract, ManyThreadsMixedOperationsNeverTornOrLost) {
  Handle c(uri());
  constexpr int kThreads = 8, kKeys = 16, kOps = 400;
  std::atomic<int> bad{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint32_t state = uint32_t(t) * 7919u + 1;
      for (int i = 0; i < kOps; ++i) {
        state = state * 1103515245u + 12345u;
        const uint32_t k = (state >> 8) % kKeys;
        const std::string key = "key" + std::to_string(k);
        const int op = int((state >> 20) % 10);
        if (op < 5) {
          std::string v;
          const pcache_status st = c.get(key, &v);
          uint32_t id = 0;
          if (st == PCACHE_OK) {
            ++hits;
            if (!check_value(v, &id) || id != k) ++bad;
          } else if (st != PCACHE_NOT_FOUND) {
            ++bad;
          }
        } else if (op < 9) {
          if (c.put(key, make_value(k, state, 100 + state % 5000)) != PCACHE_OK) ++bad;
        } else {
          const pcache_status st = pcache_delete(c, key.data(), key.size());
          if (st != PCACHE_OK && st != PCACHE_NOT_FOUND) ++bad;
        }
      }
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(bad.load(), 0) << pcache_last_error();
  EXPECT_GT(hits.load(), 0);
  // Nothing lost: every key put last is there with a self-consistent value.
  for (int k = 0; k < kKeys; ++k)
    ASSERT_EQ(c.put("final" + std::to_string(k), make_value(k, 1, 64)), PCACHE_OK);
  for (int k = 0; k < kKeys; ++k) {
    std::string v;
    ASSERT_EQ(c.get("final" + std::to_string(k), &v), PCACHE_OK);
    EXPECT_TRUE(check_value(v));
  }
}

TEST_P(Contract, ReopenSeesWhatWasStoredIfPersistent) {
  {
    Handle c(uri());
    ASSERT_EQ(c.put("persist", "me"), PCACHE_OK);
  }
  Handle c(uri());
  std::string got;
  if (GetParam().persistent) {
    ASSERT_EQ(c.get("persist", &got), PCACHE_OK);
    EXPECT_EQ(got, "me");
  } else {
    EXPECT_EQ(c.get("persist", &got), PCACHE_NOT_FOUND);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Contract, ::testing::ValuesIn(kBackends),
                         [](const auto &info) { return std::string(info.param.name); });

class LargeValues : public ::testing::TestWithParam<BackendCase> {};

TEST_P(LargeValues, A256MebibyteValueRoundTripsAndTheCapStillHolds) {
  TempDir d;
  const std::string uri = GetParam().uri(d);
  const size_t kSize = size_t(256) << 20;
  std::string v(kSize, '\0');
  for (size_t i = 0; i < kSize; i += 4096) v[i] = char(i / 4096);
  v.back() = 'z';
  {
    Handle c(uri);
    ASSERT_EQ(c.put("big", v), PCACHE_OK) << pcache_last_error();
    std::string got;
    ASSERT_EQ(c.get("big", &got), PCACHE_OK) << pcache_last_error();
    EXPECT_TRUE(got == v);
    EXPECT_EQ(c.size(), kSize);
  }
  Handle capped(uri, kSize - 1);  // reopening with a smaller cap evicts it
  EXPECT_EQ(capped.count(), 0u);
  EXPECT_EQ(capped.put("big", v), PCACHE_ERR_TOO_LARGE);
}

INSTANTIATE_TEST_SUITE_P(Persistent, LargeValues, ::testing::ValuesIn(persistent_backends()),
                         [](const auto &info) { return std::string(info.param.name); });
