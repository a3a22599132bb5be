// SQLite backend: schema versions, corruption recovery in place, permissions, fork, busy.
#define PCACHE_ADMIN_UNSTABLE 1
#include <fcntl.h>
#include <gtest/gtest.h>
#include <progcache/progcache_admin.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#define XXH_INLINE_ALL  // the journal's record checksum, to forge records
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

std::string sql_scalar(const std::string &db, const std::string &sql) {
  sqlite3 *h = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt *s = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
    out = reinterpret_cast<const char *>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
  return out;
}

void sql_exec(const std::string &db, const std::string &sql) {
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char *err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

// Puts n entries k0, k1, ... of size bytes into the database, capped at cap bytes (0: no cap),
// then closes it.
void fill(const std::string &db, int n, size_t size, uint64_t cap = 0) {
  Handle c("sqlite:" + db, cap);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), std::string(size, 'x')), PCACHE_OK);
}

// Opens the database with max_size_bytes (0: no cap) in a child process whose files cannot grow
// past limit bytes (a full disk without filling one). Returns the child's exit status: 0 if the
// open succeeded, 1 if it returned an error, 128 + N if signal N killed it.
int open_on_a_full_disk(const std::string &db, rlim_t limit, uint64_t max_size) {
  const pid_t child = spawn([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    pcache_options o;
    pcache_options_init(&o, sizeof o);
    o.max_size_bytes = max_size;
    pcache *h = nullptr;
    const pcache_status st = pcache_open(("sqlite:" + db).c_str(), &o, &h);
    pcache_close(h);
    return st == PCACHE_OK ? 0 : 1;
  });
  return wait_for(child);
}

ino_t inode_of(const std::string &path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_ino;
}

}  // namespace

TEST(Sqlite, CreatesPrivateDirectoriesAndFile) {
  TempDir d;
  const std::string db = d / "a/b/cache.db";
  { Handle c("sqlite:" + db); }
  struct stat st;
  ASSERT_EQ(::stat((d / "a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((d / "a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(sql_scalar(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(sql_scalar(db, "PRAGMA user_version"), "2");
}

TEST(Sqlite, NewerSchemaIsRefusedWithAClearError) {
  TempDir d;
  const std::string db = d / "cache.db";
  { Handle c("sqlite:" + db); }
  // A newer progcache writes its schema version twice: user_version and the application id.
  sql_exec(db, "PRAGMA user_version=99; PRAGMA application_id=" + std::to_string(0x50430000 + 99));
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &h), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(pcache_last_error(), "newer progcache"), nullptr) << pcache_last_error();
  EXPECT_EQ(sql_scalar(db, "PRAGMA user_version"), "99");  // left as it was
}

// A file that was never a cache is refused and left byte for byte as it was: a database of
// another program (even one with a table named entries), another application's id, a schema
// version of someone else's, a text file. The reset that repairs a damaged cache dropped a
// foreign database's "entries" table, and rewrote a text file as an empty database, even for a
// command that only reads (progcache stats).
TEST(Sqlite, AFileThatWasNeverACacheIsRefusedAndLeftAsItIs) {
  TempDir d;
  struct Foreign {
    std::string name, sql, says;
  };
  const Foreign kForeign[] = {
      {"notes.db",
       "CREATE TABLE entries(x); CREATE TABLE notes(t); INSERT INTO notes VALUES('thesis');",
       "tables of another program (entries, notes)"},
      {"entries.db", "CREATE TABLE entries(k TEXT); INSERT INTO entries VALUES('old');",
       "tables of another program (entries)"},
      {"app.db",
       "PRAGMA application_id=1234; CREATE TABLE entries(key BLOB PRIMARY KEY, record BLOB);",
       "another application (application id 0x000004d2"},
      {"versioned.db", "PRAGMA user_version=3;", "schema version 3"},
  };
  std::vector<std::pair<std::string, std::string>> files;  // path, what the refusal says
  for (const Foreign &f : kForeign) {
    sql_exec(d / f.name, f.sql);
    files.emplace_back(d / f.name, f.says);
  }
  write_file(d / "text.db", std::string(8192, 'G'));
  files.emplace_back(d / "text.db", "not a SQLite database");
  for (const auto &[path, says] : files) {
    const std::string before = read_file(path);
    pcache *h = nullptr;
    EXPECT_EQ(pcache_open(("sqlite:" + path).c_str(), nullptr, &h), PCACHE_ERR_INVALID_ARG) << path;
    const std::string message = pcache_last_error();
    EXPECT_NE(message.find("is not a progcache cache database"), std::string::npos) << message;
    EXPECT_NE(message.find(says), std::string::npos) << message;
    EXPECT_EQ(read_file(path), before) << path << " was changed";
    for (const char *suffix : {"-wal", "-shm", "-counters", ".locks"})
      EXPECT_FALSE(std::filesystem::exists(path + suffix)) << path + suffix;
  }
}

// A cache another SQLite program wrote to (the sqlite3 shell: its last connection deletes the
// -wal and -shm it finds) and whose first page a bad disk then destroyed is still ours: damage,
// reset in place as SQLite's "not a database" always is. With no companion left beside it,
// it was refused as a file that was never a cache, and the cache stayed unusable until removed
// by hand (the damage campaign's seed 69: totals rewritten by SQL, then page 1 overwritten).
TEST(Sqlite, ACacheWhoseFirstPageIsDestroyedAfterAnotherProgramWroteToItIsStillOurs) {
  TempDir d;
  const std::string db = d / "c.db";
  fill(db, 3, 100);
  sql_exec(db, "UPDATE meta SET value = value WHERE name = 'entry_count'");
  ASSERT_FALSE(std::filesystem::exists(db + "-wal")) << "the scenario needs the -wal gone";
  ASSERT_FALSE(std::filesystem::exists(db + "-shm"));
  // What says it was a cache: the counter journal made with the database (only puts were made,
  // so no count was ever appended to it), which the other program left alone.
  EXPECT_TRUE(std::filesystem::exists(db + "-counters"));
  const int fd = ::open(db.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string garbage(4096, '\x5a');
  ASSERT_EQ(::pwrite(fd, garbage.data(), garbage.size(), 0), ssize_t(garbage.size()));
  ::close(fd);
  pcache *h = nullptr;
  ASSERT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &h), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::string(pcache_last_error()).find("was corrupt"), std::string::npos)
      << pcache_last_error();
  EXPECT_EQ(pcache_put(h, "k", 1, "after", 5), PCACHE_OK) << pcache_last_error();
  void *data = nullptr;
  size_t size = 0;
  ASSERT_EQ(pcache_get(h, "k", 1, &data, &size), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(std::string(static_cast<char *>(data), size), "after");
  pcache_free(data);
  pcache_close(h);
}

// A byte of the application id damaged (more than the one flipped bit allowed): a database with
// every table of a cache and a cache's mark beside it is ours, opens with its entries and gets
// its id written again. It was refused as "a SQLite database of another application" until
// removed by hand. Without the mark (AFileThatWasNeverACacheIsRefusedAndLeftAsItIs: app.db) it
// is still refused.
TEST(Sqlite, ACacheWhoseApplicationIdHasADamagedByteOpensWithItsEntries) {
  TempDir d;
  const std::string db = d / "c.db";
  fill(db, 3, 100);
  const std::string id = sql_scalar(db, "PRAGMA application_id");
  const int fd = ::open(db.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "\xa5", 1, 68), 1);  // the id's first byte: "PC" becomes 0xa5 'C'
  ::close(fd);
  ASSERT_NE(sql_scalar(db, "PRAGMA application_id"), id);
  {
    Handle c("sqlite:" + db);
    ASSERT_NE(c.get(), nullptr);
    std::string v;
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(c.get("k" + std::to_string(i), &v), PCACHE_OK) << pcache_last_error();
      EXPECT_EQ(v, std::string(100, 'x'));
    }
  }
  EXPECT_EQ(sql_scalar(db, "PRAGMA application_id"), id);
}

// Every byte of the database header overwritten in turn (with 0x00, 0xff and its value ^ 0x5a),
// on a cache closed as progcache leaves one: each open succeeds, and every get returns the
// stored bytes or a miss. A whole byte, not a bit: the id's first byte refused the cache as
// another application's database before the rule above.
TEST(Sqlite, EveryHeaderByteOverwrittenLeavesACacheThatOpensAndServesOnlyItsBytes) {
  TempDir d;
  const std::string tpl = d / "tpl.db";
  std::vector<std::string> values;
  {
    Handle c("sqlite:" + tpl);
    for (int i = 0; i < 5; ++i) {
      values.push_back(make_value(uint32_t(i), 59, 1500 + 500 * size_t(i)));
      ASSERT_EQ(c.put("k" + std::to_string(i), values.back()), PCACHE_OK) << pcache_last_error();
    }
  }
  const std::string header = read_file(tpl).substr(0, 100);
  int hits = 0, misses = 0;
  for (size_t at = 0; at < header.size(); ++at) {
    for (const uint8_t to : {uint8_t(0x00), uint8_t(0xff), uint8_t(header[at] ^ 0x5a)}) {
      if (to == uint8_t(header[at])) continue;
      SCOPED_TRACE("byte " + std::to_string(at) + " = " + std::to_string(to));
      TempDir t;
      const std::string db = t / "c.db";
      for (const char *suffix : {"", "-wal", "-shm", "-counters"})
        if (std::filesystem::exists(tpl + suffix))
          std::filesystem::copy_file(tpl + suffix, db + suffix);
      const int fd = ::open(db.c_str(), O_WRONLY);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::pwrite(fd, &to, 1, off_t(at)), 1);
      ::close(fd);
      pcache *h = nullptr;
      ASSERT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &h), PCACHE_OK)
          << pcache_last_error();
      for (int i = 0; i < 5; ++i) {
        const std::string key = "k" + std::to_string(i);
        void *data = nullptr;
        size_t size = 0;
        const pcache_status st = pcache_get(h, key.data(), key.size(), &data, &size);
        if (st == PCACHE_OK) {
          ++hits;
          EXPECT_EQ(std::string(static_cast<char *>(data), size), values[size_t(i)]) << key;
        } else {
          ++misses;
          EXPECT_EQ(st, PCACHE_NOT_FOUND) << key << ": " << pcache_last_error();
        }
        pcache_free(data);
      }
      pcache_close(h);
    }
  }
  // Most of the header is not read on the way to an entry (the reserved bytes, the version
  // SQLite last wrote); the magic, the page size and the formats are.
  EXPECT_GT(hits, 0);
  EXPECT_GT(misses, 0);
}

