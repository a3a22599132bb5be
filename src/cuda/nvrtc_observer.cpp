#include "cuda/nvrtc_observer.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

#include "cuda/elf_file.hpp"
#include "cuda/elf_imports.hpp"
#include "util/fork_guard.hpp"
#include "util/paths.hpp"
#include "util/stat_identity.hpp"

// The 64-bit and extended stat structures the recorders pass through without reading.
extern "C" {
struct stat64;
struct statx;
}

namespace progcache {

// ---- the observations -------------------------------------------------------------------------

namespace {

std::string query_of(const NvrtcEvent &e) {
  std::string q(1, char('a' + int(e.kind)));
  q += std::to_string(e.kind == NvrtcEvent::Kind::access ? e.mode : 0);
  q += '\0';
  q += e.path;
  if (e.kind == NvrtcEvent::Kind::time_text) q += '\0' + e.text;  // each time asked, kept
  return q;
}

bool same_answer(const NvrtcEvent &a, const NvrtcEvent &b) {
  return a.error == b.error && a.dev == b.dev && a.ino == b.ino && a.mode == b.mode &&
         a.has_text == b.has_text && (a.content_kept || b.content_kept || a.text == b.text) &&
         (a.kind != NvrtcEvent::Kind::read ||
          (a.size == b.size && a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns));
}

}  // namespace

void NvrtcObservation::add(const NvrtcEvent &e) {
  std::lock_guard lock(mutex_);
  if (e.kind == NvrtcEvent::Kind::time_text) saw_time_ = true;
  auto [it, fresh] = index_.emplace(query_of(e), events_.size());
  if (fresh) {
    events_.push_back(e);
  } else if (!same_answer(events_[it->second], e)) {
    events_[it->second].changed = true;
  }
}

void NvrtcObservation::mark_incomplete(const std::string &why) {
  std::lock_guard lock(mutex_);
  if (incomplete_.empty()) incomplete_ = why;
}

std::vector<NvrtcEvent> NvrtcObservation::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::string NvrtcObservation::incomplete() const {
  std::lock_guard lock(mutex_);
  return incomplete_;
}

bool NvrtcObservation::saw_compiler() const {
  std::lock_guard lock(mutex_);
  return saw_time_;
}

// ---- who records ------------------------------------------------------------------------------

namespace {

// Live scopes: a thread's own, and every live one for calls from threads no scope claims.
ForkSafeMutex g_scopes_mutex{ForkSafeMutex::kInner};
std::vector<NvrtcObservation *> g_live;
std::atomic<int> g_live_count{0};
thread_local NvrtcObservation *t_observation = nullptr;

// Hands e to whoever records; cheap when no compile is being observed.
void record(const NvrtcEvent &e) {
  if (g_live_count.load(std::memory_order_acquire) == 0) return;
  if (NvrtcObservation *mine = t_observation) {
    mine->add(e);
    return;
  }
  std::lock_guard lock(g_scopes_mutex);
  for (NvrtcObservation *o : g_live) o->add(e);
}

void record_incomplete(const std::string &why) {
  if (g_live_count.load(std::memory_order_acquire) == 0) return;
  if (NvrtcObservation *mine = t_observation) {
    mine->mark_incomplete(why);
    return;
  }
  std::lock_guard lock(g_scopes_mutex);
  for (NvrtcObservation *o : g_live) o->mark_incomplete(why);
}

int file_type(mode_t mode) {
  return int(mode & S_IFMT);
}

void record_stat(NvrtcEvent::Kind kind, const char *path, int rc, int err, const struct stat *st) {
  if (!path) return;
  NvrtcEvent e;
  e.kind = kind;
  e.path = path;
  e.error = rc == 0 ? 0 : err;
  if (rc == 0 && st) {
    e.mode = file_type(st->st_mode);
    e.dev = uint64_t(st->st_dev);
    e.ino = uint64_t(st->st_ino);
  }
  record(e);
}

// statx and the stat64 variants fill other structures: the path is stat'ed again for the
// record (the same answer unless the file changes in between, which the check after the
// compile notices).
void record_stat_again(NvrtcEvent::Kind kind, const char *path, int rc, int err) {
  if (!path) return;
  struct stat st;
  const int again = kind == NvrtcEvent::Kind::lstat ? ::lstat(path, &st) : ::stat(path, &st);
  record_stat(kind, path, rc, err, rc == 0 && again == 0 ? &st : nullptr);
}

constexpr uint64_t kMaxKeptContent = uint64_t(64) << 20;

void record_open(const char *path, bool for_writing, int fd, int err) {
  if (!path) return;
  NvrtcEvent e;
  e.kind = for_writing ? NvrtcEvent::Kind::write : NvrtcEvent::Kind::read;
  e.path = path;
  e.error = fd >= 0 ? 0 : err;
  struct stat st;
  if (fd >= 0 && !for_writing && ::fstat(fd, &st) == 0) {
    e.mode = file_type(st.st_mode);
    const StatIdentity id = StatIdentity::of(st);
    e.dev = id.dev;
    e.ino = id.ino;
    e.size = id.size;
    e.mtime_ns = id.mtime_ns;
    e.ctime_ns = id.ctime_ns;
    // Changed within the timestamps' granularity (or dated where times do not compare): what
    // NVRTC reads is kept now, since the stat cannot vouch for it later (pread: NVRTC's file
    // position is left alone).
    if (id.is_racy() && S_ISREG(st.st_mode)) {
      if (e.size > kMaxKeptContent) {
        record_incomplete(std::string("header '") + path + "' changed just now and is too large");
        return;
      }
      e.text.resize(e.size);
      size_t got = 0;
      while (got < e.size) {
        const ssize_t n = ::pread(fd, e.text.data() + got, e.size - got, off_t(got));
        if (n <= 0) break;
        got += size_t(n);
      }
      if (got != e.size) {
        record_incomplete(std::string("header '") + path + "' could not be read whole");
        return;
      }
      e.content_kept = true;
    }
  }
  record(e);
}

bool opens_for_writing(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) != 0;
}

bool fopen_mode_writes(const char *mode) {
  return !mode || mode[0] != 'r' || std::strchr(mode, '+') != nullptr;
}

void record_text(NvrtcEvent::Kind kind, const char *name, const char *answer) {
  NvrtcEvent e;
  e.kind = kind;
  if (name) e.path = name;
  e.has_text = answer != nullptr;
  if (answer) e.text = answer;
  record(e);
}

void record_time_text(const char *text) {
  if (text) record_text(NvrtcEvent::Kind::time_text, "", text);
}

void record_relative_to_fd(int dirfd, const char *path, const char *what) {
  if (path && path[0] != '/' && dirfd != AT_FDCWD)
    record_incomplete(std::string("NVRTC called ") + what + " relative to a directory descriptor");
}

}  // namespace

