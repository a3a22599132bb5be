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

// The report file the command's processes count their compiles in, as src/core/run_report.hpp
// lays it out: a header (magic, then hits, misses and uncached compiles, each a native uint64)
// that every process maps, then lines. This side creates it and reads it.
constexpr char kReportMagic[8] = {'P', 'C', 'R', 'U', 'N', 0, 0, 1};
constexpr size_t kReportHeaderSize = 32;

// A new report file, its header zeroed, named into path; false (and no file) when /tmp cannot
// take one, which is said: the command then runs unreported.
bool create_report(char *path) {
  const int fd = ::mkstemp(path);
  bool written = false;
  if (fd >= 0) {
    char header[kReportHeaderSize] = {};
    std::memcpy(header, kReportMagic, sizeof kReportMagic);
    const ssize_t n = ::write(fd, header, sizeof header);
    if (n >= 0 && n != ssize_t(sizeof header)) errno = ENOSPC;
    written = n == ssize_t(sizeof header);
    const int saved = errno;
    ::close(fd);
    if (!written) ::unlink(path);
    errno = saved;
  }
  if (!written)
    std::fprintf(stderr,
                 "progcache run: cannot make a report file in /tmp (%s): the command's compiles "
                 "go unreported\n",
                 std::strerror(errno));
  return written;
}

// What the command's processes wrote to the report file (a count of each compile through any
// progcache cache, and a line for each NVRTC the helper redirected or could not), said on stderr
// when the command has ended, so that a command whose compiles did not go through the cache
// never looks cached. Another process's compiles on the same cache meanwhile are not the
// command's, and are not counted.
void say_what_happened(const std::string &report_file, bool command_ran) {
  std::vector<std::string> bypassed, others, not_cached_why;
  uint64_t counts[3] = {};  // hits, misses, uncached
  std::string report;
  if (FILE *f = std::fopen(report_file.c_str(), "r")) {
    char chunk[16384];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) report.append(chunk, n);
    std::fclose(f);
  }
  if (report.size() >= kReportHeaderSize &&
      std::memcmp(report.data(), kReportMagic, sizeof kReportMagic) == 0)
    std::memcpy(counts, report.data() + sizeof kReportMagic, sizeof counts);
  for (size_t at = std::min(report.size(), kReportHeaderSize); at < report.size();) {
    const size_t end = std::min(report.find('\n', at), report.size());
    const std::string text = report.substr(at, end - at);
    at = end + 1;
    const size_t tab = text.find('\t'), tab2 = text.find('\t', tab + 1);
    if (tab == std::string::npos || tab2 == std::string::npos) continue;
    const std::string what = text.substr(0, tab), path = text.substr(tab + 1, tab2 - tab - 1);
    const std::string detail = text.substr(tab2 + 1);
    if (what == "uncached" &&
        std::find(not_cached_why.begin(), not_cached_why.end(), detail) == not_cached_why.end())
      not_cached_why.push_back(detail);
    if (what == "bypass") bypassed.push_back(path + " itself (" + detail + ")");
    if (what == "other")
      others.push_back(path + " (the drop-in used " + detail +
                       ", named by its PCACHE_*_LIBRARY variable)");
  }
  const long long hits = (long long)counts[0], misses = (long long)counts[1],
                  not_cached = (long long)counts[2];
  if (hits > 0 || misses > 0)
    std::fprintf(stderr,
                 "progcache run: %lld compile(s) through the cache: %lld hit(s), %lld miss(es)\n",
                 hits + misses, hits, misses);
  if (not_cached > 0) {
    std::string why;
    for (size_t i = 0; i < not_cached_why.size() && i < 3; ++i)
      why += (i ? "; " : "") + not_cached_why[i];
    if (not_cached_why.size() > 3) why += "; ...";
    std::fprintf(stderr, "progcache run: %lld compile(s) not cached: %s\n", not_cached,
                 why.c_str());
  }
  // Said, so that a command whose compiles never reach the drop-ins (NVRTC linked statically, a
  // JIT of its own) does not look cached for lack of a word.
  if (command_ran && hits + misses + not_cached == 0 && bypassed.empty())
    std::fprintf(stderr,
                 "progcache run: nothing was compiled through the cache (no NVRTC, nvJitLink or "
                 "libNVVM call reached the drop-ins; a program linked with them statically "
                 "calls its own copy)\n");
  for (const std::string &b : bypassed)
    std::fprintf(stderr, "progcache run: the command loaded %s: its compiles were not cached\n",
                 b.c_str());
  for (const std::string &o : others)
    std::fprintf(stderr, "progcache run: the command asked for %s\n", o.c_str());
}

