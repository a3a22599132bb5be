// Every input of pcache_make_key changes the key; canonical equivalents do not.
#include <gtest/gtest.h>
#include <progcache/progcache.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "differential.hpp"
#include "proc_util.hpp"

namespace {

struct Prog {
  std::string name = "kernel.cu";
  std::string source = "__global__ void k() {}";
  int32_t code_type = PCACHE_CODE_CXX;
  int32_t target = PCACHE_TARGET_CUBIN;
  uint32_t nvrtc = 13000;
  std::vector<std::string> options;
  std::vector<std::string> header_names, header_sources;
  std::vector<std::string> exprs;
  std::string digest;
  bool has_digest = false;

  pcache_status key(std::string *out) const {
    std::vector<const char *> o, hn, hs, e;
    for (auto &s : options) o.push_back(s.c_str());
    for (auto &s : header_names) hn.push_back(s.c_str());
    for (auto &s : header_sources) hs.push_back(s.c_str());
    for (auto &s : exprs) e.push_back(s.c_str());
    pcache_program p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.name = name.c_str();
    p.source = source.data();
    p.source_size = source.size();
    p.code_type = code_type;
    p.target = target;
    p.nvrtc_version = nvrtc;
    p.options = o.data();
    p.num_options = o.size();
    p.header_names = hn.data();
    p.header_sources = hs.data();
    p.num_headers = hn.size();
    p.name_expressions = e.data();
    p.num_name_expressions = e.size();
    if (has_digest) {
      p.extra_digest = digest.data();
      p.extra_digest_size = digest.size();
    }
    uint8_t k[PCACHE_KEY_SIZE];
    const pcache_status st = pcache_make_key(&p, k);
    if (st == PCACHE_OK) out->assign(reinterpret_cast<char *>(k), sizeof k);
    return st;
  }
  std::string key() const {
    std::string k;
    EXPECT_EQ(key(&k), PCACHE_OK) << pcache_last_error();
    return k;
  }
};

Prog base() {
  Prog p;
  p.options = {"-arch=sm_90", "-std=c++17"};
  p.header_names = {"a.h"};
  p.header_sources = {"#define A 1"};
  p.exprs = {"k"};
  return p;
}

const Prog &base_program() {
  static const Prog p = base();
  return p;
}

}  // namespace

TEST(Key, IsDeterministicAnd32Bytes) {
  EXPECT_EQ(base().key(), base().key());
  EXPECT_EQ(base().key().size(), 32u);
}

TEST(Key, EveryFieldChangesTheKey) {
  const std::string k = base().key();
  std::vector<std::pair<const char *, Prog>> variants;
  auto add = [&](const char *what, auto change) {
    Prog p = base();
    change(p);
    variants.emplace_back(what, p);
  };
  add("name", [](Prog &p) { p.name = "other.cu"; });
  add("source", [](Prog &p) { p.source += " "; });
  add("code_type", [](Prog &p) { p.code_type = PCACHE_CODE_PTX; });
  add("target", [](Prog &p) { p.target = PCACHE_TARGET_PTX; });
  add("target ltoir", [](Prog &p) { p.target = PCACHE_TARGET_LTOIR; });
  add("nvrtc_version", [](Prog &p) { p.nvrtc = 12090; });
  add("option value", [](Prog &p) { p.options[0] = "-arch=sm_80"; });
  add("option added", [](Prog &p) { p.options.push_back("-lineinfo"); });
  add("a macro defined twice", [](Prog &p) {
    p.options.push_back("-DX=1");
    p.options.push_back("-DX=2");
  });
  add("the same macro the other way round", [](Prog &p) {
    p.options.push_back("-DX=2");
    p.options.push_back("-DX=1");
  });
  add("header content", [](Prog &p) { p.header_sources[0] = "#define A 2"; });
  add("header name", [](Prog &p) { p.header_names[0] = "b.h"; });
  add("no header", [](Prog &p) {
    p.header_names.clear();
    p.header_sources.clear();
  });
  add("name expression", [](Prog &p) { p.exprs = {"k2"}; });
  add("extra digest", [](Prog &p) {
    p.has_digest = true;
    p.digest = "abc";
  });
  add("empty extra digest", [](Prog &p) {
    p.has_digest = true;
    p.digest = "";
  });
  std::vector<std::string> keys{k};
  for (auto &[what, p] : variants) {
    const std::string v = p.key();
    for (const std::string &other : keys) EXPECT_NE(v, other) << what;
    keys.push_back(v);
  }
}

