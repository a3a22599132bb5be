#include "core/compile_coordinator.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "util/error.hpp"

namespace progcache {

CompileCoordinator::ProcessLock::ProcessLock(const std::string &dir, const Key &key,
                                             uint32_t timeout_ms, CreateModes modes) {
  if (dir.empty()) return;
  try {
    make_dirs(dir, modes.dir);
  } catch (const Error &) {
    return;  // read-only cache: no cross-process coordination, compile anyway
  }
  const unsigned stripe = (unsigned(key[0]) << 8 | key[1]) % kStripes;
  const std::string path = dir + "/" + std::to_string(stripe) + ".lock";
  fd_ = Fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, modes.file));
  if (!fd_) return;
  if (struct stat st; ::fstat(fd_.get(), &st) == 0 && st.st_size == 0)
    set_created_mode(fd_.get(), modes.file);  // the umask may have narrowed a shared mode
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) {
      held_ = true;
      return;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) return;
    if (std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

CompileCoordinator::ProcessLock::~ProcessLock() {
  if (held_) ::flock(fd_.get(), LOCK_UN);
}

CompileCoordinator::Lease::~Lease() {
  try {
    store_.release_lease(key_, token_);
  } catch (...) {  // the lease expires by itself
  }
}

CompileCoordinator::LeaseAnswer CompileCoordinator::try_lease(ByteView key,
                                                              std::string *token) const {
  if (!leases_) return LeaseAnswer::unavailable;
  std::optional<std::string> t;
  try {
    t = leases_->try_lease(key);
  } catch (const Error &) {
    return LeaseAnswer::unavailable;
  }
  if (!t) return LeaseAnswer::unavailable;
  if (t->empty()) return LeaseAnswer::held_elsewhere;
  *token = std::move(*t);
  return LeaseAnswer::taken;
}

}  // namespace progcache