// The signals a process manager or a job's timeout sends to stop or poke a job. They are passed
// on to the command: progcache run is not the job, and dying of one left the command running.
// SIGINT and SIGQUIT come from the terminal to the whole process group: the command has them
// already, and this process ignores them.
constexpr int kPassedOn[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
volatile sig_atomic_t g_command_pid = 0;

void pass_on(int sig) {
  const int saved = errno;
  if (g_command_pid > 0) ::kill(pid_t(g_command_pid), sig);
  errno = saved;
}

void wake(int) {}  // SIGCHLD: ends the wait's sigsuspend (ignored, it would not)

// The signals passed on, and SIGCHLD: blocked but while the wait suspends.
sigset_t passed_on_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kPassedOn) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Waits for the command, passing on what arrives meanwhile. In sigsuspend, not a blocking
// waitpid: a signal that lands while the process sits in waitpid may be handled only once
// waitpid returns (so under ThreadSanitizer, which defers signals to a safe point), i.e. after
// the command ended on its own.
int wait_for(pid_t child, const sigset_t &unblocked) {
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(child, &status, WNOHANG);
    if (got == child) return status;
    if (got < 0 && errno != EINTR) return 0;
    if (got == 0) ::sigsuspend(&unblocked);
  }
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

// Ends this process as the command ended: killed by the same signal where that is how it ended
// and the signal does not dump core (so that a shell or make sees a job interrupted, not one
// that failed), else with its exit status (128 + the signal for the rest, as a shell reports).
int end_as(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGPIPE) {
      std::fflush(nullptr);
      ::signal(sig, SIG_DFL);
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, sig);
      ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
      ::raise(sig);
    }
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The cache the command's compiles go through, opened to check it and kept while the command
// runs (an open SQLite cache keeps its WAL index, which the command's first open would otherwise
// rebuild). Null, with the library's message in *why, when unusable.
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
  const bool reported = create_report(report_file);
  // First in the list: a run around this one (its command started this) counts these compiles
  // too (src/core/run_report.hpp).
  if (reported) prepend_env("PCACHE_RUN_REPORT", report_file, ':');
  // Held until the handler knows the command's pid (one arriving before is passed on after), and
  // let through only while waiting.
  const sigset_t passed_on = passed_on_set();
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
  g_command_pid = child;
  struct sigaction forward {};
  forward.sa_handler = pass_on;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  for (int sig : kPassedOn) ::sigaction(sig, &forward, nullptr);
  struct sigaction child_ended {};
  child_ended.sa_handler = wake;
  sigemptyset(&child_ended.sa_mask);
  ::sigaction(SIGCHLD, &child_ended, nullptr);
  const int status = wait_for(child, before_start);
  g_command_pid = 0;  // reaped: its pid may name another process from now on
  ::signal(SIGCHLD, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &before_start, nullptr);
  if (reported) {
    // 126 and 127: as this process says when the command cannot be run at all.
    const bool ran =
        !(WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127));
    say_what_happened(report_file, ran);
    ::unlink(report_file);
  }
  opened.reset();  // closed before this process may end by the command's signal
  return end_as(status);
}

}  // namespace progcache::cli
