// The ABI grows without breaking callers (docs/ABI.md): growable structs accept the first
// published size and a newer, larger one; a newer caller's unknown fields are refused when they
// would change a compile, never silently ignored; the init functions fill any size.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

// pcache_program as the 0.1 header declared it (112 bytes on LP64): a caller compiled then.
struct ProgramV1 {
  uint32_t struct_size;
  int32_t code_type, target;
  uint32_t nvrtc_version;
  const char *name, *source;
  size_t source_size;
  const char *const *options;
  size_t num_options;
  const char *const *header_names, *const *header_sources;
  size_t num_headers;
  const char *const *name_expressions;
  size_t num_name_expressions;
  const void *extra_digest;
  size_t extra_digest_size;
};

// A caller built against a future header with one more field.
struct ProgramV2 {
  pcache_program v1;
  uint64_t future_field;
};

const char *const kOptions[] = {"-arch=sm_90"};

template <typename P>
void fill(P *p, uint32_t size) {
  std::memset(static_cast<void *>(p), 0, sizeof *p);
  auto *base = reinterpret_cast<pcache_program *>(p);
  base->struct_size = size;
  base->source = "__global__ void k() {}";
  base->options = kOptions;
  base->num_options = 1;
}

}  // namespace

TEST(Abi, ThePublishedProgramLayoutIsUnchanged) {
  EXPECT_EQ(sizeof(ProgramV1), 112u);
  EXPECT_EQ(offsetof(pcache_program, extra_digest_size), offsetof(ProgramV1, extra_digest_size));
  EXPECT_EQ(offsetof(pcache_program, name_expressions), offsetof(ProgramV1, name_expressions));
  EXPECT_EQ(offsetof(pcache_program, header_sizes), sizeof(ProgramV1)) << "0.5 appended it";
}

TEST(Abi, OlderAndNewerProgramStructsGiveOneKeyAndUnknownFieldsAreRefused) {
  ProgramV1 v1;
  fill(&v1, sizeof v1);
  pcache_program current;
  fill(&current, sizeof current);
  ProgramV2 v2;
  fill(&v2, sizeof v2);
  uint8_t k1[PCACHE_KEY_SIZE], kc[PCACHE_KEY_SIZE], k2[PCACHE_KEY_SIZE];
  ASSERT_EQ(pcache_make_key(reinterpret_cast<const pcache_program *>(&v1), k1), PCACHE_OK)
      << pcache_last_error();
  ASSERT_EQ(pcache_make_key(&current, kc), PCACHE_OK) << pcache_last_error();
  ASSERT_EQ(pcache_make_key(&v2.v1, k2), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(std::memcmp(k1, kc, sizeof k1), 0);
  EXPECT_EQ(std::memcmp(k2, kc, sizeof k2), 0);
  // A field this library does not know, set: the compile would ignore it, so it is refused.
  v2.future_field = 1;
  EXPECT_EQ(pcache_make_key(&v2.v1, k2), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(pcache_last_error(), "does not know"), nullptr) << pcache_last_error();
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  pcache_compiled *out = nullptr;
  EXPECT_EQ(pcache_compile(c, &v2.v1, &out), PCACHE_ERR_UNSUPPORTED);
  EXPECT_EQ(out, nullptr);
  pcache_close(c);
  // Smaller than the first published struct.
  fill(&current, sizeof(ProgramV1) - 8);
  EXPECT_EQ(pcache_make_key(&current, kc), PCACHE_ERR_INVALID_ARG);
}

TEST(Abi, InitFunctionsFillEverySizeAndRefuseTooSmallOnes) {
  ProgramV2 v2;
  std::memset(&v2, 0xAB, sizeof v2);
  ASSERT_EQ(pcache_program_init(&v2.v1, sizeof v2), PCACHE_OK);
  EXPECT_EQ(v2.v1.struct_size, sizeof v2);
  EXPECT_EQ(v2.future_field, 0u);  // a newer caller's tail is zeroed
  EXPECT_EQ(v2.v1.source, nullptr);
  EXPECT_EQ(v2.v1.target, PCACHE_TARGET_CUBIN);
  EXPECT_EQ(pcache_program_init(&v2.v1, 8), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_program_init(nullptr, sizeof v2), PCACHE_ERR_INVALID_ARG);

  pcache_stats s;
  std::memset(&s, 0xAB, sizeof s);
  ASSERT_EQ(pcache_stats_init(&s, sizeof s), PCACHE_OK);
  EXPECT_EQ(s.struct_size, sizeof s);
  EXPECT_EQ(s.hits, 0u);
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  EXPECT_EQ(pcache_get_stats(c, &s), PCACHE_OK);
  pcache_close(c);
  EXPECT_EQ(pcache_stats_init(&s, 71), PCACHE_ERR_INVALID_ARG);  // the first version is 72
  EXPECT_EQ(pcache_stats_init(nullptr, sizeof s), PCACHE_ERR_INVALID_ARG);
}

// A warning set during a call that then failed (here: "shared cache has no secret", then an
// unknown URI parameter) leaked into the next successful call's pcache_last_error().
TEST(Abi, AFailedCallsWarningNeverLeaksIntoTheNextCall) {
  TempDir d;
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", nullptr, &c), PCACHE_OK);
  pcache_options o;
  ASSERT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
  o.flags = PCACHE_OPEN_ALLOW_SHARED;
  pcache *bad = nullptr;
  ASSERT_EQ(pcache_open(("sqlite:" + (d / "c.db") + "?no_such_parameter=1").c_str(), &o, &bad),
            PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "no_such_parameter"), nullptr) << pcache_last_error();
  uint64_t n = 0;
  ASSERT_EQ(pcache_count(c, &n), PCACHE_OK);
  EXPECT_STREQ(pcache_last_error(), "");
  pcache_close(c);
}

