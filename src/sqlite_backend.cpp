#include "sqlite_backend.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "error.hpp"
#include "fsutil.hpp"
#include "trust.hpp"

namespace progcache {
namespace {

// Statements, in the order of SqliteBackend::Stmt.
constexpr const char *kSql[] = {
    "SELECT record FROM entries WHERE key = ?1",
    "UPDATE entries SET atime = ?2, used_at = ?3 WHERE key = ?1",
    "SELECT size FROM entries WHERE key = ?1",
    "INSERT OR REPLACE INTO entries(key, record, size, atime, used_at) VALUES(?1, ?2, ?3, ?4, ?5)",
    "DELETE FROM entries WHERE key = ?1 RETURNING size",
    "SELECT key, size FROM entries ORDER BY atime LIMIT 32",
    "SELECT value FROM meta WHERE name = ?1",
    "INSERT OR REPLACE INTO meta(name, value) VALUES(?1, ?2)",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "DELETE FROM entries",
    "SELECT key, size, used_at FROM entries ORDER BY atime DESC",
    "UPDATE meta SET value = value + ?2 WHERE name = ?1",
};

// atime is a logical clock kept in meta, not wall time: the LRU order stays exact even for
// touches within one second, and across processes (the clock advances inside write txns).
constexpr const char *kSchema =
    "CREATE TABLE entries(key BLOB PRIMARY KEY NOT NULL, record BLOB NOT NULL,"
    " size INTEGER NOT NULL, atime INTEGER NOT NULL, used_at INTEGER NOT NULL);"
    "CREATE INDEX entries_by_atime ON entries(atime);"
    "CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);"
    "INSERT INTO meta VALUES('clock', 0), ('total_size', 0), ('entry_count', 0), ('hits', 0),"
    " ('misses', 0), ('evictions', 0), ('compile_us_saved', 0);";

constexpr size_t kFlushAfterTouches = 128;
constexpr auto kFlushAfterTime = std::chrono::milliseconds(500);

struct CorruptDatabase : Error {
  explicit CorruptDatabase(const std::string &m) : Error(Status::corrupt, m) {}
};

// Resets a statement when the scope ends, whatever happened.
struct StmtScope {
  sqlite3_stmt *s;
  ~StmtScope() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

// Percent-encodes what a SQLite URI filename cannot hold literally.
std::string uri_escape(const std::string &path) {
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

bool is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

}  // namespace

SqliteBackend::SqliteBackend(Uri &uri, const BackendConfig &config)
    : config_(config), path_(uri.path) {
  busy_timeout_ms_ =
      static_cast<int>(parse_uint_param("busy_timeout_ms", uri.take("busy_timeout_ms", "5000")));
  uri.expect_no_params();
  connect();
  if (config_.max_size_bytes && !read_only_) {
    with_recovery([&] {
      write_txn([&] {
        int64_t total = meta_get("total_size"), count = meta_get("entry_count");
        if (static_cast<uint64_t>(total) <= config_.max_size_bytes) return;
        evict_locked(total, count, {});
        meta_set("total_size", total);
        meta_set("entry_count", count);
      });
    });
  }
}

SqliteBackend::~SqliteBackend() {
  std::lock_guard lock(mutex_);
  if (db_ && pid_ == ::getpid() && !pending_touches_.empty() && !read_only_) {
    try {
      write_txn([&] { flush_touches_locked(); });
    } catch (...) {  // recency is advisory; losing a few touches on close is harmless
    }
  }
  disconnect(pid_ != ::getpid());
}

void SqliteBackend::fail(int rc, const std::string &what) {
  std::string msg = what + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  const int sys = db_ ? sqlite3_system_errno(db_) : 0;
  if (sys &&
      ((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_FULL))
    msg += std::string(" (") + std::strerror(sys) + ")";
  msg += " [" + path_ + "]";
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw CorruptDatabase(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw Error(Status::busy, msg + " (still locked after busy_timeout_ms=" +
                                    std::to_string(busy_timeout_ms_) + ")");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw Error(Status::permission, msg);
    case SQLITE_NOMEM:
      throw Error(Status::no_memory, msg);
    case SQLITE_TOOBIG:
      throw Error(Status::too_large, msg);
    case SQLITE_CANTOPEN:
      throw Error(sys == EACCES || sys == EPERM ? Status::permission : Status::io, msg);
    case SQLITE_FULL:
    case SQLITE_IOERR:
      throw Error(Status::io, msg);
    default:
      throw Error(Status::internal, msg);
  }
}

void SqliteBackend::connect() {
  pid_ = ::getpid();
  const std::string dir = parent_dir(path_);
  make_dirs(dir);
  check_private_dir(dir, -1, config_.allow_shared);
  check_owned_file(path_, config_.allow_shared);
  // Create the file ourselves so that it is 0600 (SQLite gives its -wal/-shm the same mode).
  {
    Fd fd(::open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno != EEXIST && errno != EACCES && errno != EROFS)
      throw_errno("cannot create cache database '" + path_ + "'");
  }
  int rc =
      sqlite3_open_v2(path_.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc == SQLITE_OK && sqlite3_db_readonly(db_, "main") == 1 &&
      sqlite3_exec(db_, "SELECT 1 FROM sqlite_master LIMIT 1", nullptr, nullptr, nullptr) !=
          SQLITE_OK) {
    // A read-only WAL database in a directory where its -shm cannot be created: read it as an
    // immutable snapshot (no locking; writers elsewhere are not seen until reopen).
    sqlite3_close(db_);
    db_ = nullptr;
    rc = sqlite3_open_v2(
        ("file:" + uri_escape(path_) + "?immutable=1").c_str(), &db_,
        SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX,
        nullptr);
  }
  if (rc != SQLITE_OK) {
    std::string msg = "cannot open cache database";
    try {
      fail(rc, msg);
    } catch (...) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  read_only_ = sqlite3_db_readonly(db_, "main") == 1;
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_busy_timeout(db_, busy_timeout_ms_);
  const std::string net = network_fs_name(dir);
  wal_ = net.empty();
  auto setup = [&] {
    rc = sqlite3_exec(db_, "PRAGMA cell_size_check=ON; PRAGMA mmap_size=0;", nullptr, nullptr,
                      nullptr);
    if (rc != SQLITE_OK) fail(rc, "cannot configure cache database");
    if (!read_only_) {
      set_journal_mode();
      rc = sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot set synchronous mode");
    }
    init_schema();
  };
  try {
    try {
      setup();
    } catch (const CorruptDatabase &e) {
      reset_database(e.what());
      setup();
    }
  } catch (...) {
    disconnect(false);
    throw;
  }
  if (!wal_)
    set_thread_warning("cache database is on a network filesystem (" + net +
                       "): WAL is unsafe there, using journal_mode=DELETE (slower; consider "
                       "filestream:)");
}

void SqliteBackend::set_journal_mode() {
  const char *want = wal_ ? "wal" : "delete";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
  int changes = 0;
  for (int attempt = 0;; ++attempt) {
    // Read first: changing the mode needs an exclusive lock, and the pragma answers busy at
    // once (without the busy handler) while another connection recovers a crashed writer's WAL.
    sqlite3_stmt *s = nullptr;
    int rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
      mode = reinterpret_cast<const char *>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW && mode == want) return;
    if (rc == SQLITE_ROW)
      rc = sqlite3_exec(db_, wal_ ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE",
                        nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) {
      if (++changes > 2) {  // the filesystem will not take this mode: go on with the one it has
        set_thread_warning("cache database '" + path_ + "' stays in journal_mode=" + mode);
        return;
      }
      continue;  // re-read to confirm
    }
    if (is_busy(rc) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt % 8));
      continue;
    }
    fail(rc, "cannot set the journal mode");
  }
}

void SqliteBackend::disconnect(bool abandon) {
  pending_touches_.clear();
  if (!db_) return;
  if (!abandon) {
    for (auto &s : stmts_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }
  // After fork() the parent's connection belongs to the parent: it is left untouched (SQLite
  // forbids using or closing it in the child) and its memory is abandoned.
  for (auto &s : stmts_) s = nullptr;
  db_ = nullptr;
}

void SqliteBackend::ensure_process() {
  if (pid_ == ::getpid() && db_) return;
  disconnect(pid_ != ::getpid());
  connect();
}

void SqliteBackend::init_schema() {
  auto user_version = [&] {
    sqlite3_stmt *s = nullptr;
    int rc = sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &s, nullptr);
    if (rc != SQLITE_OK) fail(rc, "cannot read the schema version");
    rc = sqlite3_step(s);
    const int v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW) fail(rc, "cannot read the schema version");
    return v;
  };
  const int version = user_version();
  if (version > kSchemaVersion)
    throw Error(Status::unsupported,
                "cache database '" + path_ + "' has schema version " + std::to_string(version) +
                    ", written by a newer progcache (this one reads version " +
                    std::to_string(kSchemaVersion) + "); refusing to misread it");
  if (version < kSchemaVersion) {
    if (read_only_)
      throw Error(Status::permission,
                  "cache database '" + path_ + "' is read-only and has no progcache schema");
    // Older or foreign layout: rebuild (a cache can always be refilled).
    write_txn([&] {
      if (user_version() == kSchemaVersion) return;  // another process got here first
      int rc = sqlite3_exec(db_, "DROP TABLE IF EXISTS entries; DROP TABLE IF EXISTS meta;",
                            nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot drop the old schema");
      rc = sqlite3_exec(db_, kSchema, nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot create the schema");
      rc = sqlite3_exec(db_, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str(),
                        nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot set the schema version");
    });
  }
}

void SqliteBackend::reset_database(const std::string &why) {
  // Reset in place: other processes may hold the file open, so it is never deleted or renamed.
  // VACUUM with RESET_DATABASE takes the exclusive lock itself.
  for (auto &s : stmts_) {
    sqlite3_finalize(s);
    s = nullptr;
  }
  pending_touches_.clear();
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 0, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 1, nullptr);
  int rc = sqlite3_exec(db_, "VACUUM", nullptr, nullptr, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 0, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db_);
    throw Error(Status::corrupt, "cache database '" + path_ + "' is corrupt (" + why +
                                     ") and could not be reset: " + msg);
  }
  if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
  set_thread_warning("cache database '" + path_ + "' was corrupt (" + why +
                     "); it was reset to empty in place");
  set_journal_mode();
  init_schema();
}

sqlite3_stmt *SqliteBackend::stmt(Stmt s) {
  if (!stmts_[s]) {
    const int rc =
        sqlite3_prepare_v3(db_, kSql[s], -1, SQLITE_PREPARE_PERSISTENT, &stmts_[s], nullptr);
    if (rc != SQLITE_OK) fail(rc, std::string("cannot prepare '") + kSql[s] + "'");
  }
  return stmts_[s];
}

template <typename Fn>
auto SqliteBackend::with_recovery(Fn &&fn) -> decltype(fn()) {
  ensure_process();
  try {
    return fn();
  } catch (const CorruptDatabase &e) {
    reset_database(e.what());
    return fn();
  }
}

template <typename Fn>
void SqliteBackend::write_txn(Fn &&fn) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
  for (int attempt = 0;; ++attempt) {
    StmtScope begin{stmt(kBegin)};
    const int rc = sqlite3_step(begin.s);
    if (rc == SQLITE_DONE) break;
    // The busy handler already waited; some busy answers (snapshot conflicts) skip it.
    if (is_busy(rc) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt % 8));
      continue;
    }
    fail(rc, "cannot begin a write transaction");
  }
  try {
    fn();
    StmtScope commit{stmt(kCommit)};
    const int rc = sqlite3_step(commit.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot commit");
  } catch (...) {
    if (sqlite3_get_autocommit(db_) == 0) {
      StmtScope rollback{stmt(kRollback)};
      sqlite3_step(rollback.s);
    }
    throw;
  }
}

