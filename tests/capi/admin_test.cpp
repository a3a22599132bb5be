// The administration API (progcache_admin.h) through libprogcache.so, as the CLI uses it.
#define PCACHE_ADMIN_UNSTABLE 1
#include <gtest/gtest.h>
#include <progcache/progcache_admin.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"

using testutil::Handle;

namespace {

class Admin : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testutil::make_scratch_dir("admin"); }
  void TearDown() override { testutil::remove_tree(dir_); }
  std::string dir_;
};

std::vector<std::string> listed_keys(pcache *cache) {
  std::vector<std::string> keys;
  EXPECT_EQ(pcache_admin_list(
                cache,
                [](const pcache_entry_info *e, void *context) {
                  static_cast<std::vector<std::string> *>(context)->emplace_back(
                      static_cast<const char *>(e->key), e->key_size);
                  return 0;
                },
                &keys),
            PCACHE_OK);
  return keys;
}

pcache_shared_stats shared(pcache *cache) {
  pcache_shared_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_shared_stats(cache, &s), PCACHE_OK) << pcache_last_error();
  return s;
}

pcache_status peek(pcache *cache, const std::string &key, std::string *payload = nullptr) {
  pcache_entry *e = nullptr;
  const pcache_status s = pcache_admin_peek(cache, key.data(), key.size(), &e);
  if (payload && e) {
    size_t n = 0;
    const void *p = pcache_entry_payload(e, &n);
    payload->assign(static_cast<const char *>(p), n);
  }
  pcache_entry_free(e);
  return s;
}

}  // namespace

// A peek is no use: the least recently used entry stays the one evicted next, and no hit or miss
// is counted anywhere (the handle's statistics nor the shared ones).
TEST_F(Admin, PeekCountsNothingAndKeepsTheLruOrder) {
  for (const std::string &u :
       {"sqlite:" + dir_ + "/a.db", "filestream:" + dir_ + "/fs?touch_interval_ms=0"}) {
    Handle h(u, 3000);
    const std::string v(1000, 'x');
    for (const char *k : {"a", "b", "c"}) ASSERT_EQ(h.put(k, v), PCACHE_OK);
    for (int round = 0; round < 3; ++round)
      for (const char *k : {"a", "b", "c"}) {
        std::string got;
        ASSERT_EQ(peek(h, k, &got), PCACHE_OK) << u;
        EXPECT_EQ(got, v);
      }
    EXPECT_EQ(peek(h, "absent"), PCACHE_NOT_FOUND);
    const pcache_stats st = h.stats();
    EXPECT_EQ(st.hits, 0u) << u;
    EXPECT_EQ(st.misses, 0u) << u;
    EXPECT_EQ(shared(h).hits, 0) << u;
    EXPECT_EQ(shared(h).misses, 0) << u;
    ASSERT_EQ(h.put("d", v), PCACHE_OK);
    EXPECT_EQ(peek(h, "a"), PCACHE_NOT_FOUND) << u << ": the oldest entry was kept";
    EXPECT_EQ(peek(h, "b"), PCACHE_OK) << u;
  }
}

// A damaged record is reported as such (not as a plain miss), removed, and counted as corrupt.
TEST_F(Admin, PeekReportsDamageAndRemovesIt) {
  const std::string fs = dir_ + "/fs";
  Handle h("filestream:" + fs);
  ASSERT_EQ(h.put("k", std::string(4096, 'v')), PCACHE_OK);
  std::vector<std::string> files;  // entries live in two-hex-digit shard directories
  for (const std::string &f : testutil::list_files(fs))
    if (f.size() > fs.size() + 4 && f[fs.size() + 3] == '/') files.push_back(f);
  ASSERT_EQ(files.size(), 1u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\xee');
  }
  EXPECT_EQ(peek(h, "k"), PCACHE_ERR_CORRUPT);
  EXPECT_NE(std::strstr(pcache_last_error(), "damaged"), nullptr) << pcache_last_error();
  EXPECT_EQ(h.stats().corrupt, 1u);
  EXPECT_EQ(h.stats().misses, 0u);
  EXPECT_EQ(peek(h, "k"), PCACHE_NOT_FOUND);
  EXPECT_EQ(h.count(), 0u);
}

