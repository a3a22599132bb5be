// progcache run: runs a command with the drop-in NVRTC in front of the real one
// (docs/transparent.md), waits for it, says what went through the cache (and what did not), and
// exits with its exit status.
#include <dirent.h>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "run_gate.hpp"
#include "run_wait.h"

namespace progcache::cli {
namespace {

// The drop-in libraries in dir (libnvrtc.so.N, libnvJitLink.so.N, libnvvm.so.N), or none; with
// newest_only, only the highest major of each library.
std::vector<std::string> dropins_in(const std::string &dir, bool newest_only = false) {
  static const char *const kPrefixes[] = {"libnvrtc.so.", "libnvJitLink.so.", "libnvvm.so."};
  std::vector<std::string> found;
  int newest[3] = {-1, -1, -1};
  DIR *d = ::opendir(dir.c_str());
  if (!d) return found;
  while (const dirent *e = ::readdir(d))
    for (int i = 0; i < 3; ++i) {
      const size_t n = std::strlen(kPrefixes[i]);
      if (std::strncmp(e->d_name, kPrefixes[i], n) != 0 || !std::isdigit(e->d_name[n])) continue;
      if (!newest_only) found.push_back(dir + "/" + e->d_name);
      newest[i] = std::max(newest[i], std::atoi(e->d_name + n));
    }
  ::closedir(d);
  for (int i = 0; newest_only && i < 3; ++i)
    if (newest[i] >= 0) found.push_back(dir + "/" + kPrefixes[i] + std::to_string(newest[i]));
  return found;
}

// Where the drop-in is beside the libprogcache this command runs with: <libdir>/progcache/nvrtc
// when installed, nvrtc-dropin/ in a build tree.
std::string dropin_directory() {
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void *>(&pcache_open), &info) || !info.dli_fname)
    throw Failure(PCACHE_ERR_IO, "cannot tell where libprogcache is loaded from");
  char real[PATH_MAX];  // the loader's spelling may hold "bin/../lib" (RUNPATH $ORIGIN/../lib)
  std::string libdir = ::realpath(info.dli_fname, real) ? real : info.dli_fname;
  libdir.erase(libdir.rfind('/') == std::string::npos ? 0 : libdir.rfind('/'));
  if (libdir.empty()) libdir = ".";
  for (const char *sub : {"/progcache/nvrtc", "/nvrtc-dropin"})
    if (!dropins_in(libdir + sub).empty()) return libdir + sub;
  throw Failure(PCACHE_ERR_CUDA_UNAVAILABLE,
                "no drop-in NVRTC in " + libdir + "/progcache/nvrtc (is progcache installed?)");
}

void prepend_env(const char *name, const std::string &value, char separator) {
  const char *old = std::getenv(name);
  const std::string now = old && *old ? value + separator + old : value;
  ::setenv(name, now.c_str(), 1);
}

// Starts the command as execvp would run it (found on PATH; a file without "#!" run by /bin/sh),
// with mask as its signal mask. Through posix_spawnp rather than fork: the child neither copies
// this process's page tables nor runs the library's fork handlers, which cost a `progcache run`
// 0.2-0.5 ms on a 2-core VM (bench/analysis.md). The pid, or -1 with errno set.
pid_t start_command(std::vector<char *> argv, const sigset_t &mask) {
  posix_spawnattr_t attr;
  if (const int error = ::posix_spawnattr_init(&attr)) {
    errno = error;
    return -1;
  }
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  ::posix_spawnattr_setsigmask(&attr, &mask);
  pid_t pid = -1;
  int error = ::posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  if (error == ENOEXEC) {
    // posix_spawnp does not fall back to the shell as execvp does; the shell's exec does (it
    // runs such a file as execvp would: /bin/sh with the path it found).
    static char sh[] = "sh", dash_c[] = "-c", exec_it[] = "exec \"$0\" \"$@\"";
    argv.insert(argv.begin(), {sh, dash_c, exec_it});
    error = ::posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv.data(), environ);
  }
  ::posix_spawnattr_destroy(&attr);
  errno = error;
  return error ? -1 : pid;
}

// Waits for the command and reports, as the process the shell waits for: in
// progcache-run-wait, a small C program beside the drop-ins that this process execs into (the
// exec keeps the pid, the command as its child, the signal mask and the ignored signals), or
// here where that program cannot be run (cli/run_wait.h). mask: the mask to wait with.
[[nodiscard]] int wait_and_report(const std::string &dir, pid_t child, const sigset_t &mask,
                                  const char *report_file) {
  const std::string waiter = dir + "/progcache-run-wait";
  unsigned long long bits = 0;
  for (int sig = 1; sig <= 64; ++sig)
    if (::sigismember(&mask, sig) == 1) bits |= 1ULL << (sig - 1);
  char pid_text[24], mask_text[24];
  std::snprintf(pid_text, sizeof pid_text, "%lld", (long long)child);
  std::snprintf(mask_text, sizeof mask_text, "%llx", bits);
  char *const argv[] = {const_cast<char *>("progcache-run-wait"), pid_text, mask_text,
                        const_cast<char *>(report_file ? report_file : "-"), nullptr};
  char *const no_environment[] = {nullptr};
  std::fflush(nullptr);  // what stdio holds would be lost in the exec
  ::execve(waiter.c_str(), argv, no_environment);
  return pcache_run_wait(child, &mask, report_file);
}

