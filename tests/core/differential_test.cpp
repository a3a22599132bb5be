// Differential tests of key soundness: every compile through the cache must give exactly the
// bytes and status of a compile without it (pcache_compile with no cache, as PCACHE_DISABLE=1
// does), across edits of the headers NVRTC reads from disk, new shadowing headers, removed ones,
// directory changes, and inputs whose output cannot be cached. Real NVRTC, real files.
#include "differential.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

using namespace testutil;
using namespace difftest;

namespace {

const char *const kUsesVal = "#include \"h.h\"\n__global__ void k(int *x) { *x = VAL; }\n";

TEST_F(Differential, HeaderBesideABareNameFollowsEdits) {
  InDir in(work);
  Source s;
  s.text = kUsesVal;
  write_aged("h.h", "#define VAL 1\n");
  EXPECT_FALSE(same_as_uncached(s, "first").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "unchanged").from_cache);  // no needless miss
  write_aged("h.h", "#define VAL 2\n", 50);
  EXPECT_FALSE(same_as_uncached(s, "edited").from_cache);
  // Same size, mtime forced back to the first version's: the ctime still tells.
  write_aged("h.h", "#define VAL 3\n", 60);
  EXPECT_FALSE(same_as_uncached(s, "edited, same size and mtime").from_cache);
  write_file("h.h", "#define VAL 4\n");  // just now: read, never trusted by its stat
  EXPECT_FALSE(same_as_uncached(s, "edited just now").from_cache);
}

// A header dated past int64 nanoseconds (2400; ext4 keeps 2446) is never vouched for by its
// stat (util/timespec_ns.hpp): read each time, it still hits while unchanged, and an edit that
// keeps its size and its date compiles as an uncached compile does, its ctime long settled.
TEST_F(Differential, AHeaderDatedPastTheYear2262FollowsEdits) {
  InDir in(work);
  Source s;
  s.text = kUsesVal;
  const auto date_2400 = [] {
    const struct timespec t[2] = {{time_t(13569465600), 0}, {time_t(13569465600), 0}};
    return ::utimensat(AT_FDCWD, "h.h", t, 0) == 0;
  };
  write_file("h.h", "#define VAL 1\n");
  ASSERT_TRUE(date_2400());
  struct stat st;
  ASSERT_EQ(::stat("h.h", &st), 0);
  if (st.st_mtime != time_t(13569465600)) GTEST_SKIP() << "this filesystem does not keep 2400";
  EXPECT_FALSE(same_as_uncached(s, "first").from_cache);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the ctime settles
  EXPECT_TRUE(same_as_uncached(s, "unchanged, read again").from_cache);
  write_file("h.h", "#define VAL 2\n");
  ASSERT_TRUE(date_2400());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_FALSE(same_as_uncached(s, "edited, same size and date").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "edited, again").from_cache);
}

TEST_F(Differential, NullNameReadsTheWorkingDirectory) {
  InDir in(work);
  Source s;
  s.name = "";
  s.text = kUsesVal;
  write_aged("h.h", "#define VAL 1\n");
  same_as_uncached(s, "first");
  write_aged("h.h", "#define VAL 22\n");
  EXPECT_FALSE(same_as_uncached(s, "edited").from_cache);
}

TEST_F(Differential, EachWorkingDirectoryGetsItsOwnHeader) {
  Source s;
  s.text = kUsesVal;
  for (const char *sub : {"a", "b"}) {
    ASSERT_EQ(::mkdir((work + "/" + sub).c_str(), 0700), 0);
    write_aged(work + "/" + sub + "/h.h", std::string("#define VAL ") + (*sub == 'a' ? "1" : "2"));
  }
  std::string first;
  for (const char *sub : {"a", "b", "a"}) {
    InDir in(work + "/" + sub);
    const Outcome o = same_as_uncached(s, sub);
    if (first.empty()) first = o.bytes;
  }
  // Line info embeds the working directory: the same files elsewhere are another compile.
  s.options.push_back("-lineinfo");
  for (const char *sub : {"a", "b"}) {
    InDir in(work + "/" + sub);
    write_aged("h.h", "#define VAL 7\n");
    same_as_uncached(s, sub);
  }
}

