// File-stream backend: layout, verified reads, damage of every kind, accounting, temp files.
#define PCACHE_ADMIN_UNSTABLE 1
#include <fcntl.h>
#include <gtest/gtest.h>
#include <progcache/progcache_admin.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;
namespace fs = std::filesystem;

namespace {

// The one entry file under dir (the test stores exactly one key before calling this).
std::string only_entry(const std::string &dir) {
  std::vector<std::string> entries;
  for (const std::string &f : list_files(dir))
    if (fs::path(f).filename().string().size() == 32 &&
        fs::path(f).parent_path().parent_path() == fs::path(dir))
      entries.push_back(f);
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? "" : entries[0];
}

class FileStream : public ::testing::Test {
 protected:
  std::string dir() const { return d_ / "fs"; }
  std::string uri(const std::string &params = "touch_interval_ms=0") const {
    return "filestream:" + dir() + (params.empty() ? "" : "?" + params);
  }
  TempDir d_;
};

}  // namespace

TEST_F(FileStream, LayoutIsShardedPrivateAndMarked) {
  Handle c(uri());
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  const std::string entry = only_entry(dir());
  struct stat st;
  ASSERT_EQ(::stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(entry.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(fs::path(entry).filename().string().size(), 32u);
  EXPECT_EQ(read_file(dir() + "/format"), "progcache-filestream 1\n");
  EXPECT_TRUE(fs::is_directory(dir() + "/tmp"));
  EXPECT_TRUE(list_files(dir() + "/tmp").empty());
}

TEST_F(FileStream, EveryKindOfDamageIsAMissRemovedAndCounted) {
  const std::string good = make_value(1, 1, 4000);
  struct Damage {
    const char *name;
    std::function<void(const std::string &entry, const std::string &other)> apply;
  };
  const Damage damages[] = {
      {"truncated", [](const std::string &e,
                       const std::string &) { fs::resize_file(e, fs::file_size(e) - 10); }},
      {"zero-length", [](const std::string &e, const std::string &) { fs::resize_file(e, 0); }},
      // A size gone wrong by gigabytes (holes: no disk) was read into memory whole, and failed
      // every get with PCACHE_ERR_NO_MEMORY instead of a miss.
      {"extended by 40 GiB",
       [](const std::string &e, const std::string &) { fs::resize_file(e, uintmax_t(40) << 30); }},
      {"garbage",
       [](const std::string &e, const std::string &) { write_file(e, std::string(5000, 'g')); }},
      {"flipped payload byte",
       [](const std::string &e, const std::string &) {
         std::string b = read_file(e);
         b[b.size() - 100] ^= 1;
         write_file(e, b);
       }},
      {"another key's entry",
       [](const std::string &e, const std::string &o) {
         fs::copy_file(o, e, fs::copy_options::overwrite_existing);
       }},
      {"symlink",
       [](const std::string &e, const std::string &o) {
         fs::remove(e);
         fs::create_symlink(o, e);
       }},
      {"directory",
       [](const std::string &e, const std::string &) {
         fs::remove(e);
         fs::create_directory(e);
       }},
      // A hit reads before it stats: the read must neither block on a FIFO nor fail the get.
      {"FIFO",
       [](const std::string &e, const std::string &) {
         fs::remove(e);
         ASSERT_EQ(::mkfifo(e.c_str(), 0600), 0);
       }},
  };
  for (const Damage &dmg : damages) {
    SCOPED_TRACE(dmg.name);
    TempDir other_dir;
    std::string other_entry;
    {
      Handle o("filestream:" + (other_dir / "fs"));
      ASSERT_EQ(o.put("other", make_value(2, 2, 4000)), PCACHE_OK);
      other_entry = only_entry(other_dir / "fs");
    }
    Handle c(uri());
    ASSERT_EQ(pcache_clear(c), PCACHE_OK);
    ASSERT_EQ(c.put("k", good), PCACHE_OK);
    const std::string entry = only_entry(dir());
    dmg.apply(entry, other_entry);
    std::string v;
    EXPECT_EQ(c.get("k", &v), PCACHE_NOT_FOUND);
    EXPECT_FALSE(fs::exists(fs::symlink_status(entry)) && !fs::is_directory(entry))
        << "not removed";
    if (fs::is_directory(entry)) fs::remove(entry);
    EXPECT_EQ(c.stats().corrupt, 1u);
    EXPECT_EQ(c.stats().hits, 0u);
    ASSERT_EQ(c.put("k", good), PCACHE_OK) << pcache_last_error();  // heals
    ASSERT_EQ(c.get("k", &v), PCACHE_OK);
    EXPECT_EQ(v, good);
    EXPECT_TRUE(fs::exists(other_entry));  // a symlink's target is never touched
  }
}

// The same for a compressed entry, whose size its header bounds by the frame's largest size.
TEST_F(FileStream, ACompressedEntryExtendedByGigabytesIsAMiss) {
  const std::string good(1 << 20, 'a');
  Handle c(uri("compress=zstd"));
  ASSERT_EQ(c.put("k", good), PCACHE_OK);
  const std::string entry = only_entry(dir());
  ASSERT_LT(fs::file_size(entry), good.size()) << "stored compressed";
  fs::resize_file(entry, uintmax_t(40) << 30);
  std::string v;
  EXPECT_EQ(c.get("k", &v), PCACHE_NOT_FOUND) << pcache_last_error();
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_EQ(c.stats().corrupt, 1u);
}

TEST_F(FileStream, DamagedAccountingIsRebuiltFromTheEntries) {
  {
    Handle c(uri());
    for (int i = 0; i < 7; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(100, 'x')), PCACHE_OK);
  }
  write_file(dir() + "/stats", "garbage garbage garbage garbage!");
  Handle c(uri());
  EXPECT_EQ(c.count(), 7u);
  EXPECT_EQ(c.size(), 700u);
  fs::remove(dir() + "/stats");
  EXPECT_EQ(c.count(), 7u);
}

TEST_F(FileStream, DamagedFormatMarkerIsRewrittenAndNewerFormatRefused) {
  {
    Handle c(uri());
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  }
  write_file(dir() + "/format", "\x01\x02garbage");
  {
    Handle c(uri());
    std::string v;
    EXPECT_EQ(c.get("k", &v), PCACHE_OK);
  }
  EXPECT_EQ(read_file(dir() + "/format"), "progcache-filestream 1\n");
  write_file(dir() + "/format", "progcache-filestream 9\n");
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(uri().c_str(), nullptr, &h), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(pcache_last_error(), "newer progcache"), nullptr);
}