// A row whose size damage made negative: deleting it recounts the totals. They grew by the
// size instead (a put then evicted as if the cache were full), and the most negative size
// overflowed int64 (UBSan).
TEST(Sqlite, DeletingARowWhoseSizeIsDamagedNegativeRecountsTheTotals) {
  for (const char *size : {"-5", "-9223372036854775808"}) {
    SCOPED_TRACE(size);
    TempDir d;
    const std::string db = d / "c.db";
    fill(db, 2, 100);
    sql_exec(db, std::string("PRAGMA ignore_check_constraints=1; UPDATE entries SET size = ") +
                     size + " WHERE key = x'6b30'");  // k0
    Handle c("sqlite:" + db);
    ASSERT_EQ(pcache_delete(c, "k0", 2), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(c.count(), 1u);
    EXPECT_EQ(c.size(), 100u);
  }
}

// A FIFO (or a device, a socket) where the database or a companion file goes is no one's
// cache, shared or not: refused as a wrong path and left as it is. It was refused as a file
// another user might have planted, with advice to open the cache as shared, and then, shared,
// SQLite read the FIFO ("disk I/O error").
TEST(Sqlite, AFifoWhereTheDatabaseGoesIsAWrongPathSharedOrNot) {
  TempDir d;
  for (const char *suffix : {"", "-wal", "-counters"}) {
    SCOPED_TRACE(suffix);
    const std::string db = d / (std::string("f") + (*suffix ? suffix + 1 : "") + ".db");
    const std::string fifo = db + suffix;
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    for (uint32_t flags : {0u, uint32_t(PCACHE_OPEN_ALLOW_SHARED)}) {
      pcache_options o;
      pcache_options_init(&o, sizeof o);
      o.flags = flags;
      pcache *h = nullptr;
      EXPECT_EQ(pcache_open(("sqlite:" + db).c_str(), &o, &h), PCACHE_ERR_INVALID_ARG);
      EXPECT_NE(std::string(pcache_last_error()).find("' is a FIFO, not a file"), std::string::npos)
          << pcache_last_error();
      EXPECT_EQ(std::string(pcache_last_error()).find("ALLOW_SHARED"), std::string::npos);
      pcache_close(h);
      struct stat st;
      ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
      EXPECT_TRUE(S_ISFIFO(st.st_mode));
    }
  }
}

// A cache whose path goes through a linked directory (a home, or ~/.cache, linked to another
// disk): SQLite, told not to follow links, refused the whole path, so every open failed with
// "unable to open database file". The database itself as a link is still refused.
TEST(Sqlite, ACacheThroughALinkedDirectoryOpens) {
  TempDir d;
  ASSERT_EQ(::mkdir((d / "disk").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((d / "disk").c_str(), (d / "cache").c_str()), 0);
  {
    Handle linked("sqlite:" + (d / "cache") + "/sub/c.db");
    ASSERT_EQ(pcache_put(linked, "k", 1, "through", 7), PCACHE_OK) << pcache_last_error();
  }
  Handle real("sqlite:" + (d / "disk") + "/sub/c.db");
  void *data = nullptr;
  size_t size = 0;
  ASSERT_EQ(pcache_get(real, "k", 1, &data, &size), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(std::string(static_cast<char *>(data), size), "through");
  pcache_free(data);
  // The database itself as a link is refused, shared or not, saying what it is and where to.
  ASSERT_EQ(::symlink((d / "disk/sub/c.db").c_str(), (d / "link.db").c_str()), 0);
  for (uint32_t flags : {0u, uint32_t(PCACHE_OPEN_ALLOW_SHARED)}) {
    pcache_options o;
    pcache_options_init(&o, sizeof o);
    o.flags = flags;
    pcache *h = nullptr;
    EXPECT_EQ(pcache_open(("sqlite:" + (d / "link.db")).c_str(), &o, &h), PCACHE_ERR_INVALID_ARG);
    EXPECT_NE(std::string(pcache_last_error())
                  .find("is a symbolic link to '" + (d / "disk/sub/c.db") + "'"),
              std::string::npos)
        << pcache_last_error();
    pcache_close(h);
  }
}

// What is or may be ours opens: a blank SQLite database, a layout of ours from before
// application ids (entries without the CHECKs), and a cache whose application id has a flipped
// bit (the id is written again).
TEST(Sqlite, BlankOlderAndFlippedIdDatabasesOfOursOpen) {
  TempDir d;
  sql_exec(d / "blank.db", "VACUUM");
  sql_exec(
      d / "older.db",
      "CREATE TABLE entries(key BLOB PRIMARY KEY NOT NULL, record BLOB NOT NULL, size INTEGER"
      " NOT NULL); CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);");
  {
    Handle c("sqlite:" + (d / "flipped.db"));
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK) << pcache_last_error();
  }
  sql_exec(d / "flipped.db", "PRAGMA application_id=" + std::to_string(0x50430002 ^ (1 << 20)));
  for (const char *name : {"blank.db", "older.db", "flipped.db"}) {
    Handle c("sqlite:" + (d / name));
    ASSERT_EQ(c.put("k2", "v2"), PCACHE_OK) << name << ": " << pcache_last_error();
    std::string v;
    EXPECT_EQ(c.get("k2", &v), PCACHE_OK) << name;
  }
  EXPECT_EQ(sql_scalar(d / "flipped.db", "PRAGMA application_id"), std::to_string(0x50430002));
}

// A cache whose database was overwritten (its -wal and -shm, which stay, show it was one) is
// reset in place, never deleted or renamed: other processes may hold it open.
TEST(Sqlite, ACacheOverwrittenWithGarbageIsResetInPlaceAndReported) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  }
  write_file(db, std::string(8192, 'G'));
  const ino_t before = inode_of(db);
  pcache *h = nullptr;
  ASSERT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &h), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_last_error(), "reset"), nullptr) << pcache_last_error();
  EXPECT_EQ(inode_of(db), before);  // never deleted or renamed
  EXPECT_EQ(pcache_put(h, "k", 1, "v", 1), PCACHE_OK);
  pcache_close(h);
  EXPECT_EQ(sql_scalar(db, "PRAGMA quick_check"), "ok");
}

TEST(Sqlite, DatabaseOverwrittenWhileOpenAnswersAMissThenHeals) {
  TempDir d;
  const std::string db = d / "cache.db";
  Handle c("sqlite:" + db);
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), make_value(i, 1, 3000)), PCACHE_OK);
  const ino_t before = inode_of(db);
  {
    // Checkpoint so the data lives in the main file, then overwrite it (inode kept).
    sql_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    FILE *f = std::fopen(db.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const std::string junk(200000, 'J');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  std::string v;
  pcache_status st = PCACHE_OK;
  for (int i = 0; i < 50 && st != PCACHE_NOT_FOUND; ++i) st = c.get("k" + std::to_string(i), &v);
  EXPECT_EQ(st, PCACHE_NOT_FOUND);
  EXPECT_NE(std::strstr(pcache_last_error(), "reset"), nullptr) << pcache_last_error();
  EXPECT_GE(c.stats().corrupt, 1u);
  EXPECT_EQ(inode_of(db), before);
  ASSERT_EQ(c.put("after", "healed"), PCACHE_OK) << pcache_last_error();
  ASSERT_EQ(c.get("after", &v), PCACHE_OK);
  EXPECT_EQ(v, "healed");
}

TEST(Sqlite, DamagedRecordIsAMissRemovedAndCounted) {
  TempDir d;
  const std::string db = d / "cache.db";
  Handle c("sqlite:" + db);
  ASSERT_EQ(c.put("k", make_value(1, 1, 1000)), PCACHE_OK);
  ASSERT_EQ(c.put("other", make_value(2, 2, 1000)), PCACHE_OK);
  // Flip one payload byte behind the library's back.
  sql_exec(db,
           "UPDATE entries SET record = substr(record, 1, 500) || X'00' || substr(record, 502) "
           "WHERE key = X'6b'");
  EXPECT_EQ(c.get("k", nullptr), PCACHE_NOT_FOUND);
  EXPECT_NE(std::strstr(pcache_last_error(), "checksum"), nullptr) << pcache_last_error();
  EXPECT_EQ(c.stats().corrupt, 1u);
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM entries WHERE key = X'6b'"), "0");
  // Another key's record stored under this key is refused too.
  sql_exec(db,
           "INSERT INTO entries SELECT X'6b', record, size FROM entries WHERE key = "
           "X'6f74686572'");
  EXPECT_EQ(c.get("k", nullptr), PCACHE_NOT_FOUND);
  EXPECT_NE(std::strstr(pcache_last_error(), "another key"), nullptr) << pcache_last_error();
  EXPECT_EQ(c.get("other", nullptr), PCACHE_OK);
}

TEST(Sqlite, ReopenWithASmallerCapEvictsDownToIt) {
  TempDir d;
  const std::string uri = "sqlite:" + (d / "cache.db");
  {
    Handle c(uri);
    for (int i = 0; i < 10; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(1000, 'x')), PCACHE_OK);
  }
  Handle c(uri, 4500);
  EXPECT_EQ(c.count(), 4u);
  EXPECT_LE(c.size(), 4500u);
  EXPECT_EQ(c.get("k9", nullptr), PCACHE_OK);  // the newest survive
  EXPECT_EQ(c.get("k0", nullptr), PCACHE_NOT_FOUND);
}

