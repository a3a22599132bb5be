#include "core/opened_files.hpp"

#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include "util/fork_guard.hpp"

namespace progcache {
namespace {

constexpr size_t kMaxRemembered = 16384;

// Process-wide: the credentials the memo's opens were made under, and path -> identity opened.
ForkSafeMutex g_opened_mutex{ForkSafeMutex::kInner};
AccessCredentials g_opened_credentials;
std::unordered_map<std::string, StatIdentity> g_opened;

}  // namespace

AccessCredentials AccessCredentials::current() {
  AccessCredentials c;
  // setfsuid/setfsgid with an invalid id change nothing and answer the current one; a sandbox
  // that refuses them leaves the effective ids, which the file-system ones follow.
  const int fsuid = ::setfsuid(uid_t(-1)), fsgid = ::setfsgid(gid_t(-1));
  c.fsuid = fsuid == -1 ? uint32_t(::geteuid()) : uint32_t(fsuid);
  c.fsgid = fsgid == -1 ? uint32_t(::getegid()) : uint32_t(fsgid);
  // One call for the usual few groups; asked for the count only when there are more.
  gid_t few[64];
  int got = ::getgroups(int(std::size(few)), few);
  if (got >= 0) {
    c.groups.assign(few, few + got);
  } else if (const int n = ::getgroups(0, nullptr); n > 0) {
    std::vector<gid_t> groups(static_cast<size_t>(n));
    got = ::getgroups(n, groups.data());
    c.groups.assign(groups.begin(), groups.begin() + std::max(got, 0));
  }
  if (got < 0) c.complete = false;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) == 0)
    c.effective_capabilities = uint64_t(data[0].effective) | uint64_t(data[1].effective) << 32;
  else
    c.complete = false;
  return c;
}

bool opened_before(const std::string &path, const StatIdentity &now,
                   const AccessCredentials &credentials) {
  if (!credentials.complete) return false;
  std::lock_guard lock(g_opened_mutex);
  if (!(credentials == g_opened_credentials)) return false;
  const auto it = g_opened.find(path);
  return it != g_opened.end() && it->second == now;
}

void remember_opened(const std::string &path, const StatIdentity &opened,
                     const AccessCredentials &credentials) {
  if (!credentials.complete || opened.is_racy()) return;
  std::lock_guard lock(g_opened_mutex);
  if (!(credentials == g_opened_credentials) || g_opened.size() >= kMaxRemembered) {
    g_opened.clear();
    g_opened_credentials = credentials;
  }
  g_opened[path] = opened;
}

}  // namespace progcache
