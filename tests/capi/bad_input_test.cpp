// Every public function tried with bad input: NULL handles and out-pointers, NULL data with a
// size, empty and oversized keys, a closed handle, wrong struct sizes, odd paths and URIs.
// Each row must get its documented status and leave a message; none may crash or leak (this
// runs under ASan+UBSan and valgrind in CI).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <functional>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

struct Row {
  std::string what;
  std::function<pcache_status()> call;
  pcache_status expected;
};

}  // namespace

TEST(BadInput, EveryPublicFunctionAnswersBadInputWithTheDocumentedStatus) {
  TempDir d;
  pcache *live = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &live), PCACHE_OK);
  ASSERT_EQ(pcache_put(live, "k", 1, "v", 1), PCACHE_OK);
  pcache *closed = nullptr;
  ASSERT_EQ(pcache_open(("sqlite:" + (d / "closed.db")).c_str(), nullptr, &closed), PCACHE_OK);
  ASSERT_EQ(pcache_close(closed), PCACHE_OK);

  void *data = nullptr;
  size_t size = 0;
  uint64_t n = 0;
  char buf[8];
  pcache_view view{};
  pcache_stats stats{};
  stats.struct_size = sizeof stats;
  pcache_stats small_stats{};
  small_stats.struct_size = 4;
  uint8_t key[PCACHE_KEY_SIZE];
  pcache_program prog;
  std::memset(&prog, 0, sizeof prog);
  prog.struct_size = sizeof prog;
  prog.source = "__global__ void k() {}";
  pcache_program small_prog = prog;
  small_prog.struct_size = 8;
  pcache_program bad_code_type = prog, bad_target = prog;
  bad_code_type.code_type = -1;  // was read as an index into a table of names
  bad_target.target = PCACHE_TARGET_LTOIR + 1;
  pcache_compiled *compiled = nullptr;
  pcache_module *module = nullptr;
  pcache_options small_opts{};
  small_opts.struct_size = 8;
  const std::string big_key(PCACHE_MAX_KEY_SIZE, 'k'), too_big_key(PCACHE_MAX_KEY_SIZE + 1, 'k');
  write_file(d / "a-file", "x");
  const std::string long_path = d.path() + "/" + std::string(5000, 'p');
  pcache *out = nullptr;
  auto open = [&](const std::string &uri) { return pcache_open(uri.c_str(), nullptr, &out); };
  const pcache_status INVALID = PCACHE_ERR_INVALID_ARG;

  const std::vector<Row> rows = {
      // NULL handle
      {"get NULL handle", [&] { return pcache_get(nullptr, "k", 1, &data, &size); }, INVALID},
      {"get_into NULL handle", [&] { return pcache_get_into(nullptr, "k", 1, buf, 8, &size); },
       INVALID},
      {"get_view NULL handle", [&] { return pcache_get_view(nullptr, "k", 1, &view); }, INVALID},
      {"put NULL handle", [&] { return pcache_put(nullptr, "k", 1, "v", 1); }, INVALID},
      {"delete NULL handle", [&] { return pcache_delete(nullptr, "k", 1); }, INVALID},
      {"count NULL handle", [&] { return pcache_count(nullptr, &n); }, INVALID},
      {"size NULL handle", [&] { return pcache_size(nullptr, &n); }, INVALID},
      {"clear NULL handle", [&] { return pcache_clear(nullptr); }, INVALID},
      {"get_stats NULL handle", [&] { return pcache_get_stats(nullptr, &stats); }, INVALID},
      {"module_get_function NULL module",
       [&] {
         void *f;
         return pcache_module_get_function(nullptr, "k", &f);
       },
       INVALID},
      // NULL out-pointers
      {"open NULL out", [&] { return pcache_open("memory:", nullptr, nullptr); }, INVALID},
      {"options_init NULL", [&] { return pcache_options_init(nullptr, 16); }, INVALID},
      {"get NULL data", [&] { return pcache_get(live, "k", 1, nullptr, &size); }, INVALID},
      {"get NULL size", [&] { return pcache_get(live, "k", 1, &data, nullptr); }, INVALID},
      {"get_into NULL size", [&] { return pcache_get_into(live, "k", 1, buf, 8, nullptr); },
       INVALID},
      {"get_view NULL view", [&] { return pcache_get_view(live, "k", 1, nullptr); }, INVALID},
      {"count NULL out", [&] { return pcache_count(live, nullptr); }, INVALID},
      {"size NULL out", [&] { return pcache_size(live, nullptr); }, INVALID},
      {"get_stats NULL out", [&] { return pcache_get_stats(live, nullptr); }, INVALID},
      {"make_key NULL out", [&] { return pcache_make_key(&prog, nullptr); }, INVALID},
      {"make_key NULL program", [&] { return pcache_make_key(nullptr, key); }, INVALID},
      {"compile NULL out", [&] { return pcache_compile(live, &prog, nullptr); }, INVALID},
      {"compile NULL program", [&] { return pcache_compile(live, nullptr, &compiled); }, INVALID},
      {"load_module NULL out", [&] { return pcache_load_module(live, &prog, nullptr); }, INVALID},
      {"load_module NULL program", [&] { return pcache_load_module(live, nullptr, &module); },
       INVALID},
      {"make_key code_type -1", [&] { return pcache_make_key(&bad_code_type, key); }, INVALID},
      {"compile code_type -1", [&] { return pcache_compile(live, &bad_code_type, &compiled); },
       INVALID},
      {"make_key target LTOIR + 1", [&] { return pcache_make_key(&bad_target, key); }, INVALID},
      // NULL data with a size
      {"put NULL data, size 3", [&] { return pcache_put(live, "k", 1, nullptr, 3); }, INVALID},
      {"get_into NULL buffer, capacity 3",
       [&] { return pcache_get_into(live, "k", 1, nullptr, 3, &size); }, INVALID},
      {"get NULL key", [&] { return pcache_get(live, nullptr, 1, &data, &size); }, INVALID},
      // key sizes
      {"get empty key", [&] { return pcache_get(live, "k", 0, &data, &size); }, INVALID},
      {"get_into empty key", [&] { return pcache_get_into(live, "k", 0, buf, 8, &size); }, INVALID},
      {"get_view empty key", [&] { return pcache_get_view(live, "k", 0, &view); }, INVALID},
      {"put empty key", [&] { return pcache_put(live, "k", 0, "v", 1); }, INVALID},
      {"delete empty key", [&] { return pcache_delete(live, "k", 0); }, INVALID},
      {"put 64 KiB key", [&] { return pcache_put(live, big_key.data(), big_key.size(), "v", 1); },
       PCACHE_OK},
      {"get 64 KiB key",
       [&] {
         pcache_status s = pcache_get(live, big_key.data(), big_key.size(), &data, &size);
         pcache_free(data);
         data = nullptr;
         return s;
       },
       PCACHE_OK},
      {"put 64 KiB + 1 key",
       [&] { return pcache_put(live, too_big_key.data(), too_big_key.size(), "v", 1); }, INVALID},
      {"get 64 KiB + 1 key",
       [&] { return pcache_get(live, too_big_key.data(), too_big_key.size(), &data, &size); },
       INVALID},
      // a closed handle
      {"get on a closed handle", [&] { return pcache_get(closed, "k", 1, &data, &size); }, INVALID},
      {"put on a closed handle", [&] { return pcache_put(closed, "k", 1, "v", 1); }, INVALID},
      {"delete on a closed handle", [&] { return pcache_delete(closed, "k", 1); }, INVALID},
      {"count on a closed handle", [&] { return pcache_count(closed, &n); }, INVALID},
      {"clear on a closed handle", [&] { return pcache_clear(closed); }, INVALID},
      {"get_stats on a closed handle", [&] { return pcache_get_stats(closed, &stats); }, INVALID},
      {"close a closed handle", [&] { return pcache_close(closed); }, INVALID},
      // struct sizes
      {"options_init struct_size 8",
       [&] {
         pcache_options o;
         return pcache_options_init(&o, 8);
       },
       INVALID},
      {"open with options struct_size 8", [&] { return pcache_open("memory:", &small_opts, &out); },
       INVALID},
      {"get_stats struct_size 4", [&] { return pcache_get_stats(live, &small_stats); }, INVALID},
      {"make_key program struct_size 8", [&] { return pcache_make_key(&small_prog, key); },
       INVALID},
      {"compile program struct_size 8",
       [&] { return pcache_compile(live, &small_prog, &compiled); }, INVALID},
      // URIs and paths
      {"unknown scheme", [&] { return open("redis5://x"); }, INVALID},
      {"no scheme", [&] { return open("/tmp/cache.db"); }, INVALID},
      {"memory: with trailing garbage", [&] { return open("memory:xyz"); }, INVALID},
      {"sqlite: without a path", [&] { return open("sqlite:"); }, INVALID},
      {"parameter without a value",
       [&] { return open("sqlite:" + (d / "x.db") + "?busy_timeout_ms"); }, INVALID},
      {"non-numeric parameter",
       [&] { return open("sqlite:" + (d / "x.db") + "?busy_timeout_ms=soon"); }, INVALID},
      {"unknown parameter", [&] { return open("filestream:" + (d / "fs") + "?colour=blue"); },
       INVALID},
      {"control character in a URI",
       [&] { return open(std::string("sqlite:") + d.path() + "/a\nb.db"); }, INVALID},
      {"non-UTF-8 path (bytes are fine)",
       [&] {
         pcache_status s = open("sqlite:" + d.path() + "/\xff\xfe.db");
         pcache_close(out);
         out = nullptr;
         return s;
       },
       PCACHE_OK},
      {"path longer than PATH_MAX", [&] { return open("sqlite:" + long_path + "/c.db"); },
       PCACHE_ERR_IO},
      {"filestream directory that is a file", [&] { return open("filestream:" + (d / "a-file")); },
       PCACHE_ERR_IO},
      {"sqlite directory that is a file",
       [&] { return open("sqlite:" + (d / "a-file") + "/c.db"); }, PCACHE_ERR_IO},
      {"sqlite path that is a directory",
       [&] {
         ::mkdir((d / "a-dir").c_str(), 0700);
         return open("sqlite:" + (d / "a-dir"));
       },
       PCACHE_ERR_IO},
  };
  size_t tried = 0;
  for (const Row &row : rows) {
    SCOPED_TRACE(row.what);
    const pcache_status st = row.call();
    EXPECT_EQ(st, row.expected) << pcache_status_string(st) << ": " << pcache_last_error();
    if (row.expected != PCACHE_OK) {
      EXPECT_GT(std::strlen(pcache_last_error()), 0u);
    }
    ++tried;
  }
  std::printf("bad inputs tried: %zu\n", tried);
  RecordProperty("bad_inputs", int(tried));
  EXPECT_EQ(pcache_close(live), PCACHE_OK);
}

