#include "backends/sqlite_backend.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "backends/sqlite_internal.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"
#include "util/trust.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

// Statements, in the order of SqliteBackend::Stmt.
constexpr const char *kSql[] = {
    // A large record is left in its pages (length() reads only the row's header) and read
    // straight into the caller's block with sqlite3_blob_read: sqlite3_column_blob would first
    // gather its overflow pages into a buffer of SQLite's own, one more copy of the whole record.
    // The entry's last use (wall clock, whole seconds; NULL without a recency row) decides
    // whether a hit records its recency (touch_interval_ms).
    ("SELECT CASE WHEN length(record) <= 32768 THEN record END, rowid, length(record),"
     " (SELECT used_at FROM recency WHERE id = entries.rowid) FROM entries WHERE key = ?1"),
    // Also gives an entry that lost its recency row (damage, a foreign writer) one again.
    ("INSERT OR REPLACE INTO recency(id, atime, used_at)"
     " SELECT rowid, ?2, ?3 FROM entries WHERE key = ?1"),
    "INSERT OR REPLACE INTO entries(key, record, size) VALUES(?1, ?2, ?3)",
    "DELETE FROM entries WHERE key = ?1 RETURNING size, rowid",
    ("SELECT r.id, e.key FROM recency r LEFT JOIN entries e ON e.rowid = r.id"
     " ORDER BY r.atime LIMIT 32"),
    "SELECT value FROM meta WHERE name = ?1",
    "INSERT OR REPLACE INTO meta(name, value) VALUES(?1, ?2)",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "DELETE FROM entries",
    ("SELECT e.key, e.size, coalesce(r.used_at, 0) FROM entries e"
     " LEFT JOIN recency r ON r.id = e.rowid ORDER BY r.atime DESC"),
    ("INSERT INTO meta(name, value) VALUES(?1, ?2)"
     " ON CONFLICT(name) DO UPDATE SET value = value + ?2"),
    "INSERT OR REPLACE INTO recency(id, atime, used_at) VALUES(?1, ?2, ?3)",
    "DELETE FROM recency WHERE id = ?1",
    "DELETE FROM recency",
    "SELECT record FROM memo WHERE name = ?1",
    "INSERT OR REPLACE INTO memo(name, record) VALUES(?1, ?2)",
    ("DELETE FROM memo WHERE rowid IN (SELECT rowid FROM memo WHERE substr(name, 1, 7) <>"
     " 'config/' ORDER BY rowid LIMIT max(0, (SELECT count(*) FROM memo) - ?1))"),
    "DELETE FROM entries WHERE rowid = ?1 RETURNING size",
    "SELECT count(*), total(max(size, 0)) FROM entries",
    ("SELECT (SELECT value FROM meta WHERE name = 'total_size'),"
     " (SELECT value FROM meta WHERE name = 'entry_count'),"
     " (SELECT value FROM meta WHERE name = 'totals_check')"),
    // Entries without a recency row, evicted once every ranked one is gone.
    "SELECT rowid, key FROM entries WHERE rowid NOT IN (SELECT id FROM recency) LIMIT 32",
    // kGet without the entry's last use, for an entry known to be used within the interval.
    "SELECT CASE WHEN length(record) <= 32768 THEN record END, rowid FROM entries WHERE key = ?1",
};

// The check value stored beside the totals: SQLite checksums no pages, so a flipped bit in a
// total would otherwise be believed (and the cap enforced against a wrong number).
int64_t totals_check(int64_t size, int64_t count) {
  const int64_t both[2] = {size, count};
  return int64_t(xxh3_64(both, sizeof both, 0x70636163686531ull));
}

constexpr size_t kFlushAfterTouches = 128;

// SQLite's global mutexes a child needs to open its own connection (the unix VFS's inode list,
// the random generator's, the main one, the allocator's), in the order SQLite nests them: the
// VFS draws random numbers (a WAL's salts) under its lock, and the generator's first use finds
// the default VFS under the main one. Held across fork() so that a parent thread inside
// sqlite3_step at that instant cannot leave one locked in the child. (Taking the main mutex
// before the VFS's, as this did, could deadlock a fork against two threads opening databases;
// TSan reported the cycle.)
constexpr int kSqliteForkMutexes[] = {SQLITE_MUTEX_STATIC_VFS1, SQLITE_MUTEX_STATIC_PRNG,
                                      SQLITE_MUTEX_STATIC_MAIN, SQLITE_MUTEX_STATIC_MEM};
void sqlite_fork_prepare() {
  for (int id : kSqliteForkMutexes)
    libsqlite().sqlite3_mutex_enter(libsqlite().sqlite3_mutex_alloc(id));
}
void sqlite_fork_release() {
  for (int i = int(std::size(kSqliteForkMutexes)) - 1; i >= 0; --i)
    libsqlite().sqlite3_mutex_leave(libsqlite().sqlite3_mutex_alloc(kSqliteForkMutexes[i]));
}

