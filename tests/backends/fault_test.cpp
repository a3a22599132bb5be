// Injected faults: every class of I/O failure on the file-stream backend (through the sys::
// seam), a full disk under SQLite (RLIMIT_FSIZE), and allocation failure (RLIMIT_AS). For each:
// a clear status with the OS message, no partial entry visible, no temp file left, earlier
// entries still readable, and the next call succeeds once the fault is gone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/cache.hpp"
#include "proc_util.hpp"
#include "test_util.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"

using namespace progcache;
using testutil::TempDir;

namespace {

std::atomic<int> g_op{-1}, g_errno{0}, g_remaining{0};

int fault_hook(sys::Op op) {
  if (int(op) != g_op.load() || g_remaining.load() == 0) return 0;
  g_remaining.fetch_sub(1);
  return g_errno.load();
}

struct Fault {
  const char *name;
  sys::Op op;
  int err;
  int times;           // how many calls fail
  bool call_succeeds;  // EINTR and short writes are retried: the call must succeed anyway
};

Status status_of(const std::function<void()> &fn, std::string *message,
                 progcache::ErrorDetail *detail = nullptr) {
  try {
    fn();
    return Status::ok;
  } catch (const Error &e) {
    *message = e.what();
    if (detail) *detail = e.detail();
    return e.status();
  }
}

}  // namespace

TEST(Faults, EveryFileStreamIoFaultIsReportedAndLeavesNothingBehind) {
  const Fault faults[] = {
      {"ENOSPC creating the temp file", sys::Op::create_temp, ENOSPC, 1, false},
      {"EACCES creating the temp file", sys::Op::create_temp, EACCES, 1, false},
      {"ENOSPC on write", sys::Op::write, ENOSPC, 1, false},
      {"EIO on write", sys::Op::write, EIO, 1, false},
      {"EINTR on write", sys::Op::write, EINTR, 3, true},
      {"short writes", sys::Op::write, sys::kShortWrite, 5, true},
      {"EIO on fsync", sys::Op::fsync, EIO, 1, false},
      {"ENOSPC on fsync", sys::Op::fsync, ENOSPC, 1, false},
      {"EIO on rename", sys::Op::rename, EIO, 1, false},
      {"ENOSPC on rename", sys::Op::rename, ENOSPC, 1, false},
      {"EIO opening an entry", sys::Op::open_entry, EIO, 1, false},
      {"EIO reading an entry", sys::Op::read, EIO, 1, false},
      {"EINTR reading an entry", sys::Op::read, EINTR, 2, true},
      // The put's shard is made under the stats lock after its temp file is written: a failure
      // there must take the temp file with it ("new" and "old" are in different shards).
      {"ENOSPC creating a shard directory", sys::Op::make_dir, ENOSPC, 1, false},
      {"EIO creating a shard directory", sys::Op::make_dir, EIO, 1, false},
  };
  sys::set_fault_hook(fault_hook);
  int injected = 0;
  for (const Fault &f : faults) {
    SCOPED_TRACE(f.name);
    TempDir d;
    CacheOptions options;
    auto cache = Cache::open("filestream:" + (d / "fs") + "?fsync=1", options);
    cache->put(std::string_view("old"), std::string_view("old value"));
    const bool is_read = f.op == sys::Op::open_entry || f.op == sys::Op::read;
    g_op = int(f.op);
    g_errno = f.err;
    g_remaining = f.times;
    std::string message;
    progcache::ErrorDetail detail;
    const Status st = status_of(
        [&] {
          if (is_read) {
            if (!cache->get(std::string_view("old"))) throw Error(Status::not_found, "miss");
          } else {
            cache->put(std::string_view("new"), std::string_view("new value"));
          }
        },
        &message, &detail);
    injected += f.times - g_remaining.load();
    g_remaining = 0;
    if (f.call_succeeds) {
      EXPECT_EQ(st, Status::ok) << message;
    } else {
      EXPECT_TRUE(st == Status::io || st == Status::permission) << int(st) << " " << message;
      EXPECT_NE(message.find(std::strerror(f.err)), std::string::npos) << message;
      // The cause a caller acts on, without parsing the message (pcache_last_error_info).
      EXPECT_EQ(detail.os_errno, f.err) << message;
      const progcache::Cause want = f.err == ENOSPC ? progcache::Cause::no_space
                                    : f.err == EIO  ? progcache::Cause::device
                                                    : progcache::Cause::none;
      EXPECT_EQ(int(detail.cause), int(want)) << message;
      if (!is_read) {
        EXPECT_FALSE(cache->get(std::string_view("new"))) << "partial entry visible";
      }
    }
    EXPECT_TRUE(testutil::list_files(d / "fs/tmp").empty()) << "temp file left behind";
    auto old = cache->get(std::string_view("old"));
    ASSERT_TRUE(old) << "earlier entry lost";
    EXPECT_EQ(old->payload.str(), "old value");
    // The fault is gone: the next call succeeds.
    cache->put(std::string_view("new"), std::string_view("new value"));
    auto fresh = cache->get(std::string_view("new"));
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->payload.str(), "new value");
    EXPECT_EQ(cache->count(), 2u);
  }
  sys::set_fault_hook(nullptr);
  std::printf("faults injected: %d\n", injected);
  RecordProperty("faults_injected", injected);
}