// A temp file is a live writer's while its writer holds an flock on it (until the rename).
// Unlocked ones a few seconds old are a dead writer's; anything past stale_tmp_seconds goes.
TEST_F(FileStream, StaleTempFilesAreReapedButLiveOnesKept) {
  { Handle c(uri()); }
  const std::string dead = dir() + "/tmp/somehost.999999999.1.1.tmp";
  const std::string live = dir() + "/tmp/somehost.123.1.1.tmp";
  const std::string young = dir() + "/tmp/somehost.124.1.1.tmp";
  const std::string old = dir() + "/tmp/otherhost.5.1.1.tmp";
  for (const std::string &f : {dead, live, young, old}) write_file(f, "x");
  const int held = ::open(live.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);  // a writer still at work, whatever its pid
  struct timeval ten_s_ago[2] = {{::time(nullptr) - 10, 0}, {::time(nullptr) - 10, 0}};
  for (const std::string &f : {dead, live}) ::utimes(f.c_str(), ten_s_ago);
  struct timeval ancient[2] = {{1000, 0}, {1000, 0}};
  ::utimes(old.c_str(), ancient);
  Handle c(uri());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(young));  // within the grace between a writer's create and its lock
  EXPECT_FALSE(fs::exists(old));
  ::close(held);
}

