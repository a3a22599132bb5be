// elf_facts_of_file remembers what it read by path and checks the file's stat identity on every
// call: a library replaced at the same path (an NVRTC upgrade under a running process) is read
// again, never answered from what the old file gave.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cuda/elf_file.hpp"
#include "proc_util.hpp"
#include "scratch.hpp"

namespace {

std::string build_id_read_now(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "unreadable";
  const auto facts = progcache::read_elf_facts(fd);
  ::close(fd);
  return facts ? facts->build_id : "not ELF";
}

}  // namespace

TEST(ElfFactsMemo, ALibraryReplacedAtItsPathIsReadAgain) {
  const std::string a = "/lib/x86_64-linux-gnu/libdl.so.2",
                    b = "/lib/x86_64-linux-gnu/libutil.so.1";
  if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) GTEST_SKIP() << "no " << a;
  const std::string id_a = build_id_read_now(a), id_b = build_id_read_now(b);
  ASSERT_FALSE(id_a.empty());
  ASSERT_NE(id_a, id_b);
  testutil::TempDir dir;
  const std::string lib = dir.path() + "/libnvrtc.so.13", next = dir.path() + "/next";
  std::filesystem::copy_file(a, lib);
  std::filesystem::copy_file(b, next);
  // Files changed under 2 s ago are never remembered: wait, so that this one is.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  for (int i = 0; i < 2; ++i) {
    const auto facts = progcache::elf_facts_of_file(lib);
    ASSERT_TRUE(facts);
    EXPECT_EQ(facts->build_id, id_a);
  }
  ASSERT_EQ(std::rename(next.c_str(), lib.c_str()), 0);
  const auto facts = progcache::elf_facts_of_file(lib);
  ASSERT_TRUE(facts);
  EXPECT_EQ(facts->build_id, id_b);
  // And back again, in place (same inode, new size and times).
  std::filesystem::copy_file(a, lib, std::filesystem::copy_options::overwrite_existing);
  const auto again = progcache::elf_facts_of_file(lib);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->build_id, id_a);
}

// A library in a directory whose name holds "$ORIGIN" (odd, but a valid name): its DT_RUNPATH's
// $ORIGIN expands to that directory once. The expansion replaced in place and searched again from
// the start, so it never ended.
TEST(ElfFactsMemo, OriginExpandsOnceWhereTheDirectoryNameHoldsItself) {
  testutil::TempDir dir;
  const std::string caller_dir = dir.path() + "/$ORIGIN";
  std::filesystem::create_directories(caller_dir + "/lib");
  const std::string want = caller_dir + "/lib/libnvrtc-builtins.so.13.0";
  std::FILE *f = std::fopen(want.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const pid_t child = testutil::spawn([&] {
    int wrong = 0;
    for (const char *origin : {"${ORIGIN}/lib", "$ORIGIN/lib"}) {
      progcache::ElfFacts caller;
      caller.runpath = {"/nonexistent", origin};
      wrong +=
          progcache::predict_dlopen_path("libnvrtc-builtins.so.13.0", caller, caller_dir) != want;
    }
    return wrong;
  });
  EXPECT_EQ(testutil::wait_for_or_kill(child, std::chrono::seconds(20)), 0)
      << "1, 2: other paths; -1: the expansion did not end";
}