TEST(Key, FieldBoundariesCannotBeShifted) {
  Prog a = base(), b = base();
  a.options = {"-a", "b"};
  b.options = {"-ab"};
  EXPECT_NE(a.key(), b.key());
  a = base();
  b = base();
  a.source = "ab";
  a.options = {"c"};
  b.source = "a";
  b.options = {"bc"};
  EXPECT_NE(a.key(), b.key());
  a = base();
  b = base();
  a.header_names = {"ab"};
  a.header_sources = {"c"};
  b.header_names = {"a"};
  b.header_sources = {"bc"};
  EXPECT_NE(a.key(), b.key());
}

TEST(Key, EquivalentOptionSpellingsGiveOneKey) {
  const std::vector<std::vector<std::string>> same_arch = {{"-arch=sm_90"},
                                                           {"--gpu-architecture=sm_90"},
                                                           {"-arch", "sm_90"},
                                                           {"--gpu-architecture", "sm_90"}};
  std::string first;
  for (const auto &opts : same_arch) {
    Prog p = base();
    p.options = opts;
    const std::string k = p.key();
    if (first.empty()) first = k;
    EXPECT_EQ(k, first) << opts[0];
  }
  const std::vector<std::vector<std::string>> same_define = {
      {"-DN=4"}, {"-D", "N=4"}, {"--define-macro=N=4"}, {"--define-macro", "N=4"}};
  first.clear();
  for (const auto &opts : same_define) {
    Prog p = base();
    p.options = opts;
    const std::string k = p.key();
    if (first.empty()) first = k;
    EXPECT_EQ(k, first) << opts[0];
  }
  Prog a = base(), b = base();
  a.options = {"-G", "-lineinfo", "-std=c++17"};
  b.options = {"--device-debug", "--generate-line-info", "--std=c++17"};
  EXPECT_EQ(a.key(), b.key());
}

// NVRTC rejects "-std c++17" and "-opt-info inline" as two strings and may read "-D=N" as a
// macro named "=N": merged with the accepted spellings, a warm cache would answer a call that a
// cold one fails (the outcome would depend on what the cache holds).
TEST(Key, SpellingsNvrtcRejectsNeverShareAKeyWithAcceptedOnes) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> apart = {
      {{"-std", "c++17"}, {"-std=c++17"}},
      {{"--std", "c++17"}, {"--std=c++17"}},
      {{"-opt-info", "inline"}, {"-opt-info=inline"}},
      {{"--optimization-info", "inline"}, {"--optimization-info=inline"}},
      {{"-D=N=4"}, {"-DN=4"}},
      {{"-U=N"}, {"-UN"}}};
  for (const auto &[rejected, accepted] : apart) {
    Prog a = base(), b = base();
    a.options = rejected;
    b.options = accepted;
    EXPECT_NE(a.key(), b.key()) << rejected[0];
  }
}

TEST(Key, SetLikeInputsIgnoreOrder) {
  Prog a = base(), b = base();
  a.exprs = {"f<int>", "g"};
  b.exprs = {"g", "f<int>"};
  EXPECT_EQ(a.key(), b.key());
  a.header_names = {"x.h", "y.h"};
  a.header_sources = {"1", "2"};
  b.header_names = {"y.h", "x.h"};
  b.header_sources = {"2", "1"};
  EXPECT_EQ(a.key(), b.key());
}