int64_t SqliteBackend::meta_get(const char *name) {
  StmtScope q{stmt(kMetaGet)};
  sqlite3_bind_text(q.s, 1, name, -1, SQLITE_STATIC);
  const int rc = sqlite3_step(q.s);
  if (rc == SQLITE_ROW) return sqlite3_column_int64(q.s, 0);
  if (rc == SQLITE_DONE) return 0;
  fail(rc, "cannot read cache metadata");
}

void SqliteBackend::meta_set(const char *name, int64_t value) {
  StmtScope q{stmt(kMetaSet)};
  sqlite3_bind_text(q.s, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(q.s, 2, value);
  const int rc = sqlite3_step(q.s);
  if (rc != SQLITE_DONE) fail(rc, "cannot write cache metadata");
}

void SqliteBackend::flush_touches_locked() {
  if (pending_touches_.empty()) return;
  int64_t clock = meta_get("clock");
  for (const std::string &k : pending_touches_) {
    StmtScope q{stmt(kTouch)};
    sqlite3_bind_blob(q.s, 1, k.data(), static_cast<int>(k.size()), SQLITE_STATIC);
    sqlite3_bind_int64(q.s, 2, ++clock);
    sqlite3_bind_int64(q.s, 3, int64_t(std::time(nullptr)));
    const int rc = sqlite3_step(q.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot record entry recency");
  }
  meta_set("clock", clock);
  pending_touches_.clear();
}

void SqliteBackend::maybe_flush_touches_locked() {
  if (read_only_) {
    pending_touches_.clear();
    return;
  }
  if (pending_touches_.size() < kFlushAfterTouches &&
      std::chrono::steady_clock::now() - first_pending_ < kFlushAfterTime)
    return;
  try {
    write_txn([&] { flush_touches_locked(); });
  } catch (const Error &e) {
    if (e.status() != Status::busy) throw;  // busy: keep them for the next write
  }
}

void SqliteBackend::evict_locked(int64_t &total, int64_t &count, ByteView keep) {
  while (config_.max_size_bytes && static_cast<uint64_t>(total) > config_.max_size_bytes) {
    std::vector<std::pair<std::string, int64_t>> oldest;
    {
      StmtScope q{stmt(kOldest)};
      int rc;
      while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
        const auto *k = static_cast<const char *>(sqlite3_column_blob(q.s, 0));
        oldest.emplace_back(std::string(k ? k : "", sqlite3_column_bytes(q.s, 0)),
                            sqlite3_column_int64(q.s, 1));
      }
      if (rc != SQLITE_DONE) fail(rc, "cannot find entries to evict");
    }
    bool progressed = false;
    for (const auto &[k, sz] : oldest) {
      if (ByteView(k) == keep) continue;
      StmtScope d{stmt(kDelete)};
      sqlite3_bind_blob(d.s, 1, k.data(), static_cast<int>(k.size()), SQLITE_STATIC);
      int rc;
      while ((rc = sqlite3_step(d.s)) == SQLITE_ROW) {
      }
      if (rc != SQLITE_DONE) fail(rc, "cannot evict an entry");
      total -= sz;
      --count;
      progressed = true;
      if (config_.events) config_.events->evictions.fetch_add(1, std::memory_order_relaxed);
      if (static_cast<uint64_t>(total) <= config_.max_size_bytes) break;
    }
    if (!progressed) break;
  }
}

SharedBlob SqliteBackend::get(ByteView key) {
  std::lock_guard lock(mutex_);
  return with_recovery([&]() -> SharedBlob {
    StmtScope q{stmt(kGet)};
    sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
    int rc = sqlite3_step(q.s);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
    while (is_busy(rc) && std::chrono::steady_clock::now() < deadline) {
      sqlite3_reset(q.s);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      rc = sqlite3_step(q.s);
    }
    if (rc == SQLITE_DONE) return nullptr;
    if (rc != SQLITE_ROW) fail(rc, "cannot read an entry");
    const int n = sqlite3_column_bytes(q.s, 0);
    auto blob = std::make_shared<Blob>(static_cast<size_t>(n));
    if (n) std::memcpy(blob->data(), sqlite3_column_blob(q.s, 0), static_cast<size_t>(n));
    if (pending_touches_.empty()) first_pending_ = std::chrono::steady_clock::now();
    pending_touches_.emplace_back(key.str());
    maybe_flush_touches_locked();
    return blob;
  });
}

void SqliteBackend::put(ByteView key, Blob &&record, uint64_t payload_size) {
  std::lock_guard lock(mutex_);
  with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    write_txn([&] {
      flush_touches_locked();
      int64_t total = meta_get("total_size"), count = meta_get("entry_count");
      {
        StmtScope q{stmt(kOldSize)};
        sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
        const int rc = sqlite3_step(q.s);
        if (rc == SQLITE_ROW) {
          total -= sqlite3_column_int64(q.s, 0);
          --count;
        } else if (rc != SQLITE_DONE) {
          fail(rc, "cannot read an entry's size");
        }
      }
      const int64_t clock = meta_get("clock") + 1;
      {
        StmtScope q{stmt(kInsert)};
        sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
        sqlite3_bind_blob64(q.s, 2, record.data(), record.size(), SQLITE_STATIC);
        sqlite3_bind_int64(q.s, 3, static_cast<int64_t>(payload_size));
        sqlite3_bind_int64(q.s, 4, clock);
        sqlite3_bind_int64(q.s, 5, int64_t(std::time(nullptr)));
        const int rc = sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot store an entry");
      }
      total += static_cast<int64_t>(payload_size);
      ++count;
      evict_locked(total, count, key);
      meta_set("clock", clock);
      meta_set("total_size", total);
      meta_set("entry_count", count);
    });
  });
}