namespace {
std::atomic<int> g_unlinks_until_death{0};
int die_at_unlink_hook(sys::Op op) {
  if (op == sys::Op::unlink && g_unlinks_until_death.fetch_sub(1) == 1) ::_exit(42);
  return 0;
}
}  // namespace

// A process killed inside the stats lock, after it changed entries and before it wrote the
// totals, must not leave the accounting wrong for everyone after it (the cap then no longer holds,
// and count/size lie). The child dies just before its Nth unlink; the next opener must recount.
TEST(Faults, FileStreamWriterKilledMidUpdateIsRecountedByTheNextOne) {
  struct Case {
    const char *name;
    int die_before_unlink;
    std::function<void(Cache &)> action;
  };
  const std::string kilobyte(1000, 'v');
  const Case cases[] = {
      {"after a put's rename, before its eviction and accounting", 1,
       [&](Cache &c) { c.put(std::string_view("k10"), kilobyte); }},
      {"half-way through a put's eviction", 2,
       [&](Cache &c) { c.put(std::string_view("big"), std::string(3500, 'b')); }},
      {"half-way through a clear", 4, [](Cache &c) { c.clear(); }},
  };
  constexpr uint64_t kCap = 10 * 1000 + 500;
  for (const Case &k : cases) {
    SCOPED_TRACE(k.name);
    TempDir d;
    const std::string uri = "filestream:" + (d / "fs");
    CacheOptions options;
    options.max_size_bytes = kCap;
    {
      auto cache = Cache::open(uri, options);
      for (int i = 0; i < 10; ++i) cache->put("k" + std::to_string(i), kilobyte);
      ASSERT_EQ(cache->count(), 10u);
    }
    const int rc = testutil::wait_for(testutil::spawn([&] {
      auto cache = Cache::open(uri, options);
      g_unlinks_until_death = k.die_before_unlink;
      sys::set_fault_hook(die_at_unlink_hook);
      k.action(*cache);
      return 0;  // never reached: the hook exits first
    }));
    ASSERT_EQ(rc, 42) << "the child did not die where the test meant it to";
    auto cache = Cache::open(uri, options);
    uint64_t served = 0, bytes = 0;
    for (const std::string key :
         {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "big"})
      if (auto hit = cache->get(key)) {
        ++served;
        bytes += hit->payload.str().size();
      }
    EXPECT_EQ(cache->count(), served);
    EXPECT_EQ(cache->size(), bytes);
    EXPECT_LE(bytes, kCap);
    // And the next put is accounted from the right base.
    cache->put(std::string_view("after"), kilobyte);
    EXPECT_LE(cache->size(), kCap);
  }
}

TEST(Faults, SqliteOnAFullDiskFailsCleanlyAndRecovers) {
  TempDir d;
  const std::string db = d / "cache.db";
  const int rc = testutil::wait_for(testutil::spawn([&] {
    CacheOptions options;
    auto cache = Cache::open("sqlite:" + db, options);
    const std::string value(16 * 1024, 'v');
    for (int i = 0; i < 10; ++i) cache->put(std::string("k") + char('0' + i), value);
    // A full disk: writes past 1 MiB fail (EFBIG), as ENOSPC would, without a special filesystem.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit;
    ::getrlimit(RLIMIT_FSIZE, &limit);
    const rlim_t saved = limit.rlim_cur;
    limit.rlim_cur = 1 << 20;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string big(256 * 1024, 'b');
    int failures = 0;
    for (int i = 0; i < 12; ++i) {
      try {
        cache->put("big" + std::to_string(i), big);
      } catch (const Error &e) {
        if (e.status() != Status::io) return 10;
        ++failures;
      }
    }
    if (failures == 0) return 11;  // the disk never filled
    for (int i = 0; i < 10; ++i) {
      auto hit = cache->get(std::string("k") + char('0' + i));
      if (!hit || hit->payload.str() != value) return 12;  // nothing lost
    }
    limit.rlim_cur = saved;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    cache->put(std::string_view("after"), std::string_view("space again"));
    if (!cache->get(std::string_view("after"))) return 13;
    return 0;
  }));
  EXPECT_EQ(rc, 0);
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt *s = nullptr;
  sqlite3_prepare_v2(h, "PRAGMA quick_check", -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char *>(sqlite3_column_text(s, 0)), "ok");
  sqlite3_finalize(s);
  sqlite3_close(h);
}