// Headers on disk are found and keyed by the include scan (include_scan_test.cpp): -I, -include
// and program names with a directory need no extra_digest. Precompiled headers still do.
// Options NVRTC is shown to read as a set (tests/cuda/option_spellings_test.cpp) give one key in
// any order; repeating one that changes nothing gives the key of saying it once.
TEST(Key, IndependentOptionsInAnyOrderAndHarmlessRepeatsShareAKey) {
  Prog p = base();
  p.options = {"-arch=sm_90", "-std=c++17", "-DA=1", "-DB", "-lineinfo", "-Iinc"};
  const std::string k = p.key();
  for (std::vector<std::string> same : std::vector<std::vector<std::string>>{
           {"-lineinfo", "-DB", "-Iinc", "-std=c++17", "-DA=1", "-arch=sm_90"},
           {"-DA=1", "-arch", "sm_90", "-DB", "-DB", "-std=c++17", "-lineinfo", "-lineinfo",
            "-I=inc/"}}) {
    p.options = same;
    EXPECT_EQ(p.key(), k) << same[0];
  }
  // An include directory named twice is searched twice (#include_next and #pragma once tell).
  p.options = {"-arch=sm_90", "-std=c++17", "-DA=1", "-DB", "-lineinfo", "-Iinc", "-Iinc"};
  EXPECT_NE(p.key(), k);
  // An unknown option may take the next string as its value: no reordering around it.
  p.options = {"-arch=sm_90", "--unknown", "x", "-DA=1"};
  const std::string unknown = p.key();
  p.options = {"-DA=1", "-arch=sm_90", "--unknown", "x"};
  EXPECT_NE(p.key(), unknown);
}

// A precompiled header is NVRTC's own cache of its headers: the output does not depend on it, so
// the options need no extra_digest (compiles observe NVRTC and never key the PCH files).
TEST(Key, PrecompiledHeaderOptionsNeedNoExtraDigest) {
  for (std::vector<std::string> opts :
       std::vector<std::vector<std::string>>{{"--use-pch=x.pch"}, {"--pch-dir=/d"}, {"-pch"}}) {
    Prog p = base();
    p.options = opts;
    std::string k;
    EXPECT_EQ(p.key(&k), PCACHE_OK) << opts[0] << ": " << pcache_last_error();
  }
  for (std::vector<std::string> opts : std::vector<std::vector<std::string>>{
           {"-I/usr/include"}, {"-I", "/x"}, {"--include-path=/x"}, {"--pre-include=/dev/null"}}) {
    Prog p = base();
    p.options = opts;
    std::string k;
    EXPECT_EQ(p.key(&k), PCACHE_OK) << opts[0] << ": " << pcache_last_error();
  }
  Prog p = base();
  p.name = "dir/kernel.cu";
  std::string k;
  EXPECT_EQ(p.key(&k), PCACHE_OK) << pcache_last_error();
}

TEST(Key, SideEffectOptionsAreAlwaysRefused) {
  for (const char *opt :
       {"--create-pch=x.pch", "--time=t.csv", "-time=t.csv", "--fdevice-time-trace=t.json"}) {
    Prog p = base();
    p.options = {opt};
    p.has_digest = true;
    std::string k;
    EXPECT_EQ(p.key(&k), PCACHE_ERR_INVALID_ARG) << opt;
  }
}

