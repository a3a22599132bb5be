// Two independent pieces of work at once: one on a thread of its own, one on the caller's.
//
// For work long enough that a second core pays for starting a thread (~50k instructions, 30-80
// us on a VM): a megabyte's include scan beside its hash (bench/analysis.md, stop 70). The
// thread lives for the call only, so nothing outlives it to meet a fork() or a dlclose.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

#include "util/fork_guard.hpp"

namespace progcache {

// The CPUs this thread may run on (its affinity mask; a CPU quota is not seen); 1 when the mask
// cannot be read.
inline int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

// Whether this thread may run on more than one CPU. A thread started beside on a single CPU only
// takes turns with its caller.
inline bool more_than_one_cpu() {
  return cpus_available() > 1;
}

namespace beside_detail {
// The threads run_beside has running in this process, at most max_threads() at once: many
// callers at once (a build's threads keying large headers) each starting one would only add
// threads to CPUs their callers already fill. Kept with the id of the process they run in
// (id << 32 | count): the child of a fork() has none of its parent's threads, so it counts from
// none (a count copied from the parent would never be given back there).
inline std::atomic<uint64_t> running{0};
inline int max_threads() {
  return std::max(1, cpus_available() - 1);
}
inline uint64_t running_word(pid_t pid, uint32_t count) {
  return uint64_t(uint32_t(pid)) << 32 | count;
}
// How many run in this process now.
inline int running_now() {
  const uint64_t w = running.load(std::memory_order_relaxed);
  return (w >> 32) == uint32_t(process_id()) ? int(uint32_t(w)) : 0;
}
// A place among them, held until destroyed; none when all are taken.
struct Place {
  const pid_t pid = process_id();
  bool held = false;
  Place() {
    const int most = max_threads();
    uint64_t w = running.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t count = (w >> 32) == uint32_t(pid) ? uint32_t(w) : 0;
      if (int(count) >= most) return;
      if (running.compare_exchange_weak(w, running_word(pid, count + 1), std::memory_order_relaxed))
        break;
    }
    held = true;
  }
  ~Place() {
    if (!held) return;
    uint64_t w = running.load(std::memory_order_relaxed);
    while ((w >> 32) == uint32_t(pid) &&
           !running.compare_exchange_weak(w, w - 1, std::memory_order_relaxed)) {
    }
  }
  Place(const Place &) = delete;
  Place &operator=(const Place &) = delete;
};
}  // namespace beside_detail

// Runs beside() on a new thread while here() runs on this one, and returns when both are done.
// Where no thread can be had (a limit on threads, no memory for a stack, or as many of these
// threads running in the process as it has CPUs but one), both run here, here() first. The thread
// runs with every signal blocked. An exception from either is rethrown here, after both ended
// (here()'s when both throw). beside() must not use this thread's thread-local state nor wait for
// anything here() holds.
template <class Beside, class Here>
void run_beside(Beside &&beside, Here &&here) {
  std::exception_ptr beside_failed;
  const beside_detail::Place place;  // outlives the thread: released after the join below
  std::optional<std::thread> thread;
  if (place.held) {
    // Started with every signal blocked, the caller's mask restored at once: a signal sent to
    // the process goes to one of the host's threads, which expect it, never to the library's.
    struct MaskRestored {
      sigset_t callers;
      ~MaskRestored() { pthread_sigmask(SIG_SETMASK, &callers, nullptr); }
    } restored;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &restored.callers);
    try {
      thread.emplace([&] {
        try {
          beside();
        } catch (...) {
          beside_failed = std::current_exception();
        }
      });
    } catch (const std::system_error &) {
    }
  }
  if (!thread) {
    here();
    beside();
    return;
  }
  struct Joined {  // also when here() throws: the thread refers to this frame
    std::optional<std::thread> &t;
    ~Joined() {
      if (t->joinable()) t->join();
    }
  } joined{thread};
  here();
  thread->join();
  if (beside_failed) std::rethrow_exception(beside_failed);
}

}  // namespace progcache
