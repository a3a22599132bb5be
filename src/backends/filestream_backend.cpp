#include "backends/filestream_backend.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <random>

#include "format/entry.hpp"
#include "util/error.hpp"
#include "util/hex.hpp"
#include "util/stat_identity.hpp"
#include "util/timespec_ns.hpp"
#include "util/trust.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

constexpr const char *kFormatFile = "format";
constexpr const char *kStatsFile = "stats";
constexpr const char *kTmpDir = "tmp";
constexpr uint64_t kStatsMagic = 0x3254415453534650ull;  // "PFSSTAT2"
constexpr int kStatsWords = 8;  // magic, count, size, 4 shared counters, checksum
// Written after the totals while a lock holder changes entries, cleared by its final write: a
// holder killed in between (after a rename or unlink, or half-way through an eviction or clear)
// leaves it set, and the next holder recounts. Earlier versions read and write only the
// first kStatsWords words and ignore it.
constexpr uint64_t kUpdateInProgress = 0x5441445055534650ull;  // "PFSUPDAT"
// After the flag, the counters added in 0.4 in their own checksummed block: magic, corrupt,
// uncacheable, tier_errors, tier_timeouts, checksum. Earlier versions neither read nor write it (it
// keeps what the last newer writer left); a block that fails its check reads as zeros.
constexpr uint64_t kStatsExtMagic = 0x3354415453534650ull;  // "PFSSTAT3"
constexpr int kStatsExtWords = 6;
constexpr int kStatsFileWords = kStatsWords + 1 + kStatsExtWords;
// After that, since 0.5: the cache directory's mtime when the totals were last written, in a
// checksummed block of its own (magic, mtime_ns, checksum). A shard directory replaced by
// another, a symbolic link or a file changes it, and its entries are then gone: a writer that
// finds it changed recounts. Earlier versions leave the block as it was (a stale stamp only
// costs a recount).
constexpr uint64_t kStatsDirMagic = 0x3130524944534650ull;  // "PFSDIR01"
constexpr int kStatsDirWords = 3;
// After that, every shared counter added to PersistentCounters::kFields after 0.4's eight, in
// kFields order, in a block of its own: magic, how many, kLaterRoom values, checksum. A new
// counter needs nothing here: a reader takes the first min(how many, its own) values, and an
// older writer leaves the block as it was.
constexpr uint64_t kStatsLaterMagic = 0x3130544e43534650ull;  // "PFSCNT01"
constexpr size_t kLaterRoom = 16;
constexpr int kStatsLaterWords = 3 + int(kLaterRoom);
constexpr int kStatsAllWords = kStatsFileWords + kStatsDirWords + kStatsLaterWords;
constexpr int kLaterAt = kStatsFileWords + kStatsDirWords;  // the later block's first word

// The shared counters' words in the stats file, in PersistentCounters::kFields order: the first
// four in the base block (words 3-6), those added in 0.4 in the extension (words 10-13), the
// rest in the later block.
constexpr size_t kBaseCounters = 4, kFixedCounters = 8;
static_assert(std::size(PersistentCounters::kFields) >= kFixedCounters &&
                  std::size(PersistentCounters::kFields) - kFixedCounters <= kLaterRoom,
              "the stats file's later block has room for every counter added since 0.4");
constexpr size_t kLaterCounters = std::size(PersistentCounters::kFields) - kFixedCounters;
constexpr size_t counter_word(size_t field) {
  return field < kBaseCounters    ? 3 + field
         : field < kFixedCounters ? kStatsWords + 2 + (field - kBaseCounters)
                                  : kLaterAt + 2 + (field - kFixedCounters);
}

// valid_to: the counters of kFields[0, valid_to) whose blocks passed their checks.
PersistentCounters counters_from(const uint64_t *buf, size_t valid_to) {
  PersistentCounters c;
  for (size_t i = 0; i < std::min(valid_to, std::size(PersistentCounters::kFields)); ++i)
    c.*PersistentCounters::kFields[i].value = int64_t(buf[counter_word(i)]);
  return c;
}
// Below this many entries eviction looks at every entry (exact mtime LRU); above it, at one
// shard at a time (ccache's approach), so a put never costs a full directory scan.
constexpr int64_t kExactEvictionEntries = 4096;

int64_t mtime_ns(const struct stat &st) {
  return held_ns(st.st_mtim);
}

int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return held_ns(ts);
}

// Sets mtime (and atime) from the fine-grained clock: the kernel's own timestamps come from a
// coarse clock (one tick, several ms), which would make entries written together tie in LRU order.
int64_t stamp_now(int fd) {
  struct timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[1] = ts[0];
  ::futimens(fd, ts);
  return held_ns(ts[0]);
}

bool is_entry_name(const char *n) {
  const size_t len = std::strlen(n);
  return len == 32 && std::all_of(n, n + len, [](char c) { return std::isxdigit(c); });
}

template <typename Fn>
void for_each_name(int dir_fd, Fn &&fn) {
  for (const std::string &n : names_in_dir(dir_fd)) fn(n);
}

// A put's temporary file, removed on every way out of the put before its rename, a throw
// included (the stats lock, a recount or the shard's creation can fail after it is written).
class TempEntry {
 public:
  TempEntry(int dir_fd, const std::string &name) : dir_fd_(dir_fd), name_(name) {}
  ~TempEntry() {
    if (!renamed_) ::unlinkat(dir_fd_, name_.c_str(), 0);
  }
  TempEntry(const TempEntry &) = delete;
  TempEntry &operator=(const TempEntry &) = delete;
  void renamed() { renamed_ = true; }

 private:
  int dir_fd_;
  const std::string &name_;
  bool renamed_ = false;
};

