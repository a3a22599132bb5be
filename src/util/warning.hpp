// Warnings for the calling thread: something a call did that does not fail it (a database reset
// after corruption, WAL disabled on a network filesystem, a result not stored). The C shim clears
// them when a call starts and reports them in pcache_last_error() when it succeeds.
#pragma once

#include <string>

namespace progcache {

// Replaces the calling thread's warning.
void set_thread_warning(std::string message);
// The calling thread's warning ("" if none), cleared.
std::string take_thread_warning();

}  // namespace progcache
