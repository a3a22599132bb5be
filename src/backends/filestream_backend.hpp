// filestream:DIR: one file per entry, written to DIR/tmp and renamed into DIR/xx/ (atomic),
// verified on every read, evicted by mtime. Safe for many processes. See docs/backends.md.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "util/fsutil.hpp"
#include "util/uri.hpp"
#include "util/verified_records.hpp"

namespace progcache {

class FileStreamBackend final : public Backend, public SharedCounters {
 public:
  FileStreamBackend(Uri &uri, const BackendConfig &config);
  ~FileStreamBackend() override;

  SharedBlob get(ByteView key, Access access) override;
  void note_intact(const Blob &record) override { verified_.add(record.record_token()); }
  void put(ByteView key, Blob &&record, uint64_t payload_size) override;
  // Whether a file-stream cache is at dir (its format file is there; PCACHE_OPEN_EXISTING).
  static bool exists(const std::string &dir);
  bool remove(ByteView key) override;
  bool remove_damaged(ByteView key) override;
  uint64_t count() override;
  uint64_t size() override;
  void clear() override;
  void set_max_size_bytes(uint64_t cap) override { config_.max_size_bytes = cap; }
  void list(const std::function<void(const EntryInfo &)> &fn) override;
  void add_counters(const PersistentCounters &delta) override;
  PersistentCounters counters() override;
  void reset_counters() override;
  SharedCounters *shared_counters() override { return this; }
  // Memos live in DIR/meta/, one file per name, written like entries (temp file, rename).
  std::optional<std::string> get_meta(std::string_view name) override;
  void put_meta(std::string_view name, ByteView record) override;
  std::string lock_dir() const override { return dir_ + "/locks"; }
  std::string check_storage(bool repair) override;

  static constexpr int kFormatVersion = 1;
  static constexpr int kShards = 256;

 private:
  bool remove_entry(ByteView key, bool trust_header);
  struct Totals {
    int64_t count = 0;
    int64_t size = 0;
    PersistentCounters counters;
    bool recount = false;  // a damaged entry was removed: count again before writing
  };
  struct Victim {
    int64_t mtime_ns;
    int shard;
    std::string name;
  };
  class StatsLock;

  // An entry's file name, 32 hex digits of its key's XXH3-128, and its shard (the first byte),
  // made without a heap allocation (a hit's name is made on every get).
  struct EntryName {
    char text[33];
    int shard;
    const char *c_str() const { return text; }
  };
  static EntryName name_of(ByteView key);
  static std::string entry_name(ByteView key) { return name_of(key).c_str(); }
  void trim_meta(int meta_dir_fd);
  static constexpr uint64_t kMetaTrimEvery = 512;
  int shard_fd(int shard, bool create);
  // shard_fd, checked to still be the directory the shard's name holds: one replaced since it
  // was opened (by another directory, a symbolic link, a file) is opened afresh, and
  // *replaced set (its entries, which the totals count, are gone). Under the stats lock.
  int current_shard_fd(int shard, bool create, bool *replaced);
  // marker: the format file's text as read at open.
  void check_format(const std::string &marker);
  void reap_stale_temp_files();
  // A descriptor holding an flock on the temp file open on fd, until it is destroyed.
  static Fd hold_temp_lock(int fd);
  static constexpr int64_t kTempGraceSeconds = 2;
  // Whether a file exists under name, and the payload size its header declares when the header
  // is consistent with the file (nullopt for damage or junk).
  struct Stored {
    bool exists = false;
    std::optional<int64_t> size;
  };
  Stored stored_payload_size(int dir_fd, const std::string &name);
  // The totals counted again from the entries, keeping t's shared counters.
  Totals recount_keeping_counters_locked(const Totals &t);
  // The totals in DIR/stats, recounted (and rewritten) when missing, damaged, or left by a
  // holder of the lock that died while changing entries.
  Totals read_totals_locked();
  int64_t dir_mtime_ns() const;
  // The totals for count() and size(): recounted first when a shard may have been replaced.
  Totals current_totals();
  // Marks DIR/stats "entries changing" until the next write_totals_locked: call it after
  // read_totals_locked and before the first rename or unlink.
  void begin_update_locked();
  void write_totals_locked(Totals t);
  // Subtracts a removed entry's checked size, or marks t for a recount when it had none.
  void account_removal(Totals &t, const std::optional<int64_t> &size);
  // Counts the entries on disk (counters left zero); writes nothing.
  Totals rebuild_totals_locked();
  std::string temp_name();
  void evict_locked(Totals &t, int keep_shard, const std::string &keep_name);
  void list_shard(int shard, std::vector<Victim> &out);
  // Removes an entry file; *payload_size is its checked size, nullopt when it was damaged.
  bool unlink_entry(int shard, const std::string &name, std::optional<int64_t> *payload_size);
  int stats_fd();
  int meta_fd(bool create);

  BackendConfig config_;  // max_size_bytes may change while opening (set_max_size_bytes)
  std::string dir_;
  bool fsync_ = false;
  int64_t touch_interval_ns_ = 1000000000;
  int64_t stale_tmp_seconds_ = 3600;
  Fd dir_fd_;
  Fd tmp_fd_;
  std::atomic<int> meta_fd_{-1};
  std::atomic<uint64_t> meta_puts_{0};  // this process's; every kMetaTrimEvery-th trims
  VerifiedRecords verified_;            // entries found intact within the second (note_intact)
  ForkSafeMutex shard_mutex_{ForkSafeMutex::kInner};
  std::array<std::atomic<int>, kShards> shard_fds_;
  // Descriptors of shard directories found replaced: other threads may still be using them,
  // so they are closed with the backend, not when replaced.
  std::vector<int> retired_fds_;
  // A shard's name held something other than a directory (removed): the totals count entries
  // that are gone, and the next write recounts.
  std::atomic<bool> recount_needed_{false};
  ForkSafeMutex stats_mutex_{
      ForkSafeMutex::kOuter};  // flock() does not exclude threads sharing one descriptor
  Fd stats_fd_;
  long stats_pid_ = 0;
  std::atomic<unsigned> evict_cursor_{0};
  std::deque<Victim> lru_;  // exact-mode eviction order, oldest first (guarded by the stats lock)
  std::atomic<uint64_t> tmp_seq_{0};
  std::string tmp_prefix_;
};

}  // namespace progcache
