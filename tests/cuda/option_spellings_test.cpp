// Asks NVRTC which option spellings mean the same: every spelling of every option the key
// canonicalises is compiled (no cache) and grouped by its canonical form. Within a group, every
// member must get the same status and the same bytes; in particular a spelling NVRTC rejects is
// never merged with one it accepts (else a warm cache would answer a call a cold one fails).
// Run against the toolkit's NVRTC and, when $PCACHE_TEST_NVRTC12 names one, NVRTC 12.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/key.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

struct Spelled {
  std::vector<std::string> options;
  pcache_status status;
  std::string bytes;
};

Spelled compile_with(const std::vector<std::string> &extra) {
  static const char kSource[] =
      "#ifndef FOO\n#define FOO 1\n#endif\n"
      "__global__ void k(float *x) { x[0] = sqrtf(x[1]) / x[2] + FOO; }\n";
  std::vector<std::string> all{"-arch=sm_90"};
  all.insert(all.end(), extra.begin(), extra.end());
  std::vector<const char *> opts;
  for (const std::string &o : all) opts.push_back(o.c_str());
  pcache_program p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.name = "spell.cu";
  p.source = kSource;
  p.options = opts.data();
  p.num_options = opts.size();
  pcache_compiled *r = nullptr;
  Spelled s{all, pcache_compile(nullptr, &p, &r), {}};
  size_t n = 0;
  if (const void *d = pcache_compiled_data(r, &n)) s.bytes.assign(static_cast<const char *>(d), n);
  pcache_compiled_free(r);
  return s;
}

// Every spelling of (long name, short name, sample value): --long=v, --long v, -short=v,
// -short v, and -shortv where the value may attach; flags have two spellings.
std::vector<std::vector<std::string>> spellings(const char *lng, const char *shrt,
                                                const char *value, bool attaches) {
  if (!value) return {{lng}, {shrt}};
  std::vector<std::vector<std::string>> out;
  for (const char *name : {lng, shrt}) {
    out.push_back({std::string(name) + "=" + value});
    out.push_back({name, value});
  }
  if (attaches) out.push_back({std::string(shrt) + value});
  return out;
}

void check_groups_against_nvrtc() {
  struct Opt {
    const char *lng, *shrt, *value;
    bool attaches;
  };
  const Opt opts[] = {
      {"--gpu-architecture", "-arch", "sm_80", false},
      {"--relocatable-device-code", "-rdc", "true", false},
      {"--dopt", "-dopt", "on", false},
      {"--ptxas-options", "-Xptxas", "-O2", false},
      {"--maxrregcount", "-maxrregcount", "32", false},
      {"--ftz", "-ftz", "true", false},
      {"--prec-sqrt", "-prec-sqrt", "false", false},
      {"--prec-div", "-prec-div", "false", false},
      {"--fmad", "-fmad", "false", false},
      {"--std", "-std", "c++17", false},
      {"--define-macro", "-D", "FOO=2", true},
      {"--undefine-macro", "-U", "FOO", true},
      {"--include-path", "-I", ".", true},
      {"--optimization-info", "-opt-info", "inline", false},
      {"--diag-suppress", "-diag-suppress", "177", false},
      {"--diag-warn", "-diag-warn", "177", false},
      {"--brief-diagnostics", "-brief-diag", "true", false},
      {"--split-compile", "-split-compile", "0", false},
      {"--modify-stack-limit", "-modify-stack-limit", "false", false},
      {"--jump-table-density", "-jtd", "50", false},
      {"--device-stack-protector", "-device-stack-protector", "false", false},
      {"--builtin-move-forward", "-builtin-move-forward", "true", false},
      {"--builtin-initializer-list", "-builtin-initializer-list", "true", false},
      {"--device-debug", "-G", nullptr, false},
      {"--generate-line-info", "-lineinfo", nullptr, false},
      {"--use_fast_math", "-use_fast_math", nullptr, false},
      {"--extra-device-vectorization", "-extra-device-vectorization", nullptr, false},
      {"--disable-warnings", "-w", nullptr, false},
      {"--restrict", "-restrict", nullptr, false},
      {"--device-int128", "-device-int128", nullptr, false},
      {"--display-error-number", "-err-no", nullptr, false},
      {"--no-display-error-number", "-no-err-no", nullptr, false},
      {"--minimal", "-minimal", nullptr, false},
      {"--no-source-include", "-no-source-include", nullptr, false},
      {"--device-c", "-dc", nullptr, false},
  };
  size_t groups = 0, compiles = 0;
  for (const Opt &o : opts) {
    std::map<std::vector<std::string>, std::vector<Spelled>> by_canonical;
    for (const auto &spelling : spellings(o.lng, o.shrt, o.value, o.attaches)) {
      const std::vector<std::string_view> views(spelling.begin(), spelling.end());
      by_canonical[progcache::canonical_options(views)].push_back(compile_with(spelling));
      ++compiles;
    }
    for (const auto &[canon, members] : by_canonical) {
      ++groups;
      for (const Spelled &m : members) {
        EXPECT_EQ(m.status, members[0].status)
            << m.options.back() << " and " << members[0].options.back() << " share key " << canon[0]
            << " but NVRTC answers them differently";
        EXPECT_TRUE(m.bytes == members[0].bytes)
            << m.options.back() << " and " << members[0].options.back() << " share key " << canon[0]
            << " but compile to different bytes";
      }
    }
  }
  std::printf("%zu spellings in %zu canonical groups agree\n", compiles, groups);
}

