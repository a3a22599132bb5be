// The shared counters of processes that wrote nothing else: appended to a small file beside the
// SQLite database (`<db>-counters`) instead of a write transaction in the WAL that every process
// then re-reads, and folded into the database by the next write transaction that adds counters.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "util/fsutil.hpp"

namespace progcache {

// Records are fixed for a given field count and carry the database file's inode (a journal left
// by a database since moved aside adds nothing to its successor) and a checksum: a torn, foreign
// or damaged record is skipped, never counted. Appends take a shared flock and a fold an
// exclusive one, so that a fold never empties a record it has not read; neither waits without
// bound (a neighbour may hold a lock on a shared cache's file for ever). Thread-safe (no state
// beyond the path); fork-safe (every call opens the file afresh).
class CounterJournal {
 public:
  CounterJournal(std::string path, mode_t mode, ino_t db_ino)
      : path_(std::move(path)), mode_(mode), db_ino_(db_ino) {}

  // Creates the journal, empty, unless a file is there already. Called beside a database this
  // process has just created: the journal then marks it as a cache's for as long as it exists,
  // where the -wal and -shm do not (any SQLite program whose last connection closes deletes
  // them), so that a database whose first page is destroyed is still known for damage to a
  // cache and not taken for a file that was never one (sqlite_ownership.cpp). Where it cannot
  // be made, only that evidence is missing.
  void create() const;
  // Appends delta. False (nothing written) where the journal cannot be opened, locked or
  // written, or has grown past kFoldAfterBytes: the caller then adds delta in a transaction, and
  // folds.
  bool append(const PersistentCounters &delta) const;
  // The sum of the records now in the journal, read without a lock (a record being appended is
  // either whole or skipped).
  PersistentCounters pending() const;
  // Folding, in two steps around the transaction that stores the records: begin_fold() reads
  // them under an exclusive lock, which the Fold holds; finish() empties the journal once that
  // transaction has committed. A Fold dropped unfinished (the transaction failed) leaves the
  // records for the next fold. A process killed between the commit and finish() counts them
  // twice: advisory counters, a window of one truncate.
  class Fold {
   public:
    PersistentCounters records;
    // False if the journal could not be emptied: the next fold counts its records again.
    bool finish();

   private:
    friend class CounterJournal;
    std::optional<Fd> fd_;  // none: there was no journal
  };
  // The fold of the journal's records; nullopt when the lock was not had within wait_ms (appends
  // hold it for a write each) or the file cannot be read.
  std::optional<Fold> begin_fold(int wait_ms) const;

  static constexpr off_t kFoldAfterBytes = 64 * 1024;

 private:
  std::string path_;
  mode_t mode_;
  ino_t db_ino_;
};

}  // namespace progcache
