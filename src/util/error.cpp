#include "util/error.hpp"

#include <cerrno>
#include <cstring>

namespace progcache {

Status status_from_errno(int err) noexcept {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return Status::permission;
    case ENOMEM:
      return Status::no_memory;
    case EFBIG:
      return Status::too_large;
    case EBUSY:
    case EAGAIN:
      return Status::busy;
    default:
      return Status::io;
  }
}

void throw_errno(const std::string &what, int err) {
  throw Error(status_from_errno(err), what + ": " + std::strerror(err));
}

void throw_errno(const std::string &what) {
  throw_errno(what, errno);
}

}  // namespace progcache