// ---- the recorders ----------------------------------------------------------------------------
// Each calls the function the object called before (the C library, or a sanitizer's
// interceptor), keeps errno as that call left it, and records the query and its answer.

namespace {

#define PCACHE_ORIGINAL(name) g_original_##name
#define PCACHE_DECLARE_ORIGINAL(ret, name, params)             \
  using name##_fn = ret(*) params;                             \
  void *PCACHE_ORIGINAL(name) = nullptr;                       \
  [[maybe_unused]] inline name##_fn original_##name() {        \
    return reinterpret_cast<name##_fn>(PCACHE_ORIGINAL(name)); \
  }

PCACHE_DECLARE_ORIGINAL(int, open, (const char *, int, ...))
PCACHE_DECLARE_ORIGINAL(int, open64, (const char *, int, ...))
PCACHE_DECLARE_ORIGINAL(int, openat, (int, const char *, int, ...))
PCACHE_DECLARE_ORIGINAL(int, openat64, (int, const char *, int, ...))
PCACHE_DECLARE_ORIGINAL(FILE *, fopen, (const char *, const char *))
PCACHE_DECLARE_ORIGINAL(FILE *, fopen64, (const char *, const char *))
PCACHE_DECLARE_ORIGINAL(FILE *, freopen, (const char *, const char *, FILE *))
PCACHE_DECLARE_ORIGINAL(FILE *, freopen64, (const char *, const char *, FILE *))
PCACHE_DECLARE_ORIGINAL(int, __xstat, (int, const char *, struct stat *))
PCACHE_DECLARE_ORIGINAL(int, __xstat64, (int, const char *, struct stat64 *))
PCACHE_DECLARE_ORIGINAL(int, __lxstat, (int, const char *, struct stat *))
PCACHE_DECLARE_ORIGINAL(int, __lxstat64, (int, const char *, struct stat64 *))
PCACHE_DECLARE_ORIGINAL(int, stat, (const char *, struct stat *))
PCACHE_DECLARE_ORIGINAL(int, stat64, (const char *, struct stat64 *))
PCACHE_DECLARE_ORIGINAL(int, lstat, (const char *, struct stat *))
PCACHE_DECLARE_ORIGINAL(int, lstat64, (const char *, struct stat64 *))
PCACHE_DECLARE_ORIGINAL(int, __fxstatat, (int, int, const char *, struct stat *, int))
PCACHE_DECLARE_ORIGINAL(int, __fxstatat64, (int, int, const char *, struct stat64 *, int))
PCACHE_DECLARE_ORIGINAL(int, fstatat, (int, const char *, struct stat *, int))
PCACHE_DECLARE_ORIGINAL(int, fstatat64, (int, const char *, struct stat64 *, int))
PCACHE_DECLARE_ORIGINAL(int, statx, (int, const char *, int, unsigned, struct statx *))
PCACHE_DECLARE_ORIGINAL(int, access, (const char *, int))
PCACHE_DECLARE_ORIGINAL(int, faccessat, (int, const char *, int, int))
PCACHE_DECLARE_ORIGINAL(int, euidaccess, (const char *, int))
PCACHE_DECLARE_ORIGINAL(int, eaccess, (const char *, int))
PCACHE_DECLARE_ORIGINAL(int, statfs, (const char *, struct statfs *))
PCACHE_DECLARE_ORIGINAL(int, statfs64, (const char *, void *))
PCACHE_DECLARE_ORIGINAL(char *, realpath, (const char *, char *))
PCACHE_DECLARE_ORIGINAL(char *, canonicalize_file_name, (const char *))
PCACHE_DECLARE_ORIGINAL(ssize_t, readlink, (const char *, char *, size_t))
PCACHE_DECLARE_ORIGINAL(ssize_t, readlinkat, (int, const char *, char *, size_t))
PCACHE_DECLARE_ORIGINAL(DIR *, opendir, (const char *))
PCACHE_DECLARE_ORIGINAL(char *, getcwd, (char *, size_t))
PCACHE_DECLARE_ORIGINAL(char *, get_current_dir_name, (void))
PCACHE_DECLARE_ORIGINAL(char *, getenv, (const char *))
PCACHE_DECLARE_ORIGINAL(char *, secure_getenv, (const char *))
PCACHE_DECLARE_ORIGINAL(time_t, time, (time_t *))
PCACHE_DECLARE_ORIGINAL(char *, ctime, (const time_t *))
PCACHE_DECLARE_ORIGINAL(char *, ctime_r, (const time_t *, char *))
PCACHE_DECLARE_ORIGINAL(struct tm *, localtime, (const time_t *))
PCACHE_DECLARE_ORIGINAL(struct tm *, localtime_r, (const time_t *, struct tm *))
PCACHE_DECLARE_ORIGINAL(struct tm *, gmtime, (const time_t *))
PCACHE_DECLARE_ORIGINAL(struct tm *, gmtime_r, (const time_t *, struct tm *))
PCACHE_DECLARE_ORIGINAL(size_t, strftime, (char *, size_t, const char *, const struct tm *))
PCACHE_DECLARE_ORIGINAL(size_t, __strftime_l,
                        (char *, size_t, const char *, const struct tm *, locale_t))
