#include "util/test_hooks.hpp"

#ifdef PCACHE_TEST_HOOKS
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#endif

namespace progcache::test_hooks {

#ifdef PCACHE_TEST_HOOKS

namespace {
std::atomic<FaultHook> g_fault_hook{nullptr};
}  // namespace

bool fake_secure() {
  const char *fake = std::getenv("PCACHE_TEST_FAKE_SECURE");
  return fake && std::string(fake) == "1";
}

const char *fake_netfs() {
  const char *fake = std::getenv("PCACHE_TEST_FAKE_NETFS");
  return fake && *fake ? fake : nullptr;
}

bool force_sha256() {
  return std::getenv("PCACHE_TEST_FORCE_SHA256") != nullptr;
}

bool fetch_digests() {
  return std::getenv("PCACHE_TEST_FETCH_DIGESTS") != nullptr;
}

bool refuse_library(const char *soname) {
  const char *refused = std::getenv("PCACHE_TEST_REFUSE_LIBRARY");
  if (!refused) return false;
  const std::string_view name(soname);
  for (std::string_view list(refused); !list.empty();) {
    const size_t comma = std::min(list.find(','), list.size());
    const std::string_view prefix = list.substr(0, comma);
    if (!prefix.empty() && name.substr(0, prefix.size()) == prefix) return true;
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  return false;
}

int fake_sqlite_version() {
  const char *fake = std::getenv("PCACHE_TEST_FAKE_SQLITE_VERSION");
  return fake ? std::atoi(fake) : 0;
}

int library_load_delay_ms() {
  const char *delay = std::getenv("PCACHE_TEST_SLOW_LIBRARY_LOAD_MS");
  return delay ? std::atoi(delay) : 0;
}

void set_fault_hook(FaultHook hook) {
  g_fault_hook.store(hook);
}

namespace {

// PCACHE_TEST_FS_FAULT's mode, and its K or PATH.
struct EnvFault {
  char mode = 0;  // 'f' full, 'k' kill, 'c' count, 0 none
  long at = 0;
  std::string path;
};

EnvFault env_fault() {
  EnvFault f;
  const char *spec = std::getenv("PCACHE_TEST_FS_FAULT");
  if (!spec) return f;
  const std::string_view s(spec);
  if (s.rfind("full:", 0) == 0 || s.rfind("kill:", 0) == 0) {
    f.mode = s[0] == 'f' ? 'f' : 'k';
    f.at = std::atol(spec + 5);
  } else if (s.rfind("count:", 0) == 0) {
    f.mode = 'c';
    f.path = spec + 6;
  }
  return f;
}

int env_fault_for(FsOp op) {
  if (op != FsOp::create_temp && op != FsOp::write && op != FsOp::fsync && op != FsOp::rename)
    return 0;
  static const EnvFault f = env_fault();
  static std::atomic<long> calls{0};
  if (!f.mode) return 0;
  const long n = calls.fetch_add(1) + 1;
  if (f.mode == 'c') {
    const std::string count = std::to_string(n) + "\n";
    const int fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (::write(fd, count.data(), count.size()) < 0) {
      }
      ::close(fd);
    }
  }
  if (f.mode == 'k' && n == f.at) ::kill(::getpid(), SIGKILL);
  return f.mode == 'f' && n >= f.at ? ENOSPC : 0;
}

}  // namespace

int fault(FsOp op) {
  const FaultHook hook = g_fault_hook.load(std::memory_order_relaxed);
  return hook ? hook(op) : env_fault_for(op);
}

#else

bool fake_secure() {
  return false;
}
const char *fake_netfs() {
  return nullptr;
}
bool force_sha256() {
  return false;
}
bool fetch_digests() {
  return false;
}
bool refuse_library(const char *) {
  return false;
}
int fake_sqlite_version() {
  return 0;
}
int library_load_delay_ms() {
  return 0;
}
void set_fault_hook(FaultHook) {}
int fault(FsOp) {
  return 0;
}

#endif

}  // namespace progcache::test_hooks