// The walk reports every entry once, may delete what it is shown, and stops when asked.
TEST_F(Admin, ListReportsEveryEntryAndStopsWhenAsked) {
  Handle h("sqlite:" + dir_ + "/l.db");
  for (int i = 0; i < 20; ++i) ASSERT_EQ(h.put("key" + std::to_string(i), "v"), PCACHE_OK);
  std::vector<std::string> keys = listed_keys(h);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys.size(), 20u);
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
  struct Walk {
    pcache *cache;
    int seen = 0;
  } walk{h};
  ASSERT_EQ(pcache_admin_list(
                h,
                [](const pcache_entry_info *e, void *context) {
                  auto *w = static_cast<Walk *>(context);
                  EXPECT_EQ(pcache_delete(w->cache, e->key, e->key_size), PCACHE_OK);
                  return ++w->seen == 5 ? 1 : 0;
                },
                &walk),
            PCACHE_OK);
  EXPECT_EQ(walk.seen, 5);
  EXPECT_EQ(h.count(), 15u);
  EXPECT_EQ(pcache_admin_list(h, nullptr, nullptr), PCACHE_ERR_INVALID_ARG);
}

// A tier handle acts on its tier alone, belongs to its cache, and dies with it.
TEST_F(Admin, TierHandlesActOnOneTierAndCloseWithTheirCache) {
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open(("tiered:memory:|sqlite:" + dir_ + "/t.db").c_str(), nullptr, &c),
            PCACHE_OK);
  pcache_admin_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(pcache_admin_info_get(c, &info), PCACHE_OK);
  EXPECT_STREQ(info.scheme, "tiered");
  EXPECT_EQ(info.tier_count, 2u);
  pcache *t0 = nullptr, *t1 = nullptr, *again = nullptr, *none = nullptr;
  ASSERT_EQ(pcache_admin_tier(c, 0, &t0), PCACHE_OK);
  ASSERT_EQ(pcache_admin_tier(c, 1, &t1), PCACHE_OK);
  ASSERT_EQ(pcache_admin_tier(c, 1, &again), PCACHE_OK);
  EXPECT_EQ(t1, again);
  EXPECT_EQ(pcache_admin_tier(c, 2, &none), PCACHE_NOT_FOUND);
  EXPECT_EQ(none, nullptr);
  ASSERT_EQ(pcache_put(t1, "k", 1, "v", 1), PCACHE_OK);
  uint64_t n0 = 9, n1 = 9;
  ASSERT_EQ(pcache_count(t0, &n0), PCACHE_OK);
  ASSERT_EQ(pcache_count(t1, &n1), PCACHE_OK);
  EXPECT_EQ(n0, 0u);
  EXPECT_EQ(n1, 1u);
  pcache_admin_info tier_info{};
  tier_info.struct_size = sizeof tier_info;
  ASSERT_EQ(pcache_admin_info_get(t1, &tier_info), PCACHE_OK);
  EXPECT_STREQ(tier_info.scheme, "sqlite");
  EXPECT_EQ(tier_info.tier_count, 0u);
  // Shared counters live in the tiers; the composite has none of its own.
  pcache_shared_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_shared_stats(c, &s), PCACHE_ERR_UNSUPPORTED);
  EXPECT_EQ(pcache_close(t1), PCACHE_ERR_INVALID_ARG) << "a tier handle closes with its cache";
  EXPECT_EQ(pcache_count(t1, &n1), PCACHE_OK) << "and is still usable after the refused close";
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  EXPECT_EQ(pcache_count(t1, &n1), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_count(t0, &n0), PCACHE_ERR_INVALID_ARG);
}

// The shared counters are the ones every process sees, and --zero resets them only.
TEST_F(Admin, SharedStatsCountAcrossHandlesAndZero) {
  const std::string uri = "sqlite:" + dir_ + "/s.db";
  {
    Handle a(uri);
    ASSERT_EQ(a.put("k", "v"), PCACHE_OK);
    std::string got;
    ASSERT_EQ(a.get("k", &got), PCACHE_OK);
    ASSERT_EQ(a.get("nope", &got), PCACHE_NOT_FOUND);
  }
  Handle b(uri);
  pcache_shared_stats s = shared(b);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  ASSERT_EQ(pcache_admin_zero_shared_stats(b), PCACHE_OK);
  s = shared(b);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(b.count(), 1u);
  pcache_shared_stats small{};
  small.struct_size = 8;
  EXPECT_EQ(pcache_get_shared_stats(b, &small), PCACHE_ERR_INVALID_ARG);
}