// Every SqliteBackend of the process, for the child of a fork() (close_inherited_connections).
struct LiveBackends {
  ForkSafeMutex mutex{ForkSafeMutex::kInner};
  std::vector<SqliteBackend *> list;
};
constinit LiveBackends *g_live_backends = nullptr;  // made once, with the fork handlers
constexpr auto kFlushAfterTime = std::chrono::milliseconds(500);

// A hit records its recency only when the entry was last used longer ago than this: a touch is
// a write transaction in a WAL every process shares, and most hits (a build step run again, a
// test suite's processes) use entries used moments before. Eviction order may differ only among
// entries used within the interval (docs/backends.md).
constexpr const char *kDefaultTouchInterval = "60000";

constexpr size_t kMaxRecentUses = 4096;  // SqliteBackend::RecentUses, per connection

// used_at: whole seconds (so the interval holds to within a second), -1 for an entry without a
// recency row. A use in the future (the clock went back) counts as stale: recency repairs itself.
bool recency_stale(int64_t used_at, int64_t interval_ms) {
  if (interval_ms == 0 || used_at < 0) return true;
  const int64_t age_s = int64_t(std::time(nullptr)) - used_at;
  return age_s < 0 || age_s >= interval_ms / 1000 + (interval_ms % 1000 != 0);
}

int64_t row_used_at(sqlite3_stmt *row) {
  return libsqlite().sqlite3_column_type(row, 3) == SQLITE_NULL
             ? -1
             : libsqlite().sqlite3_column_int64(row, 3);
}

}  // namespace

using namespace sqlite_detail;

// The unix VFS keeps one record per database file for the whole process (its locks as the
// kernel holds them, counted over the process's connections), and a child of fork() inherits
// the parent's: a connection the child opens to the same file finds the parent's connections
// holding a shared lock and takes none of its own from the kernel, though POSIX locks are not
// inherited, so the child read and wrote with no lock that another process could see (a last
// connection elsewhere could then checkpoint and delete the WAL under it). Closing the
// inherited connections first lets the record go, so that the child's own connections lock
// the file for themselves. Safe here: fork() waited for every connection to leave SQLite (each
// use holds a ForkSafeMutex), and the kernel's locks are the parent's, which a close in the
// child neither holds nor releases.
void close_inherited_connections() {
  if (!g_live_backends) return;
  for (SqliteBackend *backend : g_live_backends->list) backend->close_inherited();
}

void SqliteBackend::close_inherited() {
  // Every reader, taken ones too (their threads are not in the child); then the rest as any
  // close does it (the parent's pending touches are dropped: the parent records them).
  for (Reader *r : readers_) {
    close_connection(r);
    delete r;
  }
  readers_.clear();
  idle_readers_.clear();
  disconnect(false);
}

void SqliteBackend::Listing::enlist(SqliteBackend *backend) {
  std::lock_guard lock(g_live_backends->mutex);
  g_live_backends->list.push_back(backend);
  backend_ = backend;
}

SqliteBackend::Listing::~Listing() {
  if (!backend_) return;
  std::lock_guard lock(g_live_backends->mutex);
  std::erase(g_live_backends->list, backend_);
}

bool SqliteBackend::exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

SqliteBackend::SqliteBackend(Uri &uri, const BackendConfig &config)
    : config_(config), path_(uri.path) {
  libsqlite_checked();  // a library that cannot load throws here, not through the call_once
  static std::once_flag fork_hooks;
  std::call_once(fork_hooks, [] {
    libsqlite().sqlite3_initialize();      // the static mutexes exist from here on
    g_live_backends = new LiveBackends();  // never destroyed: the fork handlers outlive statics
    add_fork_participant(&sqlite_fork_prepare, &sqlite_fork_release, &close_inherited_connections);
  });
  busy_timeout_ms_ =
      static_cast<int>(parse_uint_param("busy_timeout_ms", uri.take("busy_timeout_ms", "5000")));
  touch_interval_ms_ = int64_t(std::min<uint64_t>(
      parse_uint_param("touch_interval_ms", uri.take("touch_interval_ms", kDefaultTouchInterval)),
      uint64_t(1) << 60));
  uri.expect_no_params();
  if (config_.must_exist && !exists(path_))
    throw Error(Status::not_found, "no cache at '" + path_ + "' (nothing was created)");
  // Listed and locked before its first connection: a fork() waits until it is made, and the
  // child closes it.
  listing_.enlist(this);
  std::lock_guard lock(mutex_);
  connect();
  if (config_.max_size_bytes && !read_only_) {
    with_recovery([&] {
      write_txn([&] {
        bool recounted = false;
        Totals t = load_totals_locked(&recounted);
        if (uint64_t(t.size) <= config_.max_size_bytes && !recounted) return;
        evict_locked(t, {});
        store_totals_locked(t);
      });
    });
  }
}