// The include scan's manifests (a program's scan, answered again while every path it probed
// looks the same) are filed by the program alone: not by working directory, since a relative
// header is probed again from wherever the process is; and, where the program's name, options
// and headers take more than 1 KiB, by a digest of them. Headers are made more than 2 s old
// first: a file changed within 2 s is never vouched for by its stat, and no manifest is kept.
TEST(Key, IncludeManifestsAreFiledByProgramNotByDirectory) {
  testutil::TempDir d;
  for (const char *sub : {"a", "b", "c", "la", "lb"})
    ASSERT_EQ(::mkdir((d / sub).c_str(), 0700), 0);
  difftest::write_aged(d / "a/h.h", "#define VAL 1\n");
  difftest::write_aged(d / "b/h.h", "#define VAL 2\n");
  difftest::write_aged(d / "c/h.h", "#define VAL 1\n");  // a's text in another file: a's key
  difftest::write_aged(d / "la/h.h", "#define VAL 1\n");
  difftest::write_aged(d / "lb/h.h", "#define VAL 1\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));

  // Keys made in turn in three directories, each with its own relative h.h.
  Prog p = base();
  p.source = "#include \"h.h\"\n__global__ void k(int *x) { *x = VAL; }\n";
  auto key_in = [&](const char *sub) {
    difftest::InDir in(d / sub);
    return p.key();
  };
  const std::string a = key_in("a"), b = key_in("b");
  EXPECT_NE(a, b);
  EXPECT_EQ(key_in("a"), a);
  EXPECT_EQ(key_in("c"), a);
  ASSERT_EQ(::unlink((d / "b/h.h").c_str()), 0);
  const std::string gone = key_in("b");
  EXPECT_NE(gone, a);
  EXPECT_NE(gone, b);

  // Two long programs that differ only in their -I directory: one's manifest never answers for
  // the other (its headers would key it).
  auto long_program = [&](const char *dir) {
    Prog q = base();
    q.source = "#include <h.h>\n__global__ void k(int *x) { *x = VAL; }\n";
    for (int i = 0; i < 100; ++i) q.options.push_back("-DMACRO_NUMBER_" + std::to_string(i));
    q.options.push_back("-I" + d / dir);
    return q;
  };
  const Prog la = long_program("la"), lb = long_program("lb");
  const std::string la_key = la.key(), lb_key = lb.key();
  EXPECT_NE(la_key, lb_key);
  EXPECT_EQ(lb.key(), lb_key);
  difftest::write_aged(d / "lb/h.h", "#define VAL 2\n", 50);
  EXPECT_EQ(la.key(), la_key);
  EXPECT_NE(lb.key(), lb_key) << "lb was keyed by la's headers";
}

// pcache_make_key keeps, per thread, its last description, the digests of recent programs' fields
// and the last scan: a key must never depend on what the thread keyed before.
TEST(Key, AKeyDoesNotDependOnWhatTheThreadKeyedBefore) {
  std::vector<Prog> programs;
  auto add = [&](auto change) {
    Prog p = base();
    change(p);
    programs.push_back(p);
  };
  add([](Prog &) {});
  add([](Prog &p) { p.name = "other.cu"; });
  add([](Prog &p) { p.source = std::string(1024, 'x'); });
  add([](Prog &p) { p.options = {"-arch=sm_80"}; });
  add([](Prog &p) { p.target = PCACHE_TARGET_PTX; });
  add([](Prog &p) {
    p.has_digest = true;
    p.digest = "d";
  });
  add([](Prog &p) {  // no headers and no name expression after calls with them
    p.header_names.clear();
    p.header_sources.clear();
    p.exprs.clear();
  });
  add([](Prog &p) { p.header_sources = {std::string(20000, 'h')}; });  // fields beyond the kept
  add([](Prog &p) { p.code_type = PCACHE_CODE_PTX; });
  add([](Prog &p) { p.options = {"-DA", "-DB", "-DC", "-DD", "-DE"}; });

  // Each key made first by a thread of its own, with nothing kept.
  std::vector<std::string> alone;
  for (const Prog &p : programs) std::thread([&] { alone.push_back(p.key()); }).join();
  for (size_t i = 0; i < alone.size(); ++i)
    for (size_t j = 0; j < i; ++j) EXPECT_NE(alone[i], alone[j]) << i << " and " << j;

  // Then in one thread, in orders that cycle every kept slot, with failed calls between.
  Prog broken = base();
  broken.options = {"-arch"};  // a value missing
  std::string ignored;
  for (int round = 0; round < 3; ++round) {
    for (size_t n = 0; n < programs.size(); ++n) {
      const size_t i = (n * 7 + size_t(round)) % programs.size();
      EXPECT_EQ(programs[i].key(), alone[i]) << "program " << i << ", round " << round;
      if (n % 3 == 0) {
        EXPECT_EQ(broken.key(&ignored), PCACHE_ERR_INVALID_ARG);
      }
    }
  }
}

// pcache_make_key keeps the last program's fields per thread and compares what the caller passes
// with them. A caller that reuses its struct and strings, changing them in place (the same
// pointers, other bytes), must get each program's own key: the one a fresh thread makes.
TEST(Key, AProgramChangedInPlaceIsKeyedAsAFreshThreadKeysIt) {
  char name[] = "kernel.cu", option[] = "-arch=sm_90", expr[] = "k<float>";
  std::string source = "__global__ void k() {}\n";
  const std::string big_option = "-DBIG=" + std::string(20000, 'x');
  const char *options[] = {option, "-DN=4"};
  const char *exprs[] = {expr};
  const char header_name[] = "h.h", header_source[] = "#define H 1\n";
  const char *header_names[] = {header_name}, *header_sources[] = {header_source};
  pcache_program p;
  pcache_program_init(&p, sizeof p);
  p.name = name;
  p.options = options;
  p.num_options = 1;
  p.name_expressions = exprs;
  p.num_name_expressions = 1;
  p.nvrtc_version = 13000;
  auto key = [&] {
    p.source = source.c_str();
    uint8_t k[PCACHE_KEY_SIZE];
    EXPECT_EQ(pcache_make_key(&p, k), PCACHE_OK) << pcache_last_error();
    return std::string(reinterpret_cast<char *>(k), sizeof k);
  };
  auto fresh_key = [&] {
    std::string k;
    std::thread([&] { k = key(); }).join();
    return k;
  };
  const std::string original_key = fresh_key();
  EXPECT_EQ(key(), original_key);
  struct Change {
    const char *what;
    std::function<void()> apply, undo;
  };
  const Change changes[] = {
      {"an option's bytes", [&] { option[9] = '8'; }, [&] { option[9] = '9'; }},  // sm_80
      {"the name's bytes", [&] { name[0] = 'K'; }, [&] { name[0] = 'k'; }},
      {"no name", [&] { p.name = nullptr; }, [&] { p.name = name; }},
      {"the NVRTC version", [&] { p.nvrtc_version = 12080; }, [&] { p.nvrtc_version = 13000; }},
      {"the target", [&] { p.target = PCACHE_TARGET_PTX; },
       [&] { p.target = PCACHE_TARGET_CUBIN; }},
      {"the code type", [&] { p.code_type = PCACHE_CODE_PTX; },
       [&] { p.code_type = PCACHE_CODE_CXX; }},
      {"one more option", [&] { p.num_options = 2; }, [&] { p.num_options = 1; }},
      {"a name expression's bytes", [&] { expr[2] = 'i'; }, [&] { expr[2] = 'f'; }},
      {"no name expression", [&] { p.num_name_expressions = 0; },
       [&] { p.num_name_expressions = 1; }},
      {"an empty extra digest", [&] { p.extra_digest = ""; }, [&] { p.extra_digest = nullptr; }},
      {"an in-memory header",
       [&] {
         p.header_names = header_names;
         p.header_sources = header_sources;
         p.num_headers = 1;
       },
       [&] { p.num_headers = 0; }},
      {"the source", [&] { source += "// more\n"; }, [&] { source.resize(source.size() - 8); }},
      {"a 20 KB option (more than the thread keeps)",
       [&] {
         options[1] = big_option.c_str();
         p.num_options = 2;
       },
       [&] {
         options[1] = "-DN=4";
         p.num_options = 1;
       }},
  };
  std::vector<std::string> seen = {original_key};
  for (const Change &c : changes) {
    SCOPED_TRACE(c.what);
    c.apply();
    const std::string expected = fresh_key();
    EXPECT_EQ(key(), expected);
    EXPECT_EQ(key(), expected);  // and again, now from what the thread kept
    for (const std::string &k : seen) EXPECT_NE(expected, k);
    seen.push_back(expected);
    c.undo();
    EXPECT_EQ(key(), original_key);
  }
  // A caller of version 0.4's struct size (no header_sizes) is keyed like a current one.
  p.struct_size = offsetof(pcache_program, header_sizes);
  EXPECT_EQ(key(), original_key);
  EXPECT_EQ(key(), original_key);
}

// A thread_local made before the library's own is destroyed after them: a key made by its
// destructor comes when the thread's kept description, fields, digest contexts and scan are gone.
TEST(Key, AKeyFromALaterThreadLocalDestructorIsRight) {
  const Prog with_scan = [] {
    Prog p = base();
    p.source = "#include <absent_header.h>\n" + p.source;  // a scan with a probe
    return p;
  }();
  const std::string expected = base().key(), expected_scan = with_scan.key();
  struct Holder {
    const Prog *plain, *scanned;
    std::string *out;
    ~Holder() {
      if (!plain) return;
      *out = plain->key() + scanned->key() + plain->key();
      Prog broken = *plain;
      broken.options = {"-arch"};  // a value missing: the error is kept for pcache_last_error
      std::string ignored;
      if (broken.key(&ignored) == PCACHE_ERR_INVALID_ARG) *out += pcache_last_error();
    }
  };
  std::string at_exit;
  std::thread([&] {
    thread_local Holder holder{nullptr, nullptr, nullptr};  // constructed before the library's
    holder = {&base_program(), &with_scan, &at_exit};
    EXPECT_EQ(with_scan.key(), expected_scan);  // the library's thread-locals made now
  }).join();
  EXPECT_EQ(at_exit.substr(0, 3 * 32), expected + expected_scan + expected);
  EXPECT_NE(at_exit.find("needs a value"), std::string::npos) << at_exit.substr(3 * 32);
}

TEST(Key, BadInputsAreInvalid) {
  uint8_t k[PCACHE_KEY_SIZE];
  EXPECT_EQ(pcache_make_key(nullptr, k), PCACHE_ERR_INVALID_ARG);
  pcache_program p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  EXPECT_EQ(pcache_make_key(&p, k), PCACHE_ERR_INVALID_ARG);  // NULL source
  p.source = "x";
  EXPECT_EQ(pcache_make_key(&p, nullptr), PCACHE_ERR_INVALID_ARG);
  p.code_type = 7;
  EXPECT_EQ(pcache_make_key(&p, k), PCACHE_ERR_INVALID_ARG);
  p.code_type = 0;
  // The drop-in NVRTC's internal target (every output of a compile) is not the C API's.
  for (int32_t target : {-1, 3, 4}) {
    p.target = target;
    EXPECT_EQ(pcache_make_key(&p, k), PCACHE_ERR_INVALID_ARG) << target;
  }
  p.target = PCACHE_TARGET_CUBIN;
  p.struct_size = 8;
  EXPECT_EQ(pcache_make_key(&p, k), PCACHE_ERR_INVALID_ARG);
  p.struct_size = sizeof p;
  p.num_options = 2;
  EXPECT_EQ(pcache_make_key(&p, k), PCACHE_ERR_INVALID_ARG);
  p.num_options = 0;
  Prog q = base();
  q.options = {"-arch"};
  std::string s;
  EXPECT_EQ(q.key(&s), PCACHE_ERR_INVALID_ARG);  // option missing its value
  EXPECT_EQ(pcache_make_key(&p, k), PCACHE_OK);
}

TEST(Key, FipsFallbackUsesADistinctSchema) {
  // The hash is chosen once per process, so the SHA-256 (FIPS) path runs in a re-executed child
  // that writes its key to a file; the two keys of one program must differ.
  const std::string blake = base().key();
  const std::string out = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                          "/pcache-sha-key-" + std::to_string(getpid());
  ASSERT_EQ(testutil::run_test_in_fresh_process(
                "Key.DISABLED_Sha256Child",
                {{"PCACHE_TEST_FORCE_SHA256", "1"}, {"PCACHE_TEST_KEY_OUT", out}}),
            0);
  std::FILE *f = std::fopen(out.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  char buf[64];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  std::remove(out.c_str());
  ASSERT_EQ(n, 32u);
  EXPECT_NE(std::string(buf, n), blake);
}

TEST(Key, DISABLED_Sha256Child) {  // run only by FipsFallbackUsesADistinctSchema
  const char *out = std::getenv("PCACHE_TEST_KEY_OUT");
  if (!out) GTEST_SKIP() << "helper of FipsFallbackUsesADistinctSchema";
  const std::string k = base().key();
  std::FILE *f = std::fopen(out, "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(k.data(), 1, k.size(), f);
  std::fclose(f);
}

TEST(Key, SystemLibrariesThatCannotLoadAreUnsupportedAndSpareTheRest) {
  // libcrypto and SQLite are opened on first use; a machine without them must still run what
  // needs neither, and the calls that need them must say which library is missing. Without
  // libxxhash, whose vector code hashes large entries, every entry is hashed by the built-in code.
  char dir[] = "/tmp/pcache-refused-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  EXPECT_EQ(testutil::run_test_in_fresh_process(
                "Key.DISABLED_RefusedLibrariesChild",
                {{"PCACHE_TEST_REFUSE_LIBRARY", "libcrypto,libsqlite3,libxxhash"},
                 {"PCACHE_TEST_CACHE_DIR", dir}}),
            0);
  EXPECT_EQ(std::system((std::string("rm -rf '") + dir + "'").c_str()), 0);
}

TEST(Key, DISABLED_RefusedLibrariesChild) {  // run only by the test above
  const char *dir = std::getenv("PCACHE_TEST_CACHE_DIR");
  if (!dir) GTEST_SKIP() << "helper of SystemLibrariesThatCannotLoadAreUnsupportedAndSpareTheRest";
  std::string k;
  EXPECT_EQ(base().key(&k), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pcache_last_error()).find("libcrypto"), std::string::npos)
      << pcache_last_error();
  EXPECT_EQ(base().key(&k), PCACHE_ERR_UNSUPPORTED);  // and again: no half-made state
  pcache *c = nullptr;
  EXPECT_EQ(pcache_open((std::string("sqlite:") + dir + "/c.db").c_str(), nullptr, &c),
            PCACHE_ERR_UNSUPPORTED);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(pcache_last_error()).find("libsqlite3"), std::string::npos)
      << pcache_last_error();
  for (const std::string &uri :
       {std::string("memory:"), std::string("filestream:") + dir + "/fs"}) {
    SCOPED_TRACE(uri);
    ASSERT_EQ(pcache_open(uri.c_str(), nullptr, &c), PCACHE_OK) << pcache_last_error();
    for (size_t n : {size_t(5000), size_t(100000)}) {  // the second one libxxhash's, if it loaded
      const std::string value(n, 'v');
      ASSERT_EQ(pcache_put(c, "key", 3, value.data(), value.size()), PCACHE_OK)
          << pcache_last_error();
      void *data = nullptr;
      size_t size = 0;
      ASSERT_EQ(pcache_get(c, "key", 3, &data, &size), PCACHE_OK) << pcache_last_error();
      EXPECT_EQ(std::string(static_cast<char *>(data), size), value);
      pcache_free(data);
    }
    EXPECT_EQ(pcache_close(c), PCACHE_OK);
  }
}

