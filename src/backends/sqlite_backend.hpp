// sqlite:PATH: one SQLite database (WAL, exact LRU by a logical clock, size cap), safe for many
// processes and threads. See docs/backends.md for the schema and guarantees.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "backends/counter_journal.hpp"
#include "util/uri.hpp"
#include "util/verified_records.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace progcache {

class SqliteBackend final : public Backend, public SharedCounters {
 public:
  SqliteBackend(Uri &uri, const BackendConfig &config);
  ~SqliteBackend() override;

  SharedBlob get(ByteView key, Access access) override;
  void note_intact(const Blob &record) override { verified_.add(record.record_token()); }
  void put(ByteView key, Blob &&record, uint64_t payload_size) override;
  // Whether a database is at path (PCACHE_OPEN_EXISTING).
  static bool exists(const std::string &path);
  // The files a database at path P is made of: P, then P + each suffix after the first.
  static constexpr const char *kFileSuffixes[] = {"", "-wal", "-shm", "-journal", "-counters"};
  bool remove(ByteView key) override;
  bool remove_damaged(ByteView key) override;
  uint64_t count() override;
  uint64_t size() override;
  void clear() override;
  uint64_t max_payload_size() const override;
  void set_max_size_bytes(uint64_t cap) override { config_.max_size_bytes = cap; }
  void list(const std::function<void(const EntryInfo &)> &fn) override;
  std::string check_storage(bool repair) override;
  void add_counters(const PersistentCounters &delta) override;
  PersistentCounters counters() override;
  void reset_counters() override;
  SharedCounters *shared_counters() override { return this; }
  std::optional<std::string> get_meta(std::string_view name) override;
  void put_meta(std::string_view name, ByteView record) override;
  std::string lock_dir() const override { return path_ + ".locks"; }

  static constexpr int kSchemaVersion = 2;
  static constexpr size_t kMaxIdleReaders = 8;

 private:
  enum Stmt {
    kGet,
    kTouch,
    kInsert,
    kDelete,
    kOldest,
    kMetaGet,
    kMetaSet,
    kBegin,
    kCommit,
    kRollback,
    kClear,
    kList,
    kMetaAdd,
    kAddRecency,
    kDeleteRecency,
    kClearRecency,
    kMemoGet,
    kMemoPut,
    kMemoTrim,
    kDeleteRow,
    kRecount,
    kTotals,
    kUnranked,
    kGetRecord,
    kStmtCount
  };

  void connect();
  void open_connection();
  // Renames a database that cannot be repaired in place (and its -wal/-shm) to
  // PATH.corrupt-<time>, then connects to a fresh one. Serialised across processes by a lock
  // file; does nothing but reconnect if another process already did it.
  void move_aside(const std::string &why);
  void check_schema_text();
  void disconnect(bool abandon);
  void ensure_process();
  void init_schema();
  void set_journal_mode();
  void reset_database(const std::string &why);
  bool remove_entry(ByteView key, bool damaged);                 // remove, or remove_damaged
  void put_meta_locked(std::string_view name, ByteView record);  // holds mutex_
  sqlite3_stmt *stmt(Stmt s);
  static const char *sql_text(Stmt s);
  // Runs fn inside BEGIN IMMEDIATE ... COMMIT, retrying busy answers until the deadline and
  // resetting the database (then retrying once) if it turns out corrupt.
  template <typename Fn>
  void write_txn(Fn &&fn);
  // One attempt at BEGIN IMMEDIATE without waiting; false (nothing done) when another
  // connection holds the write lock.
  bool try_write_txn(const std::function<void()> &fn);
  template <typename Fn>
  auto with_recovery(Fn &&fn) -> decltype(fn());
  [[noreturn]] void fail(int rc, const std::string &what);
  int64_t meta_get(const char *name);
  int64_t read_clock_locked();  // meta's LRU clock, repaired when damage stopped it
  void meta_set(const char *name, int64_t value);
  // The entries a connection found used within the touch interval, with that use (whole
  // seconds): until the interval has passed a hit on one of them reads the record alone, not
  // its recency row (the second B-tree lookup was a tenth of a hit). A use only ever moves
  // later, so a remembered one can only be older than the stored one: never a touch skipped
  // that the stored time would have asked for. Bounded; each connection has its own (the main
  // one under mutex_, a reader while taken), so hits on readers share no lock for it.
  class RecentUses {
   public:
    // Whether key's remembered use is within interval_ms of now (forgetting it when not).
    bool fresh(ByteView key, int64_t interval_ms);
    void remember(ByteView key, int64_t used_at);