TEST_F(Differential, ProgramNameWithADirectoryReadsBesideIt) {
  InDir in(work);
  ASSERT_EQ(::mkdir("sub", 0700), 0);
  write_aged("sub/h.h", "#define VAL 1\n");
  write_aged("h.h", "#define VAL 9\n");
  Source s;
  s.name = "sub/k.cu";
  s.text = kUsesVal;
  same_as_uncached(s, "first");
  write_aged("h.h", "#define VAL 8\n");  // not read by NVRTC: still a hit
  EXPECT_TRUE(same_as_uncached(s, "unrelated edit").from_cache);
  write_aged("sub/h.h", "#define VAL 2\n");
  EXPECT_FALSE(same_as_uncached(s, "edited").from_cache);
}

TEST_F(Differential, AHeaderCreatedEarlierInTheSearchPathShadowsTheOldOne) {
  InDir in(work);
  ASSERT_EQ(::mkdir("a", 0700), 0);
  ASSERT_EQ(::mkdir("b", 0700), 0);
  write_aged("b/h.h", "#define VAL 1\n");
  Source s;
  s.text = "#include <h.h>\n__global__ void k(int *x) { *x = VAL; }\n";
  s.options = {"-arch=sm_90", "-Ia", "-I", "b"};
  same_as_uncached(s, "first");
  write_aged("a/h.h", "#define VAL 2\n");
  EXPECT_FALSE(same_as_uncached(s, "new shadowing header").from_cache);
  ASSERT_EQ(::unlink("a/h.h"), 0);
  same_as_uncached(s, "shadow removed");
  ASSERT_EQ(::unlink("b/h.h"), 0);
  const Outcome gone = same_as_uncached(s, "header removed");
  EXPECT_EQ(gone.status, PCACHE_ERR_COMPILE);
}

TEST_F(Differential, AbsoluteAndParentRelativeIncludes) {
  InDir in(work);
  ASSERT_EQ(::mkdir("sub", 0700), 0);
  write_aged("up.h", "#define UP 1\n");
  write_aged(d / "abs.h", "#define ABS 1\n");
  Source s;
  s.name = "sub/k.cu";
  s.text = "#include \"../up.h\"\n#include \"" + (d / "abs.h") +
           "\"\n__global__ void k(int *x) { *x = UP + ABS; }\n";
  same_as_uncached(s, "first");
  write_aged("up.h", "#define UP 5\n");
  EXPECT_FALSE(same_as_uncached(s, "../ edited").from_cache);
  write_aged(d / "abs.h", "#define ABS 7\n");
  EXPECT_FALSE(same_as_uncached(s, "absolute edited").from_cache);
}

TEST_F(Differential, IncludeNextAndHasIncludeAndPreInclude) {
  InDir in(work);
  ASSERT_EQ(::mkdir("a", 0700), 0);
  ASSERT_EQ(::mkdir("b", 0700), 0);
  write_aged("a/x.h", "#include_next <x.h>\n#define XA 1\n");
  write_aged("b/x.h", "#define XB 1\n");
  write_aged("pre.h", "#define PRE 1\n");
  Source s;
  s.text =
      "#include <x.h>\n#if __has_include(\"opt.h\")\n#define OPT 100\n#else\n#define OPT 0\n"
      "#endif\n__global__ void k(int *x) { *x = XA + XB + OPT + PRE; }\n";
  s.options = {"-arch=sm_90", "-Ia", "-Ib", "-include", "pre.h"};
  same_as_uncached(s, "first");
  write_aged("b/x.h", "#define XB 2\n");
  EXPECT_FALSE(same_as_uncached(s, "include_next target edited").from_cache);
  write_aged("opt.h", "\n");
  EXPECT_FALSE(same_as_uncached(s, "__has_include target created").from_cache);
  write_aged("pre.h", "#define PRE 3\n");
  EXPECT_FALSE(same_as_uncached(s, "pre-include edited").from_cache);
}