// The reaper deletes only our own temp files' names: a file in tmp/ that no writer of ours
// named (a person's, or one a name away from ours) stays, however old.
TEST_F(FileStream, TheReaperDeletesOnlyTempFilesOfOurs) {
  { Handle c(uri()); }
  const std::string ours = dir() + "/tmp/somehost.999999999.1.1.tmp";
  const std::string theirs[] = {dir() + "/tmp/draft.txt", dir() + "/tmp/a.b.c.d.tmp",
                                dir() + "/tmp/host.1.2.3.tmp.bak", dir() + "/tmp/.1.2.3.tmp"};
  struct timeval ancient[2] = {{1000, 0}, {1000, 0}};
  for (const std::string &f : theirs) {
    write_file(f, "x");
    ::utimes(f.c_str(), ancient);
  }
  write_file(ours, "x");
  ::utimes(ours.c_str(), ancient);
  Handle c(uri());
  EXPECT_FALSE(fs::exists(ours));
  for (const std::string &f : theirs) EXPECT_TRUE(fs::exists(f)) << f;
}

// A directory that holds what a cache never does is not adopted: nothing is created in it and
// nothing of it removed (filestream:$HOME reaped ~/tmp of files older than an hour, and wrote
// its own stats over a file of that name). A new, empty or marker-less directory of only our
// names is a cache's, and so is a volume's root (lost+found).
TEST_F(FileStream, ADirectoryThatWasNeverACacheIsLeftAsItIs) {
  const std::string home = d_ / "home";
  fs::create_directories(home + "/tmp");
  write_file(home + "/notes.txt", "mine");
  write_file(home + "/stats", "my stats");
  write_file(home + "/tmp/draft.txt", "precious");
  struct timeval two_hours_ago[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ::utimes((home + "/tmp/draft.txt").c_str(), two_hours_ago);
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(("filestream:" + home).c_str(), nullptr, &h), PCACHE_ERR_INVALID_ARG);
  const std::string message = pcache_last_error();
  EXPECT_NE(message.find("is not a progcache cache directory (it holds notes.txt)"),
            std::string::npos)
      << message;
  EXPECT_EQ(read_file(home + "/tmp/draft.txt"), "precious");
  EXPECT_EQ(read_file(home + "/stats"), "my stats");
  EXPECT_FALSE(fs::exists(home + "/format"));
  EXPECT_EQ(list_files(home).size(), 3u);

  const std::string volume = d_ / "volume";
  fs::create_directories(volume + "/lost+found");
  { Handle c("filestream:" + volume); }
  {
    Handle c(uri());
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  }
  fs::remove(dir() + "/format");  // a marker lost: the rest is all ours
  Handle c(uri());
  std::string v;
  EXPECT_EQ(c.get("k", &v), PCACHE_OK);
  EXPECT_EQ(read_file(dir() + "/format"), "progcache-filestream 1\n");
}

TEST_F(FileStream, ReopenWithASmallerCapEvictsOldestFirst) {
  {
    Handle c(uri());
    for (int i = 0; i < 10; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(1000, 'x')), PCACHE_OK);
  }
  Handle c(uri(), 4500);
  EXPECT_EQ(c.count(), 4u);
  EXPECT_EQ(c.get("k9", nullptr), PCACHE_OK);
  EXPECT_EQ(c.get("k0", nullptr), PCACHE_NOT_FOUND);
}

TEST_F(FileStream, FsyncOptionAndUnknownParameters) {
  Handle c(uri("fsync=1"));
  ASSERT_EQ(c.put("k", "durable"), PCACHE_OK);
  std::string v;
  EXPECT_EQ(c.get("k", &v), PCACHE_OK);
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(uri("fsink=1").c_str(), nullptr, &h), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "fsink"), nullptr);
  EXPECT_EQ(pcache_open(uri("fsync=yes").c_str(), nullptr, &h), PCACHE_ERR_INVALID_ARG);
}

