// The one error type of the core: a status code and a message. The C shim is the only place
// that turns it into a pcache_status and a thread-local message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace progcache {

// Mirrors the public codes value for value; capi/ static_asserts that they agree.
enum class Status : int32_t {
  ok = 0,
  not_found = 1,
  invalid_arg = -1,
  no_memory = -2,
  io = -3,
  corrupt = -4,
  unsupported = -5,
  busy = -6,
  permission = -7,
  too_large = -8,
  compile = -9,
  cuda_unavailable = -10,
  cuda = -11,
  remote = -12,
  internal = -13,
};

class Error : public std::runtime_error {
 public:
  // timed_out: the call gave up waiting for a remote store (counted apart from other failures).
  Error(Status status, const std::string &message, bool timed_out = false)
      : std::runtime_error(message), status_(status), timed_out_(timed_out) {}
  Status status() const noexcept { return status_; }
  bool timed_out() const noexcept { return timed_out_; }

 private:
  Status status_;
  bool timed_out_;
};

// Maps an errno value to the status a caller can act on.
Status status_from_errno(int err) noexcept;

// Throws Error(status_from_errno(errno), what + ": " + strerror(errno)).
[[noreturn]] void throw_errno(const std::string &what);
[[noreturn]] void throw_errno(const std::string &what, int err);

}  // namespace progcache