TEST(Sqlite, TwoHandlesInOneProcessShareEntriesAndLru) {
  TempDir d;
  const std::string uri = "sqlite:" + (d / "cache.db");
  Handle a(uri, 3000), b(uri, 3000);
  ASSERT_EQ(a.put("x", std::string(1000, 'x')), PCACHE_OK);
  ASSERT_EQ(b.put("y", std::string(1000, 'y')), PCACHE_OK);
  std::string v;
  EXPECT_EQ(b.get("x", &v), PCACHE_OK);
  EXPECT_EQ(a.get("y", &v), PCACHE_OK);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(b.size(), 2000u);
}

TEST(Sqlite, NetworkFilesystemFallsBackToRollbackJournalWithAWarning) {
  TempDir d;
  const std::string db = d / "cache.db";
  ::setenv("PCACHE_TEST_FAKE_NETFS", "nfs", 1);
  pcache *h = nullptr;
  const pcache_status st = pcache_open(("sqlite:" + db).c_str(), nullptr, &h);
  const std::string warning = pcache_last_error();
  ::unsetenv("PCACHE_TEST_FAKE_NETFS");
  ASSERT_EQ(st, PCACHE_OK);
  EXPECT_NE(warning.find("network filesystem (nfs)"), std::string::npos) << warning;
  EXPECT_EQ(pcache_put(h, "k", 1, "v", 1), PCACHE_OK);
  pcache_close(h);
  EXPECT_EQ(sql_scalar(db, "PRAGMA journal_mode"), "delete");
}

TEST(Sqlite, HandleUsedInAForkedChildOpensItsOwnConnection) {
  TempDir d;
  Handle c("sqlite:" + (d / "cache.db"));
  ASSERT_EQ(c.put("parent", "1"), PCACHE_OK);
  const int rc = wait_for(spawn([&] {
    std::string v;
    if (c.get("parent", &v) != PCACHE_OK || v != "1") return 1;
    if (c.put("child", "2") != PCACHE_OK) return 2;
    return 0;
  }));
  EXPECT_EQ(rc, 0);
  std::string v;
  EXPECT_EQ(c.get("child", &v), PCACHE_OK);
  EXPECT_EQ(v, "2");
  EXPECT_EQ(c.put("parent-again", "3"), PCACHE_OK);
}

namespace {

// The process holding a lock on the database file's shared-lock range (SQLite's SHARED lock,
// which a connection keeps while it is open in WAL mode), as the kernel sees it; 0 for none.
// The caller must hold no lock on the file itself: closing the descriptor F_GETLK used drops
// every POSIX lock the calling process holds on it.
pid_t shared_lock_holder(const std::string &db) {
  const int fd = ::open(db.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct flock query = {};
  query.l_type = F_WRLCK;  // reports any lock that a write lock would wait for
  query.l_whence = SEEK_SET;
  query.l_start = 0x40000000 + 2;  // SQLite's PENDING byte + 2: the shared range
  query.l_len = 510;
  const int rc = ::fcntl(fd, F_GETLK, &query);
  ::close(fd);
  if (rc != 0) return -1;
  return query.l_type == F_UNLCK ? 0 : query.l_pid;
}

struct ChildLock {
  pid_t child = -1;
  pid_t holder = -1;  // shared_lock_holder's answer while the child was reading
  int exit_code = -1;
  bool child_put_kept = false;  // what the child stored after the parent closed is there
};

// Runs read in a forked child of a process whose handle on db has an open connection (read
// returns 0 once it has read through a connection of the child's), closes the parent's handle
// and asks who holds the database's shared lock then. The child then stores "from-child"
// through the handle it inherited, and the parent looks for it once the child has exited.
ChildLock lock_holder_while_child_reads(const std::string &db,
                                        const std::function<int(Handle &)> &read) {
  ChildLock out;
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) return out;
  bool child_read = false;
  {
    Handle parent("sqlite:" + db);
    std::string v;
    if (parent.put("from-parent", "1") != PCACHE_OK || parent.get("from-parent", &v) != PCACHE_OK)
      return out;
    out.child = spawn([&] {
      ::alarm(60);
      const int rc = read(parent);
      char byte = rc == 0 ? 'r' : 'x';
      if (::write(ready[1], &byte, 1) != 1 || rc != 0) return rc ? rc : 20;
      if (::read(go[0], &byte, 1) != 1) return 21;
      return parent.put("from-child", "2") == PCACHE_OK ? 0 : 22;
    });
    char byte = 0;
    child_read = ::read(ready[0], &byte, 1) == 1 && byte == 'r';
  }  // the parent's connections close here, and its locks with them
  if (child_read) out.holder = shared_lock_holder(db);
  const char byte = 'g';
  if (::write(go[1], &byte, 1) == 1) out.exit_code = wait_for(out.child);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  Handle after("sqlite:" + db);
  std::string v;
  out.child_put_kept = after.get("from-child", &v) == PCACHE_OK && v == "2";
  return out;
}

}  // namespace

// The unix VFS counts the locks of every connection in a process to one file together, and a
// child of fork() inherited the parent's count: its own connection, finding a shared lock
// "held", took none from the kernel, so no other process could see that it was reading (a last
// connection elsewhere would checkpoint and delete the WAL under it). The child now closes what
// it inherited first, so its connection holds its own lock.
TEST(Sqlite, ForkedChildHoldsItsOwnLockOnTheDatabase) {
  TempDir d;
  const std::string db = d / "cache.db";
  const ChildLock lock = lock_holder_while_child_reads(db, [](Handle &inherited) {
    std::string v;
    return inherited.get("from-parent", &v) == PCACHE_OK && v == "1" ? 0 : 1;
  });
  EXPECT_EQ(lock.exit_code, 0);
  EXPECT_EQ(lock.holder, lock.child) << "the child reads the database holding no lock of its own";
  EXPECT_TRUE(lock.child_put_kept);
}

// The same for a handle the child opens itself while the inherited one is left unused.
TEST(Sqlite, HandleOpenedInAForkedChildHoldsItsOwnLock) {
  TempDir d;
  const std::string db = d / "cache.db";
  const ChildLock lock = lock_holder_while_child_reads(db, [&db](Handle &) {
    auto *own = new Handle("sqlite:" + db);  // left open until the child exits
    std::string v;
    return own->get("from-parent", &v) == PCACHE_OK && v == "1" ? 0 : 1;
  });
  EXPECT_EQ(lock.exit_code, 0);
  EXPECT_EQ(lock.holder, lock.child) << "the child reads the database holding no lock of its own";
  EXPECT_TRUE(lock.child_put_kept);
}

// fork() while threads read on the handle's pooled connections: a reader used to run without
// any lock that fork() waits for, so a child could inherit one of SQLite's per-file mutexes
// (the WAL's shared memory) held by a thread it does not have, and its own first read of the
// database waited on it for good (1-2 children in 300 with these threads, before the fix; CI
// saw one in the MultiProcess fork test). Each child opens its own handle and reads.
TEST(Sqlite, ChildrenForkedAmidPooledReadsNeverWaitOnAnInheritedLock) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "fork() of a threaded process under a sanitizer: see MultiProcess's fork test";
#endif
  TempDir d;
  const std::string uri = "sqlite:" + (d / "cache.db");
  Handle c(uri);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      // One writer keeps the main connection busy, so that the others' hits go to the pool.
      for (int i = 0; !stop; ++i) {
        const std::string k = "k" + std::to_string(i % 64);
        if (t == 0)
          c.put(k, make_value(uint32_t(i % 64), 0, 600));
        else
          c.get(k, nullptr);
      }
    });
  int hung = 0, failed = 0;
  for (int n = 0; n < 300 && hung == 0; ++n) {
    const pid_t child = spawn([&] {
      Handle own(uri);
      std::string v;
      const pcache_status st = own.get("k1", &v);
      return st == PCACHE_OK || st == PCACHE_NOT_FOUND ? 0 : 1;
    });
    const int rc = wait_for_or_kill(child, std::chrono::seconds(10));
    hung += rc == -1;
    failed += rc != 0 && rc != -1;
  }
  stop = true;
  for (auto &t : threads) t.join();
  EXPECT_EQ(hung, 0) << "a child waited on a lock held by a thread that was not forked";
  EXPECT_EQ(failed, 0);
}