TEST_F(Differential, InMemoryHeaderAndToolkitHeaders) {
  InDir in(work);
  write_aged("h.h", "#define VAL 1\n");
  Source s;
  s.text =
      "#include \"h.h\"\n#include <cuda/std/type_traits>\n#include <cuda_fp16.h>\n"
      "__global__ void k(int *x) { *x = VAL + cuda::std::is_same<int, int>::value; }\n";
  s.headers = {{"h.h", "#define VAL 40\n"}};
  s.options = {"-arch=sm_90", "-I/usr/local/cuda/include/cccl", "-I/usr/local/cuda/include"};
  EXPECT_EQ(same_as_uncached(s, "first").status, PCACHE_OK);
  EXPECT_TRUE(same_as_uncached(s, "again").from_cache);
  s.headers = {{"h.h", "#define VAL 41\n"}};
  EXPECT_FALSE(same_as_uncached(s, "in-memory header edited").from_cache);
}

TEST_F(Differential, TimeMacrosAreCompiledButNeverStored) {
  InDir in(work);
  write_aged("h.h", "#define STAMP __TIME__\n");
  Source s;
  s.text = "#include \"h.h\"\n__global__ void k(char *x) { *x = STAMP[7]; }\n";
  for (int i = 0; i < 2; ++i) {
    const Outcome o = compile(cache, s);
    EXPECT_EQ(o.status, PCACHE_OK);
    EXPECT_FALSE(o.from_cache);
    EXPECT_NE(o.warning.find("__TIME__"), std::string::npos) << o.warning;
  }
  EXPECT_EQ(uncacheable(cache), 2u);
  uint64_t n = 99;
  ASSERT_EQ(pcache_count(cache, &n), PCACHE_OK);
  EXPECT_EQ(n, 0u);
}

// A computed #include is whatever file NVRTC opened for it: observed, it is keyed like any other
// (CuPy's Thrust headers include __THRUST_HOST_SYSTEM_SWAP_RANGES_HEADER).
TEST_F(Differential, ComputedIncludesAreKeyedByWhatNvrtcOpened) {
  InDir in(work);
  write_aged("v.h", "#define VAL 3\n");
  write_aged("w.h", "#define VAL 4\n");
  Source s;
  s.text = "#define HDR \"v.h\"\n#include HDR\n__global__ void k(int *x) { *x = VAL; }\n";
  EXPECT_FALSE(same_as_uncached(s, "first").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "again").from_cache);
  write_aged("v.h", "#define VAL 5\n", 30);
  EXPECT_FALSE(same_as_uncached(s, "the computed include's target edited").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "again").from_cache);
  write_aged("w.h", "#define VAL 6\n", 30);  // never opened: no needless miss
  EXPECT_TRUE(same_as_uncached(s, "an unrelated header edited").from_cache);
  EXPECT_EQ(uncacheable(cache), 0u);
}

// A refusal NVRTC gives every time (here progcache's own: -dlto makes no PTX) is stored, and a
// warm compile answers it exactly as a cold one: status, log, no output.
TEST_F(Differential, EmptyOutputIsACompileErrorAnsweredWarmAsCold) {
  Source s;
  s.text = "__global__ void k(int *x) { *x = 1; }\n";
  s.options = {"-arch=sm_90", "-dlto"};
  s.target = PCACHE_TARGET_PTX;
  for (int i = 0; i < 2; ++i) {
    const Outcome o = same_as_uncached(s, "ptx with -dlto");
    EXPECT_EQ(o.status, PCACHE_ERR_COMPILE);
    EXPECT_EQ(o.from_cache, i == 1);
    EXPECT_NE(o.warning.find("produced no PTX"), std::string::npos) << o.warning;
  }
  uint64_t n = 99;
  ASSERT_EQ(pcache_count(cache, &n), PCACHE_OK);
  EXPECT_EQ(n, 1u);
}