PCACHE_DECLARE_ORIGINAL(size_t, strftime_l,
                        (char *, size_t, const char *, const struct tm *, locale_t))
PCACHE_DECLARE_ORIGINAL(int, chdir, (const char *))
PCACHE_DECLARE_ORIGINAL(int, fchdir, (int))
PCACHE_DECLARE_ORIGINAL(int, mkdir, (const char *, mode_t))
PCACHE_DECLARE_ORIGINAL(int, remove, (const char *))
PCACHE_DECLARE_ORIGINAL(int, unlink, (const char *))
PCACHE_DECLARE_ORIGINAL(int, rmdir, (const char *))
PCACHE_DECLARE_ORIGINAL(int, rename, (const char *, const char *))
PCACHE_DECLARE_ORIGINAL(int, system, (const char *))
PCACHE_DECLARE_ORIGINAL(FILE *, popen, (const char *, const char *))
PCACHE_DECLARE_ORIGINAL(pid_t, fork, (void))
PCACHE_DECLARE_ORIGINAL(pid_t, vfork, (void))
PCACHE_DECLARE_ORIGINAL(int, execv, (const char *, char *const[]))
PCACHE_DECLARE_ORIGINAL(int, execve, (const char *, char *const[], char *const[]))
PCACHE_DECLARE_ORIGINAL(int, execvp, (const char *, char *const[]))
PCACHE_DECLARE_ORIGINAL(int, execvpe, (const char *, char *const[], char *const[]))
PCACHE_DECLARE_ORIGINAL(int, posix_spawn,
                        (pid_t *, const char *, const posix_spawn_file_actions_t *,
                         const posix_spawnattr_t *, char *const[], char *const[]))
PCACHE_DECLARE_ORIGINAL(int, posix_spawnp,
                        (pid_t *, const char *, const posix_spawn_file_actions_t *,
                         const posix_spawnattr_t *, char *const[], char *const[]))
PCACHE_DECLARE_ORIGINAL(long, syscall, (long, ...))

// ctime's text ("Wed Nov 25 15:22:11 2026\n") of a broken-down time, for the time NVRTC formats
// itself.
void record_broken_down_time(const struct tm *tm) {
  if (!tm) return;
  char text[64];
  if (std::snprintf(text, sizeof text, "%d-%02d-%02d %02d:%02d:%02d", tm->tm_year + 1900,
                    tm->tm_mon + 1, tm->tm_mday, tm->tm_hour, tm->tm_min, tm->tm_sec) > 0)
    record_time_text(text);
  static const char *const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (tm->tm_mon >= 0 && tm->tm_mon < 12 &&
      std::snprintf(text, sizeof text, "%s %2d %d %02d:%02d:%02d", kMonths[tm->tm_mon], tm->tm_mday,
                    tm->tm_year + 1900, tm->tm_hour, tm->tm_min, tm->tm_sec) > 0)
    record_time_text(text);
}

mode_t mode_argument(int flags, va_list args) {
  return (flags & (O_CREAT | O_TMPFILE)) ? mode_t(va_arg(args, int)) : 0;
}

int recorded_open(const char *path, int flags, mode_t mode, int (*fn)(const char *, int, ...)) {
  const int fd = fn(path, flags, mode);
  const int err = errno;
  record_open(path, opens_for_writing(flags), fd, err);
  errno = err;
  return fd;
}

int recorded_openat(int dirfd, const char *path, int flags, mode_t mode,
                    int (*fn)(int, const char *, int, ...)) {
  const int fd = fn(dirfd, path, flags, mode);
  const int err = errno;
  record_relative_to_fd(dirfd, path, "openat");
  record_open(path, opens_for_writing(flags), fd, err);
  errno = err;
  return fd;
}

FILE *recorded_fopen(FILE *f, const char *path, const char *mode) {
  const int err = errno;
  record_open(path, fopen_mode_writes(mode), f ? ::fileno(f) : -1, err);
  errno = err;
  return f;
}

template <typename R>
R recorded_stat(NvrtcEvent::Kind kind, const char *path, R rc, const struct stat *st) {
  const int err = errno;
  record_stat(kind, path, int(rc), err, st);
  errno = err;
  return rc;
}

template <typename R>
R recorded_stat_again(NvrtcEvent::Kind kind, const char *path, R rc) {
  const int err = errno;
  record_stat_again(kind, path, int(rc), err);
  errno = err;
  return rc;
}

int recorded_access(const char *path, int mode, int rc) {
  const int err = errno;
  if (path) {
    NvrtcEvent e;
    e.kind = NvrtcEvent::Kind::access;
    e.path = path;
    e.mode = mode;
    e.error = rc == 0 ? 0 : err;
    record(e);
  }
  errno = err;
  return rc;
}

template <typename R>
R recorded_side_effect(const char *path, R rc) {
  const int err = errno;
  record_open(path, true, rc == 0 ? 0 : -1, err);
  errno = err;
  return rc;
}

void recorded_program_run(const char *what) {
  // In a child between fork and exec only the call itself may run: nothing is recorded there.
  record_incomplete(std::string("NVRTC ran another program (") + what + ")");
}

