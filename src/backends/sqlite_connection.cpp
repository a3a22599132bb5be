#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/sqlite_backend.hpp"
#include "backends/sqlite_internal.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"
#include "util/paths.hpp"
#include "util/test_hooks.hpp"
#include "util/trust.hpp"

// Opening, configuring, resetting and re-opening the connection (after fork()).
namespace progcache {

PCACHE_SYSTEM_LIBRARY_GETTER(LibSqlite, libsqlite, PCACHE_SQLITE_SONAME, Binding::own_first,
                             PCACHE_SQLITE_FUNCTIONS)

const LibSqlite &libsqlite_checked() {
  const LibSqlite &sqlite = libsqlite();
  const int fake = test_hooks::fake_sqlite_version();
  const int version = fake ? fake : sqlite.sqlite3_libversion_number();
  if (version < kMinSqliteVersionNumber)
    throw Error(Status::unsupported,
                std::string("SQLite ") +
                    (fake ? std::to_string(fake) : std::string(sqlite.sqlite3_libversion())) +
                    " is older than " + kMinSqliteVersion +
                    ", the first release with every statement the SQLite cache runs (upgrade "
                    "libsqlite3, or use a filestream: cache)");
  return sqlite;
}

using namespace sqlite_detail;

namespace {

// What SQLite's extended result code (and the errno under it) says of the cause.
ErrorDetail detail_of_sqlite(int extended, int sys) {
  ErrorDetail d = sys ? detail_from_errno(sys) : ErrorDetail{};
  d.sqlite_code = extended;
  switch (extended & 0xff) {
    case SQLITE_FULL:
      d.cause = Cause::no_space;
      break;
    case SQLITE_IOERR:
      if (d.cause == Cause::none) d.cause = Cause::device;
      break;
    case SQLITE_READONLY:
      d.cause = Cause::read_only;
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      d.cause = Cause::timeout;
      break;
    default:
      break;
  }
  return d;
}

// The path SQLite is given: the database's directory resolved, its own name kept. Told not to
// follow links (the file itself must not be one), SQLite refuses a link anywhere in the path,
// and a home or ~/.cache that is a link to another disk is common: every open failed there
// ("unable to open database file"). The directory checks (check_private_dir) judge the
// resolved directory too.
std::string path_through_resolved_dir(const std::string &path) {
  char real[PATH_MAX];
  if (!::realpath(parent_dir(path).c_str(), real)) return path;  // the open will say why
  return join_path(real, base_name(path));
}

}  // namespace

void SqliteBackend::fail(int rc, const std::string &what) {
  std::string msg =
      what + ": " + (db_ ? libsqlite().sqlite3_errmsg(db_) : libsqlite().sqlite3_errstr(rc));
  const int sys = db_ ? libsqlite().sqlite3_system_errno(db_) : 0;
  // The statement's own code is the extended one when it carries the detail; else the
  // connection's (the step that failed set it).
  const int extended = (rc & ~0xff) || !db_ ? rc : libsqlite().sqlite3_extended_errcode(db_);
  const ErrorDetail detail =
      detail_of_sqlite((extended & 0xff) == (rc & 0xff) ? extended : rc, sys);
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
      throw Error(
          Status::busy,
          msg + " (still locked after busy_timeout_ms=" + std::to_string(busy_timeout_ms_) + ")",
          detail);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw Error(Status::permission, msg, detail);
    case SQLITE_NOMEM:
      throw Error(Status::no_memory, msg, detail);
    case SQLITE_TOOBIG:
      throw Error(Status::too_large, msg, detail);
    case SQLITE_CANTOPEN:
      throw Error(sys == EACCES || sys == EPERM ? Status::permission : Status::io, msg, detail);
    case SQLITE_FULL:
    case SQLITE_IOERR:
      throw Error(Status::io, msg, detail);
    default:
      throw Error(Status::internal, msg, detail);
  }
}

void SqliteBackend::connect() {
  try {
    open_connection();
  } catch (const DamagedDatabase &e) {
    move_aside(e.what());
  }
}

