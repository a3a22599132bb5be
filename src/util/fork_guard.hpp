// fork() in a threaded process: a child inherits every mutex in the state it had at the fork,
// including ones held by threads that do not exist in the child, which would wait forever.
// ForkSafeMutex is a std::mutex that takes part in pthread_atfork handlers: before fork() the
// forking thread takes every such mutex (outer ranks first, the order the library nests them),
// and releases them after, in the parent and in the child. So a child may go on using handles
// it inherited (each backend reopens its connection or descriptors in a new process).
#pragma once

#include <mutex>

namespace progcache {

// Locks of a library progcache calls into (SQLite's global mutexes) taken after all of
// progcache's own before fork() and released first after it. Registered once per process.
void add_fork_participant(void (*prepare)(), void (*release)());

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

}  // namespace progcache