TEST_F(Admin, InfoRedactsThePasswordAndChecksItsArguments) {
  Handle h("tiered:memory:|redis://:hunter2@127.0.0.1:1/0?timeout_ms=10");
  ASSERT_NE(h.get(), nullptr) << pcache_last_error();
  pcache_admin_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(pcache_admin_info_get(h, &info), PCACHE_OK);
  EXPECT_EQ(std::strstr(info.uri, "hunter2"), nullptr) << info.uri;
  EXPECT_NE(std::strstr(info.uri, "***"), nullptr) << info.uri;
  info.struct_size = 4;
  EXPECT_EQ(pcache_admin_info_get(h, &info), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_info_get(h, nullptr), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_info_get(nullptr, &info), PCACHE_ERR_INVALID_ARG);
}

TEST(AdminParse, SizesDurationsAndArchitectures) {
  uint64_t v = 0;
  EXPECT_EQ(pcache_admin_parse_size("4G", &v), PCACHE_OK);
  EXPECT_EQ(v, 4ull << 30);
  EXPECT_EQ(pcache_admin_parse_size("500MiB", &v), PCACHE_OK);
  EXPECT_EQ(v, 500ull << 20);
  EXPECT_EQ(pcache_admin_parse_size("lots", &v), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "not a size"), nullptr);
  EXPECT_EQ(pcache_admin_parse_size("16777216T", &v), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_parse_duration("30d", &v), PCACHE_OK);
  EXPECT_EQ(v, 30u * 86400);
  EXPECT_EQ(pcache_admin_parse_duration("3x", &v), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_parse_duration(nullptr, &v), PCACHE_ERR_INVALID_ARG);

  auto names_arch = [](std::vector<const char *> options) {
    int32_t yes = -1;
    const pcache_status s = pcache_admin_options_name_arch(options.data(), options.size(), &yes);
    return s == PCACHE_OK ? yes : -100 + s;
  };
  EXPECT_EQ(names_arch({"-arch=sm_80"}), 1);
  EXPECT_EQ(names_arch({"-arch", "sm_80"}), 1);
  EXPECT_EQ(names_arch({"--gpu-architecture=compute_90"}), 1);
  EXPECT_EQ(names_arch({"-std=c++17", "-DX=1"}), 0);
  EXPECT_EQ(names_arch({}), 0);
  EXPECT_EQ(names_arch({"-arch"}), -100 + PCACHE_ERR_INVALID_ARG) << "a value is missing";
}