void SqliteBackend::move_aside(const std::string &why) {
  disconnect(false);
  make_dirs(lock_dir(), config_.modes.dir);
  Fd lock(::open((lock_dir() + "/recover.lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                 config_.modes.file));
  if (struct stat st; lock && ::fstat(lock.get(), &st) == 0 && st.st_size == 0)
    set_created_mode(lock.get(), config_.modes.file);
  if (lock) ::flock(lock.get(), LOCK_EX);
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && st.st_dev == db_dev_ && st.st_ino == db_ino_) {
    const std::string aside = path_ + ".corrupt-" + std::to_string(::time(nullptr));
    if (::rename(path_.c_str(), aside.c_str()) != 0)
      throw_errno("cannot move the damaged cache database '" + path_ + "' aside");
    // The old WAL and shared memory belong to the old file: a new database must not read them.
    for (const char *suffix : kFileSuffixes)
      if (*suffix) ::rename((path_ + suffix).c_str(), (aside + suffix).c_str());
    if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
    set_thread_warning("cache database '" + path_ + "' was damaged (" + why + "); moved to '" +
                       aside + "' and a new one created");
  }
  open_connection();
}

void SqliteBackend::open_connection() {
  pid_ = process_id();
  const std::string dir = parent_dir(path_);
  make_dirs(dir, config_.modes.dir);
  check_private_dir(dir, -1, config_.allow_shared);
  for (const char *suffix : kFileSuffixes) check_owned_file(path_ + suffix, config_.allow_shared);
  // Create the file ourselves so that it has our mode, 0600 unless shared (SQLite gives its
  // -wal/-shm the same mode).
  bool created = false;
  {
    Fd fd(::open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                 config_.modes.file));
    if (!fd && errno != EEXIST && errno != EACCES && errno != EROFS)
      throw_errno("cannot create cache database '" + path_ + "'");
    if (fd) set_created_mode(fd.get(), config_.modes.file);
    created = bool(fd);
  }
  sqlite_path_ = path_through_resolved_dir(path_);
  int rc = libsqlite().sqlite3_open_v2(
      sqlite_path_.c_str(), &db_,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc == SQLITE_OK && libsqlite().sqlite3_db_readonly(db_, "main") == 1 &&
      libsqlite().sqlite3_exec(db_, "SELECT 1 FROM sqlite_master LIMIT 1", nullptr, nullptr,
                               nullptr) != SQLITE_OK) {
    // A read-only WAL database in a directory where its -shm cannot be created: read it as an
    // immutable snapshot (no locking; writers elsewhere are not seen until reopen).
    libsqlite().sqlite3_close(db_);
    db_ = nullptr;
    rc = libsqlite().sqlite3_open_v2(
        ("file:" + uri_escape(sqlite_path_) + "?immutable=1").c_str(), &db_,
        SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX,
        nullptr);
  }
  if (rc != SQLITE_OK) {
    std::string msg = "cannot open cache database";
    try {
      fail(rc, msg);
    } catch (...) {
      libsqlite().sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  libsqlite().sqlite3_busy_timeout(db_, busy_timeout_ms_);
  const DatabaseHeader header = read_database_header(path_);
  // Before anything is written (the journal mode, the schema, a reset of damage): a file that
  // was never a cache is left as it is.
  if (const std::string what = created ? "" : foreign_database(path_, db_, header); !what.empty()) {
    disconnect(false);
    throw Error(Status::invalid_arg,
                "'" + path_ + "' is not a progcache cache database (" + what +
                    "); it was left as it is: point the cache at another path, or remove it");
  }
  read_only_ = libsqlite().sqlite3_db_readonly(db_, "main") == 1;
  struct stat st = header.st;
  if (header.read || ::stat(path_.c_str(), &st) == 0) {
    db_dev_ = st.st_dev;
    db_ino_ = st.st_ino;
  }
  // SQLite reads a file whose header names an unknown file-format version as read-only (write
  // version) or not at all (read version, schema format: "unsupported file format", a plain
  // SQLITE_ERROR), and VACUUM cannot reset it: only damage does that.
  if (const uint8_t *h = header.bytes;
      header.size >= 48 && std::memcmp(h, "SQLite format 3", 16) == 0) {
    const uint32_t schema_format =
        uint32_t(h[44]) << 24 | uint32_t(h[45]) << 16 | uint32_t(h[46]) << 8 | h[47];
    if (h[18] < 1 || h[18] > 2 || h[19] < 1 || h[19] > 2 || schema_format > 4) {
      disconnect(false);
      throw DamagedDatabase("file format versions " + std::to_string(h[18]) + "/" +
                            std::to_string(h[19]) + ", schema format " +
                            std::to_string(schema_format) + " in the header");
    }
  }
  libsqlite().sqlite3_extended_result_codes(db_, 1);
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  const std::string net = network_fs_name(dir);
  wal_ = net.empty();
  // Hits vouched for by snapshot (read_record) only on a connection SQLite tells every commit
  // to: not an immutable snapshot of a database this process cannot write.
  db_serial_ = wal_ && !read_only_ ? next_connection_serial() : 0;
  wal_frames_ = 0;
  journal_.reset();
  if (wal_) journal_.emplace(path_ + "-counters", config_.modes.file, db_ino_);
  // The cache's mark beside a database it created, whether the journal is used or not (a
  // network filesystem's database has no WAL): CounterJournal::create.
  if (created) CounterJournal(path_ + "-counters", config_.modes.file, db_ino_).create();
  auto setup = [&] {
    rc = libsqlite().sqlite3_exec(db_, "PRAGMA cell_size_check=ON; PRAGMA mmap_size=0;", nullptr,
                                  nullptr, nullptr);
    if (rc != SQLITE_OK) fail(rc, "cannot configure cache database");
    if (!read_only_) {
      set_journal_mode();
      rc = libsqlite().sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot set synchronous mode");
      if (wal_) {
        // Closing writes nothing: no checkpoint (writers' commits checkpoint as the WAL grows)
        // and the -wal/-shm stay for the next process, which spares a process that only read a
        // hit two fsyncs and two unlinks at exit.
        libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
        int persist = 1;
        libsqlite().sqlite3_file_control(db_, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        // The first connection of every process rebuilds the WAL index by reading and
        // checksumming each frame since the last checkpoint (~3 us a frame here), and every
        // process that hits writes a few frames (recency, counters): with SQLite's 1,000-page
        // default a fresh process's hit grew from 7 to 10 ms as the WAL filled. A bound of
        // kWalCheckpointPages keeps that under a millisecond, for a checkpoint (two fsyncs)
        // every kWalCheckpointPages frames written. The file is cut back to kWalSizeLimit.
        libsqlite().sqlite3_wal_hook(db_, &checkpoint_when_full, this);
        const std::string limit = "PRAGMA journal_size_limit=" + std::to_string(kWalSizeLimit);
        rc = libsqlite().sqlite3_exec(db_, limit.c_str(), nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(rc, "cannot set the WAL size limit");
      }
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
  enable_readers();
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
    int rc = libsqlite().sqlite3_prepare_v2(db_, "PRAGMA journal_mode", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK && (rc = libsqlite().sqlite3_step(s)) == SQLITE_ROW)
      mode = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, 0));
    libsqlite().sqlite3_finalize(s);
    if (rc == SQLITE_ROW && mode == want) return;
    if (rc == SQLITE_ROW)
      rc = libsqlite().sqlite3_exec(db_,
                                    wal_ ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE",
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
  take_touches();
  drop_readers(abandon);
  if (!db_) return;
  if (!abandon) {
    for (auto &s : stmts_) libsqlite().sqlite3_finalize(s);
    libsqlite().sqlite3_close_v2(db_);
  }
  // A child of fork() finds the connections it inherited closed already (close_inherited, run
  // by the fork's child handler); one left open would be the parent's, and is left untouched.
  for (auto &s : stmts_) s = nullptr;
  db_ = nullptr;
  db_serial_ = 0;
}

int SqliteBackend::checkpoint_when_full(void *arg, sqlite3 *db, const char *schema, int frames) {
  static_cast<SqliteBackend *>(arg)->wal_frames_ = frames;
  if (frames < kWalCheckpointPages) return SQLITE_OK;
  // SQLite's own automatic checkpoint is PASSIVE: it copies the frames back but leaves them in
  // the file, and the next process's first connection, finding no record of what was copied,
  // reads them all again and counts none as copied; only a writer that began after a complete
  // checkpoint in the same connection restarts the log, and a process that writes once at close
  // (a hit's counters) never is one, so the WAL grew by a frame per process without end.
  // So a PASSIVE checkpoint first (it holds no lock a writer needs while it copies and syncs),
  // then, once every frame is copied, a TRUNCATE one empties the file: it holds the write lock
  // only for the truncation, and readers in the way make it give up at once (busy timeout 0: a
  // commit never waits here) until a later commit. A TRUNCATE that copied under the write lock
  // starved other processes' writers when threads kept committing (MultiProcess tests).
  int log = -1, copied = -2;
  libsqlite().sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
  if (log != copied) return SQLITE_OK;
  libsqlite().sqlite3_busy_timeout(db, 0);
  libsqlite().sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  libsqlite().sqlite3_busy_timeout(db, static_cast<SqliteBackend *>(arg)->busy_timeout_ms_);
  return SQLITE_OK;
}

uint64_t SqliteBackend::next_connection_serial() {
  static constinit std::atomic<uint64_t> serials{0};
  return serials.fetch_add(1, std::memory_order_relaxed) + 1;
}

void SqliteBackend::enable_readers() {
  std::lock_guard lock(readers_mutex_);
  ++reader_generation_;
  // Readers only where they cannot differ from the main connection: a WAL database this process
  // may write (an immutable snapshot or a rollback journal would need their own rules).
  readers_enabled_ = wal_ && !read_only_;
  readers_pid_ = pid_;
  reader_dev_ = db_dev_;
  reader_ino_ = db_ino_;
}

void SqliteBackend::drop_readers(bool abandon) {
  std::vector<Reader *> idle;
  {
    std::lock_guard lock(readers_mutex_);
    ++reader_generation_;
    readers_enabled_ = false;
    idle.swap(idle_readers_);
    if (abandon) readers_.clear();  // all of them the parent's
  }
  for (Reader *r : idle) {
    if (!abandon) close_reader(r);  // another process's connections: neither used nor closed
  }
}

void SqliteBackend::close_reader(Reader *reader) {
  {
    std::lock_guard in_use(reader->in_use);
    close_connection(reader);
  }
  {
    std::lock_guard lock(readers_mutex_);
    std::erase(readers_, reader);
  }
  delete reader;
}

void SqliteBackend::close_connection(Reader *reader) {
  libsqlite().sqlite3_finalize(std::exchange(reader->get, nullptr));
  libsqlite().sqlite3_finalize(std::exchange(reader->get_record, nullptr));
  libsqlite().sqlite3_close_v2(std::exchange(reader->db, nullptr));
}

SqliteBackend::Reader *SqliteBackend::take_reader() {
  uint64_t generation;
  dev_t dev;
  ino_t ino;
  {
    std::lock_guard lock(readers_mutex_);
    if (!readers_enabled_ || readers_pid_ != process_id()) return nullptr;
    if (!idle_readers_.empty()) {
      Reader *r = idle_readers_.back();
      idle_readers_.pop_back();
      return r;
    }
    generation = reader_generation_;
    dev = reader_dev_;
    ino = reader_ino_;
  }
  return open_reader(generation, dev, ino);
}

void SqliteBackend::return_reader(Reader *reader, bool healthy) {
  {
    std::lock_guard lock(readers_mutex_);
    if (healthy && readers_enabled_ && reader->generation == reader_generation_ &&
        readers_pid_ == process_id() && idle_readers_.size() < kMaxIdleReaders) {
      idle_readers_.push_back(reader);
      return;
    }
  }
  close_reader(reader);
}

// A reader must open the very file the main connection checked (owner, mode, directory):
// it is opened read-only without following links, and kept only if the path still names the
// same inode afterwards. Any failure leaves the lookup to the main connection.
SqliteBackend::Reader *SqliteBackend::open_reader(uint64_t generation, dev_t dev, ino_t ino) {
  auto *r = new Reader;
  r->generation = generation;
  {
    std::lock_guard lock(readers_mutex_);
    readers_.push_back(r);  // before its connection exists: a fork's child closes what it finds
  }
  std::unique_lock in_use(r->in_use);
  const int rc = libsqlite().sqlite3_open_v2(
      sqlite_path_.c_str(), &r->db,
      SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, nullptr);
  struct stat st;
  bool ok =
      rc == SQLITE_OK && ::stat(path_.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  if (ok) {
    libsqlite().sqlite3_extended_result_codes(r->db, 1);
    libsqlite().sqlite3_db_config(r->db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    libsqlite().sqlite3_db_config(r->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    libsqlite().sqlite3_busy_timeout(r->db, busy_timeout_ms_);
    ok = libsqlite().sqlite3_exec(r->db, "PRAGMA cell_size_check=ON; PRAGMA mmap_size=0;", nullptr,
                                  nullptr, nullptr) == SQLITE_OK &&
         libsqlite().sqlite3_prepare_v3(r->db, sql_text(kGet), -1, SQLITE_PREPARE_PERSISTENT,
                                        &r->get, nullptr) == SQLITE_OK &&
         libsqlite().sqlite3_prepare_v3(r->db, sql_text(kGetRecord), -1, SQLITE_PREPARE_PERSISTENT,
                                        &r->get_record, nullptr) == SQLITE_OK;
  }
  if (ok) {
    r->serial = next_connection_serial();
    return r;
  }
  in_use.unlock();
  close_reader(r);
  std::lock_guard lock(readers_mutex_);
  if (reader_generation_ == generation) readers_enabled_ = false;  // not again for this file
  return nullptr;
}

void SqliteBackend::ensure_process() {
  if (pid_ == process_id() && db_) return;
  disconnect(pid_ != process_id());
  connect();
}

void SqliteBackend::init_schema() {
  auto user_version = [&] {
    sqlite3_stmt *s = nullptr;
    int rc = libsqlite().sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &s, nullptr);
    if (rc != SQLITE_OK) fail(rc, "cannot read the schema version");
    rc = libsqlite().sqlite3_step(s);
    const int v = rc == SQLITE_ROW ? libsqlite().sqlite3_column_int(s, 0) : -1;
    libsqlite().sqlite3_finalize(s);
    if (rc != SQLITE_ROW) fail(rc, "cannot read the schema version");
    return v;
  };
  auto pragma_int = [&](const char *sql) {
    sqlite3_stmt *s = nullptr;
    int rc = libsqlite().sqlite3_prepare_v2(db_, sql, -1, &s, nullptr);
    const int v = rc == SQLITE_OK && libsqlite().sqlite3_step(s) == SQLITE_ROW
                      ? libsqlite().sqlite3_column_int(s, 0)
                      : 0;
    libsqlite().sqlite3_finalize(s);
    return v;
  };
  const int version = user_version();
  if (version > kSchemaVersion) {
    // In 64 bits: a damaged user_version may be any int, and the sum would overflow.
    if (int64_t(pragma_int("PRAGMA application_id")) != int64_t(kApplicationIdBase) + version)
      throw DamagedDatabase("schema version " + std::to_string(version) +
                            " without the application id a newer progcache writes with it");
    throw Error(Status::unsupported,
                "cache database '" + path_ + "' has schema version " + std::to_string(version) +
                    ", written by a newer progcache (this one reads version " +
                    std::to_string(kSchemaVersion) + "); refusing to misread it");
  }
  if (version == kSchemaVersion) {
    check_schema_text();
    if (!read_only_ && pragma_int("PRAGMA application_id") != kApplicationIdBase + version) {
      write_txn([&] {  // databases from before application ids get theirs
        const int rc = libsqlite().sqlite3_exec(
            db_, ("PRAGMA application_id=" + std::to_string(kApplicationIdBase + version)).c_str(),
            nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(rc, "cannot set the application id");
      });
    }
  }
  if (version < kSchemaVersion) {
    if (read_only_ && version == 1)
      throw Error(Status::permission,
                  "cache database '" + path_ +
                      "' has schema version 1 (an older progcache) and is read-only here: open "
                      "it once where it is writable to convert it in place");
    if (read_only_)
      throw Error(Status::permission,
                  "cache database '" + path_ + "' is read-only and has no progcache schema");
    // Version 1 converts in place; an older or foreign layout is rebuilt (a cache can always be
    // refilled).
    write_txn([&] {
      const int found = user_version();
      if (found == kSchemaVersion) return;  // another process got here first
      int rc = found == 1 ? libsqlite().sqlite3_exec(db_, kMigrateFrom1, nullptr, nullptr, nullptr)
                          : SQLITE_ERROR;
      // Only a layout that does not match (SQLITE_ERROR: no such table or column) is rebuilt; a
      // full disk, an I/O error or damage fails the open (or resets) with the entries kept.
      if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_ERROR) fail(rc, "cannot convert the schema");
      if (rc != SQLITE_OK) {  // a foreign layout, or a version 1 that will not convert: rebuild
        rc = libsqlite().sqlite3_exec(db_,
                                      "DROP TABLE IF EXISTS entries; DROP TABLE IF EXISTS recency;"
                                      " DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS memo;",
                                      nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(rc, "cannot drop the old schema");
        rc = libsqlite().sqlite3_exec(db_, kSchema, nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(rc, "cannot create the schema");
        store_totals_locked({});
      }
      rc = libsqlite().sqlite3_exec(
          db_,
          ("PRAGMA user_version=" + std::to_string(kSchemaVersion) +
           "; PRAGMA application_id=" + std::to_string(kApplicationIdBase + kSchemaVersion))
              .c_str(),
          nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot set the schema version");
    });
  }
}

namespace {

// A schema text with white space collapsed and identifier quotes dropped (a rename quotes names).
void append_normalized(std::string_view text, std::string *row) {
  bool space = false;
  for (const char ch : text) {
    if (ch == '"') continue;
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = true;
      continue;
    }
    if (space && !row->empty() && row->back() != '|') *row += ' ';
    space = false;
    *row += ch;
  }
  *row += '|';
}

}  // namespace

// The schema as sqlite_master holds it: "type|name|statement|" per table and index, normalized.
std::set<std::string> sqlite_detail::schema_of(sqlite3 *db) {
  std::set<std::string> out;
  sqlite3_stmt *s = nullptr;
  if (libsqlite().sqlite3_prepare_v2(db, "SELECT type, name, coalesce(sql, '') FROM sqlite_master",
                                     -1, &s, nullptr) != SQLITE_OK)
    return {{"unreadable"}};
  while (libsqlite().sqlite3_step(s) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < 3; ++c) {
      const char *text = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, c));
      append_normalized(text ? text : "", &row);
    }
    out.insert(row);
  }
  libsqlite().sqlite3_finalize(s);
  return out;
}

namespace {

// What schema_of gives for a database this version creates, and for one converted from
// version 1: the only two schemas a healthy cache has.
const std::vector<std::set<std::string>> &expected_schemas() {
  static const std::vector<std::set<std::string>> schemas = [] {
    std::vector<std::set<std::string>> out;
    for (const std::string &script :
         {std::string(kSchema), std::string(kSchemaVersion1Tables) + kMigrateFrom1}) {
      sqlite3 *db = nullptr;
      if (libsqlite().sqlite3_open(":memory:", &db) == SQLITE_OK &&
          libsqlite().sqlite3_exec(db, script.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK)
        out.push_back(schema_of(db));
      libsqlite().sqlite3_close(db);
    }
    return out;
  }();
  return schemas;
}

}  // namespace

// What SQLite stores for our own CREATE statements, from their text: the statement from the
// name on ("IF NOT EXISTS" dropped), and for a PRIMARY KEY that is not an INTEGER one an
// automatic index without a statement. Building the expected schema in a database costs a fresh
// process 6.4 M instructions (a millisecond, a sixth of a hit); this costs a few thousand. Only
// a model: a schema it does not describe is then compared with expected_schemas().
std::set<std::string> sqlite_detail::modelled_schema(std::string_view script) {
  std::set<std::string> out;
  while (!script.empty()) {
    const size_t end = std::min(script.find(';'), script.size());
    std::string_view statement = script.substr(0, end);
    script.remove_prefix(std::min(end + 1, script.size()));
    for (const std::string_view kind : {"TABLE", "INDEX"}) {
      const std::string head = "CREATE " + std::string(kind) + " ";
      if (statement.substr(0, head.size()) != head) continue;
      std::string_view rest = statement.substr(head.size());
      if (rest.substr(0, 14) == "IF NOT EXISTS ") rest.remove_prefix(14);
      const std::string_view name = rest.substr(0, rest.find_first_of("( "));
      std::string row = kind == "TABLE" ? "table|" : "index|";
      append_normalized(name, &row);
      append_normalized(head + std::string(rest), &row);
      out.insert(row);
      if (kind == "TABLE" && rest.find("PRIMARY KEY") != std::string_view::npos &&
          rest.find("INTEGER PRIMARY KEY") == std::string_view::npos)
        out.insert("index|sqlite_autoindex_" + std::string(name) + "_1||");
    }
  }
  return out;
}

// The tables' and indexes' statements, compared with the ones progcache writes: any difference
// is damage, reset like any other. A missing table or column would make statements fail to
// prepare, and a flipped bit inside a CHECK constraint leaves them preparing yet every put
// failing; a schema that matches prepares every statement, so they are prepared when first
// used (preparing all sixteen up front cost a fresh process's open ~0.1 ms).
void SqliteBackend::check_schema_text() {
  const std::set<std::string> found = schema_of(db_);
  static const std::set<std::string> fresh = modelled_schema(kSchema);
  if (found == fresh) return;
  for (const std::set<std::string> &expected : expected_schemas())
    if (found == expected) return;
  throw CorruptDatabase("its schema is not the one progcache writes (damaged or altered)");
}

namespace {

using MetaRecords = std::vector<std::pair<std::string, std::string>>;

// The lasting memos (a cap a person stored) that damage left readable; nothing if none is.
MetaRecords read_lasting_meta(sqlite3 *db) {
  MetaRecords out;
  sqlite3_stmt *s = nullptr;
  if (libsqlite().sqlite3_prepare_v2(
          db, "SELECT name, record FROM memo WHERE substr(name, 1, 7) = 'config/'", -1, &s,
          nullptr) != SQLITE_OK)
    return out;
  while (libsqlite().sqlite3_step(s) == SQLITE_ROW) {
    const auto *name = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, 0));
    const auto *record = static_cast<const char *>(libsqlite().sqlite3_column_blob(s, 1));
    if (name && Backend::is_lasting_meta(name))
      out.emplace_back(
          name, std::string(record ? record : "", size_t(libsqlite().sqlite3_column_bytes(s, 1))));
  }
  libsqlite().sqlite3_finalize(s);
  return out;
}

}  // namespace

void SqliteBackend::reset_database(const std::string &why) {
  // Reset in place: other processes may hold the file open, so it is never deleted or renamed.
  // VACUUM with RESET_DATABASE takes the exclusive lock itself. The cap a person stored is kept
  // if it can still be read (the cache verifies it when it reads it): an emptied cache must not
  // also become unbounded.
  const MetaRecords lasting = read_lasting_meta(db_);
  for (auto &s : stmts_) {
    libsqlite().sqlite3_finalize(s);
    s = nullptr;
  }
  take_touches();
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 0, nullptr);
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 1, nullptr);
  int rc = libsqlite().sqlite3_exec(db_, "VACUUM", nullptr, nullptr, nullptr);
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 0, nullptr);
  libsqlite().sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  if (rc != SQLITE_OK)
    throw DamagedDatabase(why +
                          "; resetting it in place failed: " + libsqlite().sqlite3_errmsg(db_));
  if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
  set_thread_warning("cache database '" + path_ + "' was corrupt (" + why +
                     "); it was reset to empty in place");
  set_journal_mode();
  init_schema();
  memo_table_ready_ = false;
  for (const auto &[name, record] : lasting) {
    try {
      put_meta_locked(name, ByteView(record));
    } catch (const Error &) {  // the cache then applies the default cap, never none
    }
  }
}

}  // namespace progcache
