// elf_facts_of_file remembers what it read by path and checks the file's stat identity on every
// call: a library replaced at the same path (an NVRTC upgrade under a running process) is read
// again, never answered from what the old file gave. current_library_build, which remembers a
// library's build the same way, is held to the same rule.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "cuda/elf_file.hpp"
#include "cuda/jit_library.hpp"
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

// current_library_build answers from one stat while nothing it depends on has changed: a library
// replaced at its path, put back in place, another file named by the setting, and a load of an
// image that differs from the file (the stat unchanged) are each answered as library_build over
// locate_library answers them.
TEST(LibraryBuildMemo, FollowsTheFileTheSettingAndTheLoadedImage) {
  const std::string a = "/lib/x86_64-linux-gnu/libdl.so.2",
                    b = "/lib/x86_64-linux-gnu/libutil.so.1";
  if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) GTEST_SKIP() << "no " << a;
  const std::string id_a = build_id_read_now(a), id_b = build_id_read_now(b);
  ASSERT_NE(id_a, id_b);
  const progcache::LibrarySpec &spec = progcache::kNvJitLinkLibrary;
  const std::string env(spec.env);
  const char *was = std::getenv(env.c_str());
  const std::string saved = was ? was : "";
  testutil::TempDir dir;
  const std::string lib = dir.path() + "/libnvJitLink.so.13", other = dir.path() + "/other.so",
                    next = dir.path() + "/next";
  std::filesystem::copy_file(a, lib);
  std::filesystem::copy_file(b, other);
  ::setenv(env.c_str(), lib.c_str(), 1);
  auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); };
  auto expect_build = [&](const std::string &id, const char *when) {
    for (int i = 0; i < 3; ++i) {  // the first derives and remembers, the rest answer from it
      EXPECT_EQ(progcache::current_library_build(spec), "nvJitLink " + id) << when;
      EXPECT_EQ(progcache::library_build(spec, progcache::locate_library(spec)), "nvJitLink " + id)
          << when;
    }
  };
  settle();
  expect_build(id_a, "first");
  std::filesystem::copy_file(b, next);
  ASSERT_EQ(std::rename(next.c_str(), lib.c_str()), 0);
  expect_build(id_b, "replaced by rename");
  settle();
  expect_build(id_b, "replaced, settled");
  std::filesystem::copy_file(a, lib, std::filesystem::copy_options::overwrite_existing);
  settle();
  expect_build(id_a, "rewritten in place");
  ::setenv(env.c_str(), other.c_str(), 1);
  expect_build(id_b, "another file named by the setting");
  // Loaded while it was A, then replaced by B: the answer is B's until this process notes that
  // it loaded the library, A's (the mapped image's) from then on, though B's stat never changed.
  ::setenv(env.c_str(), lib.c_str(), 1);
  void *image = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(image, nullptr) << ::dlerror();
  std::filesystem::copy_file(b, next);
  ASSERT_EQ(std::rename(next.c_str(), lib.c_str()), 0);
  settle();
  expect_build(id_b, "loaded by someone else");
  progcache::note_library_loaded(lib);
  expect_build(id_a, "loaded by this process");
  ::dlclose(image);
  if (was)
    ::setenv(env.c_str(), saved.c_str(), 1);
  else
    ::unsetenv(env.c_str());
  progcache::forget_library_locations();
}

// loaded_images walks the process's objects again only when the loader has added or removed
// one: a library opened after a call is in the next call's list, and gone from it once closed.
TEST(LoadedImages, AnObjectOpenedOrClosedIsSeenOnTheNextCall) {
  const std::string b = "/lib/x86_64-linux-gnu/libutil.so.1";
  if (!std::filesystem::exists(b)) GTEST_SKIP() << "no " << b;
  testutil::TempDir dir;
  const std::string lib = dir.path() + "/libloaded_images_probe.so";
  std::filesystem::copy_file(b, lib);
  auto listed = [&](const std::shared_ptr<const std::vector<progcache::LoadedImage>> &images) {
    for (const progcache::LoadedImage &image : *images)
      if (image.path == lib) return image.build_id;
    return std::string("not listed");
  };
  const auto before = progcache::loaded_images();
  EXPECT_EQ(listed(before), "not listed");
  EXPECT_EQ(progcache::loaded_images(), before);  // nothing opened since: the same list
  void *handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  const auto opened = progcache::loaded_images();
  EXPECT_EQ(listed(opened), build_id_read_now(b));
  EXPECT_EQ(opened->size(), before->size() + 1);
  ASSERT_EQ(::dlclose(handle), 0);
  EXPECT_EQ(listed(progcache::loaded_images()), "not listed");
}
