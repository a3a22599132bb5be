// Which stored records this process found intact within the current second, so that a hit
// reading the same unchanged record again need not hash its bytes again (docs/security.md, "What
// a hit checks"). A record is named by a token: a hash of what identifies its stored bytes (a
// file's identity; a database connection's snapshot and row) and of the second. Lock-free: a
// fixed table of tokens; a token in its slot vouches, anything else does not.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "util/stat_identity.hpp"
#include "util/xxhash.hpp"

namespace progcache {

class VerifiedRecords {
 public:
  // From this record size on a hit may be vouched for: below it, XXH3 takes about as long as
  // vouching does (the coarse clock and a 56-byte hash; for a row, a file control SQLite answers
  // from memory; for a file nothing more, its fstat follows the read). A 4 KiB hit spent ~150 ns
  // of ~1.3-1.7 us on its checksum.
  static constexpr size_t kMinSize = 2 * 1024;

  // The token of a file stat'ed as id after CLOCK_REALTIME_COARSE read coarse_before: 0 (no
  // token, never vouched for) when a later change might keep its identity (settled_before).
  static uint64_t token_of_file(const StatIdentity &id, const struct timespec &coarse_before) {
    if (!id.settled_before(coarse_before)) return 0;
    return token_of({'f', id.dev, id.ino, id.size, uint64_t(id.mtime_ns), uint64_t(id.ctime_ns)});
  }
  // The token of a database row read by the connection numbered connection (a number no other
  // connection of the process has had) in the snapshot whose data version (SQLite's
  // SQLITE_FCNTL_DATA_VERSION, which any commit by any connection changes) was data_version.
  static uint64_t token_of_row(uint64_t connection, uint64_t data_version, int64_t rowid,
                               uint64_t size) {
    return token_of({'r', connection, data_version, uint64_t(rowid), size, 0});
  }

  // true when the record of token was found intact (add) within token's second.
  bool vouches_for(uint64_t token) const {
    return token != 0 && slot(token).load(std::memory_order_relaxed) == token;
  }
  // Records that the record of token was read and found intact (a token of 0 is ignored).
  void add(uint64_t token) {
    if (token != 0) slot(token).store(token, std::memory_order_relaxed);
  }

 private:
  // A token is good for the rest of the current second of the monotonic clock: bytes that change
  // under an unchanged identity (rot on a disk read back after the page cache dropped it, a write
  // through a mapping) are hashed again within a second.
  static uint64_t token_of(std::array<uint64_t, 6> identity) {
    struct timespec now;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    const uint64_t words[] = {identity[0], identity[1], identity[2],         identity[3],
                              identity[4], identity[5], uint64_t(now.tv_sec)};
    return xxh3_64(words, sizeof words) | 1;
  }
  static constexpr size_t kSlots = 1024;  // a record whose slot another took is hashed again
  std::atomic<uint64_t> &slot(uint64_t token) const { return slots_[(token >> 1) % kSlots]; }
  mutable std::array<std::atomic<uint64_t>, kSlots> slots_{};
};

}  // namespace progcache
