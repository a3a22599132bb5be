// Compiling through the cache with the real NVRTC: hits, misses, errors, single flight.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "core/cache.hpp"
#include "cuda/nvrtc.hpp"
#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

const std::string kKernels = read_file(PCACHE_EXAMPLES_DIR "/kernels.cu");

struct Program {
  std::string name = "kernels.cu";
  std::string source = kKernels;
  std::vector<const char *> options{"-arch=sm_90", "--std=c++17"};
  std::vector<const char *> exprs{"scale_add<float>", "block_sum<float, 256>"};
  int32_t target = PCACHE_TARGET_CUBIN;
  int32_t code_type = PCACHE_CODE_CXX;
  pcache_program get() {
    pcache_program p = make_program(name.c_str(), source, options.data(), options.size(),
                                    exprs.data(), exprs.size(), target);
    p.code_type = code_type;
    return p;
  }
};

struct Compiled {
  pcache_compiled *r = nullptr;
  pcache_status status;
  Compiled(pcache *cache, Program &prog) {
    const pcache_program p = prog.get();
    status = pcache_compile(cache, &p, &r);
  }
  ~Compiled() { pcache_compiled_free(r); }
  std::string data() const {
    size_t n = 0;
    const void *d = pcache_compiled_data(r, &n);
    return std::string(static_cast<const char *>(d), n);
  }
  std::string key() const {
    return std::string(reinterpret_cast<const char *>(pcache_compiled_key(r)), PCACHE_KEY_SIZE);
  }
};

std::string real_nvrtc() {
  return progcache::locate_nvrtc().path;
}

// Counts the nvrtcCompileProgram calls the fake NVRTC records in the file.
size_t compile_count(const std::string &file) {
  return read_file(file).size();
}

// A kernel no other test compiled, so the first compile is a miss.
std::string unique_source(const std::string &tag) {
  return kKernels + "\n// " + tag + " " + std::to_string(::getpid()) + " " +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
}

}  // namespace

