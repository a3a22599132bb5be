// What each compile tells `progcache run` about itself, in the file $PCACHE_RUN_REPORT names,
// which `run` creates for its command and reads when the command has ended (cli/cmd_run.cpp). So
// run reports the compiles of its command's processes, not those of every process that used the
// cache meanwhile, through whatever cache they went (a tier stack too). A run inside another's
// command puts its file first in the list (FILE:FILE...): a compile counts in each, so the outer
// run's report holds the inner one's compiles too.
//
// The file (private to run's user, in /tmp):
//   bytes 0-7    kRunReportMagic
//   bytes 8-31   three counts, native-endian uint64: compiles answered from the cache (hits),
//                compiles that ran and were stored, or failed as their library fails every time
//                (misses), and compiles that ran and were not stored (uncached)
//   then lines   "WHAT\tPATH\tDETAIL\n", appended with O_APPEND (lines from several processes
//                stay whole): "uncached\t\tWHY" for each uncached compile (uncacheable options,
//                PCACHE_DISABLE, a store that failed), and the lines of run's preloaded helper
//                for the libraries it redirected or could not (run_preload/preload.c).
// Each process maps the counts once and adds to them atomically: a compile costs no system call,
// and a process that ends without exit handlers (_exit, a signal, a forked worker) has counted
// every compile it made.
// The file is run's user's alone (0600). As with any shared mapping, a user who shortens it while
// the command runs makes the next count of a process that mapped it fault (SIGBUS); nothing of
// progcache ever does (only these counts and appends write it).
#pragma once

#include <cstddef>
#include <string_view>

namespace progcache {

inline constexpr char kRunReportMagic[8] = {'P', 'C', 'R', 'U', 'N', 0, 0, 1};
inline constexpr size_t kRunReportHeaderSize = 32;
// The most files of nested runs a compile counts in (the innermost first).
inline constexpr int kMaxRunReports = 4;

enum class RunOutcome { hit = 0, miss = 1, uncached = 2 };

// Counts outcome in each report when this process runs under `progcache run` ($PCACHE_RUN_REPORT,
// read and mapped on the first call; ignored in setuid and setgid processes), and for uncached
// appends why's line (each reason once per process, eight at most). Only a regular file that exists
// and starts with kRunReportMagic is written; any failure is ignored (the report is advisory).
// Thread-safe; a fork's child counts into the same file.
void tell_run(RunOutcome outcome, std::string_view why = {}) noexcept;

}  // namespace progcache