TEST(Sqlite, LockedDatabaseGivesBusyAfterTheTimeoutThenRecovers) {
  TempDir d;
  const std::string db = d / "cache.db";
  Handle c("sqlite:" + db + "?busy_timeout_ms=100");
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  sqlite3 *locker = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(c.put("k2", "v"), PCACHE_ERR_BUSY);
  EXPECT_NE(std::strstr(pcache_last_error(), "busy_timeout_ms=100"), nullptr)
      << pcache_last_error();
  std::string v;
  EXPECT_EQ(c.get("k", &v), PCACHE_OK);  // readers are not blocked by a writer in WAL mode
  sqlite3_exec(locker, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(locker);
  EXPECT_EQ(c.put("k2", "v"), PCACHE_OK);
}

TEST(Sqlite, ReadOnlyDatabaseServesHitsAndRefusesWrites) {
  TempDir d;
  ::chmod(d.path().c_str(), 01777);  // like /tmp: the other user may create, not replace
  const int rc = run_unprivileged([&] {
    const std::string dir = d / "ro";
    const std::string uri = "sqlite:" + dir + "/cache.db";
    {
      Handle c(uri);
      if (c.put("k", "stored") != PCACHE_OK) return 1;
    }
    ::chmod((dir + "/cache.db").c_str(), 0400);
    ::chmod(dir.c_str(), 0500);
    return check_read_only_cache(uri);
  });
  EXPECT_EQ(rc, 0);
}

namespace {

void flip_byte(const std::string &path, size_t offset, uint8_t mask) {
  FILE *f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, long(offset), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, long(offset), SEEK_SET);
  std::fputc(c ^ mask, f);
  std::fclose(f);
}

size_t files_named(const std::string &dir, const std::string &part) {
  return std::stoul(run_command("ls '" + dir + "' | grep -c -- '" + part + "' || true"));
}

}  // namespace

// One flipped bit in the database header (the schema version, or a file-format byte that makes
// SQLite treat the file as read-only or unreadable) used to disable the cache for good. A cache
// is disposable: the file is moved aside, a fresh one created, and the cache works again.
TEST(Sqlite, AFlippedHeaderBitNeverDisablesTheCache) {
  struct Damage {
    const char *what;
    size_t offset;
    uint8_t mask;
  };
  for (const Damage &dmg :
       {Damage{"user_version 1 -> 257", 62, 0x01}, Damage{"write version 2 -> 18", 18, 0x10},
        Damage{"read version 2 -> 18", 19, 0x10}}) {
    TempDir d;
    const std::string db = d / "cache.db";
    {
      Handle c("sqlite:" + db);
      ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
    }
    flip_byte(db, dmg.offset, dmg.mask);
    for (int round = 0; round < 2; ++round) {
      Handle c("sqlite:" + db);
      ASSERT_NE(c.get(), nullptr) << dmg.what << ": " << pcache_last_error();
      EXPECT_EQ(c.put("k2", "v2"), PCACHE_OK) << dmg.what << ": " << pcache_last_error();
      std::string v;
      EXPECT_EQ(c.get("k2", &v), PCACHE_OK) << dmg.what;
    }
    // Moved aside once at most (the -wal and -shm that go with a moved database are its own).
    EXPECT_LE(files_named(d.path(), "cache.db.corrupt-[0-9]*$"), 1u) << dmg.what;
  }
}

// A process that opens the cache, reads a hit and exits writes nothing to the database file at
// close: no checkpoint (and so no fsync of it), and the -wal and -shm stay for the next process
// instead of being unlinked and recreated. Before, every close checkpointed and removed them.
TEST(Sqlite, ClosingNeitherCheckpointsNorRemovesTheWal) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("k", std::string(10000, 'v')), PCACHE_OK);
  }
  ASSERT_TRUE(std::filesystem::exists(db + "-wal")) << "the WAL was removed at close";
  struct stat before {};
  ASSERT_EQ(::stat(db.c_str(), &before), 0);
  for (int i = 0; i < 3; ++i) {
    Handle c("sqlite:" + db);
    std::string v;
    ASSERT_EQ(c.get("k", &v), PCACHE_OK);
  }
  struct stat after {};
  ASSERT_EQ(::stat(db.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec) << "a close checkpointed into the file";
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_TRUE(std::filesystem::exists(db + "-wal"));
  EXPECT_TRUE(std::filesystem::exists(db + "-shm"));
}

// The processes that follow a miss are its hits, and each one's first connection reads back every
// frame left in the WAL: a handle that stored an entry empties the WAL when it closes. Before, a
// miss left its frames (~a dozen for a small entry) for every later process to read again.
TEST(Sqlite, AHandleThatStoredEmptiesTheWalWhenItCloses) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("k", std::string(10000, 'v')), PCACHE_OK);
  }
  EXPECT_EQ(std::filesystem::file_size(db + "-wal"), 0u);
  Handle c("sqlite:" + db);
  std::string v;
  ASSERT_EQ(c.get("k", &v), PCACHE_OK);
  EXPECT_EQ(v, std::string(10000, 'v'));
}

// An UPDATE rewrites a whole row, payload included: a hot key's touches between two flushes are
// written once (its last), not once per hit, and the order of last touches is the LRU order.
TEST(Sqlite, AHotKeysTouchesAreWrittenOncePerFlush) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("hot", std::string(65536, 'h')), PCACHE_OK);
    ASSERT_EQ(c.put("cold", "c"), PCACHE_OK);
  }
  const long long before = std::stoll(sql_scalar(db, "SELECT value FROM meta WHERE name='clock'"));
  {
    Handle c("sqlite:" + db + "?touch_interval_ms=0");
    std::string v;
    for (int i = 0; i < 100; ++i) ASSERT_EQ(c.get("hot", &v), PCACHE_OK);
    ASSERT_EQ(c.get("cold", &v), PCACHE_OK);
    ASSERT_EQ(c.get("hot", &v), PCACHE_OK);
  }  // the close flushes the 102 touches
  const long long after = std::stoll(sql_scalar(db, "SELECT value FROM meta WHERE name='clock'"));
  EXPECT_EQ(after - before, 2) << "one write per key touched, not one per hit";
  EXPECT_EQ(sql_scalar(db,
                       "SELECT e.key FROM entries e JOIN recency r ON r.id = e.rowid ORDER BY "
                       "r.atime DESC LIMIT 1"),
            "hot");
}

// A genuinely newer database (user_version and the matching application id) is still refused.
TEST(Sqlite, ANewerDatabaseWithItsApplicationIdIsRefusedNotMovedAside) {
  TempDir d;
  const std::string db = d / "cache.db";
  { Handle c("sqlite:" + db); }
  sql_exec(db, "PRAGMA user_version=3; PRAGMA application_id=" + std::to_string(0x50430003));
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &h), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(pcache_last_error(), "newer progcache"), nullptr) << pcache_last_error();
  EXPECT_EQ(files_named(d.path(), "corrupt"), 0u);
}

// A table whose columns no longer match ("no such column: name") is damage, reset in place.
TEST(Sqlite, AMismatchedSchemaIsResetNotAPermanentError) {
  TempDir d;
  const std::string db = d / "cache.db";
  { Handle c("sqlite:" + db); }
  sql_exec(db, "ALTER TABLE meta RENAME COLUMN name TO nom");
  Handle c("sqlite:" + db);
  ASSERT_NE(c.get(), nullptr) << pcache_last_error();
  EXPECT_EQ(c.put("k", "v"), PCACHE_OK) << pcache_last_error();
}

// integrity_check says ok, but one row has a TEXT key (the old schema did not enforce the type):
// deleting by key removed nothing while the total shrank, so a put spun forever inside BEGIN
// IMMEDIATE (or ended far over the cap). Eviction deletes by rowid and counts only real deletes.
TEST(Sqlite, RowsOfTheWrongTypeAndBadTotalsCannotStallEviction) {
  TempDir d;
  const std::string db = d / "cache.db";
  constexpr uint64_t kCap = 32 * 1024;
  fill(db, 8, 3000, kCap);
  // The old schema (no CHECK) and a foreign row: a TEXT key, oldest of all, with a large size.
  sql_exec(db,
           "CREATE TABLE e2(key BLOB PRIMARY KEY NOT NULL, record BLOB NOT NULL, size INTEGER NOT "
           "NULL);"
           "INSERT INTO e2(rowid, key, record, size) SELECT rowid, key, record, size FROM entries;"
           "DROP TABLE entries; ALTER TABLE e2 RENAME TO entries;"
           "INSERT INTO entries VALUES('textkey', x'00', 20000);"
           "INSERT INTO recency VALUES(last_insert_rowid(), -1, 0);"
           "UPDATE meta SET value = value + 20000 WHERE name = 'total_size';"
           "UPDATE meta SET value = value + 1 WHERE name = 'entry_count';");
  const pid_t child = spawn([&] {
    ::alarm(30);  // a spin is a failure, not a hung test
    Handle c("sqlite:" + db, kCap);
    for (int i = 0; i < 20; ++i)
      if (c.put("n" + std::to_string(i), std::string(3000, 'y')) != PCACHE_OK) return 1;
    return 0;
  });
  EXPECT_EQ(wait_for(child), 0);
  EXPECT_LE(std::stoull(sql_scalar(db, "SELECT total(size) FROM entries")), kCap);
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM entries WHERE typeof(key) <> 'blob'"), "0");
  // Totals that went negative are recounted, not cast to a huge unsigned number.
  sql_exec(db, "UPDATE meta SET value = -5 WHERE name = 'total_size'");
  const pid_t again = spawn([&] {
    ::alarm(30);
    Handle c("sqlite:" + db, kCap);
    return c.put("z", std::string(3000, 'z')) == PCACHE_OK && c.size() <= kCap ? 0 : 1;
  });
  EXPECT_EQ(wait_for(again), 0);
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'total_size'"),
            sql_scalar(db, "SELECT CAST(total(size) AS INTEGER) FROM entries"));
}

