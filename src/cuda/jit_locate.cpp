// Where the real JIT libraries are: the search (PCACHE_*_LIBRARY, the loader's paths, the
// toolkit), its memo, and the rule that a library carrying progcache's front-end note is never
// one of them.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "cuda/elf_file.hpp"
#include "cuda/jit_library.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/hex.hpp"
#include "util/paths.hpp"
#include "util/stat_identity.hpp"
#include "util/timespec_ns.hpp"
#include "util/trust.hpp"
#include "util/xxhash.hpp"

namespace progcache {

const LibrarySpec kNvrtcLibrary{"NVRTC", "PCACHE_NVRTC_LIBRARY", "libnvrtc.so.", "nvrtc-location/",
                                ""};
const LibrarySpec kNvJitLinkLibrary{"nvJitLink", "PCACHE_NVJITLINK_LIBRARY", "libnvJitLink.so.",
                                    "nvjitlink-location/", ""};
const LibrarySpec kNvvmLibrary{"libNVVM", "PCACHE_NVVM_LIBRARY", "libnvvm.so.", "nvvm-location/",
                               "../nvvm/lib64"};

namespace {

std::vector<std::string> base_dirs() {
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

std::vector<std::string> search_dirs(const LibrarySpec &spec) {
  std::vector<std::string> dirs;
  for (const std::string &d : base_dirs()) {
    dirs.push_back(d);
    if (!spec.subdir.empty()) dirs.push_back(join_path(d, spec.subdir));
  }
  return dirs;
}

std::string identity_text(const std::string &real, const struct stat &st) {
  return real + "|" + std::to_string(st.st_size) + "|" + std::to_string(identity_ns(st.st_mtim)) +
         "|" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

std::string identity_of(const std::string &path, std::string *resolved) {
  char real[PATH_MAX];
  if (!::realpath(path.c_str(), real)) return "";
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  *resolved = real;
  return identity_text(real, st);
}

// Whether the resolved file found earlier is still the same file (one stat, no path walk: the
// same device, inode, size and mtime through the same path is the same file).
bool still_same_file(const LibraryLocation &loc) {
  struct stat st;
  return ::stat(loc.path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         identity_text(loc.path, st) == loc.identity;
}

}  // namespace

namespace {
LibraryLocation scan_for_library(const LibrarySpec &spec);
std::optional<LibraryLocation> remembered_location(const LibrarySpec &spec, MemoStore *memos);
void remember_location(const LibrarySpec &spec, MemoStore *memos, const LibraryLocation &loc);

struct SearchRestriction {
  int major = -1;  // -1: any
  bool has_self = false;
  dev_t self_dev = 0;
  ino_t self_ino = 0;
};
// Per library, set once before any search for it (restrict_library_search), which a front end
// does from its constructor: built on first use, not by this file's static initialisation.
std::map<std::string_view, SearchRestriction> &restrictions() {
  static std::map<std::string_view, SearchRestriction> map;
  return map;
}
SearchRestriction restriction_of(const LibrarySpec &spec) {
  auto it = restrictions().find(spec.what);
  return it == restrictions().end() ? SearchRestriction{} : it->second;
}

// A front end of a library's API (this process's own, or any file with progcache's front-end
// ELF note): never the real library, whoever looks (libprogcache in a process `progcache run`
// started finds the front end first on LD_LIBRARY_PATH). The ELF facts are the ones the
// identity reads next (remembered per file), so a hit reads the library's headers once.
bool is_front_end(const LibrarySpec &spec, const std::string &path) {
  const SearchRestriction r = restriction_of(spec);
  struct stat st;
  if (r.has_self && ::stat(path.c_str(), &st) == 0 && st.st_dev == r.self_dev &&
      st.st_ino == r.self_ino)
    return true;
  const std::optional<ElfFacts> facts = elf_facts_of_file(path);
  return facts && facts->progcache_front_end;
}
}  // namespace

void restrict_library_search(const LibrarySpec &spec, int major, const std::string &self) {
  SearchRestriction r;
  r.major = major;
  struct stat st;
  if (!self.empty() && ::stat(self.c_str(), &st) == 0) {
    r.has_self = true;
    r.self_dev = st.st_dev;
    r.self_ino = st.st_ino;
  }
  restrictions()[spec.what] = r;
}

namespace {
// Scanning the library directories costs ~0.5 ms (thousands of files in the system directories),
// so it runs once per process, library and setting; each call then only re-stats the chosen
// file, which still notices a library replaced in place.
ForkSafeMutex g_found_mutex;
std::map<std::string, LibraryLocation> g_found;

// The build current_library_build answered last for a library, and what it depended on.
struct KnownBuild {
  std::string setting;  // $spec.env as it was
  std::string path;     // the file located
  StatIdentity identity;
  size_t loads = 0;  // loads_so_far() before it was derived
  std::string build;
};
ForkSafeMutex g_known_builds_mutex;
std::map<std::string_view, std::shared_ptr<const KnownBuild>> g_known_builds;  // by spec.what
}  // namespace

void forget_library_locations() {
  {
    std::lock_guard lock(g_found_mutex);
    g_found.clear();
  }
  std::lock_guard lock(g_known_builds_mutex);
  g_known_builds.clear();
}

LibraryLocation locate_library(const LibrarySpec &spec, MemoStore *memos) {
  const char *env = trusted_env(std::string(spec.env).c_str());
  const std::string setting = env ? env : "";
  const std::string found_key = std::string(spec.what) + "\n" + setting;
  {
    std::lock_guard lock(g_found_mutex);
    if (auto it = g_found.find(found_key); it != g_found.end()) {
      if (still_same_file(it->second)) return it->second;
      LibraryLocation loc = it->second;
      std::string resolved;
      loc.identity = identity_of(loc.path, &resolved);
      if (!loc.identity.empty()) return loc;
    }
  }
  std::optional<LibraryLocation> remembered;
  if (setting.empty()) remembered = remembered_location(spec, memos);
  LibraryLocation loc = remembered ? *remembered : scan_for_library(spec);
  if (setting.empty() && !remembered) remember_location(spec, memos, loc);
  std::lock_guard lock(g_found_mutex);
  g_found[found_key] = loc;
  return loc;
}

namespace {

// The major of a file named prefix<digits>, or -1.
int major_of(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  return std::atoi(std::string(digits).c_str());
}

LibraryLocation scan_for_library(const LibrarySpec &spec) {
  LibraryLocation loc;
  const std::string env(spec.env), what(spec.what);
  if (const char *explicit_path = trusted_env(env.c_str()); explicit_path && *explicit_path) {
    loc.tried.push_back(explicit_path);
    loc.identity = identity_of(explicit_path, &loc.path);
    if (loc.identity.empty())
      throw Error(Status::cuda_unavailable,
                  env + "='" + explicit_path + "' is not a readable file");
    if (is_front_end(spec, loc.path))
      throw Error(Status::cuda_unavailable, env + "='" + explicit_path + "' is progcache's " +
                                                "drop-in " + what + ", not the real one");
    return loc;
  }
  const int wanted = restriction_of(spec).major;
  int best_major = -1;
  for (const std::string &dir : search_dirs(spec)) {
    loc.tried.push_back(dir + "/" + std::string(spec.prefix) + "*");
    DIR *d = ::opendir(dir.c_str());
    if (!d) continue;
    while (struct dirent *e = ::readdir(d)) {
      const int major = major_of(e->d_name, spec.prefix);
      if (major < 0 || major <= best_major) continue;  // the first directory wins a tie
      if (wanted >= 0 && major != wanted) continue;
      std::string resolved;
      std::string id = identity_of(join_path(dir, e->d_name), &resolved);
      if (id.empty() || is_front_end(spec, resolved)) continue;
      best_major = major;
      loc.path = resolved;
      loc.found_as = join_path(dir, e->d_name);
      loc.identity = id;
    }
    ::closedir(d);
  }
  if (best_major < 0) {
    std::string msg = "no " + what + " library found (set " + env + "); tried:";
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

LocationSearch current_search(const LibrarySpec &spec) {
  LocationSearch s;
  s.dirs = search_dirs(spec);
  std::string text = "major " + std::to_string(restriction_of(spec).major);
  for (const std::string &d : s.dirs) text += "\n" + d;
  const uint64_t h = xxh3_64(text.data(), text.size());
  s.memo_name = std::string(spec.memo) + to_hex(ByteView(&h, sizeof h));
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

// The file named prefix<digits> (of the restricted major) directly in one of dirs.
bool is_candidate(const LibrarySpec &spec, const std::string &path,
                  const std::vector<std::string> &dirs) {
  if (path.find('/') == std::string::npos) return false;
  const int major = major_of(base_name(path), spec.prefix);
  const int wanted = restriction_of(spec).major;
  if (major < 0 || (wanted >= 0 && major != wanted)) return false;
  return std::find(dirs.begin(), dirs.end(), parent_dir(path)) != dirs.end();
}

std::optional<LibraryLocation> remembered_location(const LibrarySpec &spec, MemoStore *memos) {
  if (!memos) return std::nullopt;
  const LocationSearch search = current_search(spec);
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
  LibraryLocation loc;
  loc.found_as = lines[0];
  if (!is_candidate(spec, loc.found_as, search.dirs)) return std::nullopt;
  loc.identity = identity_of(loc.found_as, &loc.path);
  if (loc.identity.empty() || is_front_end(spec, loc.path)) return std::nullopt;
  for (const std::string &dir : search.dirs)
    loc.tried.push_back(dir + "/" + std::string(spec.prefix) + "*");
  return loc;
}

void remember_location(const LibrarySpec &spec, MemoStore *memos, const LibraryLocation &loc) {
  if (!memos || loc.found_as.empty()) return;
  const LocationSearch search = current_search(spec);
  std::string memo = loc.found_as + "\n";
  bool racy = false;
  for (const std::string &dir : search.dirs) memo += dir + "\t" + dir_stamp(dir, &racy) + "\n";
  if (!racy) memos->save_memo(search.memo_name, memo);
}

}  // namespace

namespace {
ForkSafeMutex g_loaded_mutex;
std::set<std::string> g_loaded_paths;  // libraries this process has dlopened (note_library_loaded)

// How many libraries this process has loaded: library_build's answer for a path changes only
// when the path joins g_loaded_paths, which only grows.
size_t loads_so_far() {
  std::lock_guard lock(g_loaded_mutex);
  return g_loaded_paths.size();
}
}  // namespace

void note_library_loaded(const std::string &path) {
  std::lock_guard lock(g_loaded_mutex);
  g_loaded_paths.insert(path);
}

namespace {
// The build-id of the file whose identity (path, size, mtime, device and inode: a replaced file
// has another) is given, read once per process: a drop-in derives the build for every program.
std::string file_build_id(const LibrarySpec &spec, const LibraryLocation &loc) {
  static ForkSafeMutex mutex;
  static std::map<std::string, std::string> known;  // identity -> build-id
  if (!loc.identity.empty()) {
    std::lock_guard lock(mutex);
    if (auto it = known.find(loc.identity); it != known.end()) return it->second;
  }
  const auto facts = elf_facts_of_file(loc.path);
  if (!facts)
    throw Error(Status::cuda_unavailable,
                std::string(spec.what) + " '" + loc.path + "' is not a readable ELF library");
  const std::string id = facts->build_id.empty() ? "none" : facts->build_id;
  if (!loc.identity.empty()) {
    std::lock_guard lock(mutex);
    if (known.size() >= 64) known.clear();
    known[loc.identity] = id;
  }
  return id;
}
}  // namespace

std::string library_build(const LibrarySpec &spec, const LibraryLocation &loc) {
  std::string id = file_build_id(spec, loc);
  bool loaded = false;
  {
    std::lock_guard lock(g_loaded_mutex);
    loaded = g_loaded_paths.count(loc.path) != 0;
  }
  // A library replaced on disk since this process loaded it is still the old image in memory.
  if (loaded)
    for (const LoadedImage &image : *loaded_images())
      if (image.path == loc.path && !image.build_id.empty()) id = image.build_id;
  return std::string(spec.what) + " " + id;
}

std::string current_library_build(const LibrarySpec &spec, MemoStore *memos) {
  const char *env = trusted_env(std::string(spec.env).c_str());
  const std::string_view setting = env ? env : "";
  const size_t loads = loads_so_far();
  std::shared_ptr<const KnownBuild> known;
  {
    std::lock_guard lock(g_known_builds_mutex);
    if (const auto it = g_known_builds.find(spec.what); it != g_known_builds.end())
      known = it->second;
  }
  struct stat st;  // outside the lock: threads asking at once do not queue behind a system call
  if (known && known->setting == setting && known->loads == loads &&
      ::stat(known->path.c_str(), &st) == 0 && StatIdentity::of(st) == known->identity)
    return known->build;
  struct timespec before;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &before);
  const LibraryLocation loc = locate_library(spec, memos);
  std::string build = library_build(spec, loc);
  // Remembered only for a file that stat still shows as locate_library vouched for it, last
  // changed before this call began: a write within the file system's timestamp granularity could
  // keep the same stat.
  if (::stat(loc.path.c_str(), &st) == 0 && identity_text(loc.path, st) == loc.identity &&
      StatIdentity::of(st).settled_before(before)) {
    std::lock_guard lock(g_known_builds_mutex);
    g_known_builds[spec.what] = std::make_shared<const KnownBuild>(
        KnownBuild{std::string(setting), loc.path, StatIdentity::of(st), loads, build});
  }
  return build;
}

void *open_library(const LibrarySpec &spec, const LibraryLocation &loc) {
  void *h = ::dlopen(loc.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error(Status::cuda_unavailable, "cannot load " + std::string(spec.what) + " '" +
                                              loc.path + "': " + (::dlerror() ?: "unknown error"));
  note_library_loaded(loc.path);
  return h;
}

void *library_function(const LibrarySpec &spec, void *handle, const LibraryLocation &loc,
                       const char *name) {
  void *fn = ::dlsym(handle, name);
  if (!fn)
    throw Error(Status::cuda_unavailable, std::string(spec.what) + " '" + loc.path + "' has no " +
                                              name + ": not a " + std::string(spec.what) +
                                              " this progcache can use");
  return fn;
}

}  // namespace progcache
