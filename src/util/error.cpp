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

std::string nul_shown(std::string message) {
  for (size_t at = message.find('\0'); at != std::string::npos; at = message.find('\0', at + 2))
    message.replace(at, 1, "\\0");
  return message;
}

ErrorDetail detail_from_errno(int err) noexcept {
  ErrorDetail d;
  d.os_errno = err;
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:  // a file size limit (RLIMIT_FSIZE) is a full disk for the writer
      d.cause = Cause::no_space;
      break;
    case EIO:
      d.cause = Cause::device;
      break;
    case EROFS:
      d.cause = Cause::read_only;
      break;
    case ETIMEDOUT:
      d.cause = Cause::timeout;
      break;
    case EMFILE:
    case ENFILE:
      d.cause = Cause::too_many_files;
      break;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
      d.cause = Cause::connection;
      break;
    default:
      break;
  }
  return d;
}

void throw_errno(const std::string &what, int err) {
  throw Error(status_from_errno(err), what + ": " + std::strerror(err), detail_from_errno(err));
}

void throw_errno(const std::string &what) {
  throw_errno(what, errno);
}

}  // namespace progcache