// New databases enforce the key's type.
TEST(Sqlite, NewDatabasesRefuseKeysThatAreNotBlobs) {
  TempDir d;
  const std::string db = d / "cache.db";
  { Handle c("sqlite:" + db); }
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(h, "INSERT INTO entries VALUES('t', x'00', 1)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
}

// The eviction that pcache_open runs failing (a file-size limit, a full disk) used to crash the
// process: the handle's destructor flushed counters through a backend that never finished
// opening. Now it is an error.
TEST(Sqlite, AnEvictionThatFailsDuringOpenIsAnErrorNotACrash) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 64, 4096);
  const int rc = open_on_a_full_disk(db, 64 * 1024, 10 * 1024);
  EXPECT_LT(rc, 128) << "the child died of signal " << rc - 128;
}

// A hit never waits for another connection's write transaction (it used to wait out
// busy_timeout_ms when its queued recency was due to be written). With a 60 s busy timeout and
// the write lock held elsewhere, 300 hits (past the 128-touch flush) finish; a 20 s alarm would
// end the child otherwise.
TEST(Sqlite, HitsNeverWaitForAWriter) {
  TempDir d;
  const std::string db = d / "cache.db";
  const std::string uri = "sqlite:" + db + "?busy_timeout_ms=60000";
  {
    Handle c(uri);
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  }
  sqlite3 *locker = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const pid_t child = spawn([&] {
    ::alarm(20);
    Handle c(uri);
    for (int i = 0; i < 300; ++i)
      if (c.get("k", nullptr) != PCACHE_OK) return 1;
    return 0;
  });
  EXPECT_EQ(wait_for(child), 0);
  sqlite3_exec(locker, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(locker);
}

// A total that went negative was shown as 18446744073709551589 entries (pcache_count cast it),
// and a flipped bit in a total was believed: the totals carry a check value, and totals that
// fail it are recounted from the rows, on reads as on writes.
TEST(Sqlite, TotalsThatFailTheirCheckAreRecountedNotBelieved) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(c.put("k" + std::to_string(i), std::string(1000, 'v')), PCACHE_OK);
  }
  const char *const damages[] = {
      "UPDATE meta SET value = -27 WHERE name = 'entry_count'",
      // one flipped bit
      "UPDATE meta SET value = (value | 4096) - (value & 4096) WHERE name = 'total_size'",
      // a database from before the check value
      "DELETE FROM meta WHERE name = 'totals_check'",
  };
  for (const char *damage : damages) {
    sql_exec(db, damage);
    Handle c("sqlite:" + db);
    EXPECT_EQ(c.count(), 5u) << damage;
    EXPECT_EQ(c.size(), 5000u) << damage;
    EXPECT_EQ(c.put("k5", "x"), PCACHE_OK);
    EXPECT_EQ(c.count(), 6u) << damage;
    EXPECT_EQ(c.size(), 5001u) << damage;
    ASSERT_EQ(pcache_delete(c, "k5", 2), PCACHE_OK);
  }
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'entry_count'"), "5");
}

namespace {

// Turns a database this version wrote back into schema version 1 (recency in the entry's row).
void downgrade_to_version_1(const std::string &db) {
  sql_exec(db,
           "CREATE TABLE e1(key BLOB PRIMARY KEY NOT NULL CHECK(typeof(key) = 'blob'),"
           " record BLOB NOT NULL, size INTEGER NOT NULL CHECK(typeof(size) = 'integer' AND"
           " size >= 0), atime INTEGER NOT NULL, used_at INTEGER NOT NULL);"
           "INSERT INTO e1 SELECT e.key, e.record, e.size, r.atime, r.used_at FROM entries e"
           " JOIN recency r ON r.id = e.rowid;"
           "DROP TABLE entries; DROP TABLE recency; ALTER TABLE e1 RENAME TO entries;"
           "CREATE INDEX entries_by_atime ON entries(atime);"
           "PRAGMA user_version=1; PRAGMA application_id=" +
               std::to_string(0x50430001));
}

size_t open_fds_on(const std::string &path) {
  size_t n = 0;
  for (const auto &fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec) == path) ++n;
  }
  return n;
}

}  // namespace

// Schema version 2 moved recency out of the entry's row. A version-1 database is converted in
// place: its entries still hit, with their recency (the least recently used goes first).
TEST(Sqlite, AVersion1DatabaseIsConvertedKeepingEntriesAndTheirOrder) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    for (const char *k : {"old", "mid", "new"})
      ASSERT_EQ(c.put(k, std::string(1000, k[0])), PCACHE_OK);
  }
  downgrade_to_version_1(db);
  ASSERT_EQ(sql_scalar(db, "PRAGMA user_version"), "1");
  {
    Handle c("sqlite:" + db, 2500);  // room for two: the oldest must go
    EXPECT_EQ(c.count(), 2u);
    std::string v;
    EXPECT_EQ(c.get("old", &v), PCACHE_NOT_FOUND);
    ASSERT_EQ(c.get("mid", &v), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(v, std::string(1000, 'm'));
    ASSERT_EQ(c.get("new", &v), PCACHE_OK);
  }
  EXPECT_EQ(sql_scalar(db, "PRAGMA user_version"), "2");
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM recency"), "2");
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM pragma_table_info('entries')"), "3");
}

// A touch rewrote the entry's whole row, payload included: 64 hit 4 KiB entries wrote 64
// payloads at each flush. Now a touch writes the recency table only.
TEST(Sqlite, ATouchLeavesTheEntryRowAlone) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("a", std::string(4096, 'a')), PCACHE_OK);
    ASSERT_EQ(c.put("b", std::string(4096, 'b')), PCACHE_OK);
  }
  const std::string rows_before = sql_scalar(db, "SELECT group_concat(rowid) FROM entries");
  const long long clock_before =
      std::stoll(sql_scalar(db, "SELECT value FROM meta WHERE name='clock'"));
  {
    Handle c("sqlite:" + db + "?touch_interval_ms=0");
    ASSERT_EQ(c.get("a", nullptr), PCACHE_OK);
  }
  EXPECT_EQ(std::stoll(sql_scalar(db, "SELECT value FROM meta WHERE name='clock'")),
            clock_before + 1);
  EXPECT_EQ(sql_scalar(db, "SELECT group_concat(rowid) FROM entries"), rows_before);
  EXPECT_EQ(sql_scalar(db,
                       "SELECT e.key FROM entries e JOIN recency r ON r.id = e.rowid ORDER BY "
                       "r.atime DESC LIMIT 1"),
            "a");
}

namespace {

// Transactions committed to the WAL so far: frames of the current generation (the header's
// salts) that end a commit. Read from the file, so that no connection of the test's own
// checkpoints it.
int wal_commits(const std::string &db) {
  const std::string wal = read_file(db + "-wal");
  auto be32 = [&](size_t at) {
    const auto *b = reinterpret_cast<const unsigned char *>(wal.data() + at);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
  };
  if (wal.size() < 32) return 0;
  const size_t frame = 24 + be32(8);
  int commits = 0;
  for (size_t at = 32; at + frame <= wal.size(); at += frame) {
    if (be32(at + 8) != be32(16) || be32(at + 12) != be32(20)) break;  // an older generation
    if (be32(at + 4) != 0) ++commits;  // the database's size after a commit, 0 otherwise
  }
  return commits;
}

std::string newest_key(const std::string &db) {
  return sql_scalar(db,
                    "SELECT e.key FROM entries e JOIN recency r ON r.id = e.rowid ORDER BY "
                    "r.atime DESC LIMIT 1");
}

// The shared counters as every process sees them (the database and the journal beside it).
int64_t shared_hits(const std::string &db) {
  Handle c("sqlite:" + db);
  pcache_shared_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_shared_stats(c.get(), &s), PCACHE_OK);
  return s.hits;
}

// A hit on k0 by a handle of its own, closed at once (as a process's whole life of one hit).
void hit_and_close(const std::string &db) {
  Handle c("sqlite:" + db);
  ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
}

off_t journal_bytes(const std::string &db) {
  struct stat st {};
  return ::stat((db + "-counters").c_str(), &st) == 0 ? st.st_size : -1;
}

}  // namespace

// A touch is a write transaction in a WAL every process shares: a hit records recency only for
// an entry last used longer ago than touch_interval_ms (60 s by default), and a process with no
// use to record appends its counters to the journal beside the database: it writes nothing to
// the database or its WAL.
TEST(Sqlite, AProcessThatOnlyHitsRecentEntriesWritesNothingToTheDatabase) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.put("a", "1"), PCACHE_OK);
    ASSERT_EQ(c.put("b", "2"), PCACHE_OK);
  }
  const std::string wal = read_file(db + "-wal"), file = read_file(db);
  for (int process = 0; process < 2; ++process) {
    Handle c("sqlite:" + db);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(c.get("a", nullptr), PCACHE_OK);
  }
  EXPECT_EQ(read_file(db + "-wal"), wal);
  EXPECT_EQ(read_file(db), file);
  EXPECT_EQ(journal_bytes(db), 2 * 96) << "one record per process";
  EXPECT_EQ(newest_key(db), "b") << "a's hit within the interval was recorded";
  EXPECT_EQ(shared_hits(db), 6);
}

