// Private to the SQLite backend's files: shared statements' helpers, the schema, and the
// transaction templates.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "backends/sqlite_backend.hpp"
#include "backends/sqlite_library.hpp"
#include "util/error.hpp"

namespace progcache::sqlite_detail {

// Schema version 2. Recency lives in a table of its own, keyed by the entry's rowid: SQLite
// rewrites a whole row on UPDATE, so a touch in the entry's row rewrote its payload and overflow
// pages (version 1 did that: a flush of 64 touched 4 KiB entries wrote 64 payloads). atime is a
// logical clock kept in meta, not wall time: the LRU order stays exact even for touches within
// one second, and across processes (the clock advances inside write txns). The shared counters
// (PersistentCounters::kFields) get their meta rows when they are first added to.
constexpr const char *kSchema =
    "CREATE TABLE entries(key BLOB PRIMARY KEY NOT NULL CHECK(typeof(key) = 'blob'),"
    " record BLOB NOT NULL, size INTEGER NOT NULL CHECK(typeof(size) = 'integer' AND size >= 0));"
    "CREATE TABLE recency(id INTEGER PRIMARY KEY, atime INTEGER NOT NULL,"
    " used_at INTEGER NOT NULL);"
    "CREATE INDEX recency_by_atime ON recency(atime);"
    "CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS memo(name TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);"
    "INSERT INTO meta VALUES('clock', 0), ('total_size', 0), ('entry_count', 0);";

// Version 1 to 2 in place, keeping every entry and its recency (DROP COLUMN keeps rowids).
constexpr const char *kMigrateFrom1 =
    "CREATE TABLE recency(id INTEGER PRIMARY KEY, atime INTEGER NOT NULL,"
    " used_at INTEGER NOT NULL);"
    "CREATE INDEX recency_by_atime ON recency(atime);"
    "INSERT INTO recency(id, atime, used_at) SELECT rowid, atime, used_at FROM entries;"
    "DROP INDEX entries_by_atime;"
    "ALTER TABLE entries DROP COLUMN atime;"
    "ALTER TABLE entries DROP COLUMN used_at;"
    "CREATE TABLE IF NOT EXISTS memo(name TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);";

// Schema version 1's tables (progcache 0.3), from which kMigrateFrom1 converts: what a converted
// database's schema is compared against (SqliteBackend::check_schema_text).
constexpr const char *kSchemaVersion1Tables =
    "CREATE TABLE entries(key BLOB PRIMARY KEY NOT NULL CHECK(typeof(key) = 'blob'),"
    " record BLOB NOT NULL, size INTEGER NOT NULL CHECK(typeof(size) = 'integer' AND size >= 0),"
    " atime INTEGER NOT NULL, used_at INTEGER NOT NULL);"
    "CREATE INDEX entries_by_atime ON entries(atime);"
    "CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);";

// Memos (the metadata side channel) came after schema version 1 without changing what older
// versions read: a version-1 database gains the table when it is first opened for writing.
constexpr const char *kMemoSchema =
    "CREATE TABLE IF NOT EXISTS memo(name TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);";

// The schema check's two views (sqlite_connection.cpp): what sqlite_master holds, one
// normalized "type|name|statement|" row per table and index, and what it must hold for a script
// of our own CREATE statements, modelled from their text.
std::set<std::string> schema_of(sqlite3 *db);
std::set<std::string> modelled_schema(std::string_view script);

// The database file's stat and first bytes (its SQLite header), read once when it is opened.
struct DatabaseHeader {
  bool read = false;  // the file was opened and stat'ed (a regular file's bytes read too)
  struct stat st {};
  uint8_t bytes[100] = {};
  size_t size = 0;  // bytes read: fewer than 100 for a shorter file
};
DatabaseHeader read_database_header(const std::string &path);

// What the existing file at path is when it cannot be a progcache database (ours, perhaps
// damaged, which is repaired), for the refusal to touch it; empty when it may be one. Only reads:
// db is a connection opened on it, nothing written yet (sqlite_ownership.cpp).
std::string foreign_database(const std::string &path, sqlite3 *db, const DatabaseHeader &header);

struct CorruptDatabase : Error {
  explicit CorruptDatabase(const std::string &m) : Error(Status::corrupt, m) {}
};

// Damage that SQLite cannot reset in place (a flipped schema version, a file-format byte that
// makes the file read-only): the file is moved aside and a fresh database created.
struct DamagedDatabase : Error {
  explicit DamagedDatabase(const std::string &m) : Error(Status::corrupt, m) {}
};

// PRAGMA application_id: "PC" and the schema version. A newer progcache writes both; a user_version
// above ours without the matching application_id is a damaged header, not a newer database.
constexpr int32_t kApplicationIdBase = 0x50430000;

// The WAL's bound (see SqliteBackend::open_connection): an automatic checkpoint once it holds this
// many frames, and its file truncated to kWalSizeLimit bytes when a checkpoint lets it restart.
constexpr int kWalCheckpointPages = 256;
// A handle whose last commit left at least this many frames empties the WAL when it closes.
constexpr int kWalCloseCheckpointPages = 32;
constexpr int64_t kWalSizeLimit = 4 << 20;

// Resets a statement when the scope ends, whatever happened.
struct StmtScope {
  sqlite3_stmt *s;
  ~StmtScope() {
    libsqlite().sqlite3_reset(s);
    libsqlite().sqlite3_clear_bindings(s);
  }
};

// Percent-encodes what a SQLite URI filename cannot hold literally.
inline std::string uri_escape(const std::string &path) {
  std::string out;
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

inline bool is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

// Calls step() (one sqlite3_step, returning its answer) again while it answers busy, until
// timeout_ms have passed, sleeping a little between attempts: the busy handler already waited
// for most answers, but some (a WAL snapshot conflict, a lock held across a checkpoint) skip it.
// Returns the last answer.
template <typename Step>
int step_while_busy(int timeout_ms, Step &&step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int attempt = 0;; ++attempt) {
    const int rc = step();
    if (!is_busy(rc) || std::chrono::steady_clock::now() >= deadline) return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt % 8));
  }
}

}  // namespace progcache::sqlite_detail

namespace progcache {

template <typename Fn>
inline auto SqliteBackend::with_recovery(Fn &&fn) -> decltype(fn()) {
  ensure_process();
  try {
    return fn();
  } catch (const sqlite_detail::CorruptDatabase &e) {
    try {
      reset_database(e.what());
    } catch (const sqlite_detail::DamagedDatabase &d) {
      move_aside(d.what());
    }
    return fn();
  }
}

template <typename Fn>
inline void SqliteBackend::write_txn(Fn &&fn) {
  const int begun = sqlite_detail::step_while_busy(busy_timeout_ms_, [&] {
    sqlite_detail::StmtScope begin{stmt(kBegin)};
    return libsqlite().sqlite3_step(begin.s);
  });
  if (begun != SQLITE_DONE) fail(begun, "cannot begin a write transaction");
  try {
    fn();
    sqlite_detail::StmtScope commit{stmt(kCommit)};
    const int rc = libsqlite().sqlite3_step(commit.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot commit");
  } catch (...) {
    if (libsqlite().sqlite3_get_autocommit(db_) == 0) {
      sqlite_detail::StmtScope rollback{stmt(kRollback)};
      libsqlite().sqlite3_step(rollback.s);
    }
    throw;
  }
}

}  // namespace progcache