TEST(BadInput, DirectoryWithoutPermissionIsAPermissionError) {
  TempDir d;
  ::chmod(d.path().c_str(), 0777);
  const int rc = run_unprivileged([&] {
    const std::string dir = d / "locked";
    ::mkdir(dir.c_str(), 0700);
    ::chmod(dir.c_str(), 0);
    pcache *h = nullptr;
    const pcache_status a = pcache_open(("filestream:" + dir + "/fs").c_str(), nullptr, &h);
    if (a != PCACHE_ERR_PERMISSION || !std::strstr(pcache_last_error(), "ermission")) return 1;
    const pcache_status b = pcache_open(("sqlite:" + dir + "/c.db").c_str(), nullptr, &h);
    if (b != PCACHE_ERR_PERMISSION) return 2;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

// The header promises PCACHE_ERR_INVALID_ARG for every call on a closed handle; pcache_compile
// used to compile without a cache instead.
TEST(BadInput, CompileOnAClosedHandleIsInvalid) {
  pcache *h = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &h), PCACHE_OK);
  ASSERT_EQ(pcache_close(h), PCACHE_OK);
  pcache_program p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.source = "__global__ void k() {}";
  pcache_compiled *r = nullptr;
  EXPECT_EQ(pcache_compile(h, &p, &r), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(r, nullptr);
  pcache_module *m = nullptr;
  EXPECT_EQ(pcache_load_module(h, &p, &m), PCACHE_ERR_INVALID_ARG);
}

// A size near SIZE_MAX overflowed the record size on memory: and filestream: (a heap overflow
// under ASan); every backend refuses it as too large, reading nothing past the caller's bytes.
TEST(BadInput, ASizeNearSizeMaxIsTooLargeOnEveryBackend) {
  TempDir d;
  const char byte = 'x';
  for (const std::string &uri :
       {std::string("memory:"), "filestream:" + (d / "fs"), "sqlite:" + (d / "c.db")}) {
    Handle c(uri);
    for (size_t size : {SIZE_MAX - 32, SIZE_MAX / 2, SIZE_MAX})
      EXPECT_EQ(pcache_put(c, "k", 1, &byte, size), PCACHE_ERR_TOO_LARGE) << uri << " " << size;
  }
}

// A non-NULL secret of size 0 would sign every entry with the empty key, which anyone knows.
TEST(BadInput, AnEmptySecretIsRefused) {
  pcache_options o;
  ASSERT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
  o.secret = "";
  o.secret_size = 0;
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open("memory:", &o, &h), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(h, nullptr);
}

// NVRTC reads the source as a C string: a NUL inside it (a source_size over a buffer with a
// NUL) compiled the bytes before it and nothing else, without a word. Refused now, with or
// without a cache; NULs that only end the source (a size that counted the terminator) compile
// as the source without them.
TEST(BadInput, ASourceWithANulInsideIsRefusedAndTrailingNulsAreItsEnd) {
  const std::string body = "__global__ void k(int *x) { *x = 1; }\n";
  const char *options[] = {"-arch=sm_90"};
  Handle cache("memory:");
  auto compile = [&](pcache *c, const std::string &source, std::string *bytes) {
    pcache_program p = testutil::make_program("k.cu", source, options, 1);
    p.source_size = source.size();  // the NULs inside count
    pcache_compiled *r = nullptr;
    const pcache_status st = pcache_compile(c, &p, &r);
    if (r && bytes) {
      size_t n = 0;
      const void *d = pcache_compiled_data(r, &n);
      bytes->assign(static_cast<const char *>(d), n);
    }
    pcache_compiled_free(r);
    return st;
  };
  for (pcache *c : {cache.get(), static_cast<pcache *>(nullptr)}) {
    EXPECT_EQ(compile(c, body + std::string(1, '\0') + "not C++ {{{", nullptr),
              PCACHE_ERR_INVALID_ARG);
    EXPECT_NE(std::strstr(pcache_last_error(), "the source holds a NUL at byte 38 of 50"), nullptr)
        << pcache_last_error();
    std::string plain, terminated;
    ASSERT_EQ(compile(c, body, &plain), PCACHE_OK) << pcache_last_error();
    ASSERT_EQ(compile(c, body + std::string(2, '\0'), &terminated), PCACHE_OK)
        << pcache_last_error();
    EXPECT_FALSE(plain.empty());
    EXPECT_TRUE(plain == terminated);
  }
  // An in-memory header given with its size, likewise.
  const std::string header = std::string("#define V 1\n") + '\0' + "#error cut";
  const char *names[] = {"h.h"}, *sources[] = {header.c_str()};
  const size_t sizes[] = {header.size()};
  const std::string source = "#include \"h.h\"\n__global__ void k(int *x) { *x = V; }\n";
  pcache_program p;
  pcache_program_init(&p, sizeof p);
  p.source = source.c_str();
  p.options = options;
  p.num_options = 1;
  p.header_names = names;
  p.header_sources = sources;
  p.header_sizes = sizes;
  p.num_headers = 1;
  pcache_compiled *r = nullptr;
  EXPECT_EQ(pcache_compile(cache, &p, &r), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "in-memory header 'h.h' holds a NUL at byte 12 of 23"),
            nullptr)
      << pcache_last_error();
  pcache_compiled_free(r);
}