SqliteBackend::~SqliteBackend() {
  std::lock_guard lock(mutex_);
  bool touched;
  {
    std::lock_guard touches(touches_mutex_);
    touched = !pending_touches_.empty();
  }
  if (touched && db_ && pid_ == process_id() && !read_only_) {
    try {  // without waiting for a writer: a reader's close must not block
      try_write_txn([&] { flush_touches_locked(); });
    } catch (...) {  // recency is advisory; losing a few touches on close is harmless
    }
  }
  // A handle that left the WAL long, or stored an entry (a compile's miss: a dozen frames or
  // more, paid for once beside a compile), empties it, without waiting for anyone: every
  // process's first connection re-reads what is in it, and the processes that follow a miss are
  // its hits, which write nothing that would.
  if ((wal_frames_ >= kWalCloseCheckpointPages || stored_) && wal_ && db_ && pid_ == process_id()) {
    libsqlite().sqlite3_busy_timeout(db_, 0);
    libsqlite().sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr,
                                          nullptr);
  }
  disconnect(pid_ != process_id());
}

const char *SqliteBackend::sql_text(Stmt s) {
  static_assert(std::size(kSql) == kStmtCount);
  return kSql[s];
}

sqlite3_stmt *SqliteBackend::stmt(Stmt s) {
  if (!stmts_[s]) {
    const int rc = libsqlite().sqlite3_prepare_v3(db_, kSql[s], -1, SQLITE_PREPARE_PERSISTENT,
                                                  &stmts_[s], nullptr);
    if (rc != SQLITE_OK) fail(rc, std::string("cannot prepare '") + kSql[s] + "'");
  }
  return stmts_[s];
}

int64_t SqliteBackend::meta_get(const char *name) {
  StmtScope q{stmt(kMetaGet)};
  libsqlite().sqlite3_bind_text(q.s, 1, name, -1, SQLITE_STATIC);
  const int rc = libsqlite().sqlite3_step(q.s);
  if (rc == SQLITE_ROW) return libsqlite().sqlite3_column_int64(q.s, 0);
  if (rc == SQLITE_DONE) return 0;
  fail(rc, "cannot read cache metadata");
}

void SqliteBackend::meta_set(const char *name, int64_t value) {
  StmtScope q{stmt(kMetaSet)};
  libsqlite().sqlite3_bind_text(q.s, 1, name, -1, SQLITE_STATIC);
  libsqlite().sqlite3_bind_int64(q.s, 2, value);
  const int rc = libsqlite().sqlite3_step(q.s);
  if (rc != SQLITE_DONE) fail(rc, "cannot write cache metadata");
}

std::vector<std::string> SqliteBackend::take_touches() {
  std::lock_guard lock(touches_mutex_);
  return std::exchange(pending_touches_, {});
}

