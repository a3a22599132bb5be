// Differential tests of the key's second round (docs/keys.md, "Observing NVRTC"): preprocessor
// corners a pattern scanner misses (__has_include behind macros, digraph and trigraph
// directives, #pragma once through links and copies), the time reached indirectly, the working
// directory and the environment NVRTC reads; and pairs of calls whose uncached outputs are
// equal, which must now hit each other. Each compile through the cache must equal one without
// it, byte for byte and status for status.
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "differential.hpp"
#include "proc_util.hpp"

using namespace testutil;
using namespace difftest;

namespace {

const char *const kOptVal = "__global__ void k(int *x) { *x = OPTVAL; }\n";

// The source, then opt.h created (a new header where NVRTC looked), then edited: each a miss
// that equals a fresh compile, and the unchanged repeats hits.
void follows_a_header_created_later(Differential &t, const Source &s, const std::string &opt) {
  const char *what = s.text.c_str();
  EXPECT_FALSE(t.same_as_uncached(s, what).from_cache) << what;
  EXPECT_TRUE(t.same_as_uncached(s, what).from_cache) << what;
  write_aged(opt, "#define OPTVAL 7\n", 50);
  EXPECT_FALSE(t.same_as_uncached(s, what).from_cache) << what << ": " << opt << " created";
  EXPECT_TRUE(t.same_as_uncached(s, what).from_cache) << what;
  write_aged(opt, "#define OPTVAL 8\n", 40);
  EXPECT_FALSE(t.same_as_uncached(s, what).from_cache) << what << ": " << opt << " edited";
}

class Observation : public Differential {
 protected:
  void SetUp() override {
    Differential::SetUp();
    ASSERT_EQ(::mkdir((work + "/inc").c_str(), 0700), 0);
  }
};

TEST_F(Observation, HasIncludeBehindMacrosNoticesTheHeaderCreatedLater) {
  InDir in(work);
  const std::string fallback = "#else\n#define OPTVAL 0\n#endif\n";
  Source s;
  s.options = {"-arch=sm_90", "-Iinc"};
  // A macro that names the header.
  s.text =
      "#define HAS(x) __has_include(x)\n#define OPT_H \"opt.h\"\n#if HAS(OPT_H)\n"
      "#include OPT_H\n" +
      fallback + kOptVal;
  follows_a_header_created_later(*this, s, "opt.h");
  // A wrapper that stringizes its argument.
  s.text =
      "#define STR(x) #x\n#define HAS(x) __has_include(STR(x))\n#if HAS(opt2.h)\n"
      "#include STR(opt2.h)\n" +
      fallback + kOptVal;
  follows_a_header_created_later(*this, s, "opt2.h");
  // A header name built by macros, found on -I.
  s.text =
      "#define HDR(n) <n.h>\n#define HAS(x) __has_include(x)\n#if HAS(HDR(opt3))\n"
      "#include HDR(opt3)\n" +
      fallback + kOptVal;
  follows_a_header_created_later(*this, s, "inc/opt3.h");
}

TEST_F(Observation, DigraphAndTrigraphDirectivesAreFollowed) {
  InDir in(work);
  write_aged("h.h", "%:include <deep.h>\n");
  write_aged("inc/deep.h", "#define VAL 1\n");
  Source s;
  s.options = {"-arch=sm_90", "-Iinc"};
  s.text =
      "%:include \"h.h\"\n%:if __has_include(\"opt.h\")\n%:include \"opt.h\"\n%:else\n"
      "#define OPTVAL 0\n%:endif\n__global__ void k(int *x) { *x = VAL + OPTVAL; }\n";
  EXPECT_FALSE(same_as_uncached(s, "digraphs").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "digraphs again").from_cache);
  write_aged("inc/deep.h", "#define VAL 2\n", 50);
  EXPECT_FALSE(same_as_uncached(s, "a header reached by %:include <> edited").from_cache);
  write_aged("opt.h", "#define OPTVAL 3\n", 50);
  EXPECT_FALSE(same_as_uncached(s, "%:if __has_include target created").from_cache);
  // NVRTC reads trigraphs under -std=c++14.
  write_aged("t.h", "#define VAL 4\n");
  Source t;
  t.options = {"-arch=sm_90", "-std=c++14"};
  t.text = "?\?=include \"t.h\"\n__global__ void k(int *x) { *x = VAL; }\n";
  EXPECT_FALSE(same_as_uncached(t, "trigraph").from_cache);
  EXPECT_TRUE(same_as_uncached(t, "trigraph again").from_cache);
  write_aged("t.h", "#define VAL 5\n", 50);
  EXPECT_FALSE(same_as_uncached(t, "a header reached by ?\?=include edited").from_cache);
}