bool SqliteBackend::remove(ByteView key) {
  std::lock_guard lock(mutex_);
  return with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    bool removed = false;
    write_txn([&] {
      flush_touches_locked();
      StmtScope d{stmt(kDelete)};
      sqlite3_bind_blob(d.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
      int64_t size = 0;
      int rc;
      while ((rc = sqlite3_step(d.s)) == SQLITE_ROW) {
        size = sqlite3_column_int64(d.s, 0);
        removed = true;
      }
      if (rc != SQLITE_DONE) fail(rc, "cannot delete an entry");
      if (removed) {
        meta_set("total_size", meta_get("total_size") - size);
        meta_set("entry_count", meta_get("entry_count") - 1);
      }
    });
    return removed;
  });
}

uint64_t SqliteBackend::count() {
  std::lock_guard lock(mutex_);
  return with_recovery([&] { return static_cast<uint64_t>(meta_get("entry_count")); });
}

uint64_t SqliteBackend::size() {
  std::lock_guard lock(mutex_);
  return with_recovery([&] { return static_cast<uint64_t>(meta_get("total_size")); });
}

void SqliteBackend::clear() {
  std::lock_guard lock(mutex_);
  with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    write_txn([&] {
      pending_touches_.clear();
      StmtScope q{stmt(kClear)};
      const int rc = sqlite3_step(q.s);
      if (rc != SQLITE_DONE) fail(rc, "cannot clear the cache");
      meta_set("total_size", 0);
      meta_set("entry_count", 0);
    });
  });
}