SqliteBackend::TouchDue SqliteBackend::note_touch(ByteView key) {
  std::lock_guard lock(touches_mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (pending_touches_.empty()) first_pending_ = now;
  pending_touches_.emplace_back(key.str());
  // Flushes that kept finding the main connection busy: the next hit waits for it, so that the
  // list stays bounded.
  if (pending_touches_.size() >= 8 * kFlushAfterTouches) return TouchDue::now;
  return pending_touches_.size() >= kFlushAfterTouches || now - first_pending_ >= kFlushAfterTime
             ? TouchDue::if_free
             : TouchDue::later;
}

int64_t SqliteBackend::read_clock_locked() {
  // A clock damage left negative or near INT64_MAX could not advance (the next touch would
  // overflow): it restarts after the newest believable recency.
  constexpr int64_t kMaxClock = int64_t(1) << 62;
  const int64_t clock = meta_get("clock");
  if (clock >= 0 && clock < kMaxClock) return clock;
  sqlite3_stmt *s = nullptr;
  int64_t newest = 0;
  const std::string sql =
      "SELECT coalesce(max(atime), 0) FROM recency WHERE atime >= 0 AND atime < " +
      std::to_string(kMaxClock);
  if (libsqlite().sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
      libsqlite().sqlite3_step(s) == SQLITE_ROW)
    newest = libsqlite().sqlite3_column_int64(s, 0);
  libsqlite().sqlite3_finalize(s);
  return newest;
}

void SqliteBackend::flush_touches_locked() {
  const std::vector<std::string> touches = take_touches();
  if (touches.empty()) return;
  // Only each key's last touch: the order of last touches is the LRU order, and a hot key hit
  // 128 times between flushes is written once, not 128 times.
  std::unordered_map<std::string_view, size_t> last;
  for (size_t i = 0; i < touches.size(); ++i) last[touches[i]] = i;
  int64_t clock = read_clock_locked();
  for (size_t i = 0; i < touches.size(); ++i) {
    const std::string &k = touches[i];
    if (last[k] != i) continue;
    StmtScope q{stmt(kTouch)};
    libsqlite().sqlite3_bind_blob(q.s, 1, k.data(), static_cast<int>(k.size()), SQLITE_STATIC);
    libsqlite().sqlite3_bind_int64(q.s, 2, ++clock);
    libsqlite().sqlite3_bind_int64(q.s, 3, int64_t(std::time(nullptr)));
    const int rc = libsqlite().sqlite3_step(q.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot record entry recency");
  }
  meta_set("clock", clock);
}

void SqliteBackend::flush_touches(TouchDue due) {
  // A hit never waits for a writer holding the write lock (the touches then wait for this
  // handle's next write), and waits for a thread busy on the main connection only when the list
  // has grown long.
  std::unique_lock lock(mutex_, std::defer_lock);
  if (due == TouchDue::now)
    lock.lock();
  else if (!lock.try_lock())
    return;
  if (read_only_ || !db_) {
    take_touches();
    return;
  }
  with_recovery([&] { try_write_txn([&] { flush_touches_locked(); }); });
}

bool SqliteBackend::try_write_txn(const std::function<void()> &fn) {
  // One attempt at the write lock, without the busy handler.
  libsqlite().sqlite3_busy_timeout(db_, 0);
  struct RestoreTimeout {
    sqlite3 *db;
    int ms;
    ~RestoreTimeout() { libsqlite().sqlite3_busy_timeout(db, ms); }
  } restore{db_, busy_timeout_ms_};
  {
    StmtScope begin{stmt(kBegin)};
    const int rc = libsqlite().sqlite3_step(begin.s);
    if (is_busy(rc)) return false;
    if (rc != SQLITE_DONE) fail(rc, "cannot begin a write transaction");
  }
  try {
    fn();
    StmtScope commit{stmt(kCommit)};
    const int rc = libsqlite().sqlite3_step(commit.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot commit");
  } catch (const Error &e) {
    if (libsqlite().sqlite3_get_autocommit(db_) == 0) {
      StmtScope rollback{stmt(kRollback)};
      libsqlite().sqlite3_step(rollback.s);
    }
    if (e.status() != Status::busy) throw;
    return false;
  }
  return true;
}

SqliteBackend::Totals SqliteBackend::recount_locked(bool counts_as_damage) {
  StmtScope q{stmt(kRecount)};
  const int rc = libsqlite().sqlite3_step(q.s);
  if (rc != SQLITE_ROW) fail(rc, "cannot recount the entries");
  Totals t{int64_t(libsqlite().sqlite3_column_double(q.s, 1)),
           libsqlite().sqlite3_column_int64(q.s, 0)};
  if (counts_as_damage && config_.events)
    config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
  return t;
}

SqliteBackend::Totals SqliteBackend::load_totals_locked(bool *recounted) {
  Totals t;
  bool checked = false, has_check = false;
  {
    StmtScope q{stmt(kTotals)};
    const int rc = libsqlite().sqlite3_step(q.s);
    if (rc != SQLITE_ROW) fail(rc, "cannot read the cache totals");
    has_check = libsqlite().sqlite3_column_type(q.s, 2) == SQLITE_INTEGER;
    if (libsqlite().sqlite3_column_type(q.s, 0) == SQLITE_INTEGER &&
        libsqlite().sqlite3_column_type(q.s, 1) == SQLITE_INTEGER && has_check) {
      t = {libsqlite().sqlite3_column_int64(q.s, 0), libsqlite().sqlite3_column_int64(q.s, 1)};
      checked = t.size >= 0 && t.count >= 0 &&
                libsqlite().sqlite3_column_int64(q.s, 2) == totals_check(t.size, t.count);
    }
  }
  if (recounted) *recounted = !checked;
  return checked ? t : recount_locked(has_check);
}

void SqliteBackend::store_totals_locked(const Totals &t) {
  meta_set("total_size", t.size);
  meta_set("entry_count", t.count);
  meta_set("totals_check", totals_check(t.size, t.count));
}

bool SqliteBackend::delete_row_locked(int64_t rowid, int64_t *freed, bool *had_entry) {
  *had_entry = false;
  *freed = 0;
  {
    StmtScope d{stmt(kDeleteRow)};
    libsqlite().sqlite3_bind_int64(d.s, 1, rowid);
    int rc;
    while ((rc = libsqlite().sqlite3_step(d.s)) == SQLITE_ROW) {
      *had_entry = true;
      *freed = std::max<int64_t>(0, libsqlite().sqlite3_column_int64(d.s, 0));
    }
    if (rc != SQLITE_DONE) fail(rc, "cannot evict an entry");
  }
  return delete_recency_locked(rowid) || *had_entry;
}

bool SqliteBackend::delete_recency_locked(int64_t rowid) {
  StmtScope r{stmt(kDeleteRecency)};
  libsqlite().sqlite3_bind_int64(r.s, 1, rowid);
  const int rc = libsqlite().sqlite3_step(r.s);
  if (rc != SQLITE_DONE) fail(rc, "cannot delete an entry's recency");
  return libsqlite().sqlite3_changes(db_) > 0;
}

// Deletes least-recently-used rows (by rowid: a row whose key has another type, or an index that
// no longer finds it, is deleted all the same; entries without a recency row go after every
// ranked one) until the total fits the cap. Only rows actually deleted count; totals that
// disagree with the table (negative, or over the cap with nothing left to delete) are recounted
// once. Each pass deletes a row or ends the loop.
void SqliteBackend::evict_locked(Totals &t, ByteView keep) {
  if (!config_.max_size_bytes) return;
  bool recounted = false;
  if (t.size < 0 || t.count < 0) {
    t = recount_locked();
    recounted = true;
  }
  auto candidates = [&](Stmt which) {
    std::vector<int64_t> rowids;
    StmtScope q{stmt(which)};
    int rc;
    while ((rc = libsqlite().sqlite3_step(q.s)) == SQLITE_ROW) {
      const bool is_keep = libsqlite().sqlite3_column_type(q.s, 1) == SQLITE_BLOB &&
                           ByteView(libsqlite().sqlite3_column_blob(q.s, 1),
                                    size_t(libsqlite().sqlite3_column_bytes(q.s, 1))) == keep;
      if (!is_keep) rowids.push_back(libsqlite().sqlite3_column_int64(q.s, 0));
    }
    if (rc != SQLITE_DONE) fail(rc, "cannot find entries to evict");
    return rowids;
  };
  while (uint64_t(t.size) > config_.max_size_bytes) {
    std::vector<int64_t> oldest = candidates(kOldest);
    if (oldest.empty()) oldest = candidates(kUnranked);
    bool progressed = false;
    for (const int64_t rowid : oldest) {
      int64_t freed;
      bool had_entry;
      if (delete_row_locked(rowid, &freed, &had_entry)) progressed = true;
      if (!had_entry) continue;  // a recency row left without its entry
      t.size -= freed;
      --t.count;
      if (config_.events) config_.events->evictions.fetch_add(1, std::memory_order_relaxed);
      if (t.size < 0 || uint64_t(t.size) <= config_.max_size_bytes) break;
    }
    if (t.size < 0 || t.count < 0 || (!progressed && !recounted)) {
      t = recount_locked();
      recounted = true;
    } else if (!progressed) {
      break;
    }
  }
}

SharedBlob SqliteBackend::get(ByteView key, Access access) {
  SharedBlob blob;
  int64_t used_at = -1;
  {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() && !get_with_reader(key, access, &blob, &used_at)) lock.lock();
    if (lock.owns_lock()) blob = get_locked(key, access, &used_at);
  }
  if (blob && access == Access::use && recency_stale(used_at, touch_interval_ms_)) {
    const TouchDue due = note_touch(key);
    if (due != TouchDue::later) flush_touches(due);
  }
  return blob;
}

bool SqliteBackend::RecentUses::fresh(ByteView key, int64_t interval_ms) {
  const auto it = used_at_.find(key.str());  // no string made: a lookup per hit
  if (it == used_at_.end()) return false;
  if (!recency_stale(it->second, interval_ms)) return true;
  used_at_.erase(it);
  return false;
}

void SqliteBackend::RecentUses::remember(ByteView key, int64_t used_at) {
  if (used_at_.size() >= kMaxRecentUses) used_at_.clear();
  used_at_[std::string(key.str())] = used_at;
}

bool SqliteBackend::reads_record_only(RecentUses &recent, ByteView key) const {
  // With touch_interval_ms=0 every hit records its use: the stored one is never needed.
  return touch_interval_ms_ == 0 || recent.fresh(key, touch_interval_ms_);
}

int64_t SqliteBackend::use_of_row(sqlite3_stmt *row, bool record_only, RecentUses &recent,
                                  ByteView key) const {
  if (record_only) return int64_t(std::time(nullptr));  // within the interval, or always due
  const int64_t used_at = row_used_at(row);
  if (!recency_stale(used_at, touch_interval_ms_)) recent.remember(key, used_at);
  return used_at;
}

SharedBlob SqliteBackend::get_locked(ByteView key, Access access, int64_t *used_at) {
  return with_recovery([&]() -> SharedBlob {
    const bool record_only = reads_record_only(recent_uses_, key);
    StmtScope q{stmt(record_only ? kGetRecord : kGet)};
    libsqlite().sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
    const int rc = step_while_busy(busy_timeout_ms_, [&] {
      libsqlite().sqlite3_reset(q.s);  // a no-op before the first step; keeps the bindings
      return libsqlite().sqlite3_step(q.s);
    });
    if (rc == SQLITE_DONE) return nullptr;
    if (rc != SQLITE_ROW) fail(rc, "cannot read an entry");
    *used_at = use_of_row(q.s, record_only, recent_uses_, key);
    int read_rc = SQLITE_OK;
    auto blob = read_record(db_, db_serial_, q.s, access, &read_rc);
    if (!blob) fail(read_rc, "cannot read an entry");
    return blob;
  });
}

bool SqliteBackend::get_with_reader(ByteView key, Access access, SharedBlob *out,
                                    int64_t *used_at) {
  Reader *reader = take_reader();
  if (!reader) return false;
  int rc;
  {
    std::lock_guard in_use(reader->in_use);
    const bool record_only = reads_record_only(reader->recent, key);
    StmtScope q{record_only ? reader->get_record : reader->get};
    libsqlite().sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
    rc = step_while_busy(busy_timeout_ms_, [&] {
      libsqlite().sqlite3_reset(q.s);
      return libsqlite().sqlite3_step(q.s);
    });
    if (rc == SQLITE_ROW) {
      *used_at = use_of_row(q.s, record_only, reader->recent, key);
      *out = read_record(reader->db, reader->serial, q.s, access, &rc);
      if (*out) rc = SQLITE_DONE;
    }
  }
  return_reader(reader, rc == SQLITE_DONE);
  return rc == SQLITE_DONE;
}

// row: a kGet or kGetRecord row, still stepped, so that the incremental read and the data
// version see the row's own snapshot.
SharedBlob SqliteBackend::read_record(sqlite3 *db, uint64_t serial, sqlite3_stmt *row,
                                      Access access, int *rc) {
  std::shared_ptr<Blob> blob;
  if (libsqlite().sqlite3_column_type(row, 0) != SQLITE_NULL) {
    const int n = libsqlite().sqlite3_column_bytes(row, 0);
    blob = std::make_shared<Blob>(Blob::for_read(static_cast<size_t>(n)));
    if (n)
      std::memcpy(blob->data(), libsqlite().sqlite3_column_blob(row, 0), static_cast<size_t>(n));
  } else {
    sqlite3_blob *incremental = nullptr;
    *rc = libsqlite().sqlite3_blob_open(db, "main", "entries", "record",
                                        libsqlite().sqlite3_column_int64(row, 1), 0, &incremental);
    struct CloseBlob {
      sqlite3_blob *b;
      ~CloseBlob() { libsqlite().sqlite3_blob_close(b); }
    } close_blob{incremental};
    if (*rc != SQLITE_OK) return nullptr;
    const int n = libsqlite().sqlite3_blob_bytes(incremental);
    blob = std::make_shared<Blob>(Blob::for_read(static_cast<size_t>(n)));
    *rc = libsqlite().sqlite3_blob_read(incremental, blob->data(), n, 0);
    if (*rc != SQLITE_OK) return nullptr;
  }
  // A peek (verify, export) always hashes what it reads.
  unsigned int version = 0;
  if (serial && access == Access::use && blob->size() >= VerifiedRecords::kMinSize &&
      libsqlite().sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &version) ==
          SQLITE_OK) {
    const uint64_t token = VerifiedRecords::token_of_row(
        serial, version, libsqlite().sqlite3_column_int64(row, 1), blob->size());
    blob->set_record_token(token, verified_.vouches_for(token));
  }
  return blob;
}

bool SqliteBackend::delete_entry_locked(ByteView key, Totals *t, int64_t *rowid) {
  StmtScope d{stmt(kDelete)};
  libsqlite().sqlite3_bind_blob(d.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
  bool deleted = false;
  int rc;
  while ((rc = libsqlite().sqlite3_step(d.s)) == SQLITE_ROW) {
    // A negative size is damage (the CHECK keeps every write at or above 0): the totals are
    // marked for the caller's recount instead of moved by it (past int64's range, for the
    // most negative one).
    const int64_t size = libsqlite().sqlite3_column_int64(d.s, 0);
    t->size = size < 0 ? -1 : t->size - size;
    --t->count;
    *rowid = libsqlite().sqlite3_column_int64(d.s, 1);
    deleted = true;
  }
  if (rc != SQLITE_DONE) fail(rc, "cannot delete an entry");
  return deleted;
}

void SqliteBackend::put(ByteView key, Blob &&record, uint64_t payload_size) {
  std::lock_guard lock(mutex_);
  with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    write_txn([&] {
      flush_touches_locked();
      Totals t = load_totals_locked();
      int64_t old_rowid = 0;
      if (delete_entry_locked(key, &t, &old_rowid)) delete_recency_locked(old_rowid);
      const int64_t clock = read_clock_locked() + 1;
      {
        StmtScope q{stmt(kInsert)};
        libsqlite().sqlite3_bind_blob(q.s, 1, key.data, static_cast<int>(key.size), SQLITE_STATIC);
        libsqlite().sqlite3_bind_blob64(q.s, 2, record.data(), record.size(), SQLITE_STATIC);
        libsqlite().sqlite3_bind_int64(q.s, 3, static_cast<int64_t>(payload_size));
        const int rc = libsqlite().sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot store an entry");
      }
      {
        StmtScope q{stmt(kAddRecency)};
        libsqlite().sqlite3_bind_int64(q.s, 1, libsqlite().sqlite3_last_insert_rowid(db_));
        libsqlite().sqlite3_bind_int64(q.s, 2, clock);
        libsqlite().sqlite3_bind_int64(q.s, 3, int64_t(std::time(nullptr)));
        const int rc = libsqlite().sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot record an entry's recency");
      }
      t.size += static_cast<int64_t>(payload_size);
      ++t.count;
      if (t.size < 0 || t.count < 0) t = recount_locked();
      evict_locked(t, key);
      meta_set("clock", clock);
      store_totals_locked(t);
    });
    stored_ = true;
  });
}