// The cache the command's compiles go through, opened to check it (and closed before the wait:
// progcache-run-wait holds nothing of it). Null, with the library's message in *why, when
// unusable.
pcache *open_cache(const std::string &uri, std::string *why) {
  pcache *cache = nullptr;
  if (pcache_open(uri.empty() ? nullptr : uri.c_str(), nullptr, &cache) == PCACHE_OK) return cache;
  *why = library_message();
  return nullptr;
}

// The check of a gated command's cache (open_cache into *cache and *why) on a thread of its own;
// done here, before returning, where no thread can be had.
std::thread start_check(const std::string &uri, pcache **cache, std::string *why) {
  auto check = [&uri, cache, why] {
    try {
      *cache = open_cache(uri, why);
    } catch (const std::exception &e) {  // the message's allocation
      *why = e.what();
    }
  };
  try {
    return std::thread(check);
  } catch (const std::system_error &) {
    check();
    return std::thread();
  }
}

Failure unusable_cache(const std::string &why, const char *command_was) {
  return Failure(PCACHE_ERR_INVALID_ARG,
                 "run: no usable cache (" + why + "); the command was " + command_was);
}

}  // namespace

int cmd_run(Invocation &in) {
  if (in.passthrough.empty()) throw Usage("run needs a command after --; see progcache run --help");
  const std::string dir = dropin_directory();
  prepend_env("LD_LIBRARY_PATH", dir, ':');
  // The helper that sends a dlopen of libnvrtc by full path to the drop-in (and notes what it
  // could not send), in every process the command starts.
  const std::string helper = dir + "/libprogcache-run.so";
  const bool helper_preloaded = ::access(helper.c_str(), R_OK) == 0;
  if (helper_preloaded) prepend_env("LD_PRELOAD", helper, ' ');
  ::setenv("PCACHE_RUN_DROPIN_DIR", dir.c_str(), 1);
  if (in.has("preload"))
    // One major of each: two majors of one library in the global scope would answer each
    // other's calls (a program of 13 bound to the 12 drop-in, which finds no NVRTC 12).
    for (const std::string &lib : dropins_in(dir, true)) prepend_env("LD_PRELOAD", lib, ' ');
  // The cache the command's compiles go through must be usable: a typo would otherwise run the
  // whole command uncached without a word. Its paths are made absolute first: the command may
  // change directory before it compiles.
  std::string uri = in.uri;
  if (!uri.empty()) {
    size_t size = 0;
    pcache_admin_absolute_uri(uri.c_str(), nullptr, &size);
    std::string absolute(size, '\0');
    check(pcache_admin_absolute_uri(uri.c_str(), absolute.data(), &size));
    uri = absolute.c_str();
    ::setenv("PCACHE_URI", uri.c_str(), 1);
  }
  std::vector<char *> argv;
  for (std::string &a : in.passthrough) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A command that runs the helper before its main waits there while the cache is checked (the
  // check and its start overlap: cli/run_gate.hpp); any other starts once the check has passed.
  Gate gate;
  const bool gated = helper_preloaded && command_runs_helper_first(argv[0]) && gate.open();
  std::string why;
  pcache *cache = gated ? nullptr : open_cache(uri, &why);
  if (!gated && !cache) throw unusable_cache(why, "not run");
  std::unique_ptr<pcache, decltype(&pcache_close)> opened(cache, &pcache_close);
  char report_file[] = "/tmp/progcache-run-XXXXXX";
  const bool reported = pcache_run_create_report(report_file) != 0;
  // First in the list: a run around this one (its command started this) counts these compiles
  // too (src/core/run_report.hpp).
  if (reported) prepend_env("PCACHE_RUN_REPORT", report_file, ':');
  // Held until the handler knows the command's pid (one arriving before is passed on after), and
  // let through only while waiting.
  sigset_t passed_on;
  pcache_run_passed_on_set(&passed_on);
  sigset_t before_start;
  ::sigprocmask(SIG_BLOCK, &passed_on, &before_start);
  // A gated command's check runs beside its start: posix_spawnp returns only once the command's
  // exec is done (0.4-0.9 ms on a 2-core VM), and the check (~1.3 ms) need not wait for that. The
  // environment is not changed while the checker may read it (gate.started() comes after).
  std::thread checker;
  if (gated) checker = start_check(uri, &cache, &why);
  const pid_t child = start_command(argv, before_start);
  const int start_error = errno;
  if (checker.joinable()) checker.join();
  if (gated) {
    opened.reset(cache);
    gate.started();
  }
  if (child < 0) {
    ::sigprocmask(SIG_SETMASK, &before_start, nullptr);
    std::fprintf(stderr, "progcache: run: cannot run %s: %s\n", argv[0],
                 std::strerror(start_error));
    if (reported) ::unlink(report_file);
    return start_error == ENOENT ? 127 : 126;  // as a shell reports it
  }
  if (gated) {
    if (!cache) {
      const bool held = gate.stop(child);
      int status = 0;
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      ::sigprocmask(SIG_SETMASK, &before_start, nullptr);
      if (reported) ::unlink(report_file);
      throw unusable_cache(
          why, held ? "not run" : "stopped (the helper did not hold it: it may have started)");
    }
    gate.let_through();
  }
  // The terminal's Ctrl-C reaches the command; this process waits for it and then reports.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  opened.reset();
  return wait_and_report(dir, child, before_start, reported ? report_file : nullptr);
}

}  // namespace progcache::cli
