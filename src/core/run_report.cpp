#include "core/run_report.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "util/env.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"

namespace progcache {
namespace {

// A reason longer than this is cut: the reader's lines are bounded (cli/cmd_run.cpp).
constexpr size_t kMaxWhy = 240;
// The most reasons one process writes.
constexpr size_t kMaxReasons = 8;

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "counts shared between processes need lock-free atomics");

// One report file, mapped.
struct Report {
  uint64_t *counts = nullptr;  // in the file's header, mapped shared
  char file[PATH_MAX] = {};
};

// The reports this process counts into: its own run's first, then those of the runs around it.
struct RunReports {
  Report reports[kMaxRunReports];
  int count = 0;
};

// Opened without O_CREAT (a file run has removed, for a process that outlived it, is not made
// again) and without waiting on a FIFO or a terminal; mapped only when it is run's report.
bool map_report(std::string_view file, Report *r) {
  if (file.empty() || file.size() >= sizeof r->file) return false;
  std::memcpy(r->file, file.data(), file.size());
  r->file[file.size()] = '\0';
  const Fd fd(::open(r->file, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size < off_t(kRunReportHeaderSize))
    return false;
  void *header =
      ::mmap(nullptr, kRunReportHeaderSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (header == MAP_FAILED) return false;
  if (std::memcmp(header, kRunReportMagic, sizeof kRunReportMagic) != 0) {
    ::munmap(header, kRunReportHeaderSize);
    return false;
  }
  r->counts = reinterpret_cast<uint64_t *>(static_cast<char *>(header) + sizeof kRunReportMagic);
  return true;
}

void map_reports(RunReports *r) {
  const char *list = trusted_env("PCACHE_RUN_REPORT");
  for (std::string_view rest(list ? list : ""); !rest.empty() && r->count < kMaxRunReports;) {
    const size_t colon = std::min(rest.find(':'), rest.size());
    if (map_report(rest.substr(0, colon), &r->reports[r->count])) ++r->count;
    rest.remove_prefix(std::min(colon + 1, rest.size()));
  }
}

// Mapped on the first compile and kept for the process's life (a fork's child shares them).
const RunReports &run_reports() {
  static constinit RunReports reports;
  static constinit ForkSafeOnce mapped;  // not a static's guard: util/fork_guard.hpp
  mapped.run([] { map_reports(&reports); });
  return reports;
}

// Whether this process has not yet written why (and may write one more).
bool first_time(std::string_view why) {
  static ForkSafeMutex mutex;
  static std::vector<std::string> said;
  std::lock_guard lock(mutex);
  if (said.size() >= kMaxReasons || std::find(said.begin(), said.end(), why) != said.end())
    return false;
  said.emplace_back(why);
  return true;
}

void append_reason(const char *file, std::string_view why) {
  std::string line = "uncached\t\t";
  // The reason quotes options the caller gave: a tab or newline in it would make lines of its own.
  for (const char c : why) line += (unsigned char)c < 0x20 ? ' ' : c;
  line += '\n';
  const Fd fd(::open(file, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK));
  if (fd && ::write(fd.get(), line.data(), line.size()) < 0) {
  }
}

}  // namespace

void tell_run(RunOutcome outcome, std::string_view why) noexcept {
  try {
    const RunReports &r = run_reports();
    for (int i = 0; i < r.count; ++i)
      std::atomic_ref<uint64_t>(r.reports[i].counts[int(outcome)])
          .fetch_add(1, std::memory_order_relaxed);
    // Each reason once per process, a few at most: a service compiling what cannot be cached all
    // day must not grow the files without end (run says the first three).
    why = why.substr(0, kMaxWhy);
    if (outcome != RunOutcome::uncached || r.count == 0 || !first_time(why)) return;
    for (int i = 0; i < r.count; ++i) append_reason(r.reports[i].file, why);
  } catch (...) {  // std::bad_alloc: the report is advisory
  }
}

}  // namespace progcache
