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