bool SqliteBackend::remove(ByteView key) {
  return remove_entry(key, false);
}

bool SqliteBackend::remove_damaged(ByteView key) {
  return remove_entry(key, true);
}

bool SqliteBackend::remove_entry(ByteView key, bool damaged) {
  std::lock_guard lock(mutex_);
  return with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    bool removed = false;
    write_txn([&] {
      flush_touches_locked();
      Totals t = load_totals_locked();
      int64_t rowid = 0;
      removed = delete_entry_locked(key, &t, &rowid);
      if (!removed) return;
      delete_recency_locked(rowid);
      // Damage may have reached the row's size too (a truncated page): the totals are then
      // recounted from what remains rather than adjusted by a size that cannot be believed.
      if (damaged)
        store_totals_locked(recount_locked(false));
      else
        store_totals_locked(t.size < 0 || t.count < 0 ? recount_locked() : t);
    });
    return removed;
  });
}

SqliteBackend::Totals SqliteBackend::current_totals() {
  std::lock_guard lock(mutex_);
  return with_recovery([&] {
    bool recounted = false;
    const Totals t = load_totals_locked(&recounted);
    // Keep the repair when the write lock is free; a reader never waits for it.
    if (recounted && !read_only_)
      try_write_txn([&] { store_totals_locked(recount_locked(false)); });
    return t;
  });
}