TEST_F(Differential, ASpellingNvrtcRejectsFailsWarmAsCold) {
  Source good, bad;
  good.text = bad.text = "__global__ void k(int *x) { *x = 1; }\n";
  good.options = {"-arch=sm_90", "-std=c++17"};
  bad.options = {"-arch=sm_90", "-std", "c++17"};
  EXPECT_EQ(same_as_uncached(good, "accepted").status, PCACHE_OK);
  EXPECT_NE(same_as_uncached(bad, "rejected, warm cache").status, PCACHE_OK);
}

// Two handles in one process miss one key at once: each gets the result stored in its own cache.
TEST_F(Differential, SingleFlightIsPerHandle) {
  Handle other("sqlite:" + (d / "other.db"));
  Source s;
  s.text = "__global__ void k(int *x) { *x = 12345; }\n";
  std::thread a([&] { EXPECT_EQ(compile(cache, s).status, PCACHE_OK); });
  std::thread b([&] { EXPECT_EQ(compile(other, s).status, PCACHE_OK); });
  a.join();
  b.join();
  for (pcache *c : {static_cast<pcache *>(cache), static_cast<pcache *>(other)}) {
    uint64_t n = 0;
    ASSERT_EQ(pcache_count(c, &n), PCACHE_OK);
    EXPECT_EQ(n, 1u);
    EXPECT_TRUE(compile(c, s).from_cache);
  }
}

TEST_F(Differential, PcacheDisableCompilesAndStoresNothing) {
  Source s;
  s.text = "__global__ void k(int *x) { *x = 3; }\n";
  {
    ScopedEnv off("PCACHE_DISABLE", "1");
    const Outcome o = compile(cache, s);
    EXPECT_EQ(o.status, PCACHE_OK);
    EXPECT_FALSE(o.from_cache);
  }
  uint64_t n = 99;
  ASSERT_EQ(pcache_count(cache, &n), PCACHE_OK);
  EXPECT_EQ(n, 0u);
  for (const char *on : {"yes", "TRUE", "2"}) {
    ScopedEnv off("PCACHE_DISABLE", on);
    compile(cache, s);
    ASSERT_EQ(pcache_count(cache, &n), PCACHE_OK);
    EXPECT_EQ(n, 0u) << "PCACHE_DISABLE=" << on;
  }
  // A flag written off (a CI matrix's false, a template's no) leaves the cache on.
  for (const char *off_word : {"0", "false", "No", "OFF", ""}) {
    ScopedEnv on("PCACHE_DISABLE", off_word);
    compile(cache, s);
    EXPECT_TRUE(compile(cache, s).from_cache) << "PCACHE_DISABLE=" << off_word;
  }
}

}  // namespace

// Outputs large enough (16 KiB and more) that a hit on a record found intact within the second is
// not hashed again (docs/security.md, "What a hit checks"): hit after hit in one process, on both
// persistent stores, each the bytes of a compile without the cache.
TEST_F(Differential, LargeOutputsHitAgainAndAgainAsCold) {
  Source s;
  s.target = PCACHE_TARGET_PTX;
  for (int i = 0; i < 64; ++i)
    s.text += "__global__ void k" + std::to_string(i) +
              "(float *x, int n) { for (int j = 0; j < n; " + "++j) x[j] = x[j] * " +
              std::to_string(i + 2) + ".0f + sqrtf(x[j + " + std::to_string(i) + "]); }\n";
  const Outcome fresh = compile(nullptr, s);
  ASSERT_EQ(fresh.status, PCACHE_OK) << fresh.log;
  ASSERT_GE(fresh.bytes.size(), 16u * 1024) << "too small to be vouched for";
  Handle filestream("filestream:" + (d / "fs"));
  for (pcache *c : {cache.get(), filestream.get()}) {
    const Outcome first = compile(c, s);
    EXPECT_TRUE(first.bytes == fresh.bytes);
    ::usleep(30 * 1000);  // past the clock tick the entry was written in
    for (int hit = 0; hit < 4; ++hit) {
      const Outcome again = compile(c, s);
      EXPECT_TRUE(again.from_cache) << "hit " << hit;
      EXPECT_TRUE(again.bytes == fresh.bytes) << "hit " << hit << ": the cache served other bytes";
    }
  }
}