TEST_F(FileStream, HitRefreshesMtimeOnlyAfterTheTouchInterval) {
  Handle c(uri("touch_interval_ms=3600000"));
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  const std::string entry = only_entry(dir());
  struct timeval tv[2] = {{2000, 0}, {2000, 0}};
  ::utimes(entry.c_str(), tv);  // an hour and more ago: refreshed
  ASSERT_EQ(c.get("k", nullptr), PCACHE_OK);
  struct stat st;
  ::stat(entry.c_str(), &st);
  EXPECT_GT(st.st_mtime, 2000);
  const time_t refreshed = st.st_mtime;
  ASSERT_EQ(c.get("k", nullptr), PCACHE_OK);  // recent: left alone
  ::stat(entry.c_str(), &st);
  EXPECT_EQ(st.st_mtime, refreshed);
}

// An entry dated in the future (a clock that went back, a restored backup, `touch -d`) is
// re-stamped by its next hit, as a SQLite cache records a use dated in the future again: it was
// never refreshed, the newest entry for ever. Past the year 2262 its mtime in nanoseconds also
// overflowed int64 (UBSan).
TEST(FileStreamDates, AnEntryDatedInTheFutureIsRestampedByItsNextHit) {
  for (const int64_t ahead : {int64_t(86400) * 365, int64_t(13569465600) /* 2400 */}) {
    SCOPED_TRACE(ahead);
    TempDir d;
    const std::string dir = d / "fs";
    Handle c("filestream:" + dir + "?touch_interval_ms=3600000");
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
    const std::string entry = only_entry(dir);
    const time_t when = ahead > 13000000000 ? time_t(ahead) : std::time(nullptr) + time_t(ahead);
    const struct timespec t[2] = {{when, 0}, {when, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, entry.c_str(), t, 0), 0);
    struct stat st;
    ASSERT_EQ(::stat(entry.c_str(), &st), 0);
    if (st.st_mtime != when) GTEST_SKIP() << "this filesystem does not keep that date";
    std::string v;
    ASSERT_EQ(c.get("k", &v), PCACHE_OK);
    EXPECT_EQ(v, "v");
    ASSERT_EQ(::stat(entry.c_str(), &st), 0);
    EXPECT_LE(st.st_mtime, std::time(nullptr) + 1);
  }
}

TEST_F(FileStream, ReadOnlyDirectoryServesHitsAndRefusesWrites) {
  ::chmod(d_.path().c_str(), 01777);  // like /tmp: the other user may create, not replace
  const int rc = run_unprivileged([&] {
    {
      Handle c(uri());
      if (c.put("k", "stored") != PCACHE_OK) return 1;
    }
    for (const std::string &f : list_files(dir())) ::chmod(f.c_str(), 0400);
    for (auto &e : fs::recursive_directory_iterator(dir()))
      if (e.is_directory()) ::chmod(e.path().c_str(), 0500);
    ::chmod(dir().c_str(), 0500);
    return check_read_only_cache(uri());
  });
  EXPECT_EQ(rc, 0);
}

TEST(FileStreamPath, CacheDirectoryThatIsAFileIsAnError) {
  TempDir d;
  write_file(d / "file", "x");
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(("filestream:" + (d / "file")).c_str(), nullptr, &h), PCACHE_ERR_IO);
  EXPECT_NE(std::strstr(pcache_last_error(), "not a directory"), nullptr) << pcache_last_error();
}

