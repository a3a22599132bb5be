#include "util/fork_guard.hpp"

#include <pthread.h>
#include <unistd.h>

namespace progcache {

namespace {
// Recursive by a per-thread depth over a plain mutex, not a recursive mutex: glibc's recursive
// mutex remembers its owner's thread id, which the child of fork() does not share, so the child's
// release handler could not unlock it (a child hung on it for good in the test suite).
constinit std::mutex g_once_mutex;
thread_local int t_once_depth = 0;
constinit std::atomic<pid_t> g_process_id{0};  // 0: not known in this process yet
}  // namespace

// Every live ForkSafeMutex, in an intrusive list (registration allocates nothing, so it cannot
// fail). The registry's own mutex is held from prepare to parent/child, so that no mutex is
// created or destroyed while a fork is under way.
struct ForkRegistry {
  std::mutex mutex;
  ForkSafeMutex *head = nullptr;
  static constexpr int kMaxParticipants = 4;
  void (*participant_prepare[kMaxParticipants])() = {};
  void (*participant_release[kMaxParticipants])() = {};
  void (*participant_in_child[kMaxParticipants])() = {};
  int participants = 0;

  static ForkRegistry &get() {
    static ForkRegistry *registry = [] {
      auto *r = new ForkRegistry();  // never destroyed: atfork handlers outlive static objects
      ::pthread_atfork(&prepare, &release, &release_in_child);
      return r;
    }();
    return *registry;
  }

  static void prepare() {
    ForkRegistry &r = get();
    r.mutex.lock();
    for (int rank = ForkSafeMutex::kOuter; rank <= ForkSafeMutex::kInner; ++rank)
      for (ForkSafeMutex *m = r.head; m; m = m->next_)
        if (m->rank_ == rank) m->m_.lock();
    // After every ForkSafeMutex (an initialisation takes none of them); not if this thread forks
    // from inside an initialisation, which holds it already.
    if (t_once_depth == 0) g_once_mutex.lock();
    for (int i = 0; i < r.participants; ++i) r.participant_prepare[i]();
  }

  static void release() {
    ForkRegistry &r = get();
    for (int i = r.participants - 1; i >= 0; --i) r.participant_release[i]();
    if (t_once_depth == 0) g_once_mutex.unlock();
    for (ForkSafeMutex *m = r.head; m; m = m->next_) m->m_.unlock();
    r.mutex.unlock();
  }

  static void release_in_child() {
    g_process_id.store(0, std::memory_order_relaxed);  // before anything the child runs
    release();
    ForkRegistry &r = get();
    for (int i = 0; i < r.participants; ++i)
      if (r.participant_in_child[i]) r.participant_in_child[i]();
  }
};

pid_t process_id() {
  const pid_t known = g_process_id.load(std::memory_order_relaxed);
  if (known != 0) return known;
  ForkRegistry::get();  // the handler that forgets it exists before it is first remembered
  const pid_t id = ::getpid();
  g_process_id.store(id, std::memory_order_relaxed);
  return id;
}

void lock_once_initialisations() {
  if (t_once_depth++ > 0) return;
  ForkRegistry::get();  // the fork handlers exist before the first initialisation runs
  g_once_mutex.lock();
}

void unlock_once_initialisations() {
  if (--t_once_depth == 0) g_once_mutex.unlock();
}

void add_fork_participant(void (*prepare)(), void (*release)(), void (*in_child)()) {
  ForkRegistry &r = ForkRegistry::get();
  std::lock_guard lock(r.mutex);
  if (r.participants == ForkRegistry::kMaxParticipants) return;
  r.participant_prepare[r.participants] = prepare;
  r.participant_in_child[r.participants] = in_child;
  r.participant_release[r.participants++] = release;
}

ForkSafeMutex::ForkSafeMutex(Rank rank) : rank_(rank) {
  ForkRegistry &r = ForkRegistry::get();
  std::lock_guard lock(r.mutex);
  next_ = r.head;
  if (r.head) r.head->prev_ = this;
  r.head = this;
}

ForkSafeMutex::~ForkSafeMutex() {
  ForkRegistry &r = ForkRegistry::get();
  std::lock_guard lock(r.mutex);
  if (prev_)
    prev_->next_ = next_;
  else
    r.head = next_;
  if (next_) next_->prev_ = prev_;
}

}  // namespace progcache