namespace {

off_t size_of(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string sqlite_text(const std::string &db, const char *sql) {
  sqlite3 *h = nullptr;
  std::string out = "cannot open";
  if (sqlite3_open(db.c_str(), &h) == SQLITE_OK) {
    sqlite3_stmt *s = nullptr;
    out = "no row";
    if (sqlite3_prepare_v2(h, sql, -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      out = reinterpret_cast<const char *>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return out;
}

// (the process dies in the checkpoint, pages the checkpoint copies before the disk is full)
using ClosingCheckpointCase = std::tuple<bool, int>;

}  // namespace

// A handle that stored empties the WAL when it closes (a TRUNCATE checkpoint): the one write a
// closing handle makes, aimed at here. The checkpoint copies the handle's frames into the
// database file past its end, so a file-size limit of that size plus k pages stops it k pages
// in: with SIGXFSZ ignored the write fails as on a full disk, and by default the signal ends the
// process there, mid-checkpoint, as SIGKILL would. Either way the WAL keeps every frame, and the
// next handle reads every entry whole.
class ClosingCheckpoint : public ::testing::TestWithParam<ClosingCheckpointCase> {};

TEST_P(ClosingCheckpoint, StoppedPartWayLosesNothing) {
  const auto [dies, pages_in] = GetParam();
  TempDir d;
  const std::string db = d / "cache.db";
  constexpr int kEntries = 20;
  auto value_of = [](int i) { return std::string(size_t(12 * 1024 + i), char('a' + i % 26)); };
  const int rc = testutil::wait_for(testutil::spawn([&] {
    auto cache = Cache::open("sqlite:" + db, CacheOptions{});
    for (int i = 0; i < kEntries; ++i) cache->put("k" + std::to_string(i), value_of(i));
    const off_t db_size = size_of(db);
    if (db_size <= 0 || size_of(db + "-wal") <= 0) return 20;  // nothing for a checkpoint to copy
    if (!dies) ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    struct rlimit limit;
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = rlim_t(db_size) + rlim_t(pages_in) * 4096;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    cache.reset();  // the closing checkpoint
    return 0;
  }));
  if (dies)
    ASSERT_EQ(rc, 128 + SIGXFSZ) << "the checkpoint never reached the end of the file";
  else
    ASSERT_EQ(rc, 0);
  EXPECT_GT(size_of(db + "-wal"), 0) << "the checkpoint finished: it met no full disk";
  {
    auto cache = Cache::open("sqlite:" + db, CacheOptions{});
    for (int i = 0; i < kEntries; ++i) {
      auto hit = cache->get("k" + std::to_string(i));
      ASSERT_TRUE(hit) << "entry " << i << " lost";
      EXPECT_EQ(hit->payload.str(), value_of(i)) << "entry " << i;
    }
    cache->put(std::string_view("after"), std::string_view("space again"));
  }
  EXPECT_EQ(size_of(db + "-wal"), 0) << "the next handle that stored did not empty the WAL";
  EXPECT_EQ(sqlite_text(db, "PRAGMA quick_check"), "ok");
}

INSTANTIATE_TEST_SUITE_P(Faults, ClosingCheckpoint,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(0, 16, 48)),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param) ? "Dies" : "DiskFull") +
                                  "After" + std::to_string(std::get<1>(info.param)) + "Pages";
                         });

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST(Faults, AllocationFailureIsNoMemory) {
  GTEST_SKIP() << "RLIMIT_AS cannot be used with sanitizer runtimes";
}
#else
TEST(Faults, AllocationFailureIsNoMemory) {
  const int rc = testutil::wait_for(testutil::spawn([] {
    pcache *h = nullptr;
    if (pcache_open("memory:", nullptr, &h) != PCACHE_OK) return 10;
    std::string small(1000, 's');
    if (pcache_put(h, "small", 5, small.data(), small.size()) != PCACHE_OK) return 11;
    // A real 512 MiB source (mapped, never touched), then room for only 64 MiB more address
    // space: the library's copy of the value cannot be allocated.
    const size_t huge = size_t(512) << 20;
    void *src =
        ::mmap(nullptr, huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (src == MAP_FAILED) return 12;
    struct rlimit limit;
    ::getrlimit(RLIMIT_AS, &limit);
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) return 13;
    std::fclose(f);
    limit.rlim_cur = pages * size_t(::sysconf(_SC_PAGESIZE)) + (64ul << 20);
    if (::setrlimit(RLIMIT_AS, &limit) != 0) return 14;
    const pcache_status st = pcache_put(h, "huge", 4, src, huge);
    if (st != PCACHE_ERR_NO_MEMORY) return 15;
    if (!std::strstr(pcache_last_error(), "memory")) return 16;
    // Still usable, earlier entry intact.
    void *data = nullptr;
    size_t size = 0;
    if (pcache_get(h, "small", 5, &data, &size) != PCACHE_OK || size != 1000) return 17;
    pcache_free(data);
    if (pcache_put(h, "after", 5, "ok", 2) != PCACHE_OK) return 18;
    pcache_close(h);
    return 0;
  }));
  EXPECT_EQ(rc, 0);
}
#endif
