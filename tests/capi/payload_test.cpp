// The blocks pcache_get hands over and pcache_free takes back: a thread keeps the last block it
// released for its next copy or record read (util/spare_block.hpp), so these check that a reused
// block never shows a caller's scribbles or another value's bytes, whatever the sizes, the
// order of frees and the thread that frees; and that pcache_free refuses a pointer that is not
// a live payload.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace testutil;

namespace {

// Values of sizes around the kept block's limit (64 KiB) and the copy prefix, each byte known.
std::string value_for(size_t size, char seed) {
  std::string v(size, '\0');
  for (size_t i = 0; i < size; ++i) v[i] = char(seed + i % 23);
  return v;
}

struct Entry {
  std::string key;
  std::string value;
};

std::vector<Entry> put_entries(pcache *c) {
  std::vector<Entry> out;
  const size_t sizes[] = {0, 1, 100, 3000, 4096, 5000, 65536 - 32, 65536, 70000};
  char seed = 'a';
  for (size_t size : sizes) {
    out.push_back({"k" + std::to_string(size), value_for(size, seed++)});
    EXPECT_EQ(pcache_put(c, out.back().key.data(), out.back().key.size(), out.back().value.data(),
                         out.back().value.size()),
              PCACHE_OK);
  }
  return out;
}

// Gets e, checks its bytes, scribbles over them as a caller may, and returns the block.
void *get_checked(pcache *c, const Entry &e) {
  void *data = nullptr;
  size_t size = 0;
  EXPECT_EQ(pcache_get(c, e.key.data(), e.key.size(), &data, &size), PCACHE_OK) << e.key;
  EXPECT_NE(data, nullptr);
  EXPECT_EQ(std::string(static_cast<const char *>(data), size), e.value) << e.key;
  std::memset(data, 0x5a, size);
  return data;
}

}  // namespace

TEST(Payload, ReusedBlocksHoldOnlyTheirOwnValue) {
  TempDir d;
  // Memory hands over copies; file-stream and SQLite the blocks they read into.
  for (const std::string &uri :
       {std::string("memory:"), "filestream:" + (d / "fs"), "sqlite:" + (d / "c.db")}) {
    SCOPED_TRACE(uri);
    pcache *c = nullptr;
    ASSERT_EQ(pcache_open(uri.c_str(), nullptr, &c), PCACHE_OK);
    const std::vector<Entry> entries = put_entries(c);
    // Every size after every other, freed at once, then two held and freed in either order.
    for (const Entry &a : entries)
      for (const Entry &b : entries) {
        pcache_free(get_checked(c, a));
        pcache_free(get_checked(c, b));
        void *x = get_checked(c, a), *y = get_checked(c, b);
        pcache_free(y);
        pcache_free(x);
      }
    pcache_close(c);
  }
}

TEST(Payload, BlocksFreedOnAnotherThreadAreSafe) {
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  const std::vector<Entry> entries = put_entries(c);
  std::mutex mutex;
  std::vector<void *> handed;  // got by the getters, freed by the others
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        void *mine = get_checked(c, entries[size_t(i * 7 + t) % entries.size()]);
        void *theirs = nullptr;
        {
          std::lock_guard lock(mutex);
          handed.push_back(mine);
          if (t % 2 == 1 && handed.size() > 1) {
            theirs = handed.front();
            handed.erase(handed.begin());
          }
        }
        pcache_free(theirs);
      }
    });
  for (auto &t : threads) t.join();
  for (void *p : handed) pcache_free(p);
  pcache_close(c);
}

// A thread_local made before the library's spare is destroyed after it: its destructor's
// pcache_free comes when the thread's spare is gone, twice (a kept block, then one more).
TEST(Payload, AFreeFromALaterThreadLocalDestructorIsSafe) {
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  const std::vector<Entry> entries = put_entries(c);
  struct Holder {
    std::vector<void *> blocks;
    ~Holder() {
      for (void *p : blocks) pcache_free(p);
    }
  };
  std::thread([&] {
    thread_local Holder holder;  // constructed before the spare: destroyed after it
    holder.blocks.push_back(get_checked(c, entries[3]));
    holder.blocks.push_back(get_checked(c, entries[4]));
    pcache_free(get_checked(c, entries[2]));  // the spare now holds a block
  }).join();
  pcache_close(c);
}