// A connection remembers the entries it found used within the interval and reads only their
// record on the next hits (not the recency row): that memory must expire with the interval, or a
// long-lived handle would stop recording the uses of its hot entries.
TEST(Sqlite, AHotEntryIsRecordedAgainOnceTheIntervalHasPassed) {
  TempDir d;
  const std::string db = d / "cache.db";
  const std::string uri = "sqlite:" + db + "?touch_interval_ms=1000";
  auto c = std::make_unique<Handle>(uri);
  ASSERT_EQ(c->put("k", "v"), PCACHE_OK);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c->get("k", nullptr), PCACHE_OK);  // within: remembered
  const long long first = std::stoll(sql_scalar(db, "SELECT used_at FROM recency"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  ASSERT_EQ(c->get("k", nullptr), PCACHE_OK);  // past the interval: its use is due again
  c.reset();                                   // writes the queued use
  const long long second = std::stoll(sql_scalar(db, "SELECT used_at FROM recency"));
  EXPECT_GE(second, first + 2) << "a hit past the interval left the entry's last use as it was";
}

// The next transaction that adds counters (here: a hit on an entry whose use is due) takes the
// journal's records in with its own counts and recency, and empties it.
TEST(Sqlite, AHitOnAnEntryUsedLongerAgoIsRecordedAndFoldsTheJournal) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 2, 10);
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  }
  ASSERT_EQ(journal_bytes(db), 96);
  const std::string clock = sql_scalar(db, "SELECT value FROM meta WHERE name = 'clock'");
  sql_exec(db, "UPDATE recency SET used_at = used_at - 61");
  const int commits = wal_commits(db);
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  }
  EXPECT_EQ(wal_commits(db), commits + 1) << "counters, journal and recency in one transaction";
  EXPECT_EQ(journal_bytes(db), 0);
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'hits'"), "2");
  EXPECT_EQ(newest_key(db), "k0");
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'clock'"),
            std::to_string(std::stoll(clock) + 1));
  EXPECT_GE(std::stoll(sql_scalar(db, "SELECT max(used_at) FROM recency")),
            int64_t(std::time(nullptr)) - 5);
  EXPECT_EQ(shared_hits(db), 2);
}

// Torn, damaged and foreign records (another database's journal) are skipped, each costing only
// itself; zeroing the counters discards the journal too.
TEST(Sqlite, TheCounterJournalCountsOnlyWholeRecordsOfItsDatabase) {
  TempDir d;
  const std::string db = d / "cache.db", other = d / "other.db";
  for (const std::string &path : {db, other}) {
    fill(path, 1, 10);
    for (int process = 0; process < 3; ++process) {
      Handle c("sqlite:" + path);
      ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
    }
  }
  const std::string mine = read_file(db + "-counters"), theirs = read_file(other + "-counters");
  ASSERT_EQ(mine.size(), 3u * 96);
  std::string flipped = mine.substr(0, 96);
  flipped[40] ^= 1;
  write_file(db + "-counters", "garbage" + mine.substr(0, 96) + flipped + theirs + mine.substr(96) +
                                   mine.substr(0, 50));
  EXPECT_EQ(shared_hits(db), 3);
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(pcache_admin_zero_shared_stats(c.get()), PCACHE_OK);
  }
  EXPECT_EQ(shared_hits(db), 0);
  EXPECT_EQ(journal_bytes(db), 0);
}

// A journal far longer than appends ever make it (damage, or a neighbour's sparse file of
// gigabytes, which costs no disk): its start is still counted, the next fold empties it, and no
// process reads or allocates the rest (each one that counted a hit read the whole file: 4 GiB
// of it took a plain `progcache get` 40 s and 4.2 GB of memory).
TEST(Sqlite, AnOverlongCounterJournalIsCountedByItsStartAndEmptied) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  hit_and_close(db);
  hit_and_close(db);
  ASSERT_EQ(journal_bytes(db), 2 * 96);
  ASSERT_EQ(::truncate((db + "-counters").c_str(), off_t(1) << 30), 0);
  EXPECT_EQ(shared_hits(db), 2) << "the records at its start";
  hit_and_close(db);
  EXPECT_EQ(journal_bytes(db), 0) << "the close folded it";
  EXPECT_EQ(shared_hits(db), 3);
}

// Records whose counts overflow a 64-bit sum (forged: the journal's checksum is no secret)
// wrap; they never stop the counting (signed overflow is undefined; UBSan aborts on it).
TEST(Sqlite, JournalRecordsThatOverflowTheSumAreAddedWithoutUndefinedBehaviour) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  hit_and_close(db);
  std::string record = read_file(db + "-counters");
  ASSERT_EQ(record.size(), 96u);
  for (size_t at = 16; at + 8 < record.size(); at += 8) {
    const int64_t most = INT64_MAX;
    std::memcpy(&record[at], &most, 8);
  }
  const uint64_t check =
      XXH3_64bits_withSeed(record.data(), record.size() - 8, 0x636f756e74657273ull);
  std::memcpy(&record[record.size() - 8], &check, 8);
  write_file(db + "-counters", record + record + record);
  EXPECT_EQ(shared_hits(db), INT64_MAX - 2) << "three times the largest count, wrapped";
  hit_and_close(db);
  EXPECT_EQ(shared_hits(db), INT64_MAX - 1);
}

// A journal replaced behind an open handle by something that is not a regular file (a FIFO, whose
// open for writing would wait for a reader): the close neither hangs nor counts through it.
TEST(Sqlite, AJournalThatIsNoLongerAFileIsNeverWaitedOn) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  const pid_t child = spawn([&] {
    ::alarm(20);
    pcache *c = nullptr;
    if (pcache_open(("sqlite:" + db).c_str(), nullptr, &c) != PCACHE_OK) return 1;
    void *data = nullptr;
    size_t size = 0;
    if (pcache_get(c, "k0", 2, &data, &size) != PCACHE_OK) return 2;
    pcache_free(data);
    ::unlink((db + "-counters").c_str());
    if (::mkfifo((db + "-counters").c_str(), 0600) != 0) return 3;
    return pcache_close(c) == PCACHE_OK ? 0 : 4;
  });
  EXPECT_EQ(wait_for(child), 0) << "128 + 14: the close waited on the FIFO";
  ::unlink((db + "-counters").c_str());
  EXPECT_EQ(shared_hits(db), 1) << "the counts went into a transaction instead";
}

// A neighbour who can write a shared cache's files holds the journal's lock and never lets go:
// a close neither waits for it (the counts go into a transaction) nor loses them, and zeroing
// says busy after its timeout instead of hanging.
TEST(Sqlite, AJournalLockedForEverIsNeverWaitedOn) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  }
  ASSERT_EQ(journal_bytes(db), 96);
  const int held = ::open((db + "-counters").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  const pid_t child = spawn([&] {
    ::alarm(20);
    for (int i = 0; i < 3; ++i) {
      pcache *c = nullptr;
      if (pcache_open(("sqlite:" + db + "?busy_timeout_ms=100").c_str(), nullptr, &c) != PCACHE_OK)
        return 1;
      void *data = nullptr;
      size_t size = 0;
      if (pcache_get(c, "k0", 2, &data, &size) != PCACHE_OK) return 2;
      pcache_free(data);
      if (pcache_close(c) != PCACHE_OK) return 3;
    }
    pcache *c = nullptr;
    if (pcache_open(("sqlite:" + db + "?busy_timeout_ms=100").c_str(), nullptr, &c) != PCACHE_OK)
      return 4;
    const pcache_status zeroed = pcache_admin_zero_shared_stats(c);
    pcache_close(c);
    return zeroed == PCACHE_ERR_BUSY ? 0 : 5;
  });
  EXPECT_EQ(wait_for(child), 0) << "128 + 14: a close or the zeroing waited on the lock";
  ::close(held);
  EXPECT_EQ(shared_hits(db), 4) << "the three closes' hits went into transactions";
}

// A full disk at close (no file may grow: the journal's append and a transaction both fail):
// the close succeeds, the database stays whole and serves, and only that batch is lost.
TEST(Sqlite, AFullDiskAtCloseLosesOnlyTheBatch) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 100);
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  }
  ASSERT_EQ(journal_bytes(db), 96);
  const pid_t child = spawn([&] {
    ::alarm(20);
    pcache *c = nullptr;
    if (pcache_open(("sqlite:" + db + "?touch_interval_ms=0").c_str(), nullptr, &c) != PCACHE_OK)
      return 1;
    void *data = nullptr;
    size_t size = 0;
    if (pcache_get(c, "k0", 2, &data, &size) != PCACHE_OK) return 2;
    pcache_free(data);
    // From here no write may reach past the journal's end, in any file.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlim_t limit = rlim_t(journal_bytes(db));
    struct rlimit lim = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
    return pcache_close(c) == PCACHE_OK ? 0 : 4;
  });
  EXPECT_EQ(wait_for(child), 0);
  EXPECT_EQ(sql_scalar(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(shared_hits(db), 1) << "the first process's record, nothing torn";
  Handle c("sqlite:" + db);
  std::string v;
  ASSERT_EQ(c.get("k0", &v), PCACHE_OK);
  EXPECT_EQ(v, std::string(100, 'x'));
}

// Processes appending while others fold: every hit is counted once, none lost, none twice.
TEST(Sqlite, ConcurrentAppendsAndFoldsCountEveryHitOnce) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  constexpr int kChildren = 4, kProcesses = 25;
  std::vector<pid_t> children;
  for (int n = 0; n < kChildren; ++n)
    children.push_back(spawn([&, n] {
      ::alarm(60);
      for (int i = 0; i < kProcesses; ++i) {
        // Every other close records a use (touch_interval_ms=0): a transaction that folds.
        const std::string uri = "sqlite:" + db + ((i + n) % 2 ? "?touch_interval_ms=0" : "");
        pcache *c = nullptr;
        if (pcache_open(uri.c_str(), nullptr, &c) != PCACHE_OK) return 1;
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(c, "k0", 2, &data, &size) != PCACHE_OK) return 2;
        pcache_free(data);
        if (pcache_close(c) != PCACHE_OK) return 3;
      }
      return 0;
    }));
  for (pid_t child : children) EXPECT_EQ(wait_for(child), 0);
  EXPECT_EQ(shared_hits(db), kChildren * kProcesses);
}

