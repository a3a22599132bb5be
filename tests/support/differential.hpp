// The differential method (tests/core/differential_test.cpp, tests/core/observation_test.cpp):
// every compile through the cache must give exactly the bytes and status of a compile without it
// (pcache_compile with no cache, as PCACHE_DISABLE=1 does). Real NVRTC, real files.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace difftest {

using testutil::Handle;
using testutil::TempDir;

struct Source {
  std::string name = "k.cu";  // "" = NULL (NVRTC's default_program)
  std::string text;
  std::vector<std::string> options{"-arch=sm_90"};
  std::vector<std::pair<std::string, std::string>> headers;
  int32_t target = PCACHE_TARGET_CUBIN;
  std::string extra_digest;
  int32_t code_type = PCACHE_CODE_CXX;
};

struct Outcome {
  pcache_status status = PCACHE_OK;
  std::string bytes;
  bool from_cache = false;
  std::string warning;
  std::string log;  // NVRTC's log (a failed compile's reasons)
  std::string key;  // pcache_compiled_key's bytes
};

inline Outcome compile(pcache *cache, const Source &s) {
  std::vector<const char *> opts, hn, hs;
  std::vector<size_t> sizes;
  for (const std::string &o : s.options) opts.push_back(o.c_str());
  for (const auto &[n, t] : s.headers) {
    hn.push_back(n.c_str());
    hs.push_back(t.c_str());
    sizes.push_back(t.size());  // NVVM modules may be bitcode
  }
  pcache_program p = testutil::make_program(s.name.empty() ? nullptr : s.name.c_str(), s.text,
                                            opts.data(), opts.size(), nullptr, 0, s.target);
  p.header_names = hn.data();
  p.header_sources = hs.data();
  p.header_sizes = sizes.data();
  p.num_headers = hn.size();
  p.code_type = s.code_type;
  p.source_size = s.text.size();
  if (!s.extra_digest.empty()) {
    p.extra_digest = s.extra_digest.data();
    p.extra_digest_size = s.extra_digest.size();
  }
  pcache_compiled *r = nullptr;
  Outcome o;
  o.status = pcache_compile(cache, &p, &r);
  o.warning = pcache_last_error();
  if (r) {
    size_t n = 0;
    const void *d = pcache_compiled_data(r, &n);
    o.bytes.assign(static_cast<const char *>(d), n);
    o.from_cache = pcache_compiled_from_cache(r) != 0;
    o.log = pcache_compiled_log(r);
    o.key.assign(reinterpret_cast<const char *>(pcache_compiled_key(r)), PCACHE_KEY_SIZE);
  }
  pcache_compiled_free(r);
  return o;
}

// A working directory of its own for the test (NVRTC resolves relative paths against it).
class InDir {
 public:
  explicit InDir(const std::string &dir) {
    char buf[4096];
    old_ = ::getcwd(buf, sizeof buf) ? buf : "/";
    EXPECT_EQ(::chdir(dir.c_str()), 0);
  }
  ~InDir() { EXPECT_EQ(::chdir(old_.c_str()), 0); }

 private:
  std::string old_;
};

// Writes a file and dates it `age_s` seconds in the past, so that its stat is trusted and the
// memos are used (files younger than 2 s are always read).
inline void write_aged(const std::string &path, const std::string &text, int age_s = 60) {
  testutil::write_file(path, text);
  struct timespec t[2];
  ::clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age_s;
  t[1] = t[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0);
}

inline uint64_t uncacheable(pcache *c) {
  pcache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_stats(c, &s), PCACHE_OK);
  return s.uncacheable;
}

class Differential : public ::testing::Test {
 public:
  TempDir d;
  Handle cache{"sqlite:" + (d / "cache.db")};
  std::string work = d / "w";
  // False where NVRTC reads other files for the same program from one compile to the next (a
  // precompiled header made by the first): each compile's key names what it read.
  bool keys_follow_reads_alike = true;
  void SetUp() override { ASSERT_EQ(::mkdir(work.c_str(), 0700), 0); }

  // Compiles through the cache and without it; both must agree. Returns the cached outcome.
  Outcome same_as_uncached(const Source &s, const char *what) {
    const Outcome cached = compile(cache, s);
    const Outcome fresh = compile(nullptr, s);
    EXPECT_EQ(cached.status, fresh.status) << what << ": " << cached.warning;
    EXPECT_TRUE(cached.bytes == fresh.bytes) << what << ": the cache served other bytes";
    // The key is part of the result: without a cache it is still the one a cache stores under.
    if (keys_follow_reads_alike) {
      EXPECT_TRUE(cached.key == fresh.key) << what << ": the key depends on the cache";
    }
    if (fresh.status == PCACHE_ERR_COMPILE) {  // a refusal answers with NVRTC's words, warm or cold
      EXPECT_EQ(cached.log, fresh.log) << what;
    }
    return cached;
  }
};

}  // namespace difftest
