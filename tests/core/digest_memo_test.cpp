// The memo of large programs' digests (src/core/digest_memo.hpp): a digest it serves is always
// the hash of the bytes the caller passes now, whatever it kept, and what it keeps is bounded.
#include "core/digest_memo.hpp"

#include <gtest/gtest.h>
#include <progcache/progcache.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/key.hpp"

using namespace progcache;

namespace {

constexpr std::string_view kPrefix = "a prefix: schema and fields digest";

std::string source_of(size_t n, char salt) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(i * 131 + size_t(salt));
  return s;
}

// The digest computed afresh (nothing kept).
ContentDigest fresh_digest(std::string_view prefix, const std::string &source) {
  program_digest_memo().clear();
  const ContentDigest d = program_digest_after(prefix, ByteView(source));
  program_digest_memo().clear();
  return d;
}

class DigestMemo : public ::testing::Test {
 protected:
  void SetUp() override { program_digest_memo().clear(); }
  void TearDown() override { program_digest_memo().clear(); }
};

TEST_F(DigestMemo, ASourceIsKeptAtItsSecondSightAndServedAtItsThird) {
  const std::string source = source_of(64 * 1024, 1);
  const ContentDigest want = fresh_digest(kPrefix, source);
  EXPECT_EQ(program_digest_after(kPrefix, ByteView(source)), want);
  EXPECT_EQ(program_digest_memo().kept_bytes(), 0u);  // seen once: a fingerprint, no copy
  EXPECT_EQ(program_digest_after(kPrefix, ByteView(source)), want);
  EXPECT_EQ(program_digest_memo().kept_bytes(), source.size());
  ASSERT_TRUE(program_digest_memo().find(kPrefix, ByteView(source)));
  EXPECT_EQ(*program_digest_memo().find(kPrefix, ByteView(source)), want);
  EXPECT_EQ(program_digest_after(kPrefix, ByteView(source)), want);
}

// The same buffer, changed in place after its digest was kept: the digest is the new bytes'.
// So for a change in the first byte, the middle and the last.
TEST_F(DigestMemo, ASourceChangedInPlaceGetsItsOwnDigest) {
  for (size_t at : {size_t(0), size_t(32 * 1024), size_t(64 * 1024 - 1)}) {
    SCOPED_TRACE(at);
    std::string source = source_of(64 * 1024, 2);
    for (int i = 0; i < 3; ++i) (void)program_digest_after(kPrefix, ByteView(source));
    ASSERT_EQ(program_digest_memo().kept_bytes(), source.size());
    source[at] ^= 0x20;
    const ContentDigest got = program_digest_after(kPrefix, ByteView(source));
    EXPECT_EQ(got, fresh_digest(kPrefix, source));
    source[at] ^= 0x20;
    EXPECT_NE(got, fresh_digest(kPrefix, source));
  }
}

TEST_F(DigestMemo, ADifferentPrefixIsADifferentDigest) {
  const std::string source = source_of(32 * 1024, 3);
  for (int i = 0; i < 3; ++i) (void)program_digest_after(kPrefix, ByteView(source));
  const std::string_view other = "another prefix: other options";
  EXPECT_FALSE(program_digest_memo().find(other, ByteView(source)));
  EXPECT_EQ(program_digest_after(other, ByteView(source)), fresh_digest(other, source));
  EXPECT_NE(fresh_digest(other, source), fresh_digest(kPrefix, source));
}

TEST_F(DigestMemo, SmallAndHugeSourcesAreNeverKept) {
  const std::string small = source_of(ProgramDigestMemo::kMinSource - 1, 4);
  const std::string huge = source_of(ProgramDigestMemo::kMaxSource + 1, 5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(program_digest_after(kPrefix, ByteView(small)), fresh_digest(kPrefix, small));
    (void)program_digest_after(kPrefix, ByteView(huge));
  }
  EXPECT_EQ(program_digest_memo().kept_bytes(), 0u);
}

TEST_F(DigestMemo, WhatIsKeptStaysUnderItsBound) {
  const size_t n = ProgramDigestMemo::kMaxSource;
  const size_t sources = ProgramDigestMemo::kMaxKeptBytes / n + 3;
  std::vector<std::string> kept;
  for (size_t i = 0; i < sources; ++i) {
    kept.push_back(source_of(n, char(10 + i)));
    for (int j = 0; j < 2; ++j) (void)program_digest_after(kPrefix, ByteView(kept.back()));
    EXPECT_LE(program_digest_memo().kept_bytes(), ProgramDigestMemo::kMaxKeptBytes);
  }
  EXPECT_GT(program_digest_memo().kept_bytes(), 0u);
  EXPECT_FALSE(program_digest_memo().find(kPrefix, ByteView(kept.front())));  // evicted first
  EXPECT_TRUE(program_digest_memo().find(kPrefix, ByteView(kept.back())));
}

// Threads keying two sources in turn, and one of them changing a third in its own buffer: every
// digest is its bytes' (ThreadSanitizer runs this too).
TEST_F(DigestMemo, ThreadsKeyingAtOnceEachGetTheirBytesDigest) {
  const std::string a = source_of(48 * 1024, 6), b = source_of(48 * 1024, 7);
  const ContentDigest da = fresh_digest(kPrefix, a), db = fresh_digest(kPrefix, b);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::string own = source_of(48 * 1024, char(20 + t));
      for (int i = 0; i < 200; ++i) {
        if (program_digest_after(kPrefix, ByteView(a)) != da) ++wrong[size_t(t)];
        if (program_digest_after(kPrefix, ByteView(b)) != db) ++wrong[size_t(t)];
        own[size_t(i) % own.size()] ^= 1;
        (void)program_digest_after(kPrefix, ByteView(own));
      }
    });
  for (std::thread &t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[size_t(t)], 0) << t;
}

// Through the C API: the same large program keyed again and again has one key, and the key of a
// changed source is the one a process that never saw the old source derives.
TEST_F(DigestMemo, RepeatedKeysThroughTheCApiAreTheKeysOfTheBytes) {
  std::string source = "extern \"C\" __global__ void k(float *x) { x[0] = 1; }\n";
  source += "// " + std::string(100 * 1024, 'x') + "\n";
  pcache_program p;
  ASSERT_EQ(pcache_program_init(&p, sizeof p), PCACHE_OK);
  p.name = "k.cu";
  p.source = source.c_str();
  uint8_t first[PCACHE_KEY_SIZE], again[PCACHE_KEY_SIZE];
  ASSERT_EQ(pcache_make_key(&p, first), PCACHE_OK);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(pcache_make_key(&p, again), PCACHE_OK);
    EXPECT_EQ(std::memcmp(first, again, sizeof first), 0);
  }
  EXPECT_GT(program_digest_memo().kept_bytes(), 0u);
  source[source.size() - 2] = 'y';
  p.source = source.c_str();
  ASSERT_EQ(pcache_make_key(&p, again), PCACHE_OK);
  program_digest_memo().clear();
  uint8_t unseen[PCACHE_KEY_SIZE];
  ASSERT_EQ(pcache_make_key(&p, unseen), PCACHE_OK);
  EXPECT_EQ(std::memcmp(again, unseen, sizeof again), 0);
  EXPECT_NE(std::memcmp(first, again, sizeof first), 0);
}

}  // namespace
