// Small POSIX helpers shared by the persistent backends.
#pragma once

#include <string>

namespace progcache {

// Creates dir and its missing parents with mode 0700 (directories that exist are left as they
// are). Throws Error with the OS message.
void make_dirs(const std::string &dir);

// The directory part of path ("." if none).
std::string parent_dir(const std::string &path);

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

// write()/read() loops that retry EINTR and short transfers. Return false with errno set.
bool write_all(int fd, const void *data, size_t size);
// Reads exactly size bytes at offset; false with errno set (EIO-like 0 for a short file).
bool pread_all(int fd, void *data, size_t size, off_t offset);

}  // namespace progcache