uint64_t SqliteBackend::count() {
  return uint64_t(current_totals().count);
}

uint64_t SqliteBackend::size() {
  return uint64_t(current_totals().size);
}

void SqliteBackend::clear() {
  std::lock_guard lock(mutex_);
  with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    write_txn([&] {
      take_touches();
      for (Stmt which : {kClear, kClearRecency}) {
        StmtScope q{stmt(which)};
        const int rc = libsqlite().sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot clear the cache");
      }
      store_totals_locked({});
    });
  });
}

namespace {

// SQLite's own check of the file: "" when it says ok, else its first complaints. The full
// integrity_check: quick_check does not compare an index's content with its table's, which is
// the damage that hides entries from lookups.
std::string integrity_check(sqlite3 *db) {
  sqlite3_stmt *s = nullptr;
  if (libsqlite().sqlite3_prepare_v2(db, "PRAGMA integrity_check(8)", -1, &s, nullptr) != SQLITE_OK)
    return std::string("integrity_check cannot run: ") + libsqlite().sqlite3_errmsg(db);
  std::string found;
  int rc;
  while ((rc = libsqlite().sqlite3_step(s)) == SQLITE_ROW) {
    const char *row = reinterpret_cast<const char *>(libsqlite().sqlite3_column_text(s, 0));
    if (row && std::string_view(row) != "ok")
      found += (found.empty() ? "" : "; ") + std::string(row);
  }
  if (rc != SQLITE_DONE && found.empty())
    found = std::string("integrity_check: ") + libsqlite().sqlite3_errmsg(db);
  libsqlite().sqlite3_finalize(s);
  return found;
}

}  // namespace

