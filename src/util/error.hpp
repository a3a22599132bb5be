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

// What is known of a failure's cause beyond its status (pcache_error_info): the class a caller
// acts on (values mirror PCACHE_CAUSE_*), and the numbers behind it.
enum class Cause : int32_t {
  none = 0,
  no_space = 1,
  device = 2,
  read_only = 3,
  timeout = 4,
  too_many_files = 5,
  connection = 6,
};
struct ErrorDetail {
  Cause cause = Cause::none;
  int32_t os_errno = 0;     // errno behind it
  int32_t sqlite_code = 0;  // SQLite's extended result code behind it
};

// A message as the C string it becomes (what(), pcache_last_error()): a NUL quoted from a file
// or an argument would end it there, so each is shown as the two characters \0.
std::string nul_shown(std::string message);

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string &message, ErrorDetail detail = {})
      : std::runtime_error(nul_shown(message)), status_(status), detail_(detail) {}
  Status status() const noexcept { return status_; }
  const ErrorDetail &detail() const noexcept { return detail_; }
  // The call gave up waiting (a remote store's timeout, a lock's busy timeout).
  bool timed_out() const noexcept { return detail_.cause == Cause::timeout; }

 private:
  Status status_;
  ErrorDetail detail_;
};

// The cause an errno value names (none for most), with the errno.
ErrorDetail detail_from_errno(int err) noexcept;

// Maps an errno value to the status a caller can act on.
Status status_from_errno(int err) noexcept;

// Throws Error(status_from_errno(errno), what + ": " + strerror(errno), detail_from_errno(errno)).
[[noreturn]] void throw_errno(const std::string &what);
[[noreturn]] void throw_errno(const std::string &what, int err);

}  // namespace progcache