// A temporary file of ours: "<host>.<pid>.<seq>.<random>.tmp" (temp_name), the host's dots made
// underscores. The reaper deletes nothing else, whatever a tmp/ directory holds.
bool is_temp_name(const std::string &n) {
  size_t dot = n.find('.');
  if (dot == 0 || dot == std::string::npos) return false;
  for (int field = 0; field < 3; ++field) {
    const size_t next = n.find('.', dot + 1);
    if (next == std::string::npos || next == dot + 1 ||
        !std::all_of(n.begin() + long(dot) + 1, n.begin() + long(next),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    dot = next;
  }
  return n.compare(dot, std::string::npos, ".tmp") == 0;
}

// A name a cache directory holds: its own files and directories, a shard (two hex digits), and
// what a filesystem puts there (a volume's lost+found, NFS's renamed open files).
bool is_cache_dir_name(const std::string &n) {
  static const char *const kOwn[] = {kFormatFile, kStatsFile, kTmpDir,
                                     "meta",      "locks",    "lost+found"};
  if (std::any_of(std::begin(kOwn), std::end(kOwn), [&](const char *own) { return n == own; }))
    return true;
  return (n.size() == 2 && std::isxdigit(static_cast<unsigned char>(n[0])) &&
          std::isxdigit(static_cast<unsigned char>(n[1]))) ||
         n.rfind(".nfs", 0) == 0;
}

// The format marker's text (at most 63 bytes), empty when it cannot be read.
std::string read_format_marker(int dir_fd) {
  char buf[64] = {};
  Fd fd(::openat(dir_fd, kFormatFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// What a directory without our format marker holds that a cache never does, for the refusal to
// adopt it (empty: a new or damaged cache). Its tmp/ would be reaped and names it shares with
// ours overwritten: `filestream:$HOME` deleted ~/tmp's files older than an hour.
std::string foreign_names(int dir_fd) {
  std::vector<std::string> names = names_in_dir(dir_fd);
  names.erase(std::remove_if(names.begin(), names.end(), is_cache_dir_name), names.end());
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += " and " + std::to_string(names.size() - 5) + " more";
  return out;
}

}  // namespace

// Serialises updates of DIR/stats between threads (mutex) and processes (flock).
class FileStreamBackend::StatsLock {
 public:
  explicit StatsLock(FileStreamBackend &b) : lock_(b.stats_mutex_), fd_(b.stats_fd()) {
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw_errno("cannot lock '" + b.dir_ + "/stats'");
  }
  ~StatsLock() { ::flock(fd_, LOCK_UN); }

 private:
  std::unique_lock<ForkSafeMutex> lock_;
  int fd_;
};

bool FileStreamBackend::exists(const std::string &dir) {
  struct stat st;
  return ::stat(join_path(dir, kFormatFile).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

FileStreamBackend::FileStreamBackend(Uri &uri, const BackendConfig &config)
    : config_(config), dir_(uri.path) {
  fsync_ = parse_uint_param("fsync", uri.take("fsync", "0")) != 0;
  touch_interval_ns_ =
      int64_t(parse_uint_param("touch_interval_ms", uri.take("touch_interval_ms", "1000"))) *
      1000000;
  stale_tmp_seconds_ =
      int64_t(parse_uint_param("stale_tmp_seconds", uri.take("stale_tmp_seconds", "3600")));
  uri.expect_no_params();
  for (auto &f : shard_fds_) f.store(-1);
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (config_.must_exist && !exists(dir_))
    throw Error(Status::not_found, "no cache at '" + dir_ + "' (nothing was created)");
  make_dirs(dir_, config_.modes.dir);
  dir_fd_ = Fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd_) throw_errno("cannot open cache directory '" + dir_ + "'");
  check_private_dir(dir_, dir_fd_.get(), config_.allow_shared);
  const std::string marker = read_format_marker(dir_fd_.get());
  if (const std::string foreign =
          marker.rfind("progcache-filestream ", 0) == 0 ? "" : foreign_names(dir_fd_.get());
      !foreign.empty())
    throw Error(Status::invalid_arg,
                "'" + dir_ + "' is not a progcache cache directory (it holds " + foreign +
                    "); it was left as it is: point the cache at a new or "
                    "empty directory");
  if (make_dir_at(dir_fd_.get(), kTmpDir, config_.modes.dir) != 0 && errno != EEXIST &&
      errno != EROFS && errno != EACCES)
    throw_errno("cannot create '" + dir_ + "/tmp'");
  tmp_fd_ = Fd(::openat(dir_fd_.get(), kTmpDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  for (char *p = host; *p; ++p)
    if (*p == '.' || *p == '/') *p = '_';
  tmp_prefix_ = host;
  check_format(marker);
  reap_stale_temp_files();
  if (::faccessat(dir_fd_.get(), ".", W_OK, 0) == 0) {
    // Establish the accounting now (a first open counts the entries, and repairs what a killed
    // writer left), not during a later put whose own entry a recount would count twice.
    StatsLock lock(*this);
    Totals t = read_totals_locked();
    if (config_.max_size_bytes && uint64_t(t.size) > config_.max_size_bytes) {
      begin_update_locked();
      evict_locked(t, -1, "");
      write_totals_locked(t);
    }
  }
}

FileStreamBackend::~FileStreamBackend() {
  for (auto &f : shard_fds_)
    if (int fd = f.load(); fd >= 0) ::close(fd);
  for (int fd : retired_fds_) ::close(fd);
  if (int fd = meta_fd_.load(); fd >= 0) ::close(fd);
}

void FileStreamBackend::check_format(const std::string &marker) {
  const std::string want = "progcache-filestream " + std::to_string(kFormatVersion) + "\n";
  int version = 0;
  if (std::sscanf(marker.c_str(), "progcache-filestream %d", &version) == 1 &&
      version > kFormatVersion)
    throw Error(Status::unsupported, "cache directory '" + dir_ + "' has format " +
                                         std::to_string(version) +
                                         ", written by a newer progcache; refusing to misread it");
  if (marker == want) return;
  // Missing or damaged marker: rewrite it (atomically); a read-only directory just reads on.
  if (!tmp_fd_) return;
  const std::string tmp = temp_name();
  Fd out(::openat(tmp_fd_.get(), tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                  config_.modes.file));
  if (!out) return;
  set_created_mode(out.get(), config_.modes.file);
  if (write_all(out.get(), want.data(), want.size()))
    ::renameat(tmp_fd_.get(), tmp.c_str(), dir_fd_.get(), kFormatFile);
  else
    ::unlinkat(tmp_fd_.get(), tmp.c_str(), 0);
}

Fd FileStreamBackend::hold_temp_lock(int fd) {
  Fd hold(::dup(fd));
  if (hold) ::flock(hold.get(), LOCK_EX | LOCK_NB);  // a fresh file: nobody else holds it
  return hold;
}

void FileStreamBackend::reap_stale_temp_files() {
  if (!tmp_fd_) return;
  const int64_t now = now_ns();
  for_each_name(tmp_fd_.get(), [&](const std::string &name) {
    struct stat st;
    if (!is_temp_name(name) ||
        ::fstatat(tmp_fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return;
    // Never by process id: a pid says nothing across PID namespaces (containers sharing the
    // directory), where kill(pid, 0) called live writers dead. A writer holds an flock on its
    // temp file until the rename; one that is unlocked and a few seconds old (past the instant
    // between a writer's create and its lock) belongs to a writer that died. Past
    // stale_tmp_seconds, a file goes regardless (file systems where flock does not reach).
    const int64_t age = now - mtime_ns(st);
    bool stale = age > stale_tmp_seconds_ * 1000000000;
    // Dated further in the future than the grace (the clock went back) is no writer's first
    // instant either; a file made after `now` was read is a little in the future, and may be.
    const int64_t grace = kTempGraceSeconds * 1000000000;
    if (!stale && (age < -grace || age > grace)) {
      Fd probe(
          ::openat(tmp_fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      stale = probe && ::flock(probe.get(), LOCK_EX | LOCK_NB) == 0;
    }
    if (stale) ::unlinkat(tmp_fd_.get(), name.c_str(), 0);
  });
}

FileStreamBackend::EntryName FileStreamBackend::name_of(ByteView key) {
  const std::array<uint8_t, 16> h = xxh3_128(key.data, key.size);
  EntryName name;
  write_hex(ByteView(h.data(), h.size()), name.text);
  name.text[32] = '\0';
  name.shard = h[0];
  return name;
}

int FileStreamBackend::shard_fd(int shard, bool create) {
  int fd = shard_fds_[shard].load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  std::lock_guard lock(shard_mutex_);
  fd = shard_fds_[shard].load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  char name[3];
  std::snprintf(name, sizeof name, "%02x", shard);
  fd = ::openat(dir_fd_.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (make_dir_at(dir_fd_.get(), name, config_.modes.dir) != 0 && errno != EEXIST)
      throw_errno("cannot create '" + dir_ + "/" + name + "'");
    fd = ::openat(dir_fd_.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    if (errno == ELOOP || errno == ENOTDIR) {
      // A symlink or file planted where a shard directory belongs: never followed. The entries
      // the directory held are gone: the totals are recounted at the next write.
      if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
      ::unlinkat(dir_fd_.get(), name, 0);
      recount_needed_.store(true);
      if (!create) return -1;
      return shard_fd(shard, create);
    }
    throw_errno("cannot open '" + dir_ + "/" + name + "'");
  }
  if (struct stat st; !config_.allow_shared && (::fstat(fd, &st) != 0 || !owned_and_private(st))) {
    ::close(fd);
    throw Error(Status::permission, "shard directory '" + dir_ + "/" + name +
                                        "' is not owned by this user or is writable by others: "
                                        "entries in it could be planted");
  }
  shard_fds_[shard].store(fd, std::memory_order_release);
  return fd;
}

namespace {

// A record this large is read only when its header gives its size: a damaged size (a file
// extended by gigabytes of holes) was read into memory whole, and a compile through the cache
// failed with "out of memory" instead of compiling. Smaller ones are read at once (a damaged one
// fails its checksum), which spares every hit a second read.
constexpr uint64_t kCheckHeaderFirstBytes = 64 << 20;

// What a hit reads before it knows the file's size when its thread keeps no spare block.
constexpr size_t kFirstReadBytes = 16 * 1024;

// The first bytes of the large record open on fd when its header does not give its size (for
// the cache layer to find inconsistent and remove, saying so); nullptr when it does.
SharedBlob start_of_misfit(int fd, const struct stat &st) {
  auto head = std::make_shared<Blob>(kEntryProbeSize);
  const ssize_t n = ::pread(fd, head->data(), head->size(), 0);
  const size_t got = n > 0 ? size_t(n) : 0;
  if (got >= kEntryHeaderSize &&
      entry_payload_size_checked(ByteView(head->data(), got), uint64_t(st.st_size)))
    return nullptr;
  head->shrink(got);
  return head;
}

}  // namespace

SharedBlob FileStreamBackend::get(ByteView key, Access access) {
  const EntryName name = name_of(key);
  const int dfd = shard_fd(name.shard, false);
  if (dfd < 0) return nullptr;
  Fd fd(sys::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0,
                    sys::Op::open_entry));
  if (!fd) {
    if (errno == ENOENT) return nullptr;
    if (errno == ELOOP) {  // a planted symlink is damage, never followed
      if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
      ::unlinkat(dfd, name.c_str(), 0);
      return nullptr;
    }
    throw_errno("cannot open cache entry '" + dir_ + "/" + std::string(name.text, 2) + "/" +
                name.c_str() + "'");
  }
  // Read first, stat after: one read into the thread's spare block usually holds the whole
  // record, and the fstat after it says so, and vouches that the bytes read did not change
  // since they were found intact; a hit makes the system calls of a plain read (open, read,
  // fstat, close), where a stat, read and second stat made a vouched hit cost one more.
  struct timespec coarse_before;  // before the read and fstat: see StatIdentity::settled_before
  ::clock_gettime(CLOCK_REALTIME_COARSE, &coarse_before);
  Blob first = Blob::for_unsized_read(kFirstReadBytes);
  ssize_t got;
  do got = sys::pread(fd.get(), first.data(), first.size(), 0);
  while (got < 0 && errno == EINTR);
  const int read_errno = errno;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat cache entry");
  if (!config_.allow_shared && !owned_and_private(st)) {
    // Not ours, or writable by others: whoever could write it could have planted it. What was
    // read of it is dropped unlooked at.
    if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
    ::unlinkat(dfd, name.c_str(), 0);
    return nullptr;
  }
  if (!S_ISREG(st.st_mode) || size_t(st.st_size) < kEntryHeaderSize) {
    // Not an entry (a FIFO, a directory, a truncated file): the cache layer will remove it.
    return std::make_shared<Blob>(0);
  }
  if (got < 0) {
    errno = read_errno;
    throw_errno("cannot read cache entry");
  }
  const size_t size = size_t(st.st_size);
  if (size_t(got) > size) return std::make_shared<Blob>(0);  // shrank under us: damage
  const bool whole = size_t(got) == size;
  if (!whole && uint64_t(size) > kCheckHeaderFirstBytes)
    if (SharedBlob misfit = start_of_misfit(fd.get(), st)) return misfit;
  auto blob = std::make_shared<Blob>(whole ? std::move(first) : Blob::for_read(size));
  if (whole) {
    blob->fit_read(size);
  } else {
    // Larger than the block (or a short read): the rest after what was read. The block goes
    // back as the thread's spare, for the next such hit's first read.
    std::memcpy(blob->data(), first.data(), size_t(got));
    size_t first_capacity = 0;
    keep_spare_block(first.release_block(&first_capacity), first_capacity);
    if (!pread_all(fd.get(), blob->data() + got, size - size_t(got), off_t(got))) {
      if (errno == 0) return std::make_shared<Blob>(0);  // shrank under us: treated as damage
      throw_errno("cannot read cache entry");
    }
  }
  // A peek (verify, export) always hashes what it reads; so does a hit on a small entry, which
  // hashes in about the time vouching takes.
  if (access == Access::use && size >= VerifiedRecords::kMinSize) {
    const StatIdentity identity = StatIdentity::of(st);
    const uint64_t token = VerifiedRecords::token_of_file(identity, coarse_before);
    // Vouched for only if the file did not change while it was read: the fstat came after a
    // single read, or a second one after the rest's read still finds it the same.
    struct stat after;
    const bool vouched =
        verified_.vouches_for(token) &&
        (whole || (::fstat(fd.get(), &after) == 0 && StatIdentity::of(after) == identity));
    blob->set_record_token(token, vouched);
  }
  // Refresh recency, at most once per touch_interval_ms per entry: a hit stays a read. Timed by
  // the coarse clock already read (behind the fine one by at most a tick: a touch may come that
  // much later, never sooner); an interval of 0 touches at every hit.
  // A use dated more than a second in the future (the clock went back) is stamped again: left
  // alone, the entry would stay the newest until the clock caught up. Less is the coarse
  // clock's lag behind the stamp of an entry just written or touched.
  const int64_t age = held_ns(coarse_before) - mtime_ns(st);
  if (access == Access::use &&
      (touch_interval_ns_ == 0 || age < -1000000000 || age >= touch_interval_ns_))
    stamp_now(fd.get());
  return blob;
}

std::string FileStreamBackend::check_storage(bool repair) {
  if (!tmp_fd_) return "";  // read-only: nothing to recount into
  StatsLock lock(*this);
  const Totals stored = read_totals_locked();
  const Totals actual = rebuild_totals_locked();
  if (stored.count == actual.count && stored.size == actual.size) return "";
  std::string report = "the totals (" + std::to_string(stored.count) + " entries, " +
                       std::to_string(stored.size) + " bytes) did not match the entries (" +
                       std::to_string(actual.count) + ", " + std::to_string(actual.size) + ")";
  if (!repair) return report;
  Totals fixed = actual;
  fixed.counters = stored.counters;
  begin_update_locked();
  write_totals_locked(fixed);
  return report + "; totals recounted";
}

int FileStreamBackend::current_shard_fd(int shard, bool create, bool *replaced) {
  const int fd = shard_fd(shard, create);
  if (fd < 0) return fd;
  char name[3];
  std::snprintf(name, sizeof name, "%02x", shard);
  struct stat held, named;
  if (::fstat(fd, &held) == 0 && ::fstatat(dir_fd_.get(), name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
      held.st_dev == named.st_dev && held.st_ino == named.st_ino)
    return fd;
  *replaced = true;
  if (config_.events) config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(shard_mutex_);
    int expected = fd;
    if (shard_fds_[shard].compare_exchange_strong(expected, -1)) retired_fds_.push_back(fd);
  }
  return shard_fd(shard, create);
}

FileStreamBackend::Stored FileStreamBackend::stored_payload_size(int dir_fd,
                                                                 const std::string &name) {
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return {errno != ENOENT, std::nullopt};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {true, std::nullopt};
  uint8_t head[kEntryProbeSize];
  const ssize_t n = ::pread(fd.get(), head, sizeof head, 0);
  if (n < ssize_t(kEntryHeaderSize)) return {true, std::nullopt};
  // Only a size the header's layout and the file's size agree on: a flipped bit or a junk file
  // named like an entry must never move the totals.
  const auto size = entry_payload_size_checked(ByteView(head, size_t(n)), uint64_t(st.st_size));
  if (!size || *size > uint64_t(INT64_MAX)) return {true, std::nullopt};
  // Another key's well-formed entry under this name (copied, or moved to another shard) is
  // reached by no key: it must not be counted either. Checked when the key fits in the probe.
  if (const auto key = entry_key_in(ByteView(head, size_t(n))); key && entry_name(*key) != name)
    return {true, std::nullopt};
  return {true, int64_t(*size)};
}

void FileStreamBackend::put(ByteView key, Blob &&record, uint64_t payload_size) {
  const EntryName entry = name_of(key);
  const std::string name = entry.c_str();
  const int shard = entry.shard;
  if (!tmp_fd_) throw Error(Status::permission, "cache directory '" + dir_ + "' is not writable");
  const std::string tmp = temp_name();
  Fd fd(sys::openat(tmp_fd_.get(), tmp.c_str(),
                    O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, config_.modes.file,
                    sys::Op::create_temp));
  if (!fd) throw_errno("cannot create a temporary file in '" + dir_ + "/tmp'");
  TempEntry temp(tmp_fd_.get(), tmp);
  set_created_mode(fd.get(), config_.modes.file);
  // Locked until it is renamed into place (the duplicate keeps the lock past the close below): a
  // reaper in any process, any PID namespace, sees a live writer by the lock, not by its pid.
  const Fd writer_lock = hold_temp_lock(fd.get());
  auto discard = [&](const std::string &what) {  // temp removes the file as this throws
    const int err = errno;
    fd = Fd();
    throw_errno(what, err);
  };
  if (!write_all(fd.get(), record.data(), record.size())) discard("cannot write a cache entry");
  const int64_t written_ns = stamp_now(fd.get());
  if (fsync_ && sys::fsync(fd.get()) != 0) discard("cannot fsync a cache entry");
  if (::close(fd.release()) != 0) discard("cannot close a cache entry");
  // Replace and account under the lock, so that concurrent writers of one key cannot each
  // count the entry as new; the costly part (writing the temp file) stays outside it.
  StatsLock lock(*this);
  Totals t = read_totals_locked();
  bool replaced = false;
  // The shard is created here, after the stamp check above and before write_totals_locked
  // stamps the directory's mtime again: its creation changes that mtime, and made outside the
  // lock it looked like a shard replaced behind our back, a recount of every entry.
  const int dfd = current_shard_fd(shard, true, &replaced);
  if (dfd < 0) discard("cannot open a shard directory");
  t.recount |= replaced || recount_needed_.exchange(false);
  const Stored old = stored_payload_size(dfd, name);
  begin_update_locked();
  if (sys::renameat(tmp_fd_.get(), tmp.c_str(), dfd, name.c_str()) != 0) {
    const int err = errno;
    write_totals_locked(t);  // nothing changed
    errno = err;             // the rename's reason, not the stats file's
    discard("cannot move a cache entry into place");
  }
  temp.renamed();
  if (fsync_) ::fsync(dfd);
  if (!lru_.empty()) lru_.push_back({written_ns, shard, name});  // the newest entry
  if ((old.exists && !old.size) || t.recount) {
    // It replaced a damaged entry whose recorded size nobody knows, or a shard was replaced:
    // count again.
    t = recount_keeping_counters_locked(t);
  } else {
    t.count += old.exists ? 0 : 1;
    t.size = std::max<int64_t>(0, t.size + int64_t(payload_size) - old.size.value_or(0));
  }
  if (config_.max_size_bytes && uint64_t(t.size) > config_.max_size_bytes)
    evict_locked(t, shard, name);
  write_totals_locked(t);
}

int FileStreamBackend::meta_fd(bool create) {
  int fd = meta_fd_.load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  std::lock_guard lock(shard_mutex_);
  if ((fd = meta_fd_.load(std::memory_order_acquire)) >= 0) return fd;
  fd = ::openat(dir_fd_.get(), "meta", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (make_dir_at(dir_fd_.get(), "meta", config_.modes.dir) != 0 && errno != EEXIST)
      throw_errno("cannot create '" + dir_ + "/meta'");
    fd = ::openat(dir_fd_.get(), "meta", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    throw_errno("cannot open '" + dir_ + "/meta'");
  }
  meta_fd_.store(fd, std::memory_order_release);
  return fd;
}

std::optional<std::string> FileStreamBackend::get_meta(std::string_view name) {
  const int dfd = meta_fd(false);
  if (dfd < 0) return std::nullopt;
  const std::string file = entry_name(name);
  Fd fd(::openat(dfd, file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20) ||
      (!config_.allow_shared && !owned_and_private(st)))
    return std::nullopt;
  std::string record(size_t(st.st_size), '\0');
  if (!pread_all(fd.get(), record.data(), record.size(), 0)) return std::nullopt;
  return record;
}

void FileStreamBackend::put_meta(std::string_view name, ByteView record) {
  if (!tmp_fd_) return;  // a read-only cache keeps no memos
  const int dfd = meta_fd(true);
  const std::string tmp = temp_name();
  Fd fd(sys::openat(tmp_fd_.get(), tmp.c_str(),
                    O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, config_.modes.file,
                    sys::Op::create_temp));
  if (fd) set_created_mode(fd.get(), config_.modes.file);
  if (!fd) throw_errno("cannot create a temporary file in '" + dir_ + "/tmp'");
  const Fd writer_lock = hold_temp_lock(fd.get());
  const bool ok = write_all(fd.get(), record.data, record.size) && ::close(fd.release()) == 0 &&
                  sys::renameat(tmp_fd_.get(), tmp.c_str(), dfd, entry_name(name).c_str()) == 0;
  if (!ok) {
    const int err = errno;
    ::unlinkat(tmp_fd_.get(), tmp.c_str(), 0);
    throw_errno("cannot write a memo in '" + dir_ + "/meta'", err);
  }
  // Counting the memos costs a directory read: a process's first memo and every
  // kMetaTrimEvery-th do it, so the directory stays within kMaxMetaRecords + a few hundred.
  if (meta_puts_.fetch_add(1, std::memory_order_relaxed) % kMetaTrimEvery == 0) trim_meta(dfd);
}

namespace {

// Whether a memo file holds a lasting record (a stored cap), by the key in its header.
bool holds_lasting_meta(int dir_fd, const std::string &name) {
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  uint8_t head[kEntryProbeSize];
  const ssize_t n = fd ? ::pread(fd.get(), head, sizeof head, 0) : -1;
  if (n <= 0) return false;
  const auto key = entry_key_in(ByteView(head, size_t(n)));
  return key && Backend::is_lasting_meta(key->str());
}

}  // namespace

// Oldest first (by mtime: a memo rewritten is young again) down to 90% of the bound, so that the
// next trims find little to do; a lasting record stays.
void FileStreamBackend::trim_meta(int meta_dir_fd) {
  std::vector<std::pair<int64_t, std::string>> memos;
  for_each_name(meta_dir_fd, [&](const std::string &name) {
    struct stat st;
    if (is_entry_name(name.c_str()) &&
        ::fstatat(meta_dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      memos.emplace_back(mtime_ns(st), name);
  });
  if (memos.size() <= kMaxMetaRecords) return;
  std::sort(memos.begin(), memos.end());
  size_t excess = memos.size() - kMaxMetaRecords * 9 / 10;
  for (const auto &memo : memos) {
    if (excess == 0) break;
    if (holds_lasting_meta(meta_dir_fd, memo.second)) continue;
    if (::unlinkat(meta_dir_fd, memo.second.c_str(), 0) == 0 || errno == ENOENT) --excess;
  }
}

std::string FileStreamBackend::temp_name() {
  // "<host>.<pid>.<seq>.<random>.tmp": lets the reaper tell a dead local writer's leftovers.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return tmp_prefix_ + "." + std::to_string(::getpid()) + "." +
         std::to_string(tmp_seq_.fetch_add(1)) + "." + std::to_string(rng()) + ".tmp";
}

bool FileStreamBackend::unlink_entry(int shard, const std::string &name,
                                     std::optional<int64_t> *payload_size) {
  const int dfd = shard_fd(shard, false);
  if (dfd < 0) return false;
  const Stored stored = stored_payload_size(dfd, name);
  if (sys::unlinkat(dfd, name.c_str(), 0) != 0) {
    if (errno == ENOENT) return false;
    // A directory planted where an entry belongs: removed if empty, otherwise left (never
    // followed or read).
    if (errno == EISDIR || errno == EPERM) {
      *payload_size = std::nullopt;
      return ::unlinkat(dfd, name.c_str(), AT_REMOVEDIR) == 0;
    }
    throw_errno("cannot remove cache entry '" + dir_ + "/" + name.substr(0, 2) + "/" + name + "'");
  }
  *payload_size = stored.size;
  return true;
}

FileStreamBackend::Totals FileStreamBackend::recount_keeping_counters_locked(const Totals &t) {
  Totals fresh = rebuild_totals_locked();
  fresh.counters = t.counters;
  return fresh;
}

bool FileStreamBackend::remove(ByteView key) {
  return remove_entry(key, true);
}

bool FileStreamBackend::remove_damaged(ByteView key) {
  return remove_entry(key, false);
}

bool FileStreamBackend::remove_entry(ByteView key, bool trust_header) {
  const EntryName entry = name_of(key);
  const std::string name = entry.c_str();
  const int shard = entry.shard;
  std::optional<int64_t> size;
  StatsLock lock(*this);
  // Deleting a missing key changes nothing: no accounting I/O for it.
  struct stat st;
  const int dfd = shard_fd(shard, false);
  if (dfd < 0 || (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT))
    return false;
  Totals t = read_totals_locked();
  begin_update_locked();
  const bool removed = unlink_entry(shard, name, &size);
  if (removed) account_removal(t, trust_header ? size : std::nullopt);
  write_totals_locked(t);
  return removed;
}

int FileStreamBackend::stats_fd() {
  // A descriptor inherited across fork() shares its flock with the parent: reopen per process.
  if (!stats_fd_ || stats_pid_ != process_id()) {
    int fd = ::openat(dir_fd_.get(), kStatsFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                      config_.modes.file);
    if (fd < 0 && (errno == EACCES || errno == EROFS))
      fd = ::openat(dir_fd_.get(), kStatsFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP) {
      ::unlinkat(dir_fd_.get(), kStatsFile, 0);
      fd = ::openat(dir_fd_.get(), kStatsFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                    config_.modes.file);
    }
    if (fd < 0) throw_errno("cannot open '" + dir_ + "/stats'");
    if (struct stat st; ::fstat(fd, &st) == 0 && st.st_size == 0)
      set_created_mode(fd, config_.modes.file);  // just created: the umask may have narrowed it
    stats_fd_ = Fd(fd);
    stats_pid_ = process_id();
  }
  return stats_fd_.get();
}

int64_t FileStreamBackend::dir_mtime_ns() const {
  struct stat st;
  return ::fstat(dir_fd_.get(), &st) == 0 ? mtime_ns(st) : 0;
}

FileStreamBackend::Totals FileStreamBackend::read_totals_locked() {
  uint64_t buf[kStatsAllWords] = {};
  const ssize_t n = ::pread(stats_fd_.get(), buf, sizeof buf, 0);
  auto has = [&](int words) { return n >= ssize_t(8 * words); };
  const uint64_t *dirs = buf + kStatsFileWords;
  const int64_t stamped = has(kStatsFileWords + kStatsDirWords) && dirs[0] == kStatsDirMagic &&
                                  dirs[2] == xxh3_64(dirs, 16)
                              ? int64_t(dirs[1])
                              : 0;
  const bool whole = has(kStatsWords) && buf[0] == kStatsMagic &&
                     buf[kStatsWords - 1] == xxh3_64(buf, 8 * (kStatsWords - 1)) &&
                     int64_t(buf[1]) >= 0 && int64_t(buf[2]) >= 0;
  const uint64_t *ext = buf + kStatsWords + 1;
  const bool ext_valid = has(kStatsFileWords) && ext[0] == kStatsExtMagic &&
                         ext[kStatsExtWords - 1] == xxh3_64(ext, 8 * (kStatsExtWords - 1));
  const uint64_t *later = buf + kLaterAt;
  const bool later_valid =
      has(kStatsAllWords) && later[0] == kStatsLaterMagic && later[1] <= kLaterRoom &&
      later[kStatsLaterWords - 1] == xxh3_64(later, 8 * (kStatsLaterWords - 1));
  const size_t valid_to = !ext_valid     ? kBaseCounters
                          : !later_valid ? kFixedCounters
                                         : kFixedCounters + size_t(later[1]);
  if (whole && buf[kStatsWords] != kUpdateInProgress) {
    Totals t{int64_t(buf[1]), int64_t(buf[2]), {}};
    t.counters = counters_from(buf, valid_to);
    t.recount = stamped != 0 && stamped != dir_mtime_ns();  // a shard may have been replaced
    return t;
  }
  // Missing or damaged accounting, or a holder of the lock died while changing entries: count
  // again from the entries themselves, keeping the shared counters when they survived.
  Totals t = rebuild_totals_locked();
  if (whole) t.counters = counters_from(buf, valid_to);
  write_totals_locked(t);
  return t;
}

void FileStreamBackend::begin_update_locked() {
  const uint64_t flag = kUpdateInProgress;
  ssize_t n;
  do {
    n = ::pwrite(stats_fd_.get(), &flag, sizeof flag, 8 * kStatsWords);
  } while (n < 0 && errno == EINTR);
}

void FileStreamBackend::account_removal(Totals &t, const std::optional<int64_t> &size) {
  if (!size) {  // a damaged entry: what the totals recorded for it is unknown
    t.recount = true;
    return;
  }
  t.count = std::max<int64_t>(0, t.count - 1);
  t.size = std::max<int64_t>(0, t.size - *size);
}

void FileStreamBackend::write_totals_locked(Totals t) {
  if (t.recount) t = recount_keeping_counters_locked(t);
  uint64_t buf[kStatsAllWords] = {};
  buf[0] = kStatsMagic;
  buf[1] = uint64_t(std::max<int64_t>(t.count, 0));
  buf[2] = uint64_t(std::max<int64_t>(t.size, 0));
  buf[kStatsWords] = 0;  // no update in progress
  buf[kStatsWords + 1] = kStatsExtMagic;
  for (size_t i = 0; i < std::size(PersistentCounters::kFields); ++i)
    buf[counter_word(i)] = uint64_t(t.counters.*PersistentCounters::kFields[i].value);
  buf[kStatsWords - 1] = xxh3_64(buf, 8 * (kStatsWords - 1));
  buf[kStatsFileWords - 1] = xxh3_64(buf + kStatsWords + 1, 8 * (kStatsExtWords - 1));
  uint64_t *dirs = buf + kStatsFileWords;
  dirs[0] = kStatsDirMagic;
  dirs[1] = uint64_t(dir_mtime_ns());
  dirs[2] = xxh3_64(dirs, 16);
  uint64_t *later = buf + kLaterAt;
  later[0] = kStatsLaterMagic;
  later[1] = kLaterCounters;
  later[kStatsLaterWords - 1] = xxh3_64(later, 8 * (kStatsLaterWords - 1));
  ssize_t n;
  do {
    n = ::pwrite(stats_fd_.get(), buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  // A failed accounting write only makes the estimate stale; the next rebuild repairs it.
}

FileStreamBackend::Totals FileStreamBackend::rebuild_totals_locked() {
  Totals t;
  recount_needed_.store(false);
  for (int s = 0; s < kShards; ++s) {
    bool replaced = false;
    const int dfd = current_shard_fd(s, false, &replaced);
    if (dfd < 0) continue;
    for_each_name(dfd, [&](const std::string &name) {
      if (!is_entry_name(name.c_str())) return;
      const Stored stored = stored_payload_size(dfd, name);
      if (stored.size) {
        ++t.count;
        t.size += *stored.size;
      } else if (stored.exists && tmp_fd_) {
        // Damage or junk named like an entry: it would fail verification when read, and left
        // in place it would be counted by its own claims. Removed, never counted.
        if (::unlinkat(dfd, name.c_str(), 0) == 0 && config_.events)
          config_.events->corrupt.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  return t;
}

void FileStreamBackend::list_shard(int shard, std::vector<Victim> &out) {
  const int dfd = shard_fd(shard, false);
  if (dfd < 0) return;
  for_each_name(dfd, [&](const std::string &name) {
    struct stat st;
    if (!is_entry_name(name.c_str())) return;
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      out.push_back({mtime_ns(st), shard, name});
  });
}

void FileStreamBackend::evict_locked(Totals &t, int keep_shard, const std::string &keep_name) {
  const uint64_t cap = config_.max_size_bytes;
  auto evict_from = [&](std::vector<Victim> &victims, uint64_t target) {
    std::sort(victims.begin(), victims.end(),
              [](const Victim &a, const Victim &b) { return a.mtime_ns < b.mtime_ns; });
    for (const Victim &v : victims) {
      if (uint64_t(t.size) <= target) break;
      if (v.shard == keep_shard && v.name == keep_name) continue;
      std::optional<int64_t> size;
      if (!unlink_entry(v.shard, v.name, &size)) continue;
      account_removal(t, size);
      if (config_.events) config_.events->evictions.fetch_add(1, std::memory_order_relaxed);
    }
  };
  if (t.count <= kExactEvictionEntries) {
    // Exact mtime LRU from a sorted listing kept between puts: a capped put costs O(1) amortised,
    // not a scan of every directory. Each victim's mtime is checked before it goes: an entry
    // touched since the listing (a hit, another process's put) moves to the back instead.
    for (int pass = 0; pass < 2 && uint64_t(t.size) > cap; ++pass) {
      if (lru_.empty()) {
        std::vector<Victim> all;
        for (int s = 0; s < kShards; ++s) list_shard(s, all);
        // The listing counts the files; if the accounting disagrees (a writer of a version
        // without the update mark killed inside the lock), recount before choosing victims.
        if (int64_t(all.size()) != t.count) {
          const PersistentCounters keep = t.counters;
          t = rebuild_totals_locked();
          t.counters = keep;
        }
        std::sort(all.begin(), all.end(),
                  [](const Victim &a, const Victim &b) { return a.mtime_ns < b.mtime_ns; });
        lru_.assign(all.begin(), all.end());
      }
      size_t requeued = 0;
      while (uint64_t(t.size) > cap && !lru_.empty() && requeued <= lru_.size()) {
        Victim v = std::move(lru_.front());
        lru_.pop_front();
        if (v.shard == keep_shard && v.name == keep_name) {
          lru_.push_back(std::move(v));
          ++requeued;
          continue;
        }
        const int dfd = shard_fd(v.shard, false);
        struct stat st;
        if (dfd < 0 || ::fstatat(dfd, v.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (mtime_ns(st) != v.mtime_ns) {  // touched since listed: now among the newest
          v.mtime_ns = mtime_ns(st);
          lru_.push_back(std::move(v));
          ++requeued;
          continue;
        }
        std::optional<int64_t> size;
        if (!unlink_entry(v.shard, v.name, &size)) continue;
        account_removal(t, size);
        if (config_.events) config_.events->evictions.fetch_add(1, std::memory_order_relaxed);
      }
      if (uint64_t(t.size) > cap) lru_.clear();  // stale or exhausted: list again
    }
    if (uint64_t(t.size) > cap) {  // accounting had drifted
      const PersistentCounters keep = t.counters;
      t = rebuild_totals_locked();
      t.counters = keep;
    }
    return;
  }
  lru_.clear();
  // Large cache: evict down to 90% of the cap from the oldest entries of one shard at a time,
  // so the scan cost is amortised over many puts.
  const uint64_t target = cap - cap / 10;
  for (int tries = 0; tries < kShards && uint64_t(t.size) > target; ++tries) {
    std::vector<Victim> victims;
    list_shard(int(evict_cursor_.fetch_add(1) % kShards), victims);
    // Take at most the older half of the shard, so one pass never empties a shard.
    std::sort(victims.begin(), victims.end(),
              [](const Victim &a, const Victim &b) { return a.mtime_ns < b.mtime_ns; });
    victims.resize((victims.size() + 1) / 2);
    evict_from(victims, target);
  }
}

FileStreamBackend::Totals FileStreamBackend::current_totals() {
  StatsLock lock(*this);
  Totals t = read_totals_locked();
  if (!t.recount || !tmp_fd_) return t;
  begin_update_locked();
  t = recount_keeping_counters_locked(t);
  write_totals_locked(t);
  return t;
}

uint64_t FileStreamBackend::count() {
  return uint64_t(current_totals().count);
}

uint64_t FileStreamBackend::size() {
  return uint64_t(current_totals().size);
}

void FileStreamBackend::clear() {
  StatsLock lock(*this);
  lru_.clear();
  if (::faccessat(dir_fd_.get(), ".", W_OK, 0) != 0)
    throw_errno("cannot clear cache directory '" + dir_ + "'");
  Totals t = read_totals_locked();
  begin_update_locked();
  for (int s = 0; s < kShards; ++s) {
    const int dfd = shard_fd(s, false);
    if (dfd < 0) continue;
    for_each_name(dfd, [&](const std::string &name) {
      std::optional<int64_t> size;
      if (unlink_entry(s, name, &size)) account_removal(t, size);
    });
  }
  write_totals_locked(t);
}

}  // namespace progcache

namespace progcache {

void FileStreamBackend::list(const std::function<void(const EntryInfo &)> &fn) {
  std::vector<std::pair<int64_t, EntryInfo>> entries;
  for (int shard = 0; shard < kShards; ++shard) {
    const int dfd = shard_fd(shard, false);
    if (dfd < 0) continue;
    for_each_name(dfd, [&](const std::string &name) {
      if (!is_entry_name(name.c_str())) return;
      Fd fd(::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      struct stat st;
      uint8_t header[kEntryProbeSize];
      ssize_t n = -1;
      if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
          (n = ::pread(fd.get(), header, sizeof header, 0)) < ssize_t(kEntryHeaderSize))
        return;
      const auto payload =
          entry_payload_size_checked(ByteView(header, size_t(n)), uint64_t(st.st_size));
      if (!payload) return;
      const ByteView head(header, size_t(n));
      const auto key_size = entry_key_size(head);
      if (!key_size || kEntryHeaderSize + *key_size > uint64_t(st.st_size)) return;
      std::string key(*key_size, '\0');
      if (const auto in_head = entry_key_in(head))
        key.assign(in_head->str());
      else if (!pread_all(fd.get(), key.data(), *key_size, kEntryHeaderSize))
        return;
      entries.push_back({mtime_ns(st), EntryInfo{std::move(key), *payload, int64_t(st.st_mtime)}});
    });
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  for (const auto &e : entries) fn(e.second);
}

void FileStreamBackend::add_counters(const PersistentCounters &delta) {
  if (::faccessat(dir_fd_.get(), ".", W_OK, 0) != 0) return;
  StatsLock lock(*this);
  Totals t = read_totals_locked();
  t.counters += delta;
  write_totals_locked(t);
}

PersistentCounters FileStreamBackend::counters() {
  StatsLock lock(*this);
  return read_totals_locked().counters;
}

void FileStreamBackend::reset_counters() {
  if (::faccessat(dir_fd_.get(), ".", W_OK, 0) != 0)
    throw_errno("cannot reset the counters of cache directory '" + dir_ + "'");
  StatsLock lock(*this);
  Totals t = read_totals_locked();
  t.counters = {};
  write_totals_locked(t);
}

}  // namespace progcache
