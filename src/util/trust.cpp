#include "util/trust.hpp"

#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/error.hpp"
#include "util/fsutil.hpp"
#include "util/paths.hpp"
#include "util/settings.hpp"
#include "util/test_hooks.hpp"
#include "util/warning.hpp"

namespace progcache {

bool process_is_privileged() {
  return ::getauxval(AT_SECURE) != 0 || test_hooks::fake_secure();
}

namespace {

// Root's files are trusted like our own (root could replace ours anyway). Root is asked first:
// for root's files (all of them, in a process running as root, as in many containers) that
// spares the geteuid() system call each check would make, one in every file-stream hit.
bool by_us_or_root(uid_t owner) {
  return owner == 0 || owner == ::geteuid();
}

const char *const kHowToShare =
    "; if this is a deliberately shared cache, open it with PCACHE_OPEN_ALLOW_SHARED (or set "
    "PCACHE_ALLOW_SHARED=1) and give it a secret (PCACHE_SECRET_FILE)";

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

// Each ancestor of dir (resolved) up to '/': owned by this user or root, and writable by others
// only with the sticky bit (like /tmp), as OpenSSH's StrictModes demands of a home directory.
// Otherwise another user could rename the cache directory away and put their own in its place.
void check_ancestors(const std::string &dir) {
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return;  // not there yet: make_dirs will report it
  std::string path = real;
  while (path.size() > 1) {
    path = parent_dir(path);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) throw_errno("cannot stat '" + path + "'");
    if (!by_us_or_root(st.st_uid))
      throw Error(Status::permission,
                  "'" + path + "', a parent of the cache directory, is owned by uid " +
                      std::to_string(st.st_uid) +
                      ": its owner could replace the cache directory with their own" + kHowToShare);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      throw Error(Status::permission,
                  "'" + path +
                      "', a parent of the cache directory, is writable by other users "
                      "(mode " +
                      mode_text(st.st_mode) +
                      ", no sticky bit): they could replace the cache directory" + kHowToShare);
  }
}

}  // namespace

bool owned_and_private(const struct stat &st) {
  return by_us_or_root(st.st_uid) && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

void check_private_dir(const std::string &path, int fd, bool allow_shared) {
  if (allow_shared) return;
  struct stat st;
  if ((fd >= 0 ? ::fstat(fd, &st) : ::stat(path.c_str(), &st)) != 0)
    throw_errno("cannot stat cache directory '" + path + "'");
  if (st.st_uid != ::geteuid())
    throw Error(Status::permission,
                "cache directory '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                    ", not by this user (uid " + std::to_string(::geteuid()) +
                    "): its owner could plant binaries the GPU would run" + kHowToShare);
  // A sticky bit stops others from replacing our files, not from creating new ones: a shard
  // directory, an entry, a -wal file beside the database. No one else may write here.
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw Error(Status::permission,
                "cache directory '" + path + "' is writable by other users (mode " +
                    mode_text(st.st_mode) + "): they could plant binaries the GPU would run" +
                    kHowToShare);
  check_ancestors(path);
}

void check_owned_file(const std::string &path, bool allow_shared) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;  // not there yet: it will be ours
  if (S_ISDIR(st.st_mode)) return;              // opening it will say what it is
  // No one's cache, shared or not: a FIFO would be read (or waited on) and a device written.
  const char *kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : nullptr;
  if (kind)
    throw Error(Status::invalid_arg, "cache file '" + path + "' is " + kind +
                                         ", not a file: it was left as it is; point the cache "
                                         "at another path");
  // Never followed, shared or not (SQLite would refuse it too, saying only that it cannot open
  // the file): one could point the cache at a file of anyone's choosing.
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    throw Error(Status::invalid_arg,
                "cache file '" + path + "' is a symbolic link" +
                    (n > 0 ? " to '" + std::string(target, size_t(n)) + "'" : std::string()) +
                    ": cache files are opened without following links, so that no one can "
                    "point one at another file; give the cache the path it names");
  }
  if (allow_shared) return;
  if (!S_ISREG(st.st_mode) || !owned_and_private(st))
    throw Error(Status::permission, "cache file '" + path +
                                        "' is not a regular file owned by this user and "
                                        "writable by no one else (uid " +
                                        std::to_string(st.st_uid) + ", mode " +
                                        mode_text(st.st_mode) +
                                        "): it could hold planted binaries" + kHowToShare);
}

std::optional<std::string> configured_secret(bool shared) {
  const Setting setting = lookup_setting("secret_file");
  if (setting.value.empty()) return std::nullopt;
  const std::string what = setting.from_environment()
                               ? "PCACHE_SECRET_FILE '" + setting.value + "'"
                               : "secret_file '" + setting.value + "' (" + setting.source + ")";
  const std::string path = expand_home(setting.value, what);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("cannot read " + what);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Status::io, what + " is not a regular file");
  if (shared) {
    // A team's secret: group members read it; only its owner may change it.
    if (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))
      throw Error(Status::permission, what + " (mode " + mode_text(st.st_mode) +
                                          ") is writable by its group or open to others; "
                                          "chmod 640 it (the team's group may read it)");
  } else {
    if (st.st_mode & (S_IRWXG | S_IRWXO))
      throw Error(Status::permission,
                  what +
                      " is readable by other users; chmod 600 it (a team's cache shares a "
                      "group-readable secret with PCACHE_ALLOW_SHARED=1)");
    if (!by_us_or_root(st.st_uid))
      throw Error(Status::permission,
                  what + " is owned by another user (uid " + std::to_string(st.st_uid) + ")");
  }
  // Bounded: a secret_file naming a log or a disk image by mistake is not read into memory.
  if (uint64_t(st.st_size) > kMaxSecretFileSize)
    throw Error(Status::invalid_arg, what + " is " + std::to_string(st.st_size) +
                                         " bytes: a secret file holds at most 1 MiB (is it the "
                                         "right file?)");
  std::string secret(size_t(st.st_size), '\0');
  if (!pread_all(fd.get(), secret.data(), secret.size(), 0))
    throw_errno("cannot read " + what, errno ? errno : EIO);  // 0: it shrank meanwhile
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) throw Error(Status::invalid_arg, what + " is empty");
  warn_if_guessable_secret(secret.size(), what);
  return secret;
}

void warn_if_guessable_secret(size_t size, const std::string &what) {
  if (size >= kMinSecretSize) return;
  set_thread_warning(what + " is " + std::to_string(size) + (size == 1 ? " byte" : " bytes") +
                     ": a secret shorter than 16 bytes can be found by trying guesses against "
                     "any entry it signed, and then used to sign planted ones; use 32 random "
                     "bytes (head -c 32 /dev/urandom > FILE)");
}

}  // namespace progcache
