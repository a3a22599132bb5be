#include "cuda/nvrtc.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "cuda/elf_file.hpp"
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

// A drop-in NVRTC (this process's own, or any file with the drop-in's ELF note): never the
// real library, whoever looks (libprogcache in a process `progcache run` started finds the
// drop-in first on LD_LIBRARY_PATH). The ELF facts are the ones the identity reads next
// (remembered per file), so a hit reads libnvrtc's headers once.
bool is_dropin(const std::string &path) {
  struct stat st;
  if (g_restriction.has_self && ::stat(path.c_str(), &st) == 0 &&
      st.st_dev == g_restriction.self_dev && st.st_ino == g_restriction.self_ino)
    return true;
  const std::optional<ElfFacts> facts = elf_facts_of_file(path);
  return facts && facts->progcache_dropin;
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
    if (is_dropin(loc.path))
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
      if (id.empty() || is_dropin(resolved)) continue;
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
  if (loc.identity.empty() || is_dropin(loc.path)) return std::nullopt;
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

Nvrtc::Nvrtc() = default;
Nvrtc::~Nvrtc() = default;

const NvrtcApi &Nvrtc::api() const {
  return *api_;
}

namespace {
ForkSafeMutex g_loaded_mutex;
std::map<std::string, std::unique_ptr<Nvrtc>> g_loaded;  // lives as long as the process
}  // namespace

const Nvrtc *Nvrtc::find_loaded(const std::string &path) {
  std::lock_guard lock(g_loaded_mutex);
  auto it = g_loaded.find(path);
  return it == g_loaded.end() ? nullptr : it->second.get();
}

Nvrtc &Nvrtc::load(const NvrtcLocation &where) {
  std::lock_guard lock(g_loaded_mutex);
  auto &loaded = g_loaded;
  if (auto it = loaded.find(where.path); it != loaded.end()) return *it->second;
  void *h = ::dlopen(where.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error(Status::cuda_unavailable,
                "cannot load NVRTC '" + where.path + "': " + (::dlerror() ?: "unknown error"));
  auto api = std::make_unique<NvrtcApi>();
  api->handle = h;
  bool missing = false;
  std::string missing_name;
  auto resolve = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
    if (!fn && !missing) {
      missing = true;
      missing_name = name;
    }
  };
  resolve(api->version, "nvrtcVersion");
  resolve(api->error_string, "nvrtcGetErrorString");
  resolve(api->create, "nvrtcCreateProgram");
  resolve(api->destroy, "nvrtcDestroyProgram");
  resolve(api->compile, "nvrtcCompileProgram");
  resolve(api->log_size, "nvrtcGetProgramLogSize");
  resolve(api->log, "nvrtcGetProgramLog");
  resolve(api->ptx_size, "nvrtcGetPTXSize");
  resolve(api->ptx, "nvrtcGetPTX");
  resolve(api->cubin_size, "nvrtcGetCUBINSize");
  resolve(api->cubin, "nvrtcGetCUBIN");
  resolve(api->ltoir_size, "nvrtcGetLTOIRSize");
  resolve(api->ltoir, "nvrtcGetLTOIR");
  resolve(api->add_name_expression, "nvrtcAddNameExpression");
  resolve(api->lowered_name, "nvrtcGetLoweredName");
  // What only a caller forwarding the whole API needs (the drop-in NVRTC): null when absent
  // (before NVRTC 12.4 for the PCH and flow-callback calls; __nvrtcCPEx is private).
  auto optional = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
  };
  optional(api->num_supported_archs, "nvrtcGetNumSupportedArchs");
  optional(api->supported_archs, "nvrtcGetSupportedArchs");
  optional(api->optixir_size, "nvrtcGetOptiXIRSize");
  optional(api->optixir, "nvrtcGetOptiXIR");
  optional(api->get_pch_heap_size, "nvrtcGetPCHHeapSize");
  optional(api->set_pch_heap_size, "nvrtcSetPCHHeapSize");
  optional(api->pch_create_status, "nvrtcGetPCHCreateStatus");
  optional(api->pch_heap_size_required, "nvrtcGetPCHHeapSizeRequired");
  optional(api->set_flow_callback, "nvrtcSetFlowCallback");
  optional(api->create_ex, "__nvrtcCPEx");
  if (missing) {
    ::dlclose(h);
    throw Error(Status::cuda_unavailable,
                "NVRTC '" + where.path + "' lacks " + missing_name + " (too old or not NVRTC)");
  }
  int major = 0, minor = 0;
  if (api->version(&major, &minor) != NVRTC_SUCCESS) {
    ::dlclose(h);
    throw Error(Status::cuda_unavailable, "nvrtcVersion failed in '" + where.path + "'");
  }
  std::unique_ptr<Nvrtc> n(new Nvrtc());
  n->api_ = std::move(api);
  n->version_ = uint32_t(major) * 1000 + uint32_t(minor) * 10;
  n->path_ = where.path;
  return *loaded.emplace(where.path, std::move(n)).first->second;
}