extern "C" {

int pcache_observe_open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_argument(flags, args);
  va_end(args);
  return recorded_open(path, flags, mode, original_open());
}
int pcache_observe_open64(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_argument(flags, args);
  va_end(args);
  return recorded_open(path, flags, mode, original_open64());
}
int pcache_observe_openat(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_argument(flags, args);
  va_end(args);
  return recorded_openat(dirfd, path, flags, mode, original_openat());
}
int pcache_observe_openat64(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_argument(flags, args);
  va_end(args);
  return recorded_openat(dirfd, path, flags, mode, original_openat64());
}
FILE *pcache_observe_fopen(const char *path, const char *mode) {
  return recorded_fopen(original_fopen()(path, mode), path, mode);
}
FILE *pcache_observe_fopen64(const char *path, const char *mode) {
  return recorded_fopen(original_fopen64()(path, mode), path, mode);
}
FILE *pcache_observe_freopen(const char *path, const char *mode, FILE *stream) {
  return recorded_fopen(original_freopen()(path, mode, stream), path, mode);
}
FILE *pcache_observe_freopen64(const char *path, const char *mode, FILE *stream) {
  return recorded_fopen(original_freopen64()(path, mode, stream), path, mode);
}
int pcache_observe___xstat(int ver, const char *path, struct stat *st) {
  const int rc = original___xstat()(ver, path, st);
  return recorded_stat(NvrtcEvent::Kind::stat, path, rc, st);
}
int pcache_observe___lxstat(int ver, const char *path, struct stat *st) {
  const int rc = original___lxstat()(ver, path, st);
  return recorded_stat(NvrtcEvent::Kind::lstat, path, rc, st);
}
int pcache_observe_stat(const char *path, struct stat *st) {
  const int rc = original_stat()(path, st);
  return recorded_stat(NvrtcEvent::Kind::stat, path, rc, st);
}
int pcache_observe_lstat(const char *path, struct stat *st) {
  const int rc = original_lstat()(path, st);
  return recorded_stat(NvrtcEvent::Kind::lstat, path, rc, st);
}
int pcache_observe___xstat64(int ver, const char *path, struct stat64 *st) {
  return recorded_stat_again(NvrtcEvent::Kind::stat, path, original___xstat64()(ver, path, st));
}
int pcache_observe___lxstat64(int ver, const char *path, struct stat64 *st) {
  return recorded_stat_again(NvrtcEvent::Kind::lstat, path, original___lxstat64()(ver, path, st));
}
int pcache_observe_stat64(const char *path, struct stat64 *st) {
  return recorded_stat_again(NvrtcEvent::Kind::stat, path, original_stat64()(path, st));
}
int pcache_observe_lstat64(const char *path, struct stat64 *st) {
  return recorded_stat_again(NvrtcEvent::Kind::lstat, path, original_lstat64()(path, st));
}
int pcache_observe___fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags) {
  const int rc = original___fxstatat()(ver, dirfd, path, st, flags);
  record_relative_to_fd(dirfd, path, "fstatat");
  return recorded_stat(
      flags & AT_SYMLINK_NOFOLLOW ? NvrtcEvent::Kind::lstat : NvrtcEvent::Kind::stat, path, rc, st);
}
int pcache_observe_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  const int rc = original_fstatat()(dirfd, path, st, flags);
  record_relative_to_fd(dirfd, path, "fstatat");
  return recorded_stat(
      flags & AT_SYMLINK_NOFOLLOW ? NvrtcEvent::Kind::lstat : NvrtcEvent::Kind::stat, path, rc, st);
}
int pcache_observe___fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
                                int flags) {
  const int rc = original___fxstatat64()(ver, dirfd, path, st, flags);
  record_relative_to_fd(dirfd, path, "fstatat");
  return recorded_stat_again(
      flags & AT_SYMLINK_NOFOLLOW ? NvrtcEvent::Kind::lstat : NvrtcEvent::Kind::stat, path, rc);
}
int pcache_observe_fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
  const int rc = original_fstatat64()(dirfd, path, st, flags);
  record_relative_to_fd(dirfd, path, "fstatat");
  return recorded_stat_again(
      flags & AT_SYMLINK_NOFOLLOW ? NvrtcEvent::Kind::lstat : NvrtcEvent::Kind::stat, path, rc);
}
int pcache_observe_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st) {
  const int rc = original_statx()(dirfd, path, flags, mask, st);
  record_relative_to_fd(dirfd, path, "statx");
  return recorded_stat_again(
      flags & AT_SYMLINK_NOFOLLOW ? NvrtcEvent::Kind::lstat : NvrtcEvent::Kind::stat, path, rc);
}
int pcache_observe_access(const char *path, int mode) {
  return recorded_access(path, mode, original_access()(path, mode));
}
int pcache_observe_faccessat(int dirfd, const char *path, int mode, int flags) {
  const int rc = original_faccessat()(dirfd, path, mode, flags);
  record_relative_to_fd(dirfd, path, "faccessat");
  return recorded_access(path, mode, rc);
}
int pcache_observe_euidaccess(const char *path, int mode) {
  return recorded_access(path, mode, original_euidaccess()(path, mode));
}
int pcache_observe_eaccess(const char *path, int mode) {
  return recorded_access(path, mode, original_eaccess()(path, mode));
}
int pcache_observe_statfs(const char *path, struct statfs *buf) {
  return recorded_access(path, F_OK, original_statfs()(path, buf));
}
int pcache_observe_statfs64(const char *path, void *buf) {
  return recorded_access(path, F_OK, original_statfs64()(path, buf));
}
char *pcache_observe_realpath(const char *path, char *resolved) {
  char *r = original_realpath()(path, resolved);
  const int err = errno;
  record_text(NvrtcEvent::Kind::resolve, path, r);
  errno = err;
  return r;
}
char *pcache_observe_canonicalize_file_name(const char *path) {
  char *r = original_canonicalize_file_name()(path);
  const int err = errno;
  record_text(NvrtcEvent::Kind::resolve, path, r);
  errno = err;
  return r;
}
ssize_t pcache_observe_readlink(const char *path, char *buf, size_t size) {
  const ssize_t n = original_readlink()(path, buf, size);
  const int err = errno;
  record_text(NvrtcEvent::Kind::resolve, path,
              n >= 0 ? std::string("link:").append(buf, size_t(n)).c_str() : nullptr);
  errno = err;
  return n;
}
ssize_t pcache_observe_readlinkat(int dirfd, const char *path, char *buf, size_t size) {
  const ssize_t n = original_readlinkat()(dirfd, path, buf, size);
  const int err = errno;
  record_relative_to_fd(dirfd, path, "readlinkat");
  record_text(NvrtcEvent::Kind::resolve, path,
              n >= 0 ? std::string("link:").append(buf, size_t(n)).c_str() : nullptr);
  errno = err;
  return n;
}
DIR *pcache_observe_opendir(const char *path) {
  DIR *d = original_opendir()(path);
  const int err = errno;
  if (path) {
    NvrtcEvent e;
    e.kind = NvrtcEvent::Kind::list;
    e.path = path;
    e.error = d ? 0 : err;
    record(e);
  }
  errno = err;
  return d;
}
char *pcache_observe_getcwd(char *buf, size_t size) {
  char *r = original_getcwd()(buf, size);
  const int err = errno;
  record_text(NvrtcEvent::Kind::cwd, "", r);
  errno = err;
  return r;
}
char *pcache_observe_get_current_dir_name(void) {
  char *r = original_get_current_dir_name()();
  const int err = errno;
  record_text(NvrtcEvent::Kind::cwd, "", r);
  errno = err;
  return r;
}
char *pcache_observe_getenv(const char *name) {
  char *v = original_getenv()(name);
  if (name) record_text(NvrtcEvent::Kind::env, name, v);
  return v;
}
char *pcache_observe_secure_getenv(const char *name) {
  char *v = original_secure_getenv()(name);
  if (name) record_text(NvrtcEvent::Kind::env, name, v);
  return v;
}
time_t pcache_observe_time(time_t *out) {
  const time_t t = original_time()(out);
  char text[32];
  std::snprintf(text, sizeof text, "@%lld", static_cast<long long>(t));
  record_time_text(text);
  return t;
}
char *pcache_observe_ctime(const time_t *t) {
  char *r = original_ctime()(t);
  record_time_text(r);
  return r;
}
char *pcache_observe_ctime_r(const time_t *t, char *buf) {
  char *r = original_ctime_r()(t, buf);
  record_time_text(r);
  return r;
}
struct tm *pcache_observe_localtime(const time_t *t) {
  struct tm *r = original_localtime()(t);
  record_broken_down_time(r);
  return r;
}
struct tm *pcache_observe_localtime_r(const time_t *t, struct tm *out) {
  struct tm *r = original_localtime_r()(t, out);
  record_broken_down_time(r);
  return r;
}
struct tm *pcache_observe_gmtime(const time_t *t) {
  struct tm *r = original_gmtime()(t);
  record_broken_down_time(r);
  return r;
}
struct tm *pcache_observe_gmtime_r(const time_t *t, struct tm *out) {
  struct tm *r = original_gmtime_r()(t, out);
  record_broken_down_time(r);
  return r;
}
size_t pcache_observe_strftime(char *s, size_t max, const char *format, const struct tm *tm) {
  const size_t n = original_strftime()(s, max, format, tm);
  if (n > 0) record_time_text(std::string(s, n).c_str());
  return n;
}
size_t pcache_observe___strftime_l(char *s, size_t max, const char *format, const struct tm *tm,
                                   locale_t loc) {
  const size_t n = original___strftime_l()(s, max, format, tm, loc);
  if (n > 0) record_time_text(std::string(s, n).c_str());
  return n;
}
size_t pcache_observe_strftime_l(char *s, size_t max, const char *format, const struct tm *tm,
                                 locale_t loc) {
  const size_t n = original_strftime_l()(s, max, format, tm, loc);
  if (n > 0) record_time_text(std::string(s, n).c_str());
  return n;
}
int pcache_observe_chdir(const char *path) {
  record_incomplete("NVRTC changed the working directory");
  return original_chdir()(path);
}
int pcache_observe_fchdir(int fd) {
  record_incomplete("NVRTC changed the working directory");
  return original_fchdir()(fd);
}
int pcache_observe_mkdir(const char *path, mode_t mode) {
  return recorded_side_effect(path, original_mkdir()(path, mode));
}
int pcache_observe_remove(const char *path) {
  return recorded_side_effect(path, original_remove()(path));
}
int pcache_observe_unlink(const char *path) {
  return recorded_side_effect(path, original_unlink()(path));
}
int pcache_observe_rmdir(const char *path) {
  return recorded_side_effect(path, original_rmdir()(path));
}
int pcache_observe_rename(const char *from, const char *to) {
  const int rc = original_rename()(from, to);
  recorded_side_effect(from, rc);
  return recorded_side_effect(to, rc);
}
int pcache_observe_system(const char *command) {
  recorded_program_run("system");
  return original_system()(command);
}
FILE *pcache_observe_popen(const char *command, const char *mode) {
  recorded_program_run("popen");
  return original_popen()(command, mode);
}
pid_t pcache_observe_fork(void) {
  recorded_program_run("fork");
  return original_fork()();
}
pid_t pcache_observe_vfork(void) {
  recorded_program_run("vfork");
  return original_fork()();  // vfork's child must not return into a wrapper: fork instead
}
int pcache_observe_execv(const char *path, char *const argv[]) {
  return original_execv()(path, argv);
}
int pcache_observe_execve(const char *path, char *const argv[], char *const envp[]) {
  return original_execve()(path, argv, envp);
}
int pcache_observe_execvp(const char *file, char *const argv[]) {
  return original_execvp()(file, argv);
}
int pcache_observe_execvpe(const char *file, char *const argv[], char *const envp[]) {
  return original_execvpe()(file, argv, envp);
}
int pcache_observe_posix_spawn(pid_t *pid, const char *path,
                               const posix_spawn_file_actions_t *actions,
                               const posix_spawnattr_t *attr, char *const argv[],
                               char *const envp[]) {
  recorded_program_run("posix_spawn");
  return original_posix_spawn()(pid, path, actions, attr, argv, envp);
}
int pcache_observe_posix_spawnp(pid_t *pid, const char *file,
                                const posix_spawn_file_actions_t *actions,
                                const posix_spawnattr_t *attr, char *const argv[],
                                char *const envp[]) {
  recorded_program_run("posix_spawnp");
  return original_posix_spawnp()(pid, file, actions, attr, argv, envp);
}

