// What a compile tells `progcache run` (src/core/run_report.hpp). The file is named and mapped
// once per process, so each case runs RunReport.DISABLED_Child in a re-executed process with
// $PCACHE_RUN_REPORT set; the parent checks the file it leaves.
#include "core/run_report.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "proc_util.hpp"
#include "scratch.hpp"

using namespace testutil;
using progcache::RunOutcome;
using progcache::tell_run;

namespace {

const std::string kLongWhy = "option -x writes files\tbeside\nthe output\r" + std::string(400, 'w');

std::string header(uint64_t hits = 0, uint64_t misses = 0, uint64_t uncached = 0) {
  std::string h(progcache::kRunReportHeaderSize, '\0');
  std::memcpy(h.data(), progcache::kRunReportMagic, sizeof progcache::kRunReportMagic);
  const uint64_t counts[3] = {hits, misses, uncached};
  std::memcpy(h.data() + sizeof progcache::kRunReportMagic, counts, sizeof counts);
  return h;
}

int child(const std::string &report, const std::string &what) {
  return run_test_in_fresh_process("RunReport.DISABLED_Child",
                                   {{"PCACHE_RUN_REPORT", report}, {"PCACHE_TEST_RUN_DOES", what}});
}

TEST(RunReport, CountsEveryCompileAndSaysEachReasonOnce) {
  TempDir dir;
  const std::string report = dir / "report";
  const std::string helper_line = "redirect\tlibnvrtc.so.13\t/x/libnvrtc.so.13\n";
  write_file(report, header() + helper_line);
  ASSERT_EQ(child(report, "compiles"), 0);
  // Control characters in a reason become spaces and it is cut at 240 bytes: one line each. Of
  // 12 distinct reasons, the first 8; a reason given twice, once.
  std::string lines =
      helper_line + "uncached\t\t" +
      ("option -x writes files beside the output " + std::string(400, 'w')).substr(0, 240) + "\n";
  for (int i = 0; i < 7; ++i) lines += "uncached\t\treason " + std::to_string(i) + "\n";
  EXPECT_EQ(read_file(report), header(2, 1, 14) + lines);
}

TEST(RunReport, ACompileCountsInTheReportOfEveryRunAroundIt) {
  TempDir dir;
  // A run inside another's command: its own report first, then the outer one's (a third one in
  // between has been removed). Of more than four, the first four.
  std::string list;
  for (const char *name : {"inner", "gone", "outer", "third", "fourth", "fifth"}) {
    if (std::string(name) != "gone") write_file(dir / name, header());
    list += (list.empty() ? "" : ":") + (dir / name);
  }
  ASSERT_EQ(child(list, "compiles"), 0);
  std::string lines =
      "uncached\t\t" +
      ("option -x writes files beside the output " + std::string(400, 'w')).substr(0, 240) + "\n";
  for (int i = 0; i < 7; ++i) lines += "uncached\t\treason " + std::to_string(i) + "\n";
  for (const char *name : {"inner", "outer", "third", "fourth"})
    EXPECT_EQ(read_file(dir / name), header(2, 1, 14) + lines) << name;
  EXPECT_EQ(read_file(dir / "fifth"), header());
  EXPECT_NE(::access((dir / "gone").c_str(), F_OK), 0);
}

TEST(RunReport, AForkedChildAndAProcessEndingWithoutExitHandlersCount) {
  TempDir dir;
  const std::string report = dir / "report";
  write_file(report, header());
  ASSERT_EQ(child(report, "fork"), 0);
  EXPECT_EQ(read_file(report), header(2, 1, 0));
}

TEST(RunReport, WritesOnlyRunsOwnReport) {
  TempDir dir;
  // Removed by run (a process that outlived it): not made again.
  EXPECT_EQ(child(dir / "gone", "compiles"), 0);
  EXPECT_NE(::access((dir / "gone").c_str(), F_OK), 0);
  // A link to a report: not followed.
  write_file(dir / "target", header());
  ASSERT_EQ(::symlink((dir / "target").c_str(), (dir / "link").c_str()), 0);
  EXPECT_EQ(child(dir / "link", "compiles"), 0);
  EXPECT_EQ(read_file(dir / "target"), header());
  // A file of the user's, or one too short for the counts: left as they are.
  const std::string mine = "not a report, but 32 bytes long!\n";
  write_file(dir / "mine", mine);
  EXPECT_EQ(child(dir / "mine", "compiles"), 0);
  EXPECT_EQ(read_file(dir / "mine"), mine);
  write_file(dir / "short", header().substr(0, 16));
  EXPECT_EQ(child(dir / "short", "compiles"), 0);
  EXPECT_EQ(read_file(dir / "short"), header().substr(0, 16));
  // A FIFO nobody reads: neither waited on nor written (the child would hang here).
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(child(dir / "fifo", "compiles"), 0);
}

TEST(RunReport, DISABLED_Child) {  // run only by the tests above, in a fresh process
  const std::string does = std::getenv("PCACHE_TEST_RUN_DOES");
  if (does == "fork") {
    tell_run(RunOutcome::hit);
    const pid_t pid = ::fork();
    if (pid == 0) {
      tell_run(RunOutcome::miss);
      ::_exit(0);  // no exit handlers: counted all the same
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    tell_run(RunOutcome::hit);
    return;
  }
  tell_run(RunOutcome::hit);
  tell_run(RunOutcome::miss);
  tell_run(RunOutcome::uncached, kLongWhy);
  tell_run(RunOutcome::uncached, kLongWhy);
  for (int i = 0; i < 12; ++i) tell_run(RunOutcome::uncached, "reason " + std::to_string(i));
  // The file is named and mapped once: a change of the variable afterwards is not seen.
  ::unsetenv("PCACHE_RUN_REPORT");
  tell_run(RunOutcome::hit);
}

}  // namespace
