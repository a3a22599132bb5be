// Many processes on one persistent cache: races, clear, and writers killed with SIGKILL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "backends.hpp"
#include "proc_util.hpp"

using namespace testutil;

namespace {

// Counters shared with forked children.
struct Shared {
  std::atomic<uint64_t> bad_reads, errors, reads, hits;
};

Shared *make_shared_counters() {
  void *p =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return new (p) Shared{};
}

// The value of key id is a fixed function of the id, so any reader can check what it gets.
std::string fixed_value(uint32_t id) {
  return make_value(id, 0, 500 + (id * 997) % 3500);
}

class MultiProcess : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override { shared_ = make_shared_counters(); }
  void TearDown() override {
    if (shared_) ::munmap(shared_, sizeof(Shared));
  }
  std::string uri() const { return GetParam().uri(dir_); }
  TempDir dir_;
  Shared *shared_ = nullptr;
};

}  // namespace

TEST_P(MultiProcess, SameKeyFromEveryWriterLastWriteWinsNeverTorn) {
  constexpr int kProcs = 8, kOps = 150;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(spawn([&, p] {
      Handle c(uri());
      for (int i = 0; i < kOps; ++i) {
        if (c.put("shared", make_value(7, uint32_t(p * 100000 + i), 2000 + (i % 7) * 1000)) !=
            PCACHE_OK)
          shared_->errors++;
        std::string v;
        const pcache_status st = c.get("shared", &v);
        shared_->reads++;
        uint32_t id = 0;
        if (st != PCACHE_OK || !check_value(v, &id) || id != 7) shared_->bad_reads++;
      }
      return 0;
    }));
  }
  for (pid_t pid : pids) EXPECT_EQ(wait_for(pid), 0);
  EXPECT_EQ(shared_->bad_reads.load(), 0u);
  EXPECT_EQ(shared_->errors.load(), 0u);
  EXPECT_EQ(shared_->reads.load(), uint64_t(kProcs * kOps));
  Handle c(uri());
  std::string v;
  uint32_t seed = 0;
  ASSERT_EQ(c.get("shared", &v), PCACHE_OK);
  ASSERT_TRUE(check_value(v, nullptr, &seed));
  EXPECT_EQ(seed % 100000, uint32_t(kOps - 1));  // the final value is some writer's last write
  EXPECT_EQ(c.count(), 1u);
}

TEST_P(MultiProcess, DistinctKeysFromEveryWriterNothingLost) {
  constexpr int kProcs = 8, kKeys = 60;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p)
    pids.push_back(spawn([&, p] {
      Handle c(uri());
      for (int i = 0; i < kKeys; ++i)
        if (c.put("p" + std::to_string(p) + "k" + std::to_string(i),
                  fixed_value(uint32_t(p * kKeys + i))) != PCACHE_OK)
          shared_->errors++;
      return 0;
    }));
  for (pid_t pid : pids) EXPECT_EQ(wait_for(pid), 0);
  EXPECT_EQ(shared_->errors.load(), 0u);
  Handle c(uri());
  EXPECT_EQ(c.count(), uint64_t(kProcs * kKeys));
  for (int p = 0; p < kProcs; ++p)
    for (int i = 0; i < kKeys; ++i) {
      std::string v;
      ASSERT_EQ(c.get("p" + std::to_string(p) + "k" + std::to_string(i), &v), PCACHE_OK);
      EXPECT_EQ(v, fixed_value(uint32_t(p * kKeys + i)));
    }
}

TEST_P(MultiProcess, ReadersRacingWritersAndClearSeeWholeValuesOrMisses) {
  constexpr int kProcs = 8, kOps = 200, kKeys = 20;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p)
    pids.push_back(spawn([&, p] {
      Handle c(uri());
      std::mt19937 rng(uint32_t(p) + 1);
      for (int i = 0; i < kOps; ++i) {
        const uint32_t id = rng() % kKeys;
        const uint32_t op = rng() % 100;
        if (p == 0 && op < 10) {
          if (pcache_clear(c) != PCACHE_OK) shared_->errors++;
        } else if (op < 40) {
          if (c.put("k" + std::to_string(id), fixed_value(id)) != PCACHE_OK) shared_->errors++;
        } else {
          std::string v;
          const pcache_status st = c.get("k" + std::to_string(id), &v);
          shared_->reads++;
          if (st == PCACHE_OK) {
            shared_->hits++;
            if (v != fixed_value(id)) shared_->bad_reads++;
          } else if (st != PCACHE_NOT_FOUND) {
            shared_->errors++;
          }
        }
      }
      return 0;
    }));
  for (pid_t pid : pids) EXPECT_EQ(wait_for(pid), 0);
  EXPECT_EQ(shared_->bad_reads.load(), 0u);
  EXPECT_EQ(shared_->errors.load(), 0u);
  EXPECT_GT(shared_->hits.load(), 0u);
}

