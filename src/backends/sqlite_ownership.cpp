// Whether an existing file may be a progcache database before anything is written to it. A
// cache is disposable, so damage to one is repaired by resetting it; a file that was never one
// (a path typed wrong, another program's database) must not be: resetting it would destroy it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/sqlite_internal.hpp"
#include "util/fsutil.hpp"

namespace progcache::sqlite_detail {
namespace {

bool exists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Files only a progcache cache leaves beside its database (the -wal and -shm stay: the WAL is
// persistent); evidence that a database whose own bytes are unreadable was ours.
bool has_our_companions(const std::string &path) {
  for (const char *suffix : {"-wal", "-shm", "-counters", ".locks"})
    if (exists(path + suffix)) return true;
  return false;
}

// Of those, the ones no other SQLite program makes (every database in WAL mode has a -wal and a
// -shm); a database progcache creates has its -counters from the start.
bool has_cache_marks(const std::string &path) {
  return exists(path + "-counters") || exists(path + ".locks");
}

// Reads the database's tables: SQLITE_OK, or why not. Only SQLITE_NOTADB and SQLITE_CORRUPT say
// the file is unreadable; another process creating the cache holds its lock (SQLITE_BUSY past
// the busy timeout), which says nothing of what the file is.
int read_tables(sqlite3 *db, std::vector<std::pair<std::string, std::string>> *tables) {
  sqlite3_stmt *s = nullptr;
  int rc = libsqlite().sqlite3_prepare_v2(
      db,
      "SELECT name, coalesce(sql, '') FROM sqlite_master"
      " WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
      -1, &s, nullptr);
  if (rc != SQLITE_OK) return rc;
  while ((rc = libsqlite().sqlite3_step(s)) == SQLITE_ROW) {
    const auto *name = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, 0));
    const auto *sql = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, 1));
    tables->emplace_back(name ? name : "", sql ? sql : "");
  }
  libsqlite().sqlite3_finalize(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

bool unreadable(int rc) {
  return (rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT;
}

bool is_our_table_name(const std::string &name) {
  return name == "entries" || name == "recency" || name == "meta" || name == "memo";
}

uint32_t big_endian32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

}  // namespace

DatabaseHeader read_database_header(const std::string &path) {
  DatabaseHeader h;
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd || ::fstat(fd.get(), &h.st) != 0) return h;
  const size_t want =
      S_ISREG(h.st.st_mode) ? size_t(std::min<off_t>(h.st.st_size, off_t(sizeof h.bytes))) : 0;
  h.read = pread_all(fd.get(), h.bytes, want, 0);
  h.size = h.read ? want : 0;
  return h;
}

std::string foreign_database(const std::string &path, sqlite3 *db, const DatabaseHeader &h) {
  if (!h.read) return {};  // SQLite says why it cannot open it
  if (!S_ISREG(h.st.st_mode)) return "not a regular file";
  if (h.size == 0) return {};  // new: SQLite writes its header with the first transaction
  const uint8_t *header = h.bytes;
  const size_t got = h.size;
  // Every database progcache has opened for writing carries its application id: "PC" and the
  // schema version. One flipped bit in "PC" still names us (another application's id one bit
  // from ours is not worth refusing a damaged cache for).
  const uint32_t application_id = got >= 72 ? big_endian32(header + 68) : 0;
  if (__builtin_popcount((application_id ^ uint32_t(kApplicationIdBase)) & 0xffff0000u) <= 1)
    return {};
  const bool sqlite_header =
      got == sizeof h.bytes && std::memcmp(header, "SQLite format 3", 16) == 0;
  std::vector<std::pair<std::string, std::string>> tables;
  const int rc = sqlite_header ? read_tables(db, &tables) : SQLITE_NOTADB;
  if (rc != SQLITE_OK && !unreadable(rc)) return {};  // not known now: the open reports it
  if (rc != SQLITE_OK) {
    // Unreadable: ours if what a cache leaves beside its database is there (damage), else a file
    // that was never a database.
    if (has_our_companions(path)) return {};
    return sqlite_header ? "a SQLite database SQLite cannot read, with nothing of a cache beside it"
                         : "not a SQLite database";
  }
  std::string names;
  bool our_names = true, has_entries = false, our_columns = false;
  for (const auto &[name, sql] : tables) {
    our_names &= is_our_table_name(name);
    if (name == "entries") {
      has_entries = true;
      our_columns = sql.find("key BLOB PRIMARY KEY") != std::string::npos &&
                    sql.find("record BLOB") != std::string::npos;
    }
    names += (names.empty() ? "" : ", ") + name;
  }
  // Readable, without an application id (a database from before ids): ours if blank (no tables,
  // no schema version), if it has only our tables (from any version: their entries table always
  // had these two columns), or our tables' names and a cache's companions (a schema statement
  // damaged).
  const uint32_t user_version = big_endian32(header + 60);
  if (application_id == 0 &&
      ((tables.empty() && user_version == 0) || (our_names && has_entries && our_columns) ||
       (our_names && has_our_companions(path))))
    return {};
  // Every table ours, with our entries table's columns, and a cache's mark beside it: a cache
  // whose application id was damaged (a byte of it, past the one flipped bit allowed above),
  // which the open writes again. Refused, it stayed unusable until removed by hand.
  if (our_names && has_entries && our_columns && has_cache_marks(path)) return {};
  if (application_id != 0) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", application_id);
    return std::string("a SQLite database of another application (application id ") + id +
           (names.empty() ? "" : ", tables: " + names) + ")";
  }
  if (names.empty()) return "a SQLite database with schema version " + std::to_string(user_version);
  return "a SQLite database with tables of another program (" + names + ")";
}

}  // namespace progcache::sqlite_detail