// explain derives the key pcache_compile uses, with the words a stored entry keeps, and the
// header paths the key covers, present or absent.
TEST_F(Admin, ExplainGivesTheCompileKeyItsFieldsAndItsHeaders) {
  testutil::write_file(dir_ + "/h.cuh", "#define SCALE 3\n");
  std::filesystem::create_directories(dir_ + "/first");
  std::filesystem::create_directories(dir_ + "/inc");
  testutil::write_file(dir_ + "/inc/angle.cuh", "#define OFFSET 1\n");
  const std::string source =
      "#include \"h.cuh\"\n#include <angle.cuh>\n"
      "extern \"C\" __global__ void k(int *x) { x[0] = SCALE + OFFSET; }\n";
  const std::string name = dir_ + "/k.cu";
  const std::string first = "-I" + dir_ + "/first", inc = "-I" + dir_ + "/inc";
  const char *options[] = {"-arch=sm_90", first.c_str(), inc.c_str()};
  pcache_program p = testutil::make_program(name.c_str(), source, options, 3);
  Handle h("sqlite:" + dir_ + "/e.db");
  // Headers found or probed: predicted before a compile, as NVRTC was seen to after it.
  auto check_dependencies = [&](pcache_explain *e, const char *when) {
    size_t n = 0;
    const char *const *paths = nullptr;
    const int32_t *present = nullptr;
    ASSERT_EQ(pcache_explain_dependencies(e, &n, &paths, &present), PCACHE_OK);
    std::map<std::string, int32_t> deps;
    for (size_t i = 0; i < n; ++i) deps[paths[i]] = present[i];
    EXPECT_EQ(deps.count(dir_ + "/h.cuh") ? deps[dir_ + "/h.cuh"] : -1, 1)
        << when << ": beside the program";
    EXPECT_EQ(deps.count(dir_ + "/first/angle.cuh") ? deps[dir_ + "/first/angle.cuh"] : -1, 0)
        << when << ": looked at first, absent: creating it would change the key";
    EXPECT_EQ(deps.count(dir_ + "/inc/angle.cuh") ? deps[dir_ + "/inc/angle.cuh"] : -1, 1) << when;
  };
  const uint8_t zero[PCACHE_KEY_SIZE] = {};
  pcache_explain *e = nullptr;
  ASSERT_EQ(pcache_admin_explain(h, &p, &e), PCACHE_OK) << pcache_last_error();
  EXPECT_STREQ(pcache_explain_uncacheable(e), "");
  // Never compiled: no observation of NVRTC, so no key yet, and a reason.
  EXPECT_EQ(std::memcmp(pcache_explain_key(e), zero, PCACHE_KEY_SIZE), 0);
  EXPECT_NE(std::strstr(pcache_explain_why_not(e), "not been compiled"), nullptr)
      << pcache_explain_why_not(e);
  check_dependencies(e, "predicted");
  pcache_explain_free(e);

  pcache_compiled *r = nullptr;
  ASSERT_EQ(pcache_compile(h, &p, &r), PCACHE_OK) << pcache_last_error();
  EXPECT_STREQ(pcache_admin_compiled_not_stored(r), "");
  ASSERT_EQ(pcache_admin_explain(h, &p, &e), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(std::memcmp(pcache_compiled_key(r), pcache_explain_key(e), PCACHE_KEY_SIZE), 0)
      << "explain's key is the key the compile stored under";
  EXPECT_STREQ(pcache_explain_why_not(e), "");
  check_dependencies(e, "observed");
  const char *const *names = nullptr, *const *values = nullptr;
  size_t fields = 0;
  ASSERT_EQ(pcache_explain_key_fields(e, &fields, &names, &values), PCACHE_OK);
  ASSERT_GT(fields, 3u);

  // The stored entry carries the same words.
  pcache_entry *entry = nullptr;
  ASSERT_EQ(pcache_admin_peek(h, pcache_compiled_key(r), PCACHE_KEY_SIZE, &entry), PCACHE_OK);
  EXPECT_EQ(pcache_entry_is_compiled(entry), 1);
  EXPECT_EQ(pcache_entry_target(entry), PCACHE_TARGET_CUBIN);
  EXPECT_EQ(pcache_entry_nvrtc_version(entry), pcache_compiled_nvrtc_version(r));
  EXPECT_EQ(std::string(pcache_entry_program_name(entry)), name);
  EXPECT_GT(pcache_entry_compile_us(entry), 0u);
  EXPECT_EQ(pcache_entry_compile_us(entry), pcache_compiled_compile_us(r));
  size_t stored_n = 0;
  const char *const *stored_names = nullptr, *const *stored_values = nullptr;
  ASSERT_EQ(pcache_entry_key_fields(entry, &stored_n, &stored_names, &stored_values), PCACHE_OK);
  ASSERT_EQ(stored_n, fields);
  for (size_t i = 0; i < fields; ++i) {
    EXPECT_STREQ(stored_names[i], names[i]);
    EXPECT_STREQ(stored_values[i], values[i]);
  }
  pcache_entry_free(entry);
  pcache_explain_free(e);

  // A header edited since: no recorded observation holds, and explain says which header.
  testutil::write_file(dir_ + "/inc/angle.cuh", "#define OFFSET 2\n");
  ASSERT_EQ(pcache_admin_explain(h, &p, &e), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(std::memcmp(pcache_explain_key(e), zero, PCACHE_KEY_SIZE), 0);
  EXPECT_NE(std::strstr(pcache_explain_why_not(e), "inc/angle.cuh"), nullptr)
      << pcache_explain_why_not(e);
  pcache_explain_free(e);
  pcache_compiled_free(r);

  // A put entry has no compile metadata.
  ASSERT_EQ(h.put("plain", "bytes"), PCACHE_OK);
  ASSERT_EQ(pcache_admin_peek(h, "plain", 5, &entry), PCACHE_OK);
  EXPECT_EQ(pcache_entry_is_compiled(entry), 0);
  EXPECT_EQ(pcache_entry_target(entry), -1);
  EXPECT_EQ(pcache_entry_compile_us(entry), 0u);
  EXPECT_EQ(pcache_entry_nvrtc_version(entry), 0u);
  EXPECT_STREQ(pcache_entry_program_name(entry), "");
  ASSERT_EQ(pcache_entry_key_fields(entry, &stored_n, &stored_names, &stored_values), PCACHE_OK);
  EXPECT_EQ(stored_n, 0u);
  pcache_entry_free(entry);
}

// A header the scan cannot read (over 64 MiB: holes here) is there, not absent, and explain
// says the prediction stopped at it; a key cannot be made for the program.
TEST_F(Admin, ExplainShowsAHeaderTooLargeToScanAsPresentAndSaysSo) {
  testutil::write_file(dir_ + "/big.h", "");
  ASSERT_EQ(::truncate((dir_ + "/big.h").c_str(), off_t(65) << 20), 0);
  const std::string source = "#include \"big.h\"\n__global__ void k() {}\n";
  const std::string name = dir_ + "/k.cu";
  const char *options[] = {"-arch=sm_90"};
  pcache_program p = testutil::make_program(name.c_str(), source, options, 1);
  Handle h("sqlite:" + dir_ + "/big.db");
  for (int call = 0; call < 2; ++call) {  // the second from the scan's memo
    pcache_explain *e = nullptr;
    ASSERT_EQ(pcache_admin_explain(h, &p, &e), PCACHE_OK) << pcache_last_error();
    size_t n = 0;
    const char *const *paths = nullptr;
    const int32_t *present = nullptr;
    ASSERT_EQ(pcache_explain_dependencies(e, &n, &paths, &present), PCACHE_OK);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(std::string(paths[0]), dir_ + "/big.h");
    EXPECT_EQ(present[0], 1) << "call " << call;
    EXPECT_NE(std::strstr(pcache_explain_why_not(e), "larger than 64 MiB"), nullptr)
        << pcache_explain_why_not(e);
    pcache_explain_free(e);
  }
  uint8_t key[PCACHE_KEY_SIZE];
  EXPECT_EQ(pcache_make_key(&p, key), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "larger than 64 MiB"), nullptr) << pcache_last_error();
}

TEST_F(Admin, ExplainAndCompileSayWhyAProgramIsNotStored) {
  const std::string source = "__global__ void k(const char **s) { *s = __TIME__; }\n";
  const char *options[] = {"-arch=sm_90"};
  pcache_program p = testutil::make_program("t.cu", source, options, 1);
  Handle h("sqlite:" + dir_ + "/u.db");
  pcache_explain *e = nullptr;
  ASSERT_EQ(pcache_admin_explain(h, &p, &e), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_explain_uncacheable(e), "__TIME__"), nullptr)
      << pcache_explain_uncacheable(e);
  const uint8_t zero[PCACHE_KEY_SIZE] = {};
  EXPECT_EQ(std::memcmp(pcache_explain_key(e), zero, PCACHE_KEY_SIZE), 0);
  pcache_explain_free(e);
  pcache_compiled *r = nullptr;
  ASSERT_EQ(pcache_compile(h, &p, &r), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_admin_compiled_not_stored(r), "__TIME__"), nullptr)
      << pcache_admin_compiled_not_stored(r);
  pcache_compiled_free(r);
  EXPECT_EQ(h.count(), 0u);
}

