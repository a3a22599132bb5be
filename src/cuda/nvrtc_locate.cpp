// Where the real NVRTC is: the search (PCACHE_NVRTC_LIBRARY, the loader's paths, the toolkit),
// its memo, and the rule that a library carrying progcache's front-end note is never it.
#include <dirent.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "cuda/elf_file.hpp"
#include "cuda/nvrtc.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/hex.hpp"
#include "util/paths.hpp"
#include "util/stat_identity.hpp"
#include "util/trust.hpp"

namespace progcache {

namespace {

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *v = trusted_env(var); v && *v) dirs.push_back(std::string(v) + "/lib64");
  if (const char *v = trusted_env("LD_LIBRARY_PATH"); v && *v) {
    std::string s = v;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t colon = s.find(':', start);
      const std::string d = s.substr(start, colon - start);
      if (!d.empty()) dirs.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  for (const char *d : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                        "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"})
    dirs.emplace_back(d);
  return dirs;
}

std::string identity_of(const std::string &path, std::string *resolved) {
  char real[PATH_MAX];
  if (!::realpath(path.c_str(), real)) return "";
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  *resolved = real;
  return std::string(real) + "|" + std::to_string(st.st_size) + "|" +
         std::to_string(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec) + "|" +
         std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

}  // namespace

namespace {
NvrtcLocation scan_for_nvrtc();
std::optional<NvrtcLocation> remembered_location(MemoStore *memos);
void remember_location(MemoStore *memos, const NvrtcLocation &loc);

struct SearchRestriction {
  int major = -1;  // -1: any
  bool has_self = false;
  dev_t self_dev = 0;
  ino_t self_ino = 0;
};
SearchRestriction g_restriction;  // set once, before any search (restrict_nvrtc_search)

// A front end of NVRTC's API (this process's own, or any file with progcache's front-end ELF
// note): never the
// real library, whoever looks (libprogcache in a process `progcache run` started finds the
// front end first on LD_LIBRARY_PATH). The ELF facts are the ones the identity reads next
// (remembered per file), so a hit reads libnvrtc's headers once.
bool is_front_end(const std::string &path) {
  struct stat st;
  if (g_restriction.has_self && ::stat(path.c_str(), &st) == 0 &&
      st.st_dev == g_restriction.self_dev && st.st_ino == g_restriction.self_ino)
    return true;
  const std::optional<ElfFacts> facts = elf_facts_of_file(path);
  return facts && facts->progcache_front_end;
}
}  // namespace

void restrict_nvrtc_search(int major, const std::string &self) {
  g_restriction.major = major;
  struct stat st;
  if (!self.empty() && ::stat(self.c_str(), &st) == 0) {
    g_restriction.has_self = true;
    g_restriction.self_dev = st.st_dev;
    g_restriction.self_ino = st.st_ino;
  }
}

namespace {
// Scanning the library directories costs ~0.5 ms (thousands of files in the system directories),
// so it runs once per process and setting; each call then only re-stats the chosen file, which
// still notices an NVRTC replaced in place.
ForkSafeMutex g_found_mutex;
std::map<std::string, NvrtcLocation> g_found;
}  // namespace

void forget_nvrtc_locations() {
  std::lock_guard lock(g_found_mutex);
  g_found.clear();
}

NvrtcLocation locate_nvrtc(MemoStore *memos) {
  const char *env = trusted_env("PCACHE_NVRTC_LIBRARY");
  const std::string setting = env ? env : "";
  {
    std::lock_guard lock(g_found_mutex);
    if (auto it = g_found.find(setting); it != g_found.end()) {
      NvrtcLocation loc = it->second;
      std::string resolved;
      loc.identity = identity_of(loc.path, &resolved);
      if (!loc.identity.empty()) return loc;
    }
  }
  std::optional<NvrtcLocation> remembered;
  if (setting.empty()) remembered = remembered_location(memos);
  NvrtcLocation loc = remembered ? *remembered : scan_for_nvrtc();
  if (setting.empty() && !remembered) remember_location(memos, loc);
  std::lock_guard lock(g_found_mutex);
  g_found[setting] = loc;
  return loc;
}