// #pragma once knows a header reached twice by a symbolic link or a hard link as one file, and a
// copy as another: trees that differ only so give different outputs (here one compiles, one is a
// redefinition error), and must not share an entry.
TEST_F(Observation, PragmaOnceIdentityThroughLinksAndCopies) {
  namespace fs = std::filesystem;
  InDir in(work);
  ASSERT_EQ(::mkdir("real", 0700), 0);
  write_aged("real/p.h", "#pragma once\n__device__ int defined_once = 1;\n");
  Source s;
  s.text =
      "#include \"real/p.h\"\n#include \"alias/p.h\"\n"
      "__global__ void k(int *x) { *x = defined_once; }\n";
  auto make_alias = [](const char *how) {
    fs::remove_all("alias");
    if (std::string(how) == "symlink") {
      fs::create_directory_symlink("real", "alias");
    } else {
      fs::create_directory("alias");
      if (std::string(how) == "copy")
        fs::copy_file("real/p.h", "alias/p.h");
      else
        fs::create_hard_link("real/p.h", "alias/p.h");
    }
  };
  for (const char *how : {"copy", "symlink", "copy", "hardlink", "symlink", "hardlink"}) {
    make_alias(how);
    const Outcome o = same_as_uncached(s, how);
    EXPECT_EQ(o.status, std::string(how) == "copy" ? PCACHE_ERR_COMPILE : PCACHE_OK) << how;
  }
}