// A bundle round trip through the admin API, with the callbacks it promises.
TEST_F(Admin, ExportImportRoundTripWithRejects) {
  Handle from("sqlite:" + dir_ + "/from.db");
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(from.put("k" + std::to_string(i), testutil::make_value(i, 1, 3000)), PCACHE_OK);
  const std::string bundle = dir_ + "/b.pcb";
  pcache_transfer out{};
  ASSERT_EQ(pcache_admin_export(from, bundle.c_str(), nullptr, nullptr, &out), PCACHE_OK)
      << pcache_last_error();
  EXPECT_EQ(out.entries, 5u);
  EXPECT_EQ(out.payload_bytes, 15000u);
  std::string bytes = testutil::read_file(bundle);
  ASSERT_EQ(out.file_bytes, bytes.size());
  bytes[bytes.size() / 2] ^= 1;  // one record damaged
  testutil::write_file(dir_ + "/bad.pcb", bytes);
  Handle to("filestream:" + dir_ + "/to");
  std::vector<std::string> reasons;
  pcache_transfer in{};
  ASSERT_EQ(pcache_admin_import(
                to, (dir_ + "/bad.pcb").c_str(), nullptr,
                [](const char *why, void *context) {
                  static_cast<std::vector<std::string> *>(context)->push_back(why);
                },
                &reasons, &in),
            PCACHE_OK)
      << pcache_last_error();
  EXPECT_EQ(in.entries, 4u);
  EXPECT_EQ(in.rejected, 1u);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(to.count(), 4u);
  for (int i = 0; i < 5; ++i) {
    std::string got;
    if (to.get("k" + std::to_string(i), &got) == PCACHE_OK) {
      EXPECT_TRUE(testutil::check_value(got));
    }
  }
  EXPECT_EQ(
      pcache_admin_import(to, (dir_ + "/none.pcb").c_str(), nullptr, nullptr, nullptr, nullptr),
      PCACHE_ERR_IO);
  EXPECT_EQ(pcache_admin_export(to, nullptr, nullptr, nullptr, nullptr), PCACHE_ERR_INVALID_ARG);
}