   private:
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view k) const { return std::hash<std::string_view>()(k); }
    };
    std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> used_at_;
  };
  // A read-only connection of this handle's pool. A hit runs on the main connection when it is
  // free and on a reader when another thread holds it: WAL readers never wait for each other,
  // so hits scale with threads, and a single-threaded process opens no second connection.
  struct Reader {
    // Held while the connection is inside SQLite (opened, used, closed), so that fork() waits
    // for it: a thread inside SQLite may hold one of the unix VFS's per-file mutexes (a WAL's
    // shared-memory lock), which every connection of the process to that file shares, and a
    // child that inherited it held waited forever on its first read of the database.
    ForkSafeMutex in_use{ForkSafeMutex::kInner};
    sqlite3 *db = nullptr;
    sqlite3_stmt *get = nullptr;
    sqlite3_stmt *get_record = nullptr;  // kGetRecord
    uint64_t generation = 0;             // the main connection's generation it was opened against
    uint64_t serial = 0;                 // next_connection_serial
    RecentUses recent;
  };
  // *used_at: the entry's last use in whole seconds, -1 where it has no recency row (now for an
  // entry the connection knows as used within the interval: see RecentUses).
  SharedBlob get_locked(ByteView key, Access access, int64_t *used_at);
  // Whether a hit on key may run kGetRecord (the record alone) on a connection knowing recent.
  bool reads_record_only(RecentUses &recent, ByteView key) const;
  // A hit's entry's last use, from its kGet row (remembered in recent when within the interval),
  // or now for a kGetRecord row (record_only).
  int64_t use_of_row(sqlite3_stmt *row, bool record_only, RecentUses &recent, ByteView key) const;
  // Answers a lookup on a reader; false when no reader could answer (the caller then takes the
  // main connection, which reports errors and repairs damage).
  bool get_with_reader(ByteView key, Access access, SharedBlob *out, int64_t *used_at);
  Reader *take_reader();
  // healthy: the reader answered without an error and may be reused.
  void return_reader(Reader *reader, bool healthy);
  Reader *open_reader(uint64_t generation, dev_t dev, ino_t ino);
  void close_reader(Reader *reader);             // its statements, its connection, itself
  static void close_connection(Reader *reader);  // its statements and connection (db: null)
  // In the child of fork(), alone (its only thread, every lock free, every connection idle):
  // closes the connections inherited from the parent (SqliteBackend::close_inherited).
  friend void close_inherited_connections();
  void close_inherited();
  // Forgets the pool: the main connection changed (closed, moved aside, or another process's
  // after fork()). abandon: the readers belong to the parent process, so are not closed.
  // Closes only idle readers; a taken one is closed when it comes back (its generation is old).
  void drop_readers(bool abandon);
  void enable_readers();
  // The main connection's WAL hook (arg: the backend): once the WAL holds kWalCheckpointPages
  // frames, a checkpoint that also empties the file, without waiting for anyone.
  static int checkpoint_when_full(void *arg, sqlite3 *db, const char *schema, int frames);
  // The record of a kGet or kGetRecord row (one copy, whatever its size), read on the
  // connection db numbered serial (0: one whose hits are never vouched for); nullptr with *rc
  // set on failure. For a use, the record carries its row's token in the row's snapshot and
  // whether verified_ vouches for it.
  SharedBlob read_record(sqlite3 *db, uint64_t serial, sqlite3_stmt *row, Access access, int *rc);
  // A number no other connection of this process has had: what makes a snapshot's data version
  // name one database state (VerifiedRecords::token_of_row).
  static uint64_t next_connection_serial();
  enum class TouchDue { later, if_free, now };
  // Records a hit's touch, and says whether the pending touches are due to be written.
  TouchDue note_touch(ByteView key);
  std::vector<std::string> take_touches();
  void flush_touches_locked();
  // Writes the pending touches if the write lock is free (and, unless due now, mutex_ too).
  void flush_touches(TouchDue due);
  // The entry count and payload total, kept in meta with a check value over both.
  struct Totals {
    int64_t size = 0, count = 0;
  };
  // Reads the totals in one snapshot. Totals that fail their check (a flipped bit, a foreign
  // writer, negative values, a database from before the check) are recounted from the rows;
  // *recounted says so (the caller persists them where it may write).
  Totals load_totals_locked(bool *recounted = nullptr);
  void store_totals_locked(const Totals &t);
  // The totals for count() and size(), repaired first when they fail their check.
  Totals current_totals();
  void evict_locked(Totals &t, ByteView keep);
  // Deletes the entry at rowid and its recency; false if neither existed. *freed: its size.
  bool delete_row_locked(int64_t rowid, int64_t *freed, bool *had_entry);
  bool delete_recency_locked(int64_t rowid);  // false if there was none
  // Deletes key's entry, taking it out of *t; false if there was none. *rowid: its rowid.
  bool delete_entry_locked(ByteView key, Totals *t, int64_t *rowid);
  // counts_as_damage: false for a database that merely predates the check value.
  Totals recount_locked(bool counts_as_damage = true);

  BackendConfig config_;  // max_size_bytes may change while opening (set_max_size_bytes)
  std::string path_;
  std::string sqlite_path_;  // path_ through its resolved directory, as SQLite is given it
  int busy_timeout_ms_ = 5000;
  int64_t touch_interval_ms_ = 0;  // a hit touches an entry last used at least this long ago
  // Counters of closes that had nothing else to write (local WAL databases only).
  std::optional<CounterJournal> journal_;
  int wal_frames_ = 0;      // frames in the WAL after this connection's last commit (the WAL hook)
  bool stored_ = false;     // this handle stored an entry: it empties the WAL when it closes
  RecentUses recent_uses_;  // the main connection's (under mutex_)
  bool wal_ = true;
  ForkSafeMutex mutex_{ForkSafeMutex::kMiddle};
  sqlite3 *db_ = nullptr;
  uint64_t db_serial_ = 0;    // db_'s next_connection_serial; 0: its hits are never vouched for
  VerifiedRecords verified_;  // rows found intact within the second, by snapshot (note_intact)
  sqlite3_stmt *stmts_[kStmtCount] = {};
  bool read_only_ = false;
  bool memo_table_ready_ = false;  // this connection made sure the memo table exists
  long pid_ = 0;
  dev_t db_dev_ = 0;  // the database file this connection opened
  ino_t db_ino_ = 0;
  // Recency of hits not yet written (a hit stays a read); flushed in order before any write.
  ForkSafeMutex touches_mutex_{ForkSafeMutex::kInner};  // taken after mutex_, never before
  std::vector<std::string> pending_touches_;
  std::chrono::steady_clock::time_point first_pending_;
  ForkSafeMutex readers_mutex_{ForkSafeMutex::kInner};  // taken after mutex_, never before
  std::vector<Reader *> idle_readers_;
  std::vector<Reader *> readers_;  // every open reader, idle or taken (closed in a fork's child)
  bool readers_enabled_ = false;
  uint64_t reader_generation_ = 0;
  long readers_pid_ = 0;
  dev_t reader_dev_ = 0;  // db_dev_ and db_ino_, for threads that do not hold mutex_
  ino_t reader_ino_ = 0;
  // Whether this backend is on the process's list whose connections a fork's child closes.
  // Last, so that a child never finds it listed with a member not yet made or already gone.
  class Listing {
   public:
    Listing() = default;
    Listing(const Listing &) = delete;
    Listing &operator=(const Listing &) = delete;
    ~Listing();
    void enlist(SqliteBackend *backend);

   private:
    SqliteBackend *backend_ = nullptr;
  } listing_;
};

}  // namespace progcache