// A writer in another PID namespace (a container sharing the directory) has a process id that
// means nothing here: another process's open used to call kill(pid, 0), find no such process,
// and delete a live writer's file. A real writer in a forked child, holding its lock through a
// slow put, keeps its file whatever pid the name carries.
TEST(FileStreamTemp, ALiveWritersTempFileSurvivesOpensElsewhere) {
  TempDir d;
  const std::string dir = d / "fs";
  { Handle c("filestream:" + dir); }
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t writer = spawn([&] {
    Handle c("filestream:" + dir);
    // A 256 MiB put keeps its temp file for a while.
    const std::string big(256 << 20, 'w');
    ::close(go[0]);
    ::close(go[1]);
    return c.put("big", big) == PCACHE_OK ? 0 : 1;
  });
  ::close(go[1]);
  char b;
  ASSERT_GE(::read(go[0], &b, 1), 0);  // EOF: the writer is running (it closed its ends)
  ::close(go[0]);
  for (int i = 0; i < 50; ++i) {
    struct timespec t[2] = {{::time(nullptr) - 30, 0}, {::time(nullptr) - 30, 0}};
    for (const auto &f : fs::directory_iterator(dir + "/tmp"))  // as if the writer were slow
      ::utimensat(AT_FDCWD, f.path().c_str(), t, 0);
    Handle c("filestream:" + dir);
  }
  EXPECT_EQ(wait_for(writer), 0) << "the writer's temp file was taken away";
}

namespace {

// Every entry file under a file-stream directory (the 256 shard directories).
std::vector<std::string> entry_files(const std::string &dir) {
  std::vector<std::string> out;
  for (const std::string &f : list_files(dir)) {
    const std::string rel = f.substr(dir.size() + 1);
    if (rel.size() == 2 + 1 + 32 && rel[2] == '/') out.push_back(f);
  }
  return out;
}

}  // namespace

// Accounting never trusts an entry's own claims: a flipped bit in one entry's size field, or a
// 1 GiB sparse junk file named like an entry, used to leave size=0 with 29 KiB stored, then 60 KiB
// under a 32 KiB cap, or evict every good entry. After any of them, count and size equal exactly
// what get serves, and the good entries stay.
TEST(FileStreamAccounting, DamagedHeadersAndJunkNeverMoveTheTotals) {
  TempDir d;
  const std::string dir = d / "fs";
  constexpr uint64_t kCap = 32 * 1024;
  auto served = [&](Handle &c, uint64_t *bytes) {
    uint64_t n = 0;
    *bytes = 0;
    for (int i = 0; i < 20; ++i) {
      std::string v;
      if (c.get("k" + std::to_string(i), &v) == PCACHE_OK) {
        ++n;
        *bytes += v.size();
      }
    }
    return n;
  };
  {
    Handle c("filestream:" + dir, kCap);
    for (int i = 0; i < 10; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(2900, 'a' + i)), PCACHE_OK);
  }
  const auto files = entry_files(dir);
  ASSERT_EQ(files.size(), 10u);
  {  // the top bit of one entry's payload size
    FILE *f = std::fopen(files[3].c_str(), "r+b");
    std::fseek(f, 23, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, 23, SEEK_SET);
    std::fputc(c ^ 0x80, f);
    std::fclose(f);
  }
  {
    Handle c("filestream:" + dir, kCap);
    uint64_t bytes = 0;
    const uint64_t n = served(c, &bytes);
    EXPECT_EQ(n, 9u);
    EXPECT_EQ(c.count(), n);
    EXPECT_EQ(c.size(), bytes);
    for (int i = 10; i < 20; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(2900, 'b')), PCACHE_OK);
    EXPECT_LE(c.size(), kCap);
    EXPECT_EQ(c.count(), served(c, &bytes));
    EXPECT_EQ(c.size(), bytes);
  }
  // Junk named like an entry, 1 GiB sparse, and accounting that must be rebuilt from the files.
  const std::string junk = files[0].substr(0, files[0].size() - 32) + std::string(32, 'f');
  {
    FILE *f = std::fopen(junk.c_str(), "wb");
    std::fseek(f, (1L << 30) - 1, SEEK_SET);
    std::fputc(0, f);
    std::fclose(f);
  }
  ::unlink((dir + "/stats").c_str());
  Handle c("filestream:" + dir, kCap);
  uint64_t bytes = 0;
  const uint64_t before = served(c, &bytes);
  EXPECT_GE(before, 9u) << "good entries were evicted to make room for junk";
  EXPECT_EQ(c.count(), before);
  EXPECT_EQ(c.size(), bytes);
}

