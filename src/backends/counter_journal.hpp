// The shared counters of processes that wrote nothing else: appended to a small file beside the
// SQLite database (`<db>-counters`) instead of a write transaction in the WAL that every process
// then re-reads, and folded into the database by the next write transaction that adds counters.
#pragma once

#include <sys/types.h>

#include <string>

#include "backends/backend.hpp"

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

  // Appends delta. False (nothing written) where the journal cannot be opened or written, or
  // has grown past kFoldAfterBytes: the caller then adds delta in a transaction, and folds.
  bool append(const PersistentCounters &delta) const;
  // The sum of the records now in the journal, read without a lock (a record being appended is
  // either whole or skipped).
  PersistentCounters pending() const;
  // Empties the journal under an exclusive lock and adds its records to *sum; call inside the
  // write transaction that stores *sum (a failed commit loses those counts: they are advisory).
  // True if it was emptied (or there is none); false, nothing taken, when the lock was not had
  // within wait_ms (appends hold it for a write each) or the file cannot be read.
  bool take(PersistentCounters *sum, int wait_ms) const;

  static constexpr off_t kFoldAfterBytes = 64 * 1024;

 private:
  std::string path_;
  mode_t mode_;
  ino_t db_ino_;
};

}  // namespace progcache