// x86 copies a destination a few bytes past its source's offset in a 4 KiB page many times
// slower (4 KiB aliasing): a memory hit's copy of 1 KiB or more starts at its source's page
// offset, wherever the thread's block lies; smaller ones right after the block's header.
TEST(Payload, LargeCopiesStartAtTheirSourcesPageOffset) {
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  const std::vector<Entry> entries = put_entries(c);
  for (int round = 0; round < 3; ++round)  // fresh blocks, then the kept one reused
    for (const Entry &e : entries) {
      SCOPED_TRACE(e.key);
      pcache_view view;
      ASSERT_EQ(pcache_get_view(c, e.key.data(), e.key.size(), &view), PCACHE_OK);
      void *copy = get_checked(c, e);
      const uintptr_t distance =
          reinterpret_cast<uintptr_t>(copy) - reinterpret_cast<uintptr_t>(view.data);
      if (e.value.size() >= 1024) {
        EXPECT_EQ(distance % 4096, 0u);
      }
      pcache_view_release(&view);
      pcache_free(copy);
    }
  pcache_close(c);
}

// A hit of up to 64 KiB lands in the block the thread freed last: a memory hit's copy (with its
// page-offset gap), and the record a file-stream or SQLite hit reads (util/spare_block.hpp). The
// second get of the same value returns the first one's pointer even though the heap's own free
// chunks of those sizes have been taken meanwhile.
TEST(Payload, HitsUpTo64KiBReuseTheThreadsBlock) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "no block is kept under AddressSanitizer";
#endif
  TempDir d;
  for (const std::string &uri :
       {std::string("memory:"), "filestream:" + (d / "fs"), "sqlite:" + (d / "c.db")}) {
    pcache *c = nullptr;
    ASSERT_EQ(pcache_open(uri.c_str(), nullptr, &c), PCACHE_OK);
    for (size_t size : {size_t(3000), size_t(62000), size_t(65536)}) {
      SCOPED_TRACE(uri + " " + std::to_string(size));
      const std::string value = value_for(size, 'q');
      ASSERT_EQ(pcache_put(c, "v", 1, value.data(), value.size()), PCACHE_OK);
      void *first = get_checked(c, {"v", value});
      pcache_free(first);
      // What the heap would hand out again: a copy's block, and a record's (the entry's header,
      // key and padding, 80 bytes, and the value); escaping, so that the compiler keeps them.
      static void *volatile taken[2];
      taken[0] = std::malloc(size + 4096 + 32);
      taken[1] = std::malloc(80 + size);
      void *second = get_checked(c, {"v", value});
      EXPECT_EQ(second, first);
      pcache_free(second);
      std::free(taken[0]);
      std::free(taken[1]);
    }
    pcache_close(c);
  }
}

TEST(PayloadDeathTest, FreeingAnythingButALivePayloadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  ASSERT_EQ(pcache_put(c, "k", 1, "value", 5), PCACHE_OK);
  EXPECT_DEATH(
      {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "k", 1, &data, &size) != PCACHE_OK) std::exit(0);
        pcache_free(data);
        pcache_free(data);  // twice
      },
      "");
  EXPECT_DEATH(
      {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "k", 1, &data, &size) != PCACHE_OK) std::exit(0);
        std::memset(static_cast<char *>(data) - 32, 0xff, 8);  // a copy's block size, overwritten
        pcache_free(data);
      },
      "");
  const std::string large = value_for(5000, 'x');
  ASSERT_EQ(pcache_put(c, "large", 5, large.data(), large.size()), PCACHE_OK);
  EXPECT_DEATH(
      {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "large", 5, &data, &size) != PCACHE_OK) std::exit(0);
        char *base = static_cast<char *>(data) - 4096 - 32;  // a block further back than any copy's
        std::memcpy(static_cast<char *>(data) - 8, &base, sizeof base);
        pcache_free(data);
      },
      "");
  EXPECT_DEATH(
      {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "large", 5, &data, &size) != PCACHE_OK) std::exit(0);
        char *base =
            static_cast<char *>(data) - 48;  // within reach, but not where the block starts
        std::memcpy(static_cast<char *>(data) - 8, &base, sizeof base);
        pcache_free(data);
      },
      "");
  pcache_close(c);
  // A record read from storage is handed over in its own block, behind the same prefix.
  TempDir d;
  ASSERT_EQ(pcache_open(("sqlite:" + (d / "c.db")).c_str(), nullptr, &c), PCACHE_OK);
  ASSERT_EQ(pcache_put(c, "large", 5, large.data(), large.size()), PCACHE_OK);
  EXPECT_DEATH(
      {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "large", 5, &data, &size) != PCACHE_OK) std::exit(0);
        std::memset(static_cast<char *>(data) - 32, 0xff, 8);  // the block's size, overwritten
        pcache_free(data);
      },
      "");
  EXPECT_DEATH(
      {
        auto *block = static_cast<char *>(std::calloc(64, 1));
        pcache_free(block + 32);  // never from pcache_get
      },
      "");
  pcache_close(c);
}