namespace {

pcache_error_info last_info() {
  pcache_error_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_EQ(pcache_last_error_info(&info), PCACHE_OK);
  return info;
}

}  // namespace

// A full disk says so in a number, not only in the message's text (it used to be PCACHE_ERR_IO
// and words, alike for a full disk and a failing one), on both local stores; the next call that
// succeeds clears it, and asking does not. The disk is a 512 KiB tmpfs mounted in a mount
// namespace of the child's own (root only; skipped elsewhere).
TEST(Abi, AFullDiskIsACauseNotOnlyAMessage) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small file system";
  for (const std::string scheme : {"sqlite", "filestream"}) {
    TempDir d;
    const std::string disk = d / "disk";
    ASSERT_EQ(::mkdir(disk.c_str(), 0700), 0);
    const int rc = testutil::wait_for(testutil::spawn([&] {
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=512k,mode=0700") != 0)
        return 77;
      Handle c(scheme + ":" + disk + "/c");
      if (c.put("small", "v") != PCACHE_OK) return 10;
      const std::string big(64 << 10, 'b');
      pcache_status st = PCACHE_OK;
      for (int i = 0; i < 32 && st == PCACHE_OK; ++i) st = c.put("big" + std::to_string(i), big);
      const pcache_error_info info = last_info();
      if (st != PCACHE_ERR_IO || info.status != PCACHE_ERR_IO ||
          info.cause != PCACHE_CAUSE_NO_SPACE) {
        std::fprintf(stderr, "%s: status %d cause %d errno %d sqlite %d: %s\n", scheme.c_str(),
                     info.status, info.cause, info.os_errno, info.sqlite_code, pcache_last_error());
        return 11;
      }
      if (scheme == "filestream" && info.os_errno != ENOSPC) return 12;
      if (scheme == "sqlite" && info.sqlite_code != 13 /* SQLITE_FULL */) return 13;
      if (last_info().cause != PCACHE_CAUSE_NO_SPACE) return 14;  // asking changes nothing
      std::string got;
      if (c.get("small", &got) != PCACHE_OK) return 15;
      const pcache_error_info after = last_info();
      if (after.status != PCACHE_OK || after.cause != PCACHE_CAUSE_NONE || after.os_errno)
        return 16;
      return 0;
    }));
    if (rc == 77) GTEST_SKIP() << "cannot mount a tmpfs here";
    EXPECT_EQ(rc, 0) << scheme;
  }
}

TEST(Abi, ErrorInfoRefusesNullAndTooSmallStructs) {
  EXPECT_EQ(pcache_last_error_info(nullptr), PCACHE_ERR_INVALID_ARG);
  pcache_error_info info{};
  info.struct_size = 16;
  EXPECT_EQ(pcache_last_error_info(&info), PCACHE_ERR_INVALID_ARG);
  Handle c("memory:");
  std::string got;
  EXPECT_EQ(c.get("absent", &got), PCACHE_NOT_FOUND);
  info.struct_size = 20;  // the first version: what fits, nothing past it
  EXPECT_EQ(pcache_last_error_info(&info), PCACHE_OK);
  EXPECT_EQ(info.status, PCACHE_NOT_FOUND);
  EXPECT_EQ(info.cause, PCACHE_CAUSE_NONE);
}

// PCACHE_OPEN_EXISTING (0.5): a cache that is not there is PCACHE_NOT_FOUND and nothing is made;
// one that is there opens; memory: always exists.
TEST(Abi, OpenExistingCreatesNothing) {
  TempDir d;
  pcache_options o;
  ASSERT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
  o.flags = PCACHE_OPEN_EXISTING;
  for (const std::string &uri :
       {"sqlite:" + (d / "missing/cache.db"), "filestream:" + (d / "missing/fs")}) {
    pcache *c = nullptr;
    EXPECT_EQ(pcache_open(uri.c_str(), &o, &c), PCACHE_NOT_FOUND) << uri;
    EXPECT_EQ(c, nullptr);
    EXPECT_NE(std::string(pcache_last_error()).find("no cache at"), std::string::npos);
    EXPECT_NE(::access((d / "missing").c_str(), F_OK), 0) << uri << " created a directory";
    { Handle create(uri); }
    ASSERT_EQ(pcache_open(uri.c_str(), &o, &c), PCACHE_OK) << uri << ": " << pcache_last_error();
    pcache_close(c);
    testutil::remove_tree(d / "missing");
  }
  pcache *m = nullptr;
  EXPECT_EQ(pcache_open("memory:", &o, &m), PCACHE_OK);
  pcache_close(m);
}