// Eviction order may differ only among entries used within the interval.
TEST(Sqlite, EvictionFollowsUseBeyondTheIntervalOnly) {
  for (const bool aged : {true, false}) {
    TempDir d;
    const std::string db = d / "cache.db";
    fill(db, 3, 1000, 3000);  // k0, k1, k2, oldest first
    if (aged) sql_exec(db, "UPDATE recency SET used_at = used_at - 3600");
    {
      Handle c("sqlite:" + db, 3000);
      ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
      ASSERT_EQ(c.put("new", std::string(1000, 'n')), PCACHE_OK);
      // Used an hour ago, k0's hit is recorded and k1 is the oldest; used moments ago, it is not.
      EXPECT_EQ(c.get(aged ? "k1" : "k0", nullptr), PCACHE_NOT_FOUND) << "aged " << aged;
      EXPECT_EQ(c.get(aged ? "k0" : "k1", nullptr), PCACHE_OK) << "aged " << aged;
    }
  }
}

// A clock that went back leaves uses in the future: those count as stale, so recency repairs
// itself instead of freezing until the clock catches up.
TEST(Sqlite, AUseInTheFutureIsRecordedAgain) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 1, 10);
  sql_exec(db, "UPDATE recency SET used_at = used_at + 86400");
  {
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  }
  EXPECT_LE(std::stoll(sql_scalar(db, "SELECT used_at FROM recency")),
            int64_t(std::time(nullptr)) + 5);
}

TEST(Sqlite, TouchIntervalMustBeANumber) {
  TempDir d;
  pcache *c = nullptr;
  EXPECT_EQ(
      pcache_open(("sqlite:" + (d / "c.db") + "?touch_interval_ms=soon").c_str(), nullptr, &c),
      PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "touch_interval_ms"), nullptr) << pcache_last_error();
  EXPECT_EQ(c, nullptr);
}

// SIGKILL between hits and the close that writes them: the database stays whole and serves, and
// what is lost is that process's batch (its counters and touches), nothing else.
TEST(Sqlite, AProcessKilledBeforeItsCloseLosesOnlyItsBatch) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 2, 100);
  sql_exec(db, "UPDATE recency SET used_at = used_at - 3600");
  const std::string clock = sql_scalar(db, "SELECT value FROM meta WHERE name = 'clock'");
  const pid_t child = spawn([&] {
    pcache *c = nullptr;
    if (pcache_open(("sqlite:" + db).c_str(), nullptr, &c) != PCACHE_OK) return 1;
    for (int i = 0; i < 100; ++i) {
      void *data = nullptr;
      size_t size = 0;
      if (pcache_get(c, "k0", 2, &data, &size) != PCACHE_OK) return 2;
      pcache_free(data);
    }
    ::raise(SIGKILL);
    return 3;
  });
  EXPECT_EQ(wait_for(child), 128 + SIGKILL);
  EXPECT_EQ(sql_scalar(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(sql_scalar(db, "SELECT coalesce((SELECT value FROM meta WHERE name = 'hits'), 0)"),
            "0");
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'clock'"), clock);
  {
    Handle c("sqlite:" + db);
    std::string v;
    ASSERT_EQ(c.get("k0", &v), PCACHE_OK);
    EXPECT_EQ(v, std::string(100, 'x'));
  }
  EXPECT_EQ(sql_scalar(db, "SELECT value FROM meta WHERE name = 'hits'"), "1");
  EXPECT_EQ(newest_key(db), "k0");
}

// Every process's first connection reads back each WAL frame since the last checkpoint, and
// every process that hits writes a few (recency, counters): the WAL must stay bounded, or a fresh
// process's hit slows down as it fills (SQLite's default let it grow to 1,000 frames, 4 MiB).
TEST(Sqlite, TheWalStaysSmallAcrossManyWritersAndFreshHits) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 150, 1000);            // one write transaction each
  for (int i = 0; i < 60; ++i) {  // a process that hits and exits, as far as SQLite can tell
    Handle c("sqlite:" + db);
    ASSERT_EQ(c.get("k" + std::to_string(i), nullptr), PCACHE_OK);
  }
  std::error_code ec;
  const auto wal_bytes = std::filesystem::file_size(db + "-wal", ec);
  ASSERT_FALSE(ec) << "the WAL was expected to stay on disk: " << ec.message();
  EXPECT_LT(wal_bytes, 2u << 20);
  // PRAGMA wal_checkpoint answers (busy, frames in the WAL, frames checkpointed).
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt *s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "PRAGMA wal_checkpoint(PASSIVE)", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_LE(sqlite3_column_int(s, 1), 256 + 16);
  sqlite3_finalize(s);
  sqlite3_close(h);
}

// Rows a foreign writer or damage left unpaired: entries without a recency row are evicted after
// every ranked one (never kept forever over the cap), and recency rows without an entry neither
// count nor stall eviction.
TEST(Sqlite, UnpairedEntryAndRecencyRowsCannotStallEviction) {
  TempDir d;
  const std::string db = d / "cache.db";
  constexpr uint64_t kCap = 16 * 1024;
  fill(db, 4, 3000, kCap);
  sql_exec(db,
           "DELETE FROM recency;"                                         // every entry unranked
           "INSERT INTO recency VALUES(100000, 0, 0), (100001, 1, 0);");  // ranked, no entry
  const pid_t child = spawn([&] {
    ::alarm(30);
    Handle c("sqlite:" + db, kCap);
    for (int i = 0; i < 12; ++i)
      if (c.put("n" + std::to_string(i), std::string(3000, 'y')) != PCACHE_OK) return 1;
    return c.size() <= kCap ? 0 : 2;
  });
  EXPECT_EQ(wait_for(child), 0);
  EXPECT_LE(std::stoull(sql_scalar(db, "SELECT total(size) FROM entries")), kCap);
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM entries WHERE key LIKE 'k%'"), "0");
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM recency WHERE id >= 100000"), "0");
}

// Hits from several threads run on read connections beside the main one (they used to queue on
// it): every hit is a whole, right value while another thread overwrites, removes and evicts.
TEST(Sqlite, ThreadsHitInParallelAndNeverSeeATornOrWrongValue) {
  TempDir d;
  const std::string db = d / "cache.db";
  Handle c("sqlite:" + db, 40 * 5000);
  constexpr uint32_t kKeys = 48;
  for (uint32_t k = 0; k < kKeys; ++k)
    ASSERT_EQ(c.put("k" + std::to_string(k), make_value(k, 0, 1000 + k * 97)), PCACHE_OK);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, hits{0};
  size_t most_fds = 0;
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&, t] {
      for (uint32_t i = uint32_t(t); !stop; ++i) {
        const uint32_t k = i % kKeys;
        std::string v;
        const pcache_status s = c.get("k" + std::to_string(k), &v);
        uint32_t id = 0;
        if (s == PCACHE_OK && (!check_value(v, &id) || id != k)) ++bad;
        if (s != PCACHE_OK && s != PCACHE_NOT_FOUND) ++bad;
        if (s == PCACHE_OK) ++hits;
      }
    });
  for (uint32_t round = 1; round <= 60; ++round) {
    const uint32_t k = round % kKeys;
    if (round % 5 == 0)
      pcache_delete(c, ("k" + std::to_string(k)).c_str(), 1 + std::to_string(k).size());
    else
      EXPECT_EQ(c.put("k" + std::to_string(k), make_value(k, round, 3000 + round * 31)), PCACHE_OK);
    most_fds = std::max(most_fds, open_fds_on(db));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto &r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 100);
  EXPECT_GE(most_fds, 2u) << "no read connection was opened beside the main one";
}

// Every connection of a handle reads the file the handle opened: after the path is renamed and
// a new database made in its place, a reader opened then (the path names another inode) must not
// answer from the new file while the main connection and older readers answer from the old one.
// The two files share a WAL by name, so once the new file's handle empties it (a checkpoint: at
// 256 frames, or when a handle that stored closes) the old handle's uncheckpointed entries are
// gone: it misses, and still never answers from the new file.
TEST(Sqlite, ReadersNeverMixTwoFilesAfterTheDatabaseIsReplaced) {
  TempDir d;
  const std::string db = d / "cache.db";
  Handle c("sqlite:" + db);
  ASSERT_EQ(c.put("k", "before"), PCACHE_OK);
  ASSERT_EQ(::rename(db.c_str(), (db + ".old").c_str()), 0);
  auto fresh = std::make_unique<Handle>("sqlite:" + db);
  ASSERT_EQ(fresh->put("k", "after"), PCACHE_OK);
  auto read_in_threads = [&](std::atomic<int> *hits, std::atomic<int> *other) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        std::string v;
        for (int i = 0; i < 1000; ++i) {
          if (c.get("k", &v) != PCACHE_OK) continue;
          ++*hits;
          if (v != "before") ++*other;
        }
      });
    for (auto &t : ts) t.join();
  };
  std::atomic<int> hits{0}, other{0};
  read_in_threads(&hits, &other);
  EXPECT_EQ(hits.load(), 4000);
  EXPECT_EQ(other.load(), 0) << "a reader answered from the new file";
  fresh.reset();  // stored: empties the shared WAL as it closes
  std::atomic<int> later_hits{0}, later_other{0};
  read_in_threads(&later_hits, &later_other);
  EXPECT_EQ(later_other.load(), 0) << "a reader answered from the new file";
}