namespace {
NvrtcLocation scan_for_nvrtc() {
  NvrtcLocation loc;
  if (const char *explicit_path = trusted_env("PCACHE_NVRTC_LIBRARY");
      explicit_path && *explicit_path) {
    loc.tried.push_back(explicit_path);
    loc.identity = identity_of(explicit_path, &loc.path);
    if (loc.identity.empty())
      throw Error(Status::cuda_unavailable, std::string("PCACHE_NVRTC_LIBRARY='") + explicit_path +
                                                "' is not a readable file");
    if (is_front_end(loc.path))
      throw Error(Status::cuda_unavailable, std::string("PCACHE_NVRTC_LIBRARY='") + explicit_path +
                                                "' is progcache's drop-in NVRTC, not the real one");
    return loc;
  }
  int best_major = -1;
  for (const std::string &dir : search_dirs()) {
    loc.tried.push_back(dir + "/libnvrtc.so.*");
    DIR *d = ::opendir(dir.c_str());
    if (!d) continue;
    while (struct dirent *e = ::readdir(d)) {
      const char *n = e->d_name;
      constexpr const char prefix[] = "libnvrtc.so.";
      if (std::strncmp(n, prefix, sizeof prefix - 1) != 0) continue;
      const char *digits = n + sizeof prefix - 1;
      if (!*digits || std::strspn(digits, "0123456789") != std::strlen(digits)) continue;
      const int major = std::atoi(digits);
      if (major <= best_major) continue;  // the first directory wins a tie
      if (g_restriction.major >= 0 && major != g_restriction.major) continue;
      std::string resolved;
      std::string id = identity_of(dir + "/" + n, &resolved);
      if (id.empty() || is_front_end(resolved)) continue;
      best_major = major;
      loc.path = resolved;
      loc.found_as = dir + "/" + n;
      loc.identity = id;
    }
    ::closedir(d);
  }
  if (best_major < 0) {
    std::string msg = "no NVRTC library found (set PCACHE_NVRTC_LIBRARY); tried:";
    for (const std::string &t : loc.tried) msg += " " + t;
    throw Error(Status::cuda_unavailable, msg);
  }
  return loc;
}
}  // namespace

namespace {

// The location memo: which file a scan of the search directories chose, valid while every one of
// them has the inode and mtime it had (adding, removing or renaming a name changes a directory's
// mtime; retargeting a symlinked directory changes the inode). Named by the search it answers.
struct LocationSearch {
  std::vector<std::string> dirs;
  std::string memo_name;
};

LocationSearch current_search() {
  LocationSearch s;
  s.dirs = search_dirs();
  std::string text = "major " + std::to_string(g_restriction.major);
  for (const std::string &d : s.dirs) text += "\n" + d;
  const uint64_t h = XXH3_64bits(text.data(), text.size());
  s.memo_name = "nvrtc-location/" + to_hex(ByteView(&h, sizeof h));
  return s;
}

// "ino:mtime_ns" of dir, "-" when absent; racy when it changed too recently to vouch for.
std::string dir_stamp(const std::string &dir, bool *racy) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return "-";
  const StatIdentity id = StatIdentity::of(st);
  if (racy && id.is_racy()) *racy = true;
  return std::to_string(id.ino) + ":" + std::to_string(id.mtime_ns);
}

// The file named libnvrtc.so.<digits> (of the restricted major) directly in one of dirs.
bool is_candidate(const std::string &path, const std::vector<std::string> &dirs) {
  if (path.find('/') == std::string::npos) return false;
  const std::string dir = parent_dir(path), name = base_name(path);
  constexpr std::string_view prefix = "libnvrtc.so.";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  if (g_restriction.major >= 0 && std::atoi(digits.c_str()) != g_restriction.major) return false;
  return std::find(dirs.begin(), dirs.end(), dir) != dirs.end();
}

std::optional<NvrtcLocation> remembered_location(MemoStore *memos) {
  if (!memos) return std::nullopt;
  const LocationSearch search = current_search();
  const std::optional<std::string> memo = memos->load_memo(search.memo_name);
  if (!memo) return std::nullopt;
  // found_as, then one "dir\tstamp" line per search directory, in order.
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = memo->find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(memo->substr(start, nl - start));
  if (lines.size() != search.dirs.size() + 1) return std::nullopt;
  for (size_t i = 0; i < search.dirs.size(); ++i)
    if (lines[i + 1] != search.dirs[i] + "\t" + dir_stamp(search.dirs[i], nullptr))
      return std::nullopt;
  // Only a file the scan could have chosen: a memo never names a library outside the search.
  NvrtcLocation loc;
  loc.found_as = lines[0];
  if (!is_candidate(loc.found_as, search.dirs)) return std::nullopt;
  loc.identity = identity_of(loc.found_as, &loc.path);
  if (loc.identity.empty() || is_front_end(loc.path)) return std::nullopt;
  for (const std::string &dir : search.dirs) loc.tried.push_back(dir + "/libnvrtc.so.*");
  return loc;
}

void remember_location(MemoStore *memos, const NvrtcLocation &loc) {
  if (!memos || loc.found_as.empty()) return;
  const LocationSearch search = current_search();
  std::string memo = loc.found_as + "\n";
  bool racy = false;
  for (const std::string &dir : search.dirs) memo += dir + "\t" + dir_stamp(dir, &racy) + "\n";
  if (!racy) memos->save_memo(search.memo_name, memo);
}

}  // namespace

}  // namespace progcache