// The time reached indirectly: through options (every spelling of -D), token pasting (in one file
// or across two), a trigraph line splice, an in-memory header. Compiled every time, never stored.
TEST_F(Observation, TimeMacrosReachedIndirectlyAreNeverStored) {
  InDir in(work);
  write_aged("cat.h", "#define CAT(a, b) a##b\n");
  const std::string uses = "__global__ void k(char *x) { *x = STAMP[7]; }\n";
  std::vector<Source> sources;
  for (const std::vector<std::string> &define :
       std::vector<std::vector<std::string>>{{"-DSTAMP=__TIME__"},
                                             {"--define-macro=STAMP=__DATE__"},
                                             {"-D", "STAMP=__TIME__"},
                                             {"--define-macro", "STAMP=__TIME__"}}) {
    Source s;
    s.text = uses;
    s.options.insert(s.options.end(), define.begin(), define.end());
    sources.push_back(s);
  }
  Source paste;
  paste.text = "#define CAT(a, b) a##b\n#define STAMP CAT(__TI, ME__)\n" + uses;
  sources.push_back(paste);
  Source across;  // the ## in one file, the pieces in another
  across.text = "#include \"cat.h\"\n#define STAMP CAT(__DA, TE__)\n" + uses;
  sources.push_back(across);
  Source trigraph;
  trigraph.options = {"-arch=sm_90", "-std=c++14"};
  trigraph.text = "#define STAMP __TI?\?/\nME__\n" + uses;
  sources.push_back(trigraph);
  Source memory;
  memory.headers = {{"stamp.h", "#define STAMP __TIME__\n"}};
  memory.text = "#include \"stamp.h\"\n" + uses;
  sources.push_back(memory);
  for (const Source &s : sources) {
    for (int i = 0; i < 2; ++i) {
      const Outcome o = compile(cache, s);
      EXPECT_EQ(o.status, PCACHE_OK) << s.text << o.warning;
      EXPECT_FALSE(o.from_cache) << s.text;
      EXPECT_NE(o.warning.find("not cached"), std::string::npos) << s.text << o.warning;
    }
  }
  uint64_t n = 99;
  ASSERT_EQ(pcache_count(cache, &n), PCACHE_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(uncacheable(cache), 2 * sources.size());
}

// NVRTC's LTO-IR holds the working directory and the program name (in LLVM bitcode, where no
// text search finds them): another directory or name is another compile.
TEST_F(Observation, LtoIrDependsOnTheWorkingDirectoryAndTheName) {
  Source s;
  s.text = "__global__ void k(int *x) { *x = 1; }\n";
  s.options = {"-arch=sm_90", "-dlto"};
  s.target = PCACHE_TARGET_LTOIR;
  ASSERT_EQ(::mkdir((work + "/a").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((work + "/bbbb").c_str(), 0700), 0);
  int step = 0;
  for (const char *sub : {"a", "bbbb", "a"}) {
    InDir in(work + "/" + sub);
    const Outcome o = same_as_uncached(s, sub);
    EXPECT_EQ(o.from_cache, ++step == 3) << sub << ": only the return to a/ is a hit";
  }
  InDir in(work + "/a");
  s.name = "other_name.cu";
  EXPECT_FALSE(same_as_uncached(s, "another name").from_cache);
}

// With -lineinfo NVRTC names the directory in its line table as $PWD does when $PWD is the
// working directory (reached through a symbolic link), else as getcwd() does.
TEST_F(Observation, LineInfoFollowsTheLogicalDirectory) {
  ASSERT_EQ(::mkdir((work + "/real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink("real", (work + "/link").c_str()), 0);
  Source s;
  s.text = "__global__ void k(int *x) { *x = 2; }\n";
  s.options = {"-arch=sm_90", "-lineinfo"};
  s.target = PCACHE_TARGET_PTX;
  InDir in(work + "/real");
  {
    ScopedEnv pwd("PWD", work + "/real");
    EXPECT_FALSE(same_as_uncached(s, "physical").from_cache);
    EXPECT_TRUE(same_as_uncached(s, "physical again").from_cache);
  }
  ScopedEnv pwd("PWD", work + "/link");
  const Outcome o = same_as_uncached(s, "through the link");
  EXPECT_FALSE(o.from_cache);
  EXPECT_NE(o.bytes.find(work + "/link"), std::string::npos);
}

// A compile NVRTC refuses is stored, and answered warm as it was cold, with its log: jitify2
// starts with a compile that fails on purpose. A header created where NVRTC looked is a miss.
TEST_F(Observation, AFailedCompileIsAnsweredWarmAsColdUntilItsInputsChange) {
  InDir in(work);
  Source s;
  s.options = {"-arch=sm_90", "-Iinc"};
  s.text = "#include <__JITIFY_STOP_COMPILATION>\n__global__ void k() {}\n";
  const Outcome cold = same_as_uncached(s, "cold");
  EXPECT_EQ(cold.status, PCACHE_ERR_COMPILE);
  EXPECT_NE(cold.log.find("__JITIFY_STOP_COMPILATION"), std::string::npos) << cold.log;
  const Outcome warm = same_as_uncached(s, "warm");
  EXPECT_TRUE(warm.from_cache);
  EXPECT_EQ(warm.log, cold.log);
  write_aged("inc/__JITIFY_STOP_COMPILATION", "\n", 50);
  const Outcome now = same_as_uncached(s, "the missing header created");
  EXPECT_FALSE(now.from_cache);
  EXPECT_EQ(now.status, PCACHE_OK);
}

// NVRTC's precompiled headers are its own cache: created, used, stale or absent, the output is
// the same, and their appearance never causes a miss.
TEST_F(Observation, PrecompiledHeadersAreNotInputs) {
  InDir in(work);
  ASSERT_EQ(::mkdir("pch", 0700), 0);
  Source s;
  s.options = {"-arch=sm_90", "-I/usr/local/cuda/include/cccl", "-pch", "--pch-dir=pch"};
  keys_follow_reads_alike = false;  // a compile that used the PCH read no header
  s.text =
      "#include <cuda/std/type_traits>\n"
      "__global__ void k(int *x) { *x = cuda::std::is_same_v<int, int>; }\n";
  EXPECT_FALSE(same_as_uncached(s, "PCH created").from_cache);
  EXPECT_TRUE(same_as_uncached(s, "PCH used").from_cache);
  for (const auto &e : std::filesystem::directory_iterator("pch"))
    write_file(e.path().string(), "stale");
  EXPECT_TRUE(same_as_uncached(s, "PCH stale").from_cache);
  std::filesystem::remove_all("pch");
  ASSERT_EQ(::mkdir("pch", 0700), 0);
  EXPECT_TRUE(same_as_uncached(s, "PCH absent").from_cache);
  // -pch alone: NVRTC makes /tmp/__nvrtc_auto_pch_<pid>_<n> itself; that write is its own
  // cache, not an effect a hit must repeat (it made such programs uncacheable).
  Source automatic = s;
  automatic.options = {"-arch=sm_90", "-I/usr/local/cuda/include/cccl", "-pch"};
  EXPECT_FALSE(same_as_uncached(automatic, "automatic PCH directory").from_cache);
  EXPECT_TRUE(same_as_uncached(automatic, "automatic PCH directory, warm").from_cache);
  EXPECT_EQ(uncacheable(cache), 0u);
}

// Pairs of calls whose uncached outputs are byte for byte equal: the second is a hit, equal to an
// uncached compile. (Before this round 19 of 21 such pairs missed.)
TEST_F(Observation, SpellingsNvrtcReadsAlikeHitEachOther) {
  InDir in(work);
  ASSERT_EQ(::mkdir("a", 0700), 0);
  ASSERT_EQ(::mkdir("b", 0700), 0);
  write_aged("inc/h.h", "#define VAL 9\n");
  write_aged("pre.h", "#define PRE 1\n");
  const std::string text = "#include <h.h>\n__global__ void k(int *x) { *x = VAL + PRE; }\n";
  struct Pair {
    const char *what;
    std::vector<std::string> first, second;
    const char *first_dir = nullptr, *second_dir = nullptr;  // relative to work
    const char *first_name = "k.cu", *second_name = "k.cu";
  };
  const std::string inc = work + "/inc";
  const std::vector<Pair> pairs = {
      {"-lineinfo twice", {"-lineinfo"}, {"-lineinfo", "-lineinfo"}},
      {"-G twice", {"-G"}, {"-G", "-G"}},
      {"-use_fast_math twice", {"-use_fast_math"}, {"-use_fast_math", "-use_fast_math"}},
      {"the same -D twice", {"-DA=1"}, {"-DA=1", "-DA=1"}},
      {"-std twice", {"-std=c++17"}, {"-std=c++17", "--std=c++17"}},
      {"distinct -D in either order", {"-DA=1", "-DB=2"}, {"-DB=2", "-DA=1"}},
      {"-arch first or last", {"-arch=sm_80", "-lineinfo"}, {"-lineinfo", "-arch=sm_80"}},
      {"-D and -U of other names", {"-DA=1", "-UB"}, {"-UB", "-DA=1"}},
      {"-std and -D", {"-std=c++17", "-DA"}, {"-DA", "-std=c++17"}},
      {"-Xptxas -O3 in another directory", {"-Xptxas", "-O3"}, {"-Xptxas", "-O3"}, "a", "b"},
      {"--dopt=on in another directory", {"--dopt=on"}, {"--dopt=on"}, "a", "b"},
      {"-frandom-seed=1 in another directory", {"-frandom-seed=1"}, {"-frandom-seed=1"}, "a", "b"},
      {"another program name", {}, {}, nullptr, nullptr, "x.cu", "y.cu"},
      {"another name, -Xptxas -O3",
       {"-Xptxas", "-O3"},
       {"-Xptxas", "-O3"},
       nullptr,
       nullptr,
       "x.cu",
       "yyyy.cu"},
      {"another name, -dopt", {"--dopt=on"}, {"--dopt=on"}, nullptr, nullptr, "n1.cu", "n2.cu"},
      {"-I=dir and -Idir", {"-I=" + inc}, {"-I" + inc}},
      {"-Idir/ and -Idir", {"-I" + inc + "/"}, {"-I" + inc}},
      {"-include=f and -include f", {"-include=pre.h"}, {"-include", "pre.h"}},
      {"--pre-include f and -include f", {"--pre-include", "pre.h"}, {"-include", "pre.h"}},
      {"-arch sm_80 and -arch=sm_80", {"-arch", "sm_80"}, {"-arch=sm_80"}},
      {"--gpu-architecture and -arch", {"--gpu-architecture=sm_80"}, {"-arch=sm_80"}},
  };
  size_t hits = 0;
  for (const Pair &p : pairs) {
    Source s;
    s.text = text;
    auto options = [&](const std::vector<std::string> &extra) {
      std::vector<std::string> o{"-I" + inc};
      if (std::find(extra.begin(), extra.end(), "-include") == extra.end() &&
          std::find(extra.begin(), extra.end(), "--pre-include") == extra.end() &&
          std::find(extra.begin(), extra.end(), "-include=pre.h") == extra.end())
        o.push_back("-DPRE=1");
      bool has_arch = false;
      for (const std::string &e : extra) has_arch |= e.find("arch") != std::string::npos;
      if (!has_arch) o.push_back("-arch=sm_90");
      o.insert(o.end(), extra.begin(), extra.end());
      return o;
    };
    s.options = options(p.first);
    s.name = p.first_name;
    {
      InDir here(work + "/" + (p.first_dir ? p.first_dir : "."));
      same_as_uncached(s, p.what);
    }
    s.options = options(p.second);
    s.name = p.second_name;
    InDir there(work + "/" + (p.second_dir ? p.second_dir : "."));
    const bool hit = same_as_uncached(s, p.what).from_cache;
    EXPECT_TRUE(hit) << p.what;
    hits += hit;
  }
  std::printf("%zu of %zu pairs NVRTC compiles alike hit each other\n", hits, pairs.size());
}

// A compile named after a fresh temporary file each run (CuPy, cuda.core) hits the last run's.
TEST_F(Observation, ProgramsNamedAfterTemporaryFilesHit) {
  write_aged(work + "/inc/h.h", "#define VAL 9\n");
  Source s;
  s.options = {"-arch=sm_90", "-I" + work + "/inc"};
  s.text = "#include <h.h>\n__global__ void k(int *x) { *x = VAL; }\n";
  size_t hits = 0;
  for (int run = 0; run < 3; ++run) {
    const std::string tmp = work + "/tmp" + std::to_string(run);
    ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
    write_file(tmp + "/kern.cu", s.text);  // the program's source, as CuPy writes it
    s.name = tmp + "/kern.cu";
    hits += same_as_uncached(s, s.name.c_str()).from_cache;
  }
  EXPECT_EQ(hits, 2u);
}

// #include_next searches only the directories after the one that held the including header:
// a header created in an earlier one is no input.
TEST_F(Observation, IncludeNextKeysOnlyTheDirectoriesAfterItsOwn) {
  InDir in(work);
  for (const char *dir : {"i1", "i2", "i3", "i4"}) ASSERT_EQ(::mkdir(dir, 0700), 0);
  write_aged("i3/n.h", "#include_next <m.h>\n");
  write_aged("i4/m.h", "#define VAL 4\n");
  Source s;
  s.options = {"-arch=sm_90", "-Ii1", "-Ii2", "-Ii3", "-Ii4"};
  s.text = "#include <n.h>\n__global__ void k(int *x) { *x = VAL; }\n";
  EXPECT_FALSE(same_as_uncached(s, "first").from_cache);
  write_aged("i1/m.h", "#define VAL 1\n", 50);
  EXPECT_TRUE(same_as_uncached(s, "m.h created before n.h's directory").from_cache);
  write_aged("i4/m.h", "#define VAL 5\n", 40);
  EXPECT_FALSE(same_as_uncached(s, "the m.h #include_next finds edited").from_cache);
}

// Two threads compiling at once record their own observations: neither may key the other's
// headers only (a superset is safe, a subset is not).
TEST_F(Observation, ThreadsCompilingAtOnceKeepTheirOwnObservations) {
  InDir in(work);
  for (int i = 0; i < 4; ++i)
    write_aged("t" + std::to_string(i) + ".h", "#define VAL " + std::to_string(i) + "\n");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      Source s;
      s.text =
          "#include \"t" + std::to_string(i) + ".h\"\n__global__ void k(int *x) { *x = VAL; }\n";
      EXPECT_EQ(compile(cache, s).status, PCACHE_OK);
    });
  for (std::thread &t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    write_aged("t" + std::to_string(i) + ".h", "#define VAL " + std::to_string(10 + i) + "\n", 30);
    Source s;
    s.text = "#include \"t" + std::to_string(i) + ".h\"\n__global__ void k(int *x) { *x = VAL; }\n";
    EXPECT_FALSE(same_as_uncached(s, "its own header edited").from_cache) << i;
  }
}

// Variables of the environment NVRTC reads when it loads change its output (LLVM_OVERRIDE_PRODUCER
// in LTO-IR) or its outcome (NV_NVVM_VERSION=1.0 makes it fail): another value is another key.
// NVRTC keeps what it read for the process, so each compile runs in a process of its own.
TEST_F(Observation, VariablesNvrtcReadsWhenItLoadsAreKeyed) {
  write_file(work + "/k.cu", "__global__ void k(int *x) { *x = 3; }\n");
  const std::string db = d / "env.db";
  auto run = [&](const std::string &env, bool cached) {
    const std::string out = work + (cached ? "/cached.bin" : "/fresh.bin");
    std::remove(out.c_str());
    const std::string cmd =
        "cd '" + work + "' && env " + env + (cached ? "" : " PCACHE_DISABLE=1") +
        " " PCACHE_CLI " --cache 'sqlite:" + db + "' compile k.cu --target ltoir -o '" + out +
        "' -- -arch=sm_90 -dlto 2>&1; echo \"exit $?\"";
    const std::string printed = run_command(cmd);
    std::string bytes;
    if (::access(out.c_str(), F_OK) == 0) bytes = read_file(out);
    return std::pair{printed, bytes};
  };
  for (const std::string env : {"A=1", "LLVM_OVERRIDE_PRODUCER=someone-else", "A=1",
                                "NV_NVVM_VERSION=1.0", "LLVM_OVERRIDE_PRODUCER=someone-else"}) {
    const auto cached = run(env, true);
    const auto fresh = run(env, false);
    EXPECT_EQ(cached.first.substr(cached.first.rfind("exit")),
              fresh.first.substr(fresh.first.rfind("exit")))
        << env << "\n"
        << cached.first << fresh.first;
    EXPECT_TRUE(cached.second == fresh.second) << env << ": the cache served other bytes\n"
                                               << cached.first;
  }
}

// A warm hit re-checks each header NVRTC read by a stat, not an open, where this process opened
// the same unchanged file under the same credentials (core/opened_files.hpp). What may open
// changes with the process's credentials and with the file's mode: either way the hit must not
// be served, and the call must equal a compile without the cache (NVRTC cannot open the header).
// Each case runs in a child that compiles three times (a miss, a hit that opens the header and a
// hit that takes its stat's word), then loses the right to read the header and compiles again.
TEST_F(Observation, AHeaderTheProcessMayNoLongerOpenIsNotVouchedForByAnEarlierOpen) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user (uid 65534)";
  // Directories every user may search, so that only the header's own mode decides.
  ASSERT_EQ(::chmod(d.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(work.c_str(), 0755), 0);
  for (const char *dir : {"/root-only", "/nobodys"})
    ASSERT_EQ(::mkdir((work + dir).c_str(), 0755), 0);
  ASSERT_EQ(::chown((work + "/nobodys").c_str(), 65534, 65534), 0);
  write_aged(work + "/root-only/secret.h", "#define OPTVAL 5\n");
  ASSERT_EQ(::chmod((work + "/root-only/secret.h").c_str(), 0600), 0);
  write_aged(work + "/nobodys/mine.h", "#define OPTVAL 6\n");
  ASSERT_EQ(::chown((work + "/nobodys/mine.h").c_str(), 65534, 65534), 0);
  // Until both have settled (ctime 2 s old), no open is remembered (a change within the file
  // system's timestamp granularity could hide).
  ::usleep(2100 * 1000);
  auto source_on = [&](const std::string &dir, const char *header) {
    Source s;
    s.options = {"-arch=sm_90", "-I" + work + dir};
    s.text = std::string("#include <") + header + ">\n" + kOptVal;
    return s;
  };
  // 0 when the child's compiles went as they must; else which one did not.
  auto warm_then = [&](const Source &s, const std::string &header,
                       const std::function<bool()> &lose_access) {
    return testutil::wait_for(testutil::spawn([&] {
      if (::chdir(work.c_str()) != 0) return 90;
      pcache *c = nullptr;
      if (pcache_open("memory:", nullptr, &c) != PCACHE_OK) return 91;
      for (int i = 0; i < 3; ++i) {
        const Outcome o = compile(c, s);
        if (o.status != PCACHE_OK || o.from_cache != (i > 0)) return 92 + i;
      }
      if (!lose_access()) return 95;
      struct stat st;
      if (::stat(header.c_str(), &st) != 0) return 98;  // only the header's mode may refuse
      const Outcome cached = compile(c, s), fresh = compile(nullptr, s);
      if (fresh.status != PCACHE_ERR_COMPILE) return 96;  // NVRTC cannot open it now
      if (cached.from_cache || cached.status != fresh.status || cached.log != fresh.log) return 97;
      pcache_close(c);
      return 0;
    }));
  };
  // Root's header, then the process becomes uid 65534: the same file, unchanged, no longer opens.
  EXPECT_EQ(warm_then(source_on("/root-only", "secret.h"), work + "/root-only/secret.h",
                      [] {
                        return ::setgroups(0, nullptr) == 0 &&
                               ::setresgid(65534, 65534, 65534) == 0 &&
                               ::setresuid(65534, 65534, 65534) == 0;
                      }),
            0);
  // As uid 65534 throughout, its own header made unreadable (chmod moves the file's ctime).
  const std::string mine = work + "/nobodys/mine.h";
  EXPECT_EQ(testutil::run_unprivileged([&] {
              return warm_then(source_on("/nobodys", "mine.h"), mine,
                               [&] { return ::chmod(mine.c_str(), 0) == 0; });
            }),
            0);
}

}  // namespace