TEST(Key, AForkDuringTheFirstLibraryLoadLeavesAWorkingChild) {
  // A thread makes the process's first key while libcrypto's load is slowed down (a test-build
  // hook); the main thread forks meanwhile. The load ran under a function-local static's guard
  // and a call_once, which a child inherits as "under way" with no thread to finish them: its own
  // first key waited forever. Now fork() waits for the load, and the child keys at once.
  EXPECT_EQ(testutil::run_test_in_fresh_process("Key.DISABLED_ForkDuringTheFirstLoadChild",
                                                {{"PCACHE_TEST_SLOW_LIBRARY_LOAD_MS", "300"}}),
            0);
}

TEST(Key, DISABLED_ForkDuringTheFirstLoadChild) {  // run only by the test above
  if (!std::getenv("PCACHE_TEST_SLOW_LIBRARY_LOAD_MS"))
    GTEST_SKIP() << "helper of AForkDuringTheFirstLibraryLoadLeavesAWorkingChild";
  std::thread loader([] {
    std::string k;
    EXPECT_EQ(base().key(&k), PCACHE_OK) << pcache_last_error();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loader is in the load
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string k;
    _exit(base().key(&k) == PCACHE_OK ? 0 : 1);
  }
  loader.join();
  const int rc = testutil::wait_for_or_kill(pid, std::chrono::seconds(20));
  ASSERT_NE(rc, -1) << "the child forked during the first load hung (killed after 20 s)";
  EXPECT_EQ(rc, 0);
}

namespace {

// The status and key (or error) of p's key, made in a child of this process: the child inherits
// none of the keys the parent makes after the fork, and its memos end with it.
std::string key_in_child(const Prog &p, bool one_cpu) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = testutil::spawn([&] {
    ::close(fds[0]);
    if (one_cpu) {  // the first CPU of its mask only: the scan is not started beside the hash
      cpu_set_t set;
      if (::sched_getaffinity(0, sizeof set, &set) != 0) return 2;
      int first = 0;
      while (!CPU_ISSET(first, &set)) ++first;
      CPU_ZERO(&set);
      CPU_SET(first, &set);
      if (::sched_setaffinity(0, sizeof set, &set) != 0) return 2;
    }
    std::string k;
    const pcache_status st = p.key(&k);
    const std::string said = std::to_string(st) + ":" + (st == PCACHE_OK ? k : pcache_last_error());
    return ::write(fds[1], said.data(), said.size()) == ssize_t(said.size()) ? 0 : 3;
  });
  ::close(fds[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, size_t(n));
  ::close(fds[0]);
  EXPECT_EQ(testutil::wait_for(pid), 0);
  return said;
}

}  // namespace

// A large new source is scanned on a thread of its own while its digest is computed, where the
// process may run on two CPUs (core/file_facts.hpp, scan_beside_pays), and so is a header as
// large read from disk: its key, or the reason it has none, must be the one the scan on the
// caller's thread gives (a process pinned to one CPU).
TEST(Key, ALargeSourceScannedBesideItsHashIsKeyedAsOnOneCpu) {
  cpu_set_t set;
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  if (CPU_COUNT(&set) < 2) GTEST_SKIP() << "one CPU: no scan runs beside a hash here";
  testutil::TempDir d;
  ASSERT_EQ(::mkdir((d / "inc").c_str(), 0700), 0);
  difftest::write_aged(d / "inc/disk.h", "#define DISK 2\n#include \"next.h\"\n");
  difftest::write_aged(d / "inc/next.h", "#define NEXT 3\n");
  auto body_of = [](const std::string &tag) {  // real-looking C++: comments, literals, directives
    std::string body;
    for (int i = 0; body.size() < 400 * 1024; ++i)
      body += "/* " + tag + std::to_string(i) + " */ static const char s" + std::to_string(i) +
              "[] = \"#include <not_a_header.h>\"; // " + std::to_string(i * 7) +
              "\n#if defined(X" + std::to_string(i) + ")\n#define Y" + std::to_string(i) +
              " 1\n#endif\n";
    return body;
  };
  const std::string body = body_of("block ");
  // A header as large, read from disk: its scan runs beside its digest too (facts_of_text).
  difftest::write_aged(d / "inc/big.h", body_of("header ") + "#include \"only_big.h\"\n");
  struct Case {
    const char *what, *head, *tail;
  };
  const Case cases[] = {
      {"headers in memory and on disk", "#include <a.h>\n#include \"disk.h\"\n#include <big.h>\n",
       "#include <absent_header.h>\n__global__ void k() {}\n"},
      {"__TIME__ at its end", "#include <a.h>\n", "const char *t = __TIME__;\n"},
      {"a computed include", "#include \"disk.h\"\n", "#define H <a.h>\n#include H\n"},
      {"no directive at all", "", "__global__ void k() {}\n"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    Prog p = base();
    p.options.push_back("-I" + d / "inc");
    p.source = c.head + body + c.tail;
    ASSERT_GE(p.source.size(), 256u * 1024);
    const std::string beside = key_in_child(p, false), alone = key_in_child(p, true);
    EXPECT_EQ(beside, alone);
    EXPECT_GT(beside.size(), 2u);
    // And in this process, where the scan runs beside; then again, from what it kept.
    std::string k;
    const pcache_status st = p.key(&k);
    EXPECT_EQ(std::to_string(st) + ":" + (st == PCACHE_OK ? k : pcache_last_error()), alone);
    EXPECT_EQ(std::to_string(p.key(&k)) + ":" + (st == PCACHE_OK ? k : pcache_last_error()), alone);
  }
}
