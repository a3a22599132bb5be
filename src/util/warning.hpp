// Warnings for the calling thread: something a call did that does not fail it (a database reset
// after corruption, WAL disabled on a network filesystem, a result not stored). The C shim clears
// them when a call starts and reports them in pcache_last_error() when it succeeds.
#pragma once

#include <cstdint>
#include <string>

#include "util/error.hpp"
#include "util/thread_state.hpp"

namespace progcache {

// What the calling thread's calls report: the warning the current call raised, and the message
// of the C API's last call (pcache_last_error). One thread-local object, so that the C shim
// reaches both with one lookup per call.
struct ThreadMessages {
  std::string warning;
  std::string last_error;
  int32_t last_status = 0;  // the C API's last call's status and cause (pcache_last_error_info)
  ErrorDetail last_detail;
};
// Inline: every C API call asks for it, and a call in between cost a hit a call and a return.
inline ThreadMessages &thread_messages() {
  return ThreadState<ThreadMessages>::get();
}

// Replaces the calling thread's warning.
void set_thread_warning(std::string message);

}  // namespace progcache