std::string SqliteBackend::check_storage(bool repair) {
  std::lock_guard lock(mutex_);
  return with_recovery([&]() -> std::string {
    const std::string found = integrity_check(db_);
    bool recounted = false;
    const Totals stored = load_totals_locked(&recounted);
    const Totals actual = recount_locked(false);
    std::string report = found.empty() ? "" : "SQLite's integrity_check: " + found;
    if (recounted || stored.size != actual.size || stored.count != actual.count)
      report += std::string(report.empty() ? "" : "; ") + "the totals (" +
                std::to_string(stored.count) + " entries, " + std::to_string(stored.size) +
                " bytes) did not match the entries (" + std::to_string(actual.count) + ", " +
                std::to_string(actual.size) + ")";
    if (report.empty() || !repair || read_only_) return report;
    if (!found.empty()) {
      // Damaged indexes are rebuilt from their tables, which keeps every entry; damage that
      // survives that is reset, as any other.
      const int rc = libsqlite().sqlite3_exec(db_, "REINDEX", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK || !integrity_check(db_).empty()) {
        reset_database(report);
        return report + "; reset to empty";
      }
      report += "; indexes rebuilt";
    }
    write_txn([&] { store_totals_locked(recount_locked(false)); });
    if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
    return report + "; totals recounted";
  });
}

