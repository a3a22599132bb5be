#include "trust.hpp"

#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "error.hpp"
#include "fsutil.hpp"

namespace progcache {

const char *trusted_env(const char *name) {
  return ::secure_getenv(name);
}

bool process_is_privileged() {
  if (::getauxval(AT_SECURE) != 0) return true;
  const char *fake = std::getenv("PCACHE_TEST_FAKE_SECURE");
  return fake && std::string(fake) == "1";
}

void check_private_dir(const std::string &path, int fd, bool allow_shared) {
  if (allow_shared) return;
  struct stat st;
  if ((fd >= 0 ? ::fstat(fd, &st) : ::stat(path.c_str(), &st)) != 0)
    throw_errno("cannot stat cache directory '" + path + "'");
  const std::string how =
      "; if this is a deliberately shared cache, open it with PCACHE_OPEN_ALLOW_SHARED "
      "(or set PCACHE_ALLOW_SHARED=1)";
  if (st.st_uid != ::geteuid())
    throw Error(Status::permission,
                "cache directory '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                    ", not by this user (uid " + std::to_string(::geteuid()) +
                    "): its owner could plant binaries the GPU would run" + how);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", unsigned(st.st_mode & 0777));
    throw Error(Status::permission, "cache directory '" + path +
                                        "' is writable by other users (mode " + mode +
                                        ", no sticky bit): they could plant or replace binaries "
                                        "the GPU would run" +
                                        how);
  }
}

void check_owned_file(const std::string &path, bool allow_shared) {
  if (allow_shared) return;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;  // not there yet: it will be ours
  if (st.st_uid != ::geteuid())
    throw Error(Status::permission,
                "cache file '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                    ", not by this user: its owner could plant binaries the GPU would run; if "
                    "this is a deliberately shared cache, open it with PCACHE_OPEN_ALLOW_SHARED "
                    "(or set PCACHE_ALLOW_SHARED=1)");
}

std::optional<std::string> secret_from_env() {
  const char *path = trusted_env("PCACHE_SECRET_FILE");
  if (!path || !*path) return std::nullopt;
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno(std::string("cannot read PCACHE_SECRET_FILE '") + path + "'");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Status::io, std::string("PCACHE_SECRET_FILE '") + path + "' is not a regular file");
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    throw Error(Status::permission, std::string("PCACHE_SECRET_FILE '") + path +
                                        "' is readable by other users; chmod 600 it");
  std::string secret;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) secret.append(buf, size_t(n));
  if (n < 0) throw_errno(std::string("cannot read PCACHE_SECRET_FILE '") + path + "'");
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty())
    throw Error(Status::invalid_arg, std::string("PCACHE_SECRET_FILE '") + path + "' is empty");
  return secret;
}

}  // namespace progcache