NvrtcOutput Nvrtc::compile(const ProgramDesc &p) const {
  if (p.code_type != CodeType::cxx)
    throw Error(Status::unsupported,
                "NVRTC compiles CUDA C++ only; PTX and NVVM IR inputs are not supported by "
                "pcache_compile (store their results with pcache_put)");
  NvrtcOutput out;
  try {
    compile_into(p, out);
  } catch (const ApiFailure &f) {
    // Any NVRTC call that refused the program (an invalid option, a bad name expression) fails
    // the compile like a compile error: a result whose log holds NVRTC's log and the call.
    if (!out.log.empty() && out.log.back() != '\n') out.log += '\n';
    out.log += "progcache: " + f.what + "\n";
    out.ok = false;
    out.code.clear();
    out.lowered_names.clear();
  }
  return out;
}

void Nvrtc::compile_into(const ProgramDesc &p, NvrtcOutput &out) const {
  const NvrtcApi &a = *api_;
  auto check = [&](nvrtcResult r, const char *what) {
    if (r == NVRTC_SUCCESS) return;
    if (r == NVRTC_ERROR_OUT_OF_MEMORY)
      throw Error(Status::no_memory, std::string(what) + ": " + a.error_string(r));
    out.nvrtc_result = int32_t(r);
    throw ApiFailure{std::string(what) + " returned " + a.error_string(r)};
  };
  const std::string source(p.source.str());  // NVRTC wants it NUL-terminated
  const std::string name(p.name);
  std::vector<std::string> header_names, header_sources;
  for (const auto &[n, s] : p.headers) {
    header_names.emplace_back(n);
    header_sources.emplace_back(s);
  }
  std::vector<const char *> hn, hs, opts;
  for (auto &s : header_names) hn.push_back(s.c_str());
  for (auto &s : header_sources) hs.push_back(s.c_str());
  std::vector<std::string> options(p.options.begin(), p.options.end());
  if (p.target == Target::ltoir) {
    bool has_dlto = false;
    for (const std::string &o : options) has_dlto |= o == "-dlto" || o == "--dlink-time-opt";
    if (!has_dlto) options.push_back("-dlto");
  }
  for (auto &s : options) opts.push_back(s.c_str());

  nvrtcProgram prog = nullptr;
  check(a.create(&prog, source.c_str(), name.c_str(), int(hn.size()), hs.data(), hn.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    const NvrtcApi &a;
    nvrtcProgram *p;
    ~Destroy() { a.destroy(p); }
  } destroy{a, &prog};
  std::vector<std::string> exprs(p.name_expressions.begin(), p.name_expressions.end());
  for (const std::string &e : exprs)
    check(a.add_name_expression(prog, e.c_str()), "nvrtcAddNameExpression");

  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult rc = a.compile(prog, int(opts.size()), opts.data());
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  size_t log_size = 0;
  if (a.log_size(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    a.log(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (rc != NVRTC_SUCCESS) {
    if (rc != NVRTC_ERROR_COMPILATION) check(rc, "nvrtcCompileProgram");
    out.nvrtc_result = int32_t(rc);
    return;  // ok = false; the log says why
  }
  size_t size = 0;
  switch (p.target) {
    case Target::nvrtc_outputs:
      throw Error(Status::unsupported, "every output of a compile is collected by the drop-in");
    case Target::cubin:
      check(a.cubin_size(prog, &size), "nvrtcGetCUBINSize");
      out.code.resize(size);
      if (size) check(a.cubin(prog, out.code.data()), "nvrtcGetCUBIN");
      break;
    case Target::ptx:
      check(a.ptx_size(prog, &size), "nvrtcGetPTXSize");
      out.code.resize(size);
      if (size) check(a.ptx(prog, out.code.data()), "nvrtcGetPTX");
      if (size <= 1) out.code.clear();  // only the terminating NUL: no PTX at all
      break;
    case Target::ltoir:
      check(a.ltoir_size(prog, &size), "nvrtcGetLTOIRSize");
      out.code.resize(size);
      if (size) check(a.ltoir(prog, out.code.data()), "nvrtcGetLTOIR");
      break;
  }
  if (out.code.empty()) {
    // Success without output is not a binary: a compile error, never stored.
    static const char *const kWhy[] = {
        "no cubin: give a real architecture (-arch=sm_XX), not a virtual one (compute_XX)",
        "no PTX: -dlto/--dlink-time-opt makes LTO-IR instead; ask for the LTO-IR target",
        "no LTO-IR: add -dlto"};
    if (!out.log.empty() && out.log.back() != '\n') out.log += '\n';
    out.log += std::string("progcache: NVRTC succeeded but produced ") + kWhy[int(p.target)] + "\n";
    return;  // ok = false
  }
  for (const std::string &e : exprs) {
    const char *lowered = nullptr;
    check(a.lowered_name(prog, e.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.emplace_back(e, lowered ? lowered : "");
  }
  out.ok = true;
}

}  // namespace progcache
