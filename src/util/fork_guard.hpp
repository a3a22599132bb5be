// fork() in a threaded process: a child inherits every mutex in the state it had at the fork,
// including ones held by threads that do not exist in the child, which would wait forever.
// ForkSafeMutex is a std::mutex that takes part in pthread_atfork handlers: before fork() the
// forking thread takes every such mutex (outer ranks first, the order the library nests them),
// and releases them after, in the parent and in the child. So a child may go on using handles
// it inherited (each backend reopens its connection or descriptors in a new process).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>

namespace progcache {

// This process's id, without a system call each time: getpid() is one (glibc keeps no cache),
// and every hit asked it, to notice that it runs in the child of a fork. Forgotten in the child
// of every fork() that runs pthread_atfork's handlers, as the locks below already require; a
// vfork() or raw clone() child must not call into progcache (it may only exec or exit).
pid_t process_id();

// Locks of a library progcache calls into (SQLite's global mutexes) taken after all of
// progcache's own before fork() and released first after it. Registered once per process.
// in_child, when given, runs in the child only, after every lock is released: the child has one
// thread then, and what the parent's threads were using is quiescent (each use holds a lock the
// fork waited for), so it may close what it inherited.
void add_fork_participant(void (*prepare)(), void (*release)(), void (*in_child)() = nullptr);

class ForkSafeMutex {
 public:
  // Rank: mutexes are taken before fork in ascending rank; a mutex held while another is
  // taken must have the lower rank (e.g. the file-stream stats lock before its shard lock).
  enum Rank { kOuter = 0, kMiddle = 1, kInner = 2 };
  explicit ForkSafeMutex(Rank rank = kInner);
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex &) = delete;
  ForkSafeMutex &operator=(const ForkSafeMutex &) = delete;
  void lock() { m_.lock(); }
  void unlock() { m_.unlock(); }
  bool try_lock() { return m_.try_lock(); }

 private:
  friend struct ForkRegistry;
  std::mutex m_;
  Rank rank_;
  ForkSafeMutex *prev_ = nullptr, *next_ = nullptr;
};

// The lock every ForkSafeOnce initialisation runs under: one mutex for the process, recursive per
// thread, taken before fork() after every ForkSafeMutex (and before the participants above),
// released after it.
void lock_once_initialisations();
void unlock_once_initialisations();

// A process's one-time initialisation (opening a system library, OpenSSL's set-up, a digest's
// fetch) that fork() never catches half done. A function-local static or std::call_once left a
// child forked while another thread ran it waiting forever on its guard; this runs under the
// lock above, so a fork in another thread waits until it is finished, and the child finds it
// done or not begun. fn may throw (then it is not done, and the next call runs it again) and may
// run other ForkSafeOnce initialisations (the lock is recursive). It must neither take nor
// construct a ForkSafeMutex (the fork handlers hold those while they wait for this lock), nor
// register a fork participant. Constant-initialised, so a static one needs no guard of its own.
class ForkSafeOnce {
 public:
  constexpr ForkSafeOnce() = default;
  ForkSafeOnce(const ForkSafeOnce &) = delete;
  ForkSafeOnce &operator=(const ForkSafeOnce &) = delete;

  template <typename Fn>
  void run(Fn &&fn) {
    if (done_.load(std::memory_order_acquire)) return;
    struct Held {
      Held() { lock_once_initialisations(); }
      ~Held() { unlock_once_initialisations(); }
    } held;
    if (done_.load(std::memory_order_relaxed)) return;
    fn();
    done_.store(true, std::memory_order_release);
  }

 private:
  std::atomic<bool> done_{false};
};

}  // namespace progcache