TEST_P(MultiProcess, WritersKilledAtRandomNeverCorruptWhatIsServed) {
  const char *env = std::getenv("PCACHE_CRASH_KILLS");
  const int kills_wanted = env ? std::atoi(env) : 1000;
  constexpr int kProcs = 4, kKeys = 150;
  constexpr uint64_t kCap = 96 * 1024;
  std::mt19937 rng(12345);
  int kills = 0;
  while (kills < kills_wanted) {
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcs; ++p)
      pids.push_back(spawn([&, p] {
        Handle c(uri(), kCap);
        std::mt19937 r(uint32_t(::getpid()) * 31u + uint32_t(p));
        for (;;) {
          const uint32_t id = r() % kKeys;
          const uint32_t op = r() % 100;
          if (op < 2) {
            pcache_clear(c);
          } else if (op < 8) {
            const std::string k = "k" + std::to_string(id);
            pcache_delete(c, k.data(), k.size());
          } else if (op < 60) {
            c.put("k" + std::to_string(id), fixed_value(id));
          } else {
            std::string v;
            if (c.get("k" + std::to_string(id), &v) == PCACHE_OK && v != fixed_value(id))
              shared_->bad_reads++;
          }
        }
        return 0;
      }));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 15000));
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      EXPECT_EQ(wait_for(pid), 128 + SIGKILL);
      ++kills;
    }
  }
  EXPECT_EQ(shared_->bad_reads.load(), 0u);
  Handle c(uri(), kCap);
  uint64_t total = 0;
  int served = 0;
  for (uint32_t id = 0; id < kKeys; ++id) {
    std::string v;
    const pcache_status st = c.get("k" + std::to_string(id), &v);
    ASSERT_TRUE(st == PCACHE_OK || st == PCACHE_NOT_FOUND) << pcache_last_error();
    if (st == PCACHE_OK) {
      EXPECT_EQ(v, fixed_value(id));
      total += v.size();
      ++served;
    }
  }
  EXPECT_EQ(c.stats().corrupt, 0u) << "a killed writer left a damaged entry behind";
  // A writer killed inside its locked section (between its rename or unlink and its accounting
  // update, or in the middle of an eviction or clear) is noticed by the next one to take the lock,
  // here the open: the accounting matches the entries and the cap holds again.
  EXPECT_EQ(c.count(), uint64_t(served)) << "the accounting drifted from the entries";
  EXPECT_EQ(c.size(), total) << "the accounting drifted from the entries";
  EXPECT_LE(total, kCap);
  // One more capped put brings the store back under the cap exactly.
  ASSERT_EQ(c.put("k0", fixed_value(0)), PCACHE_OK) << pcache_last_error();
  EXPECT_LE(c.size(), kCap);
  if (std::string(GetParam().name) == "sqlite") {
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "cache.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt *s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char *>(sqlite3_column_text(s, 0)), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
  } else {
    // Killed writers hold no lock: once past the grace period, the next open reaps their files.
    struct timespec ago[2] = {{::time(nullptr) - 30, 0}, {::time(nullptr) - 30, 0}};
    for (const std::string &f : list_files(dir_ / "fs/tmp"))
      ::utimensat(AT_FDCWD, f.c_str(), ago, 0);
    { Handle again("filestream:" + (dir_ / "fs")); }
    EXPECT_TRUE(list_files(dir_ / "fs/tmp").empty())
        << "temp files of killed writers were not reaped";
  }
  RecordProperty("kills", kills);
  RecordProperty("entries_served", served);
}

// fork() while other threads use the handle: a child used to inherit a mutex held by a thread
// that does not exist in it and hang (28 of 30 children on SQLite and file-stream). Now every
// child can go on using the handle it inherited; each must finish within 20 s.
TEST_P(MultiProcess, ChildrenForkedWhileThreadsUseTheHandleKeepWorking) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // The sanitizer runtimes' own allocators and thread registries take locks that a child of a
  // threaded process can inherit held (GCC 12's runtimes install no fork handlers for them): CI
  // saw 1 child in 30 hang in the ASan build only. What this test guards, progcache's and
  // SQLite's locks, it checks in the release build.
  GTEST_SKIP() << "fork() of a process whose threads hold sanitizer-runtime locks is outside "
                  "what the sanitizers support; this test runs in the release build";
#endif
  Handle c(GetParam().uri(dir_));
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 4; ++t)
    busy.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        const std::string k = "t" + std::to_string(t) + "-" + std::to_string(i % 16);
        c.put(k, make_value(uint32_t(i), uint32_t(t), 512));
        c.get(k, nullptr);
      }
    });
  int hung = 0, failed = 0;
  std::string codes;
  for (int n = 0; n < 30; ++n) {
    const pid_t child = spawn([&] {
      ::alarm(30);
      const std::string k = "child" + std::to_string(n);
      // Four threads commit without pause, so a child's write may wait out the busy timeout
      // (5 s) on a loaded machine (CI saw it once): PCACHE_ERR_BUSY is the documented answer to
      // that, not the inherited lock this test is about, and is tried again.
      pcache_status put = PCACHE_ERR_BUSY;
      for (int attempt = 0; attempt < 3 && put == PCACHE_ERR_BUSY; ++attempt)
        put = c.put(k, "from a child");
      if (put != PCACHE_OK) return 10 - put;  // 11.. : which status
      std::string v;
      return c.get(k, &v) == PCACHE_OK && v == "from a child" ? 0 : 2;
    });
    const int rc = wait_for(child);
    hung += rc == 128 + SIGALRM;
    failed += rc != 0;
    if (rc != 0) codes += " " + std::to_string(rc);
  }
  stop = true;
  for (auto &t : busy) t.join();
  EXPECT_EQ(hung, 0) << "children hung on a lock held by a thread that was not forked";
  EXPECT_EQ(failed, 0) << "children's exit codes (10 - status for a failed put, 2 for a wrong "
                          "get):"
                       << codes;
}

INSTANTIATE_TEST_SUITE_P(Persistent, MultiProcess, ::testing::ValuesIn(persistent_backends()),
                         [](const auto &info) { return std::string(info.param.name); });