// System calls made by number that would read the file system or run a program unseen.
long pcache_observe_syscall(long number, ...) {
  va_list args;
  va_start(args, number);
  long a[6];
  for (long &x : a) x = va_arg(args, long);
  va_end(args);
  static const long kUnseen[] = {
#ifdef SYS_open
      SYS_open,
#endif
#ifdef SYS_stat
      SYS_stat,     SYS_lstat,
#endif
#ifdef SYS_access
      SYS_access,
#endif
#ifdef SYS_readlink
      SYS_readlink,
#endif
#ifdef SYS_getdents
      SYS_getdents,
#endif
#ifdef SYS_fork
      SYS_fork,     SYS_vfork,
#endif
      SYS_openat,   SYS_newfstatat, SYS_statx,      SYS_faccessat, SYS_readlinkat, SYS_getcwd,
      SYS_chdir,    SYS_fchdir,     SYS_getdents64, SYS_execve,    SYS_execveat,
  };
  if (std::find(std::begin(kUnseen), std::end(kUnseen), number) != std::end(kUnseen))
    record_incomplete("NVRTC made system call " + std::to_string(number) + " directly");
  return original_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

}  // extern "C"

#define PCACHE_HOOK(name)                                                             \
  ImportHook {                                                                        \
#name, reinterpret_cast < void *>(&pcache_observe_##name), &PCACHE_ORIGINAL(name) \
  }

