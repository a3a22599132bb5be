// The metadata section of a compiled entry: a round trip keeps every field, a newer writer's
// field is skipped, and every truncation or damaged length is refused (never read past the end).
#include "core/compiled_meta.hpp"

#include <gtest/gtest.h>

#include <string>

using progcache::ByteView;
using progcache::CompiledMeta;
using progcache::decode_meta;
using progcache::encode_meta;

namespace {

CompiledMeta sample() {
  CompiledMeta m;
  m.target = 2;
  m.nvrtc_version = 13000;
  m.compile_us = 123456789012ull;
  m.program_name = "k.cu";
  m.log = "warning: something\n";
  m.lowered_names = {{"g<int>", "_Z1gIiEvv"}, {"h", ""}};
  m.key_fields = {{"options", "-arch=sm_90"}};
  m.failure = 6;
  m.identity = std::string("\0id", 3);
  return m;
}

ByteView view(const std::string &s) {
  return ByteView(s);
}

}  // namespace

TEST(CompiledMeta, ARoundTripKeepsEveryField) {
  const CompiledMeta m = sample();
  const auto back = decode_meta(view(encode_meta(m)));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->target, m.target);
  EXPECT_EQ(back->nvrtc_version, m.nvrtc_version);
  EXPECT_EQ(back->compile_us, m.compile_us);
  EXPECT_EQ(back->program_name, m.program_name);
  EXPECT_EQ(back->log, m.log);
  EXPECT_EQ(back->lowered_names, m.lowered_names);
  EXPECT_EQ(back->key_fields, m.key_fields);
  EXPECT_EQ(back->failure, m.failure);
  EXPECT_EQ(back->identity, m.identity);
}

TEST(CompiledMeta, ANewerWritersFieldIsSkipped) {
  std::string bytes = encode_meta(sample());
  bytes += std::string("\x7f\x03\0\0\0new", 8);
  const auto back = decode_meta(view(bytes));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->log, sample().log);
}

TEST(CompiledMeta, EveryTruncationAndADamagedLengthAreRefused) {
  const std::string bytes = encode_meta(sample());
  size_t refused = 0, boundaries = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    const auto back = decode_meta(view(bytes.substr(0, n)));
    // A cut between two records reads as a shorter section; one inside a record never does.
    if (back) {
      ++boundaries;
      EXPECT_GE(n, 4u);
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, bytes.size() - 20);
  EXPECT_LE(boundaries, 12u);
  std::string long_length = bytes;
  long_length[5] = '\x7f';  // the first record's length, now past the end
  EXPECT_FALSE(decode_meta(view(long_length)));
  std::string zero_failure = encode_meta(CompiledMeta{});
  zero_failure += std::string("\x08\x04\0\0\0\0\0\0\0", 9);  // a failure of 0 is not a failure
  EXPECT_FALSE(decode_meta(view(zero_failure)));
}

// A hit decodes without the key fields (checked, not kept): every other field as a full decode
// gives it, and a malformed key field still refuses the section.
TEST(CompiledMeta, AHitsDecodeChecksTheKeyFieldsWithoutKeepingThem) {
  const std::string bytes = encode_meta(sample());
  const auto full = decode_meta(view(bytes));
  const auto hit = decode_meta(view(bytes), progcache::KeyFields::checked_only);
  ASSERT_TRUE(full);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->key_fields.empty());
  EXPECT_EQ(full->key_fields, sample().key_fields);
  EXPECT_EQ(hit->lowered_names, full->lowered_names);
  EXPECT_EQ(hit->log, full->log);
  EXPECT_EQ(hit->identity, full->identity);
  EXPECT_EQ(hit->failure, full->failure);
  EXPECT_EQ(hit->compile_us, full->compile_us);

  // A key field whose inner length runs past its value: refused by both.
  CompiledMeta bare;
  std::string damaged = encode_meta(bare);
  damaged += std::string("\x07\x06\0\0\0\xff\0\0\0ab", 11);
  EXPECT_FALSE(decode_meta(view(damaged)));
  EXPECT_FALSE(decode_meta(view(damaged), progcache::KeyFields::checked_only));
  std::string good = encode_meta(bare);
  good += std::string("\x07\x06\0\0\0\x01\0\0\0ab", 11);  // "a" -> "b"
  ASSERT_TRUE(decode_meta(view(good), progcache::KeyFields::checked_only));
  EXPECT_EQ(decode_meta(view(good))->key_fields,
            (std::vector<std::pair<std::string, std::string>>{{"a", "b"}}));
}