uint64_t SqliteBackend::max_payload_size() const {
  // SQLite's largest blob (SQLITE_LIMIT_LENGTH, 1e9 by default) less the record's header and key.
  const int limit = db_ ? libsqlite().sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, -1) : 1000000000;
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
      while ((rc = libsqlite().sqlite3_step(q.s)) == SQLITE_ROW) {
        const auto *k = static_cast<const char *>(libsqlite().sqlite3_column_blob(q.s, 0));
        entries.push_back(
            {std::string(k ? k : "", size_t(libsqlite().sqlite3_column_bytes(q.s, 0))),
             uint64_t(libsqlite().sqlite3_column_int64(q.s, 1)),
             libsqlite().sqlite3_column_int64(q.s, 2)});
      }
      if (rc != SQLITE_DONE) fail(rc, "cannot list entries");
    });
  }
  for (const EntryInfo &e : entries) fn(e);
}

void SqliteBackend::add_counters(const PersistentCounters &d) {
  std::lock_guard lock(mutex_);
  if (read_only_) return;
  bool touched;
  {
    std::lock_guard touches(touches_mutex_);
    touched = !pending_touches_.empty();
  }
  // With no use due to be recorded, the counters are all a close would write: appended to the
  // journal they leave the WAL alone (docs/backends.md).
  if (!touched && journal_ && journal_->append(d)) return;
  with_recovery([&] {
    // Advisory counters never make a lookup wait for a writer: busy, they go back to the handle.
    // The pending touches and the journal's records go in the same transaction.
    std::optional<CounterJournal::Fold> fold;
    const bool done = try_write_txn([&] {
      flush_touches_locked();
      PersistentCounters sum = d;
      if (journal_ && (fold = journal_->begin_fold(0))) sum += fold->records;
      for (const auto &field : PersistentCounters::kFields) {
        const int64_t value = sum.*field.value;
        if (!value) continue;
        StmtScope q{stmt(kMetaAdd)};
        libsqlite().sqlite3_bind_text(q.s, 1, field.name, -1, SQLITE_STATIC);
        libsqlite().sqlite3_bind_int64(q.s, 2, value);
        const int rc = libsqlite().sqlite3_step(q.s);
        if (rc != SQLITE_DONE) fail(rc, "cannot update the shared counters");
      }
    });
    if (done && fold) fold->finish();
    if (!done) throw Error(Status::busy, "the shared counters are locked by a writer");
  });
}

PersistentCounters SqliteBackend::counters() {
  std::lock_guard lock(mutex_);
  return with_recovery([&] {
    PersistentCounters c = journal_ ? journal_->pending() : PersistentCounters{};
    for (const auto &field : PersistentCounters::kFields) c.*field.value += meta_get(field.name);
    return c;
  });
}

void SqliteBackend::reset_counters() {
  std::lock_guard lock(mutex_);
  with_recovery([&] {
    if (read_only_) throw Error(Status::permission, "cache database '" + path_ + "' is read-only");
    std::optional<CounterJournal::Fold> fold;
    write_txn([&] {
      if (journal_ && !(fold = journal_->begin_fold(busy_timeout_ms_)))
        throw Error(Status::busy, "the shared counters' journal '" + path_ +
                                      "-counters' is locked or unreadable; nothing was zeroed");
      for (const auto &field : PersistentCounters::kFields) meta_set(field.name, 0);
    });
    if (fold) fold->finish();
  });
}

std::optional<std::string> SqliteBackend::get_meta(std::string_view name) {
  std::lock_guard lock(mutex_);
  ensure_process();
  sqlite3_stmt *s = nullptr;
  try {
    s = stmt(kMemoGet);
  } catch (const Error &) {
    return std::nullopt;  // a database from before memos, not yet opened for writing
  }
  StmtScope q{s};
  libsqlite().sqlite3_bind_text(q.s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  const int rc = libsqlite().sqlite3_step(q.s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail(rc, "cannot read a memo");
  const auto *p = static_cast<const char *>(libsqlite().sqlite3_column_blob(q.s, 0));
  return std::string(p ? p : "", size_t(libsqlite().sqlite3_column_bytes(q.s, 0)));
}

void SqliteBackend::put_meta(std::string_view name, ByteView record) {
  std::lock_guard lock(mutex_);
  if (read_only_) return;
  with_recovery([&] { put_meta_locked(name, record); });
}

void SqliteBackend::put_meta_locked(std::string_view name, ByteView record) {
  write_txn([&] {
    if (!memo_table_ready_) {
      const int rc = libsqlite().sqlite3_exec(db_, kMemoSchema, nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(rc, "cannot create the memo table");
      memo_table_ready_ = true;
    }
    StmtScope q{stmt(kMemoPut)};
    libsqlite().sqlite3_bind_text(q.s, 1, name.data(), int(name.size()), SQLITE_STATIC);
    libsqlite().sqlite3_bind_blob64(q.s, 2, record.data, record.size, SQLITE_STATIC);
    int rc = libsqlite().sqlite3_step(q.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot write a memo");
    StmtScope trim{stmt(kMemoTrim)};
    libsqlite().sqlite3_bind_int64(trim.s, 1, int64_t(kMaxMetaRecords));
    rc = libsqlite().sqlite3_step(trim.s);
    if (rc != SQLITE_DONE) fail(rc, "cannot trim the memos");
  });
}

}  // namespace progcache