// A read-only version-1 database cannot be converted here: the error says why and what to do
// (it used to say the file had no progcache schema at all).
TEST(Sqlite, AReadOnlyVersion1DatabaseSaysHowToConvertIt) {
  TempDir d;
  ::chmod(d.path().c_str(), 01777);
  const int rc = run_unprivileged([&] {
    const std::string dir = d / "ro";
    const std::string db = dir + "/cache.db";
    {
      Handle c("sqlite:" + db);
      if (c.put("k", "stored") != PCACHE_OK) return 1;
    }
    downgrade_to_version_1(db);
    ::chmod(db.c_str(), 0400);
    ::chmod(dir.c_str(), 0500);
    pcache *h = nullptr;
    if (pcache_open(("sqlite:" + db).c_str(), nullptr, &h) != PCACHE_ERR_PERMISSION) return 2;
    return std::strstr(pcache_last_error(), "schema version 1") ? 0 : 3;
  });
  EXPECT_EQ(rc, 0);
}

// Converting a version-1 database that meets a full disk (here a file-size limit) must fail the
// open and keep the entries for a later try, never fall back to rebuilding the schema (which
// drops every entry) over a transient error.
TEST(Sqlite, AConversionThatMeetsAFullDiskKeepsTheEntries) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 64, 4096);
  downgrade_to_version_1(db);
  sql_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  // 128 KiB: the WAL cannot take the rewritten table.
  EXPECT_EQ(open_on_a_full_disk(db, 128 * 1024, 0), 1)
      << "the conversion should have failed for want of space";
  EXPECT_EQ(sql_scalar(db, "SELECT count(*) FROM entries"), "64");
  Handle c("sqlite:" + db);
  EXPECT_EQ(c.count(), 64u);
  EXPECT_EQ(c.get("k5", nullptr), PCACHE_OK);
}

// A flipped bit in the schema's text (here inside a CHECK constraint) left every statement
// preparing and every put failing its constraint, for good: `progcache clear` did not repair it.
// The schema is compared with the expected one at open, and the database reset, with a warning.
TEST(Sqlite, ADamagedSchemaIsDetectedAtOpenAndTheCacheRebuilt) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 3, 100);
  for (const char *damage :
       {"UPDATE sqlite_master SET sql = replace(sql, 'size >= 0', 'size >= 8') "
        "WHERE name = 'entries'",
        "UPDATE sqlite_master SET sql = replace(sql, '''blob''', '''blom''') "
        "WHERE name = 'entries'"}) {
    sql_exec(db, std::string("PRAGMA writable_schema = ON; ") + damage +
                     "; PRAGMA writable_schema = OFF;");
    ASSERT_NE(sql_scalar(db, "SELECT sql FROM sqlite_master WHERE name = 'entries'")
                  .find(std::strstr(damage, "8") ? "size >= 8" : "blom"),
              std::string::npos)
        << "the damage did not take";
    Handle c("sqlite:" + db);
    ASSERT_NE(c.get(), nullptr) << pcache_last_error();
    EXPECT_NE(std::string(pcache_last_error()).find("schema"), std::string::npos)
        << pcache_last_error();
    EXPECT_EQ(c.put("after", "v"), PCACHE_OK) << pcache_last_error();
    std::string got;
    EXPECT_EQ(c.get("after", &got), PCACHE_OK);
    EXPECT_EQ(c.stats().corrupt, 1u);
  }
}

namespace {

// Flips a byte of the copy of key that the entries' key index holds (not the table's), so the
// index no longer finds the row: lookups miss while a walk of the table still lists the entry.
void damage_the_key_index(const std::string &db, const std::string &key) {
  sql_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  const int64_t page = std::stoll(sql_scalar(
      db, "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_entries_1'"));
  const int64_t page_size = std::stoll(sql_scalar(db, "PRAGMA page_size"));
  std::string bytes = read_file(db);
  const size_t begin = size_t((page - 1) * page_size);
  const size_t at = bytes.find(key, begin);
  ASSERT_TRUE(at != std::string::npos && at < begin + size_t(page_size)) << "no index copy";
  bytes[at + key.size() - 1] ^= 0x01;
  write_file(db, bytes);
}

}  // namespace

// Damage in SQLite's index: every entry read well when verified (the walk reads the table),
// while lookups missed. verify runs SQLite's quick_check, reports the damage and rebuilds the
// index, which brings the entries back.
TEST(Sqlite, IndexDamageIsFoundByTheStorageCheckAndRepaired) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    Handle c("sqlite:" + db);
    for (const char *k : {"index-key-one", "index-key-two", "index-key-six"})
      ASSERT_EQ(c.put(k, std::string(300, k[10])), PCACHE_OK);
  }
  damage_the_key_index(db, "index-key-two");
  Handle c("sqlite:" + db);
  std::string got;
  ASSERT_EQ(c.get("index-key-two", &got), PCACHE_NOT_FOUND) << "the damage is invisible";
  int32_t damaged = -1;
  ASSERT_EQ(pcache_admin_check_storage(c, 0, &damaged), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(damaged, 1);
  EXPECT_NE(std::string(pcache_last_error()).find("integrity_check"), std::string::npos)
      << pcache_last_error();
  ASSERT_EQ(pcache_admin_check_storage(c, 1, &damaged), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::string(pcache_last_error()).find("indexes rebuilt"), std::string::npos)
      << pcache_last_error();
  EXPECT_EQ(c.get("index-key-two", &got), PCACHE_OK) << "the rebuilt index finds it again";
  EXPECT_EQ(got, std::string(300, 't'));
  EXPECT_EQ(c.count(), 3u);
  ASSERT_EQ(pcache_admin_check_storage(c, 0, &damaged), PCACHE_OK);
  EXPECT_EQ(damaged, 0) << pcache_last_error();
}

// The LRU clock damaged to a value near INT64_MAX (9.9e30 reads as INT64_MAX): the next put's
// clock + 1 overflowed (UBSan in the damage campaign), and in a release build wrapped to the
// oldest time there is, so the newest entry was the first evicted. It restarts after the newest
// recency instead.
TEST(Sqlite, ADamagedLruClockStillOrdersEvictions) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 3, 1000);
  sql_exec(db, "UPDATE meta SET value = 9.9e30 WHERE name = 'clock'");
  Handle c("sqlite:" + db, 3500);
  ASSERT_EQ(c.put("new", std::string(1000, 'n')), PCACHE_OK);  // 4000 bytes: one must go
  std::string got;
  EXPECT_EQ(c.get("new", &got), PCACHE_OK) << "the newest entry was evicted";
  EXPECT_EQ(c.get("k0", &got), PCACHE_NOT_FOUND) << "the oldest was kept";
  ASSERT_EQ(c.put("newer", std::string(1000, 'n')), PCACHE_OK);
  EXPECT_EQ(c.get("new", &got), PCACHE_OK) << "the entry put after the damage was taken as oldest";
  EXPECT_EQ(c.get("newer", &got), PCACHE_OK);
}

// Totals that agree with their check value but not with the entries (a row's size damaged after
// it was counted): the storage check finds the drift and recounts; removing a damaged row
// recounts rather than trusting its size.
TEST(Sqlite, SizeDriftIsFoundAndRecounted) {
  TempDir d;
  const std::string db = d / "cache.db";
  fill(db, 4, 1000);
  sql_exec(db, "UPDATE entries SET size = 5000 WHERE key = CAST('k1' AS BLOB)");
  Handle c("sqlite:" + db);
  int32_t damaged = 0;
  ASSERT_EQ(pcache_admin_check_storage(c, 1, &damaged), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(damaged, 1);
  EXPECT_NE(std::string(pcache_last_error()).find("totals"), std::string::npos);
  EXPECT_EQ(c.size(), 8000u) << "recounted from the rows as they are";
  // The damaged row's record fails verification on a read: removed, and the totals recounted
  // (subtracting its claimed 5000 from a total that never held them would drift).
  sql_exec(db,
           "UPDATE entries SET record = zeroblob(length(record)), size = 9999 "
           "WHERE key = CAST('k2' AS BLOB)");
  std::string got;
  EXPECT_EQ(c.get("k2", &got), PCACHE_NOT_FOUND);
  EXPECT_EQ(c.count(), 3u);
  EXPECT_EQ(c.size(), 7000u);
  ASSERT_EQ(pcache_admin_check_storage(c, 0, &damaged), PCACHE_OK);
  EXPECT_EQ(damaged, 0) << pcache_last_error();
}

// libsqlite3.so.0 names every SQLite 3, and the backend's statements need 3.35.0 (DELETE ...
// RETURNING): an older one is refused at open, naming both versions, with nothing created,
// rather than taken for a database whose statements no longer prepare.
TEST(Sqlite, AnSqliteTooOldForTheStatementsIsRefusedAtOpen) {
  TempDir d;
  const std::string db = d / "sub/cache.db";
  pcache *c = nullptr;
  {
    ScopedEnv old("PCACHE_TEST_FAKE_SQLITE_VERSION", "3034001");
    EXPECT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &c), PCACHE_ERR_UNSUPPORTED);
    EXPECT_EQ(c, nullptr);
    const std::string message = pcache_last_error();
    EXPECT_NE(message.find("SQLite 3034001 is older than 3.35.0"), std::string::npos) << message;
    EXPECT_FALSE(std::filesystem::exists(d / "sub")) << "a refused open created files";
  }
  ScopedEnv enough("PCACHE_TEST_FAKE_SQLITE_VERSION", "3035000");
  ASSERT_EQ(pcache_open(("sqlite:" + db).c_str(), nullptr, &c), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(pcache_put(c, "k", 1, "v", 1), PCACHE_OK);
  EXPECT_EQ(pcache_close(c), PCACHE_OK);
}
