#include "backends/counter_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/fsutil.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

constexpr size_t kFieldCount = std::size(PersistentCounters::kFields);
constexpr uint32_t kMagic = 0x31434350;  // "PCC1"
constexpr uint64_t kSeed = 0x636f756e74657273ull;

struct Record {
  uint32_t magic = kMagic;
  uint32_t fields = kFieldCount;
  uint64_t db_ino = 0;
  int64_t values[kFieldCount] = {};
  uint64_t check = 0;
};
static_assert(sizeof(Record) == 16 + 8 * kFieldCount + 8, "no padding in a record");

uint64_t checksum(const Record &r) {
  return xxh3_64(&r, offsetof(Record, check), kSeed);
}

// Adds every valid record in bytes to *sum. After a bad one the scan moves on a byte at a time,
// so that one damaged record costs only itself.
void add_records(const std::string &bytes, ino_t db_ino, PersistentCounters *sum) {
  size_t at = 0;
  while (at + sizeof(Record) <= bytes.size()) {
    Record r;
    std::memcpy(&r, bytes.data() + at, sizeof r);
    if (r.magic != kMagic || r.fields != kFieldCount || r.check != checksum(r)) {
      ++at;
      continue;
    }
    at += sizeof r;
    if (r.db_ino != uint64_t(db_ino)) continue;
    PersistentCounters counts;
    for (size_t i = 0; i < kFieldCount; ++i)
      counts.*PersistentCounters::kFields[i].value = r.values[i];
    *sum += counts;
  }
}

// What a journal can hold: appends stop at kFoldAfterBytes, and a few processes appending at once
// may pass it by a record each. A longer file is damage (or a neighbour's doing: a sparse file
// of gigabytes costs no disk), and only this much of its start is read: reading all of it made
// every process that counted a hit allocate and read the whole file.
constexpr uint64_t kMaxJournalBytes = 4 * uint64_t(CounterJournal::kFoldAfterBytes);

// The first kMaxJournalBytes of the open journal, or nullopt if it cannot be read.
std::optional<std::string> read_journal(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string bytes(size_t(std::min<uint64_t>(uint64_t(st.st_size), kMaxJournalBytes)), '\0');
  if (!bytes.empty() && !pread_all(fd, bytes.data(), bytes.size(), 0)) return std::nullopt;
  return bytes;
}

}  // namespace

void CounterJournal::create() const {
  const Fd fd(
      ::open(path_.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode_));
  struct stat st;
  if (fd && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    set_created_mode(fd.get(), mode_);
}

bool CounterJournal::append(const PersistentCounters &delta) const {
  Fd fd(::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
               mode_));
  if (!fd) return false;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size >= kFoldAfterBytes)
    return false;
  if (st.st_size == 0) set_created_mode(fd.get(), mode_);
  Record r;
  r.db_ino = uint64_t(db_ino_);
  for (size_t i = 0; i < kFieldCount; ++i)
    r.values[i] = delta.*PersistentCounters::kFields[i].value;
  r.check = checksum(r);
  // Never waits: a fold holds the lock for a read and a truncate, and a neighbour who can write
  // a shared cache's files could hold it for ever; busy, the counts go into a transaction.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return false;
  // One write of fewer than PIPE_BUF bytes to an O_APPEND file: whole or (a full disk) short,
  // and a short record is skipped by every reader.
  return ::write(fd.get(), &r, sizeof r) == ssize_t(sizeof r);
}

PersistentCounters CounterJournal::pending() const {
  PersistentCounters sum;
  const Fd fd(::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd)
    if (const std::optional<std::string> bytes = read_journal(fd.get()))
      add_records(*bytes, db_ino_, &sum);
  return sum;
}

std::optional<CounterJournal::Fold> CounterJournal::begin_fold(int wait_ms) const {
  Fold fold;
  Fd fd(::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return errno == ENOENT ? std::optional<Fold>(std::move(fold)) : std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::optional<std::string> bytes = read_journal(fd.get());
  if (!bytes) return std::nullopt;
  add_records(*bytes, db_ino_, &fold.records);  // finish() empties all of it, read or not
  fold.fd_ = std::move(fd);
  return fold;
}

bool CounterJournal::Fold::finish() {
  // Still under the lock: nothing was appended since the read.
  const bool emptied = !fd_ || ::ftruncate(fd_->get(), 0) == 0;
  fd_.reset();
  return emptied;
}

}  // namespace progcache