TEST(Compile, MissThenHitAnswersExactlyLikeAFreshCompile) {
  TempDir d;
  Handle c("sqlite:" + (d / "cache.db"));
  Program prog;
  Compiled miss(c, prog);
  ASSERT_EQ(miss.status, PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(pcache_compiled_from_cache(miss.r), 0);
  const std::string cubin = miss.data();
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(uint8_t(cubin[18]) | uint8_t(cubin[19]) << 8, 190);  // e_machine = EM_CUDA
  EXPECT_STREQ(pcache_compiled_lowered_name(miss.r, "scale_add<float>"),
               "_Z9scale_addIfEvPT_PKS0_S0_i");
  EXPECT_GT(pcache_compiled_compile_us(miss.r), 0u);
  // The call's own time, end to end, holds the compile it ran.
  EXPECT_GE(pcache_compiled_elapsed_us(miss.r), pcache_compiled_compile_us(miss.r));
  EXPECT_GE(pcache_compiled_nvrtc_version(miss.r), 12000u);

  Compiled hit(c, prog);
  ASSERT_EQ(hit.status, PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(pcache_compiled_from_cache(hit.r), 1);
  EXPECT_EQ(hit.data(), cubin);
  EXPECT_EQ(hit.key(), miss.key());
  EXPECT_STREQ(pcache_compiled_lowered_name(hit.r, "scale_add<float>"),
               "_Z9scale_addIfEvPT_PKS0_S0_i");
  EXPECT_STREQ(pcache_compiled_lowered_name(hit.r, "block_sum<float, 256>"),
               "_Z9block_sumIfLi256EEvPKT_PS0_i");
  EXPECT_EQ(pcache_compiled_lowered_name(hit.r, "nope<int>"), nullptr);
  EXPECT_STREQ(pcache_compiled_log(hit.r), pcache_compiled_log(miss.r));
  EXPECT_EQ(pcache_compiled_compile_us(hit.r), pcache_compiled_compile_us(miss.r));
  EXPECT_GT(pcache_compiled_elapsed_us(hit.r), 0u);

  // Raw pcache_get of the compiled entry returns exactly the cubin (usable by NVIDIA's tools).
  std::string raw;
  ASSERT_EQ(c.get(miss.key(), &raw), PCACHE_OK);
  EXPECT_EQ(raw, cubin);
}

// The key names the exact NVRTC build (GNU build-ids of libnvrtc and its builtins), not just
// major.minor: the fake NVRTC forwards to the real one, reports the same version and produces the
// same bytes, yet is another build, so it gets another key. pcache_make_key, which compiles
// nothing, keys by the caller's nvrtc_version.
TEST(Compile, TheExactNvrtcBuildIsPartOfTheKey) {
  Program prog;
  Compiled real(nullptr, prog);
  ASSERT_EQ(real.status, PCACHE_OK) << pcache_last_error();
  std::string fake_key;
  {
    ScopedEnv to_real("PCACHE_TEST_REAL_NVRTC", real_nvrtc());
    ScopedEnv fake("PCACHE_NVRTC_LIBRARY", PCACHE_FAKE_NVRTC);
    Compiled r(nullptr, prog);
    ASSERT_EQ(r.status, PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(pcache_compiled_nvrtc_version(r.r), pcache_compiled_nvrtc_version(real.r));
    fake_key = r.key();
  }
  EXPECT_NE(fake_key, real.key());
  pcache_program p = prog.get();
  p.nvrtc_version = pcache_compiled_nvrtc_version(real.r);
  uint8_t key[PCACHE_KEY_SIZE], next[PCACHE_KEY_SIZE];
  ASSERT_EQ(pcache_make_key(&p, key), PCACHE_OK);
  p.nvrtc_version += 10;  // the next minor release
  ASSERT_EQ(pcache_make_key(&p, next), PCACHE_OK);
  EXPECT_NE(std::string(reinterpret_cast<char *>(key), sizeof key),
            std::string(reinterpret_cast<char *>(next), sizeof next));
}

TEST(Compile, HitInAFreshProcessDoesNotLoadNvrtc) {
  TempDir d;
  const std::string cmd = std::string(PCACHE_COMPILE_PROBE) + " sqlite:" + (d / "cache.db") + " " +
                          PCACHE_EXAMPLES_DIR "/kernels.cu";
  const std::string first = run_command(cmd);
  EXPECT_NE(first.find("status=0 hit=0 nvrtc_mapped=1"), std::string::npos) << first;
  const std::string second = run_command(cmd);
  EXPECT_NE(second.find("status=0 hit=1 nvrtc_mapped=0 lowered=_Z9scale_addIfEvPT_PKS0_S0_i"),
            std::string::npos)
      << second;
}

TEST(Compile, HitsMakeNoNvrtcCompileCalls) {
  TempDir d;
  const std::string count = d / "count";
  const std::string env =
      "PCACHE_NVRTC_LIBRARY=" PCACHE_FAKE_NVRTC " PCACHE_TEST_REAL_NVRTC=" + real_nvrtc() +
      " PCACHE_TEST_NVRTC_COUNT=" + count + " ";
  const std::string cmd = env + PCACHE_COMPILE_PROBE + " sqlite:" + (d / "cache.db") + " " +
                          PCACHE_EXAMPLES_DIR "/kernels.cu";
  EXPECT_NE(run_command(cmd).find("hit=0"), std::string::npos);
  EXPECT_EQ(compile_count(count), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(run_command(cmd).find("hit=1"), std::string::npos);
  EXPECT_EQ(compile_count(count), 1u);
}

TEST(Compile, EightThreadsMissingOneKeyCompileOnce) {
  TempDir d;
  const std::string count = d / "count";
  const std::string real = real_nvrtc();  // before the fake takes its place
  ::setenv("PCACHE_TEST_REAL_NVRTC", real.c_str(), 1);
  ::setenv("PCACHE_NVRTC_LIBRARY", PCACHE_FAKE_NVRTC, 1);
  ::setenv("PCACHE_TEST_NVRTC_COUNT", count.c_str(), 1);
  const std::string uri = "sqlite:" + (d / "cache.db");
  std::vector<std::string> keys(8);
  std::vector<int> statuses(8, -100);
  std::vector<uint64_t> compile_us(8);
  {
    Handle c(uri);
    Program prog;
    prog.source = unique_source("threads");
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        Compiled r(c, prog);
        statuses[t] = r.status;
        keys[t] = r.r ? r.key() : "";
        compile_us[t] = pcache_compiled_compile_us(r.r);
      });
    for (auto &t : threads) t.join();
  }
  ::unsetenv("PCACHE_NVRTC_LIBRARY");
  ::unsetenv("PCACHE_TEST_NVRTC_COUNT");
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(statuses[t], PCACHE_OK);
    EXPECT_EQ(keys[t], keys[0]);
    EXPECT_EQ(compile_us[t], compile_us[0]);
  }
  EXPECT_EQ(compile_count(count), 1u);
  // The seven callers spared the compile are hits that saved it, whether they found the entry
  // or waited for the leader's result (waiters used to count as neither: 0.0 s saved).
  const auto shared = progcache::Cache::open(uri, {})->persistent_counters();
  EXPECT_EQ(shared.hits, 7);
  EXPECT_EQ(uint64_t(shared.compile_us_saved), 7 * compile_us[0]);
  // One lookup per call: a second look after waiting used to count a second miss.
  EXPECT_EQ(shared.hits + shared.misses, 8);
}

TEST(Compile, FourProcessesMissingOneKeyCompileOnce) {
  TempDir d;
  const std::string count = d / "count";
  const std::string src = d / "kernels.cu";
  write_file(src, unique_source("processes"));
  const std::string cmd =
      "PCACHE_NVRTC_LIBRARY=" PCACHE_FAKE_NVRTC " PCACHE_TEST_REAL_NVRTC=" + real_nvrtc() +
      " PCACHE_TEST_NVRTC_COUNT=" + count + " " + PCACHE_COMPILE_PROBE +
      " sqlite:" + (d / "cache.db") + " " + src;
  // Four processes started together; each prints one line.
  const std::string out = run_command("for i in 1 2 3 4; do " + cmd + " & done; wait");
  size_t lines = 0, ok = 0;
  for (size_t pos = 0; (pos = out.find("status=", pos)) != std::string::npos; ++pos, ++lines)
    if (out.compare(pos, 9, "status=0 ") == 0) ++ok;
  EXPECT_EQ(lines, 4u) << out;
  EXPECT_EQ(ok, 4u) << out;
  EXPECT_EQ(compile_count(count), 1u) << out;
  // The three processes that waited for the compiling one are hits that saved its compile.
  const auto shared =
      progcache::Cache::open("sqlite:" + (d / "cache.db"), {})->persistent_counters();
  EXPECT_EQ(shared.hits, 3) << out;
  EXPECT_EQ(shared.hits + shared.misses, 4) << out;
  EXPECT_GT(shared.compile_us_saved, 0) << out;
}

// NVRTC refusing a program in a call other than a compile error (an option it does not know:
// NVRTC_ERROR_INVALID_OPTION from nvrtcCompileProgram) used to give PCACHE_ERR_COMPILE with no
// result and NVRTC's log dropped, against the header's promise. Now it is a failed compile like
// any other: a result whose log holds NVRTC's words and the call that refused. NVRTC refuses it
// the same way every time, so the refusal is stored and a warm compile answers it exactly so.
TEST(Compile, NvrtcRefusingTheProgramIsACompileErrorWithItsLog) {
  Handle c("memory:");
  Program bad_option;
  bad_option.source = unique_source("bad option");
  bad_option.options.push_back("--no-such-nvrtc-option");
  Compiled r(c, bad_option);
  ASSERT_EQ(r.status, PCACHE_ERR_COMPILE) << pcache_last_error();
  ASSERT_NE(r.r, nullptr) << pcache_last_error();
  const std::string log = pcache_compiled_log(r.r);
  EXPECT_NE(log.find("no-such-nvrtc-option"), std::string::npos) << log;  // NVRTC's own words
  EXPECT_NE(log.find("progcache: nvrtcCompileProgram returned NVRTC_ERROR_INVALID_OPTION"),
            std::string::npos)
      << log;
  EXPECT_NE(std::string(pcache_last_error()).find("NVRTC_ERROR_INVALID_OPTION"), std::string::npos)
      << pcache_last_error();
  size_t n = 1;
  pcache_compiled_data(r.r, &n);
  EXPECT_EQ(n, 0u);
  EXPECT_FALSE(pcache_compiled_from_cache(r.r));
  EXPECT_EQ(c.count(), 1u);  // the refusal
  Compiled warm(c, bad_option);
  ASSERT_EQ(warm.status, PCACHE_ERR_COMPILE) << pcache_last_error();
  EXPECT_TRUE(pcache_compiled_from_cache(warm.r));
  EXPECT_EQ(std::string(pcache_compiled_log(warm.r)), log);
  pcache_compiled_data(warm.r, &n);
  EXPECT_EQ(n, 0u);
}

namespace {

// Memos in a map, as a cache keeps them (tests look inside).
class MapMemos final : public progcache::MemoStore {
 public:
  std::map<std::string, std::string, std::less<>> memos;
  std::optional<std::string> load_memo(std::string_view name) override {
    auto it = memos.find(name);
    return it == memos.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void save_memo(std::string_view name, std::string_view value) override {
    memos[std::string(name)] = std::string(value);
  }
  // The one NVRTC location memo.
  std::string *location() {
    for (auto &[name, value] : memos)
      if (name.rfind("nvrtc-location/", 0) == 0) return &value;
    return nullptr;
  }
};

}  // namespace

// A fresh process finds NVRTC from the location memo while no search directory changed (only
// stats, no listing); the memo never names a library the search could not have chosen, and a
// directory that changed sends it back to listing.
TEST(NvrtcLocation, TheMemoAnswersOnlyForUnchangedDirectoriesAndCandidates) {
  const std::string real = real_nvrtc();
  // A search directory of our own, first on the path, holding a link to the real library: the
  // scan chooses it (the first directory wins a tie), a memo naming the toolkit's is observable.
  TempDir scratch, elsewhere;
  const std::string dir = scratch.path();
  ASSERT_EQ(::symlink(real.c_str(), (dir + "/libnvrtc.so.13").c_str()), 0);
  const char *old_path = std::getenv("LD_LIBRARY_PATH");
  ScopedEnv path("LD_LIBRARY_PATH", dir + (old_path ? ":" + std::string(old_path) : ""));
  // Nothing searched ahead of it (an empty variable is no directory).
  ScopedEnv no_explicit("PCACHE_NVRTC_LIBRARY", ""), no_home("CUDA_HOME", ""),
      no_path("CUDA_PATH", "");
  MapMemos memos;
  progcache::forget_nvrtc_locations();
  auto scanned = progcache::locate_nvrtc(&memos);
  EXPECT_EQ(scanned.found_as, dir + "/libnvrtc.so.13");
  EXPECT_EQ(scanned.path, real);
  // Our directory changed less than 2 s ago: too recent to vouch for, nothing remembered.
  EXPECT_EQ(memos.location(), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  progcache::forget_nvrtc_locations();
  (void)progcache::locate_nvrtc(&memos);
  std::string *memo = memos.location();
  ASSERT_NE(memo, nullptr);
  const std::string good = *memo;
  EXPECT_EQ(good.substr(0, good.find('\n')), dir + "/libnvrtc.so.13");

  // Naming the toolkit's file (a candidate in the search) with the right stamps: used as is,
  // which shows the memo answered and no listing did.
  const std::string toolkit = "/usr/local/cuda/lib64/libnvrtc.so.13";
  *memo = toolkit + good.substr(good.find('\n'));
  progcache::forget_nvrtc_locations();
  EXPECT_EQ(progcache::locate_nvrtc(&memos).found_as, toolkit);

  // Naming a file outside the search (a planted library): refused, the scan answers.
  const std::string planted = elsewhere.path() + "/libnvrtc.so.13";
  ASSERT_EQ(::symlink(real.c_str(), planted.c_str()), 0);
  *memo = planted + good.substr(good.find('\n'));
  progcache::forget_nvrtc_locations();
  EXPECT_EQ(progcache::locate_nvrtc(&memos).found_as, dir + "/libnvrtc.so.13");

  // A directory that changed since (a name added): the memo is stale, the scan answers.
  *memos.location() = toolkit + good.substr(good.find('\n'));
  write_file(dir + "/unrelated", "x");
  progcache::forget_nvrtc_locations();
  EXPECT_EQ(progcache::locate_nvrtc(&memos).found_as, dir + "/libnvrtc.so.13");
  progcache::forget_nvrtc_locations();
}