// A shard directory replaced (by a symbolic link, an empty directory, a file) takes its entries
// with it: the totals must stop counting them, or the cap is enforced against ghosts. After the
// replacement the next write recounts, in a handle that held the old directory open as in a new
// one; and the storage check finds a drift left behind.
TEST(FileStreamAccounting, AShardReplacedInPlaceIsNoLongerCounted) {
  for (const char *how : {"symlink", "directory", "file"}) {
    TempDir d;
    const std::string dir = d / "fs";
    Handle c("filestream:" + dir);
    for (int i = 0; i < 16; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(1000, 'v')), PCACHE_OK);
    const std::string victim = fs::path(entry_files(dir).front()).parent_path().string();
    size_t lost = 0;
    for (const std::string &f : entry_files(dir)) lost += f.rfind(victim + "/", 0) == 0;
    ASSERT_GE(lost, 1u);
    fs::remove_all(victim);
    if (std::string(how) == "symlink") {
      fs::create_directory(d / "elsewhere");
      fs::create_directory_symlink(d / "elsewhere", victim);
    } else if (std::string(how) == "directory") {
      ::mkdir(victim.c_str(), 0700);
    } else {
      write_file(victim, "not a directory");
    }
    ASSERT_EQ(c.put("after", std::string(1000, 'a')), PCACHE_OK);
    EXPECT_EQ(c.count(), 16 - lost + 1) << how << ": the handle that held the old directory";
    EXPECT_EQ(c.size(), (16 - lost + 1) * 1000) << how;
    Handle fresh("filestream:" + dir);
    EXPECT_EQ(fresh.count(), 16 - lost + 1) << how;
    int32_t damaged = -1;
    ASSERT_EQ(pcache_admin_check_storage(fresh, 0, &damaged), PCACHE_OK);
    EXPECT_EQ(damaged, 0) << how << ": " << pcache_last_error();
  }
}

// A put that creates a shard directory changes the cache directory's mtime, which the stats file
// stamps to notice a shard replaced behind the library's back. The put's own creation is not
// such a replacement: it used to make the next write recount every entry, so a fresh cache's
// first ~256 puts each read every entry's header (2,000 puts of 1 KiB into a new cache: 527 us a
// put, 68-78 us with the shard made under the stats lock). A junk file named like an entry is
// the witness: a recount removes it, an ordinary put leaves it alone.
TEST(FileStreamAccounting, APutThatCreatesAShardDoesNotRecountTheCache) {
  TempDir d;
  const std::string dir = d / "fs";
  Handle c("filestream:" + dir);
  ASSERT_EQ(c.put("first", std::string(1000, 'f')), PCACHE_OK);
  const std::string shard = fs::path(entry_files(dir).front()).parent_path().string();
  const std::string junk = shard + "/" + std::string(32, 'e');
  write_file(junk, "junk named like an entry");
  // Keys until some put has created shards (nearly every one, with 256 shards to fill).
  auto shards = [&] {
    size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir)) n += e.path().filename().string().size() == 2;
    return n;
  };
  const size_t shards_before = shards();
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), std::string(1000, 'v')), PCACHE_OK);
  ASSERT_GT(shards(), shards_before + 2) << "the puts created too few shard directories";
  EXPECT_TRUE(fs::exists(junk)) << "a put that created a shard recounted every entry";
  EXPECT_EQ(c.count(), 9u);
  EXPECT_EQ(c.size(), 9u * 1000);
  // A shard removed behind the library's back still makes the next write recount (and the
  // recount takes the junk away with it).
  std::string other;
  for (const std::string &f : entry_files(dir))
    if (fs::path(f).parent_path().string() != shard) other = fs::path(f).parent_path().string();
  ASSERT_FALSE(other.empty());
  fs::remove_all(other);
  ASSERT_EQ(c.put("after", std::string(1000, 'a')), PCACHE_OK);
  EXPECT_FALSE(fs::exists(junk)) << "a shard removed by hand went unnoticed";
}
