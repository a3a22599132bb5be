#include "util/fsutil.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "util/env.hpp"
#include "util/error.hpp"

namespace progcache {

Fd &Fd::operator=(Fd &&o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int make_dir_at(int dirfd, const char *name, mode_t mode) {
  if (const int e = test_hooks::fault(test_hooks::FsOp::make_dir); e > 0) {
    errno = e;
    return -1;
  }
  if (::mkdirat(dirfd, name, mode) != 0) return -1;
  if ((mode & 0077) == 0) return 0;  // private: the umask cannot have narrowed it
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    // A directory made in a setgid one (a team's: chmod 2770) inherits the bit, so that what is
    // made in it belongs to the team's group: kept, or the next member is refused.
    struct stat st;
    const mode_t setgid = ::fstat(fd, &st) == 0 ? (st.st_mode & S_ISGID) : 0;
    (void)::fchmod(fd, mode | setgid);  // best effort: a narrower mode only keeps others out
    ::close(fd);
  }
  return 0;
}

void set_created_mode(int fd, mode_t mode) {
  if ((mode & 0077) != 0) (void)::fchmod(fd, mode);  // best effort, as above
}

void make_dirs(const std::string &dir, mode_t dir_mode) {
  if (dir.empty()) return;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw Error(Status::io, "cache directory '" + dir + "' exists and is not a directory");
    return;
  }
  if (errno != ENOENT) throw_errno("cannot access cache directory '" + dir + "'");
  const std::string parent = parent_dir(dir);
  if (parent != dir && parent != "." && parent != "/") make_dirs(parent, dir_mode);
  if (make_dir_at(AT_FDCWD, dir.c_str(), dir_mode) != 0 && errno != EEXIST)
    throw_errno("cannot create cache directory '" + dir + "'");
}

std::string parent_dir(const std::string &path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string network_fs_name(const std::string &path) {
  if (const char *fake = test_hooks::fake_netfs()) return fake;
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return "";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x6969:
      return "nfs";
    case 0x517B:
      return "smb";
    case 0xFF534D42:
      return "cifs";
    case 0xFE534D42:
      return "smb2";
    case 0x0BD00BD0:
      return "lustre";
    case 0x47504653:
      return "gpfs";
    case 0x5346414F:
      return "afs";
    case 0x00C36400:
      return "ceph";
    case 0x01021997:
      return "9p";
    case 0x65735546:
      return "fuse";
    default:
      return "";
  }
}

namespace sys {
using test_hooks::fault;

int openat(int dir_fd, const char *name, int flags, unsigned mode, Op op) {
  if (const int e = fault(op); e > 0) {
    errno = e;
    return -1;
  }
  return ::openat(dir_fd, name, flags, mode);
}

ssize_t write(int fd, const void *data, size_t size) {
  const int e = fault(Op::write);
  if (e > 0) {
    errno = e;
    return -1;
  }
  if (e == kShortWrite && size > 1) size /= 2;
  return ::write(fd, data, size);
}

int fsync(int fd) {
  if (const int e = fault(Op::fsync); e > 0) {
    errno = e;
    return -1;
  }
  return ::fsync(fd);
}

int renameat(int from_dir, const char *from, int to_dir, const char *to) {
  if (const int e = fault(Op::rename); e > 0) {
    errno = e;
    return -1;
  }
  return ::renameat(from_dir, from, to_dir, to);
}

int unlinkat(int dir_fd, const char *name, int flags) {
  if (const int e = fault(Op::unlink); e > 0) {
    errno = e;
    return -1;
  }
  return ::unlinkat(dir_fd, name, flags);
}

ssize_t pread(int fd, void *data, size_t size, off_t offset) {
  if (const int e = fault(Op::read); e > 0) {
    errno = e;
    return -1;
  }
  return ::pread(fd, data, size, offset);
}
}  // namespace sys

bool write_all(int fd, const void *data, size_t size) {
  auto *p = static_cast<const char *>(data);
  while (size > 0) {
    const ssize_t n = sys::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool pread_all(int fd, void *data, size_t size, off_t offset) {
  auto *p = static_cast<char *>(data);
  while (size > 0) {
    const ssize_t n = sys::pread(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = 0;  // short file
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

bool read_whole_file(const std::string &path, std::string *out, uint64_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      uint64_t(st.st_size) > max_bytes)
    return false;
  out->assign(size_t(st.st_size), '\0');
  return pread_all(fd.get(), out->data(), out->size(), 0);
}

std::vector<std::string> names_in_dir(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR *d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return names;
  }
  while (struct dirent *e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

}  // namespace progcache