const std::vector<ImportHook> &hooks() {
  static const std::vector<ImportHook> all = {
      PCACHE_HOOK(open),
      PCACHE_HOOK(open64),
      PCACHE_HOOK(openat),
      PCACHE_HOOK(openat64),
      PCACHE_HOOK(fopen),
      PCACHE_HOOK(fopen64),
      PCACHE_HOOK(freopen),
      PCACHE_HOOK(freopen64),
      PCACHE_HOOK(__xstat),
      PCACHE_HOOK(__xstat64),
      PCACHE_HOOK(__lxstat),
      PCACHE_HOOK(__lxstat64),
      PCACHE_HOOK(stat),
      PCACHE_HOOK(stat64),
      PCACHE_HOOK(lstat),
      PCACHE_HOOK(lstat64),
      PCACHE_HOOK(__fxstatat),
      PCACHE_HOOK(__fxstatat64),
      PCACHE_HOOK(fstatat),
      PCACHE_HOOK(fstatat64),
      PCACHE_HOOK(statx),
      PCACHE_HOOK(access),
      PCACHE_HOOK(faccessat),
      PCACHE_HOOK(euidaccess),
      PCACHE_HOOK(eaccess),
      PCACHE_HOOK(statfs),
      PCACHE_HOOK(statfs64),
      PCACHE_HOOK(realpath),
      PCACHE_HOOK(canonicalize_file_name),
      PCACHE_HOOK(readlink),
      PCACHE_HOOK(readlinkat),
      PCACHE_HOOK(opendir),
      PCACHE_HOOK(getcwd),
      PCACHE_HOOK(get_current_dir_name),
      PCACHE_HOOK(getenv),
      PCACHE_HOOK(secure_getenv),
      PCACHE_HOOK(time),
      PCACHE_HOOK(ctime),
      PCACHE_HOOK(ctime_r),
      PCACHE_HOOK(localtime),
      PCACHE_HOOK(localtime_r),
      PCACHE_HOOK(gmtime),
      PCACHE_HOOK(gmtime_r),
      PCACHE_HOOK(strftime),
      PCACHE_HOOK(__strftime_l),
      PCACHE_HOOK(strftime_l),
      PCACHE_HOOK(chdir),
      PCACHE_HOOK(fchdir),
      PCACHE_HOOK(mkdir),
      PCACHE_HOOK(remove),
      PCACHE_HOOK(unlink),
      PCACHE_HOOK(rmdir),
      PCACHE_HOOK(rename),
      PCACHE_HOOK(system),
      PCACHE_HOOK(popen),
      PCACHE_HOOK(fork),
      PCACHE_HOOK(vfork),
      PCACHE_HOOK(execv),
      PCACHE_HOOK(execve),
      PCACHE_HOOK(execvp),
      PCACHE_HOOK(execvpe),
      PCACHE_HOOK(posix_spawn),
      PCACHE_HOOK(posix_spawnp),
      PCACHE_HOOK(syscall),
  };
  return all;
}

}  // namespace

const std::vector<std::string> &recorded_functions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const ImportHook &h : hooks()) n.emplace_back(h.name);
    return n;
  }();
  return names;
}

