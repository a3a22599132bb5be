// Small POSIX helpers shared by the persistent backends.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/paths.hpp"
#include "util/test_hooks.hpp"

namespace progcache {

// The modes a cache creates its directories and files with: private (0700/0600) unless the
// cache is shared (see create_modes in util/settings.hpp).
struct CreateModes {
  mode_t dir = 0700;
  mode_t file = 0600;
};

// Creates dir and its missing parents with mode dir_mode, exactly (the process umask does not
// narrow it); directories that exist are left as they are. Throws Error with the OS message.
void make_dirs(const std::string &dir, mode_t dir_mode = 0700);

// mkdirat(dirfd, name) with exactly mode. 0, or -1 with errno (EEXIST when it exists).
int make_dir_at(int dirfd, const char *name, mode_t mode);

// Gives a file this process just created exactly mode, which the process umask may have
// narrowed (a shared cache's group bits). Nothing to do for the private 0600.
void set_created_mode(int fd, mode_t mode);

// The names in the directory dir_fd, except those starting with '.'; none if it cannot be read.
// The directory is opened anew ("." relative to dir_fd), so dir_fd's own offset is untouched.
std::vector<std::string> names_in_dir(int dir_fd);

// Name of the network filesystem holding path ("nfs", "lustre", ...), or "" if local/unknown.
std::string network_fs_name(const std::string &path);

// A close-on-destruction file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd &&o) noexcept : fd_(o.release()) {}
  Fd &operator=(Fd &&o) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

// System calls of the file-stream backend, through a seam that a test build can make fail
// (util/test_hooks.hpp; the installed library has no hook).
namespace sys {
using Op = test_hooks::FsOp;
using test_hooks::FaultHook;
using test_hooks::kShortWrite;
using test_hooks::set_fault_hook;
int openat(int dir_fd, const char *name, int flags, unsigned mode, Op op);
ssize_t write(int fd, const void *data, size_t size);
int fsync(int fd);
int renameat(int from_dir, const char *from, int to_dir, const char *to);
int unlinkat(int dir_fd, const char *name, int flags);
ssize_t pread(int fd, void *data, size_t size, off_t offset);
}  // namespace sys

// write()/read() loops that retry EINTR and short transfers. Return false with errno set.
bool write_all(int fd, const void *data, size_t size);
// Reads exactly size bytes at offset; false with errno set (EIO-like 0 for a short file).
bool pread_all(int fd, void *data, size_t size, off_t offset);
// The whole regular file at path into *out; false if it cannot be opened or read whole, is not a
// regular file, or holds more than max_bytes.
bool read_whole_file(const std::string &path, std::string *out, uint64_t max_bytes);

}  // namespace progcache