// Repetitions and orders the key merges (core/key.cpp: normalized_order): every option list
// below is compiled without a cache in a directory with a header on an -I path and a
// pre-include, and the lists that share a canonical form must get the same status, log and bytes.
void check_orders_against_nvrtc() {
  TempDir d;
  write_file(d / "inc/h.h", "#define H 5\n");
  write_file(d / "pre.h", "#ifndef FOO\n#define FOO 3\n#endif\n#define PRE FOO\n");
  const std::string inc = d / "inc";
  const std::vector<std::vector<std::string>> lists = {
      {"-lineinfo"},
      {"-lineinfo", "-lineinfo"},
      {"-G"},
      {"-G", "-G"},
      {"-use_fast_math"},
      {"-use_fast_math", "-use_fast_math"},
      {"-DA=1"},
      {"-DA=1", "-DA=1"},
      {"-DA=1", "-DB=2"},
      {"-DB=2", "-DA=1"},
      {"-DA=1", "-UB"},
      {"-UB", "-DA=1"},
      {"-arch=sm_80", "-lineinfo"},
      {"-lineinfo", "-arch=sm_80"},
      {"-std=c++17", "-DA"},
      {"-DA", "-std=c++17"},
      {"-std=c++17"},
      {"-std=c++17", "--std=c++17"},
      {"-I" + inc},
      {"-I=" + inc},
      {"-I" + inc + "/"},
      {"-I", inc},
      {"--include-path=" + inc + "//"},
      {"-include", d / "pre.h"},
      {"-include=" + d / "pre.h"},
      {"--pre-include", d / "pre.h"},
      {"-DFOO=9", "-include", d / "pre.h"},
      {"-include", d / "pre.h", "-DFOO=9"},
      {"-Xptxas", "-O3", "-lineinfo"},
      {"-lineinfo", "-Xptxas", "-O3"},
      {"-maxrregcount=32", "-std=c++17", "-DA"},
      {"-DA", "-maxrregcount=32", "-std=c++17"},
  };
  const std::string source =
      "#if __has_include(<h.h>)\n#include <h.h>\n#else\n#define H 0\n#endif\n"
      "#ifndef PRE\n#define PRE 0\n#endif\n#ifndef A\n#define A 0\n#endif\n"
      "__global__ void k(float *x) { x[0] = sqrtf(x[1]) / x[2] + H + PRE + A; }\n";
  struct Seen {
    std::vector<std::string> options;
    pcache_status status;
    std::string bytes, log;
  };
  std::map<std::vector<std::string>, std::vector<Seen>> by_canonical;
  for (const std::vector<std::string> &extra : lists) {
    std::vector<std::string> all = extra;
    if (std::none_of(all.begin(), all.end(),
                     [](const std::string &o) { return o.find("arch") != std::string::npos; }))
      all.insert(all.begin(), "-arch=sm_90");
    std::vector<const char *> opts;
    for (const std::string &o : all) opts.push_back(o.c_str());
    pcache_program p = make_program("order.cu", source, opts.data(), opts.size());
    pcache_compiled *r = nullptr;
    Seen seen{all, pcache_compile(nullptr, &p, &r), {}, {}};
    size_t n = 0;
    if (const void *data = pcache_compiled_data(r, &n))
      seen.bytes.assign(static_cast<const char *>(data), n);
    if (r) seen.log = pcache_compiled_log(r);
    pcache_compiled_free(r);
    const std::vector<std::string_view> views(all.begin(), all.end());
    by_canonical[progcache::canonical_options(views)].push_back(std::move(seen));
  }
  size_t merged = 0;
  for (const auto &[canon, members] : by_canonical) {
    merged += members.size() - 1;
    for (const Seen &m : members) {
      const std::string both = m.options.back() + " and " + members[0].options.back();
      EXPECT_EQ(m.status, members[0].status) << both << " share a key, NVRTC answers differently";
      EXPECT_TRUE(m.bytes == members[0].bytes) << both << " share a key, compile differently";
      EXPECT_EQ(m.log, members[0].log) << both << " share a key, log differently";
    }
  }
  EXPECT_GE(merged, 15u) << "the lists above are meant to merge";
  std::printf("%zu option lists in %zu canonical groups agree\n", lists.size(),
              by_canonical.size());
}

TEST(OptionSpellings, MergedSpellingsCompileAlikeWithTheToolkitsNvrtc) {
  check_groups_against_nvrtc();
  check_orders_against_nvrtc();
}

TEST(OptionSpellings, MergedSpellingsCompileAlikeWithNvrtc12) {
  const char *nvrtc12 = std::getenv("PCACHE_TEST_NVRTC12");
  if (!nvrtc12 || !*nvrtc12)
    GTEST_SKIP() << "PCACHE_TEST_NVRTC12 is not set (scripts/test sets it)";
  ScopedEnv use("PCACHE_NVRTC_LIBRARY", nvrtc12);
  check_groups_against_nvrtc();
  check_orders_against_nvrtc();
}

}  // namespace