bool is_harmless_import(const std::string &name) {
  // What NVRTC 12 and 13 import besides the recorded functions. None can tell NVRTC anything
  // about files, the environment or the time except through a descriptor or FILE it opened
  // (recorded), a directory stream it opened (recorded), or as plain numbers: the processor
  // count, limits, the process and user ids, the host name (docs/keys.md says why each is
  // harmless).
  static const std::set<std::string> kHarmless = {
      "_IO_getc",
      "_IO_putc",
      "alarm",
      "iswalpha",
      "iswdigit",
      "mblen",
      "mbtowc",
      "rewind",
      "_ITM_deregisterTMCloneTable",
      "_ITM_registerTMCloneTable",
      "__ctype_get_mb_cur_max",
      "__ctype_b_loc",
      "__ctype_tolower_loc",
      "__ctype_toupper_loc",
      "__cxa_atexit",
      "__cxa_finalize",
      "__duplocale",
      "__errno_location",
      "__freelocale",
      "__fxstat",
      "__fxstat64",
      "fstat",
      "fstat64",
      "__gmon_start__",
      "__isoc99_sscanf",
      "__isoc99_fscanf",
      "__iswctype_l",
      "__newlocale",
      "__nl_langinfo_l",
      "__pthread_key_create",
      "__sched_cpucount",
      "__stack_chk_fail",
      "__strcoll_l",
      "__strtod_l",
      "__strtof_l",
      "__strtok_r",
      "__strxfrm_l",
      "__tls_get_addr",
      "__towlower_l",
      "__towupper_l",
      "__uselocale",
      "__wcscoll_l",
      "__wcsftime_l",
      "__wcsxfrm_l",
      "__wctype_l",
      "_exit",
      "_setjmp",
      "abort",
      "acos",
      "asin",
      "atan",
      "atan2",
      "bind_textdomain_codeset",
      "bsearch",
      "btowc",
      "calloc",
      "ceil",
      "clock",
      "clock_gettime",
      "close",
      "closedir",
      "cos",
      "cosh",
      "dgettext",
      "difftime",
      "dl_iterate_phdr",
      "dladdr",
      "dlclose",
      "dlerror",
      "dlinfo",
      "dlopen",
      "dlsym",
      "dlvsym",
      "dup",
      "dup2",
      "erf",
      "exit",
      "exp",
      "exp2",
      "expf",
      "fabs",
      "fclose",
      "fcntl",
      "fdopen",
      "feclearexcept",
      "fegetenv",
      "feof",
      "ferror",
      "fesetenv",
      "fetestexcept",
      "fflush",
      "fgetc",
      "fgets",
      "fileno",
      "floor",
      "fmod",
      "fprintf",
      "fputc",
      "fputs",
      "fread",
      "free",
      "freelocale",
      "fscanf",
      "fseek",
      "fseeko",
      "fseeko64",
      "ftell",
      "ftello",
      "ftello64",
      "fwrite",
      "get_nprocs",
      "get_nprocs_conf",
      "getc",
      "getegid",
      "geteuid",
      "getgid",
      "gethostname",
      "getpagesize",
      "getpid",
      "getppid",
      "getpwnam_r",
      "getpwuid_r",
      "getrlimit",
      "getrusage",
      "gettid",
      "gettimeofday",
      "getuid",
      "getwc",
      "iconv",
      "iconv_close",
      "iconv_open",
      "ioctl",
      "isalnum",
      "isalpha",
      "isatty",
      "iscntrl",
      "isdigit",
      "islower",
      "isprint",
      "ispunct",
      "isspace",
      "isupper",
      "isxdigit",
      "kill",
      "log",
      "log10",
      "log1p",
      "log2",
      "log2f",
      "logb",
      "longjmp",
      "lseek",
      "lseek64",
      "madvise",
      "mallinfo",
      "mallinfo2",
      "malloc",
      "mbrtowc",
      "mbsnrtowcs",
      "mbsrtowcs",
      "memchr",
      "memcmp",
      "memcpy",
      "memmove",
      "memset",
      "mmap",
      "mmap64",
      "mprotect",
      "munmap",
      "nanosleep",
      "newlocale",
      "perror",
      "pipe",
      "poll",
      "posix_madvise",
      "posix_memalign",
      "pow",
      "pread",
      "pread64",
      "printf",
      "pthread_attr_destroy",
      "pthread_attr_init",
      "pthread_attr_setdetachstate",
      "pthread_attr_setinheritsched",
      "pthread_attr_setschedparam",
      "pthread_attr_setschedpolicy",
      "pthread_attr_setstacksize",
      "pthread_cond_broadcast",
      "pthread_cond_destroy",
      "pthread_cond_init",
      "pthread_cond_signal",
      "pthread_cond_timedwait",
      "pthread_cond_wait",
      "pthread_create",
      "pthread_detach",
      "pthread_equal",
      "pthread_exit",
      "pthread_getspecific",
      "pthread_join",
      "pthread_key_create",
      "pthread_key_delete",
      "pthread_kill",
      "pthread_mutex_destroy",
      "pthread_mutex_init",
      "pthread_mutex_lock",
      "pthread_mutex_trylock",
      "pthread_mutex_unlock",
      "pthread_mutexattr_destroy",
      "pthread_mutexattr_init",
      "pthread_mutexattr_settype",
      "pthread_once",
      "pthread_rwlock_destroy",
      "pthread_rwlock_init",
      "pthread_rwlock_rdlock",
      "pthread_rwlock_unlock",
      "pthread_rwlock_wrlock",
      "pthread_self",
      "pthread_setspecific",
      "pthread_sigmask",
      "putc",
      "putchar",
      "puts",
      "putwc",
      "qsort",
      "raise",
      "rand",
      "rand_r",
      "read",
      "readdir",
      "readdir64",
      "realloc",
      "round",
      "sched_get_priority_max",
      "sched_get_priority_min",
      "sched_getaffinity",
      "sched_yield",
      "select",
      "sem_destroy",
      "sem_init",
      "sem_post",
      "sem_trywait",
      "sem_wait",
      "setenv",
      "setlocale",
      "setrlimit",
      "setsid",
      "sigaction",
      "sigaltstack",
      "sigemptyset",
      "sigfillset",
      "signal",
      "sigprocmask",
      "sin",
      "sinh",
      "snprintf",
      "sprintf",
      "sqrt",
      "srand",
      "sscanf",
      "stderr",
      "stdin",
      "stdout",
      "stpcpy",
      "strcasecmp",
      "strcat",
      "strchr",
      "strcmp",
      "strcpy",
      "strdup",
      "strerror",
      "strerror_r",
      "strlen",
      "strncasecmp",
      "strncmp",
      "strncpy",
      "strndup",
      "strnlen",
      "strpbrk",
      "strrchr",
      "strsignal",
      "strspn",
      "strcspn",
      "strstr",
      "strtod",
      "strtof",
      "strtok",
      "strtok_r",
      "strtol",
      "strtold",
      "strtold_l",
      "strtoll",
      "strtoul",
      "strtoull",
      "sysconf",
      "tan",
      "tanh",
      "tolower",
      "toupper",
      "towlower",
      "towupper",
      "uname",
      "ungetc",
      "ungetwc",
      "unsetenv",
      "uselocale",
      "vfprintf",
      "vprintf",
      "vsnprintf",
      "vsprintf",
      "wait",
      "wait4",
      "waitpid",
      "wcrtomb",
      "wcscmp",
      "wcslen",
      "wcsnrtombs",
      "wctob",
      "wmemchr",
      "wmemcpy",
      "wmemmove",
      "wmemset",
      "write",
      "writev",
  };
  if (kHarmless.count(name)) return true;
  // A fortified variant (_FORTIFY_SOURCE: __fprintf_chk for fprintf) is as harmless as the
  // function it checks. Never so for a recorded function's (__realpath_chk, __read_chk): those
  // are not recorded, so they stay unknown, and the observation incomplete.
  constexpr std::string_view kChk = "_chk";
  if (name.size() > 2 + kChk.size() && name.compare(0, 2, "__") == 0 &&
      name.compare(name.size() - kChk.size(), kChk.size(), kChk) == 0)
    return kHarmless.count(name.substr(2, name.size() - 2 - kChk.size())) != 0;
  // The builtins library's own entry points (__nvrtc_builtins__13_0_getBuiltinHeader, ...), and
  // a sanitizer's runtime in an instrumented library (a test's forwarding NVRTC).
  for (const char *prefix : {"__nvrtc_builtins__", "__asan_", "__ubsan_", "__tsan_", "__lsan_",
                             "__msan_", "__sanitizer_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// ---- which objects are observed ---------------------------------------------------------------

namespace {

ForkSafeMutex g_patch_mutex{ForkSafeMutex::kMiddle};  // held while elf_file's inner one is taken
std::map<std::string, std::string> g_patched;         // object path -> "" or why it is not observed

bool is_nvrtc_object(const std::string &path) {
  return base_name(path).rfind("libnvrtc", 0) == 0;
}

// Redirects one object's imports; "" when it is observed from now on, else why not.
std::string observe_object(const std::string &path) {
  if (const auto facts = elf_facts_of_file(path); facts && facts->progcache_front_end) return "";
  if (patch_imports(path, hooks()) < 0)
    return "its imports cannot be redirected on this platform (" + path + ")";
  for (const std::string &f : imported_functions(path)) {
    const auto &recorded = recorded_functions();
    if (std::find(recorded.begin(), recorded.end(), f) == recorded.end() && !is_harmless_import(f))
      return "it imports " + f + ", which progcache neither records nor knows to be harmless (" +
             path + ")";
  }
  return "";
}

// Observes path and every loaded libnvrtc* object not yet seen; returns the first reason one of
// them is not observed ("" when all are). new_imports: those loaded since the last call that
// import a recorded function (their calls so far went unseen).
std::string observe_loaded(const std::string &path, bool *new_recorded_imports) {
  std::lock_guard lock(g_patch_mutex);
  std::vector<std::string> candidates;
  if (!path.empty()) candidates.push_back(path);
  for (const std::string &p : loaded_object_paths())
    if (is_nvrtc_object(p)) candidates.push_back(p);
  std::string why;
  for (const std::string &p : candidates) {
    auto [it, fresh] = g_patched.emplace(p, "");
    if (fresh) {
      it->second = observe_object(p);
      if (new_recorded_imports)
        for (const std::string &f : imported_functions(p)) {
          const auto &recorded = recorded_functions();
          if (std::find(recorded.begin(), recorded.end(), f) != recorded.end())
            *new_recorded_imports = true;
        }
    }
    if (why.empty() && !it->second.empty()) why = it->second;
  }
  return why;
}

}  // namespace

std::string observe_nvrtc_library(const std::string &path) {
  return observe_loaded(path, nullptr);
}

ObservationScope::ObservationScope(NvrtcObservation *observation, const std::string &nvrtc_path)
    : observation_(observation), outer_(t_observation) {
  if (const std::string why = observe_loaded(nvrtc_path, nullptr); !why.empty())
    observation_->mark_incomplete("NVRTC cannot be observed: " + why);
  {
    std::lock_guard lock(g_scopes_mutex);
    g_live.push_back(observation_);
  }
  g_live_count.fetch_add(1, std::memory_order_acq_rel);
  t_observation = observation_;
}

ObservationScope::~ObservationScope() {
  t_observation = outer_;
  {
    std::lock_guard lock(g_scopes_mutex);
    g_live.erase(std::find(g_live.begin(), g_live.end(), observation_));
  }
  g_live_count.fetch_sub(1, std::memory_order_acq_rel);
  bool unseen = false;
  const std::string why = observe_loaded("", &unseen);
  if (unseen)
    observation_->mark_incomplete(
        "NVRTC loaded a library during the compile whose calls were "
        "not observed" +
        (why.empty() ? std::string() : ": " + why));
}

}  // namespace progcache