uint64_t SqliteBackend::max_payload_size() const {
  // SQLite's largest blob (SQLITE_LIMIT_LENGTH, 1e9 by default) less the record's header and key.
  const int limit = db_ ? sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, -1) : 1000000000;
  return static_cast<uint64_t>(limit) - 2 * 65536 - 256;
}

}  // namespace progcache

namespace progcache {

void SqliteBackend::list(const std::function<void(const EntryInfo &)> &fn) {
  std::vector<EntryInfo> entries;  // collected first: fn may call back into the cache
  {
    std::lock_guard lock(mutex_);
    with_recovery([&] {
      entries.clear();
      StmtScope q{stmt(kList)};
      int rc;
      while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
        const auto *k = static_cast<const char *>(sqlite3_column_blob(q.s, 0));
        entries.push_back({std::string(k ? k : "", size_t(sqlite3_column_bytes(q.s, 0))),
                           uint64_t(sqlite3_column_int64(q.s, 1)), sqlite3_column_int64(q.s, 2)});
      }
      if (rc != SQLITE_DONE) fail(rc, "cannot list entries");
    });
  }
  for (const EntryInfo &e : entries) fn(e);
}

void SqliteBackend::add_counters(const PersistentCounters &d) {
  std::lock_guard lock(mutex_);
  if (read_only_) return;
  with_recovery([&] {
    write_txn([&] {
      const std::pair<const char *, int64_t> adds[] = {{"hits", d.hits},
                                                       {"misses", d.misses},
                                                       {"evictions", d.evictions},
                                                       {"compile_us_saved", d.compile_us_saved}};
      for (const auto &[name, value] : adds) {
        if (!value) continue;
        StmtScope q{stmt(kMetaAdd)};
        sqlite3_bind_text(q.s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q.s, 2, value);
        const int rc = sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot update the shared counters");
      }
    });
  });
}

PersistentCounters SqliteBackend::counters() {
  std::lock_guard lock(mutex_);
  return with_recovery([&] {
    PersistentCounters c;
    c.hits = meta_get("hits");
    c.misses = meta_get("misses");
    c.evictions = meta_get("evictions");
    c.compile_us_saved = meta_get("compile_us_saved");
    return c;
  });
}

}  // namespace progcache
