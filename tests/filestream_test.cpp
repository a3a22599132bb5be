// File-stream backend: layout, verified reads, damage of every kind, accounting, temp files.
#include <fcntl.h>
#include <gtest/gtest.h>
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

TEST_F(FileStream, StaleTempFilesAreReapedButLiveOnesKept) {
  { Handle c(uri()); }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string h = host;
  for (char &ch : h)
    if (ch == '.' || ch == '/') ch = '_';
  // A writer that died (no such pid), a live writer (us), and an ancient file of another host.
  const std::string dead = dir() + "/tmp/" + h + ".999999999.1.1.tmp";
  const std::string live = dir() + "/tmp/" + h + "." + std::to_string(::getpid()) + ".1.1.tmp";
  const std::string old = dir() + "/tmp/otherhost.5.1.1.tmp";
  write_file(dead, "x");
  write_file(live, "x");
  write_file(old, "x");
  struct timeval tv[2] = {{1000, 0}, {1000, 0}};
  ::utimes(old.c_str(), tv);
  Handle c(uri());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_FALSE(fs::exists(old));
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

TEST_F(FileStream, ReadOnlyDirectoryServesHitsAndRefusesWrites) {
  ::chmod(d_.path().c_str(), 0777);
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
// means nothing here: its fresh temp file must survive another process's open, which used to
// call kill(pid, 0), find no such process, and delete a live writer's file.
TEST(FileStreamTemp, FreshTempFilesOfUnknownProcessesAreNotReaped) {
  TempDir d;
  const std::string dir = d / "fs";
  { Handle c("filestream:" + dir); }
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  // A process id that is not alive here (beyond pid_max on Linux).
  const std::string tmp = dir + "/tmp/" + host + ".4194304.1.abcd.tmp";
  write_file(tmp, "a writer's half-written entry");
  { Handle c("filestream:" + dir); }
  struct stat st;
  EXPECT_EQ(::stat(tmp.c_str(), &st), 0) << "a live writer's temp file was deleted";
  // Old ones (past stale_tmp_seconds, an hour by default) are reaped.
  struct timespec t[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, tmp.c_str(), t, 0), 0);
  { Handle c("filestream:" + dir); }
  EXPECT_NE(::stat(tmp.c_str(), &st), 0);
}
